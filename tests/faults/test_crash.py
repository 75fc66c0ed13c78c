"""Crash: a worker process talking to a real server (llmock) is SIGKILLed in the middle
of a turn (while the answer streams, or inside a tool), with the SQLite and the
PostgreSQL store. A fresh process then carries the conversation on: the store holds
the whole turns before the crash, nothing of the killed turn, and no duplicate.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from faults._faults import scenario
from peers._peer import Peer

from beamfilter_core import Message
from beamfilter_memory import ChatStore, SQLiteStore

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.slow]

WORKER = Path(__file__).with_name("_crash_worker.py")
U, A = Message.user, Message.assistant


def _spawn(mode: str, url: str, prefix: str, cid: str, peer: Peer) -> subprocess.Popen[str]:
    argv = [sys.executable, str(WORKER), mode, url, prefix, cid, peer.base_url]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _kill_at(proc: subprocess.Popen[str], lines: list[str]) -> None:
    """Read the worker's lines until the last expected one, then SIGKILL it."""
    assert proc.stdout is not None
    for expected in lines:
        line = proc.stdout.readline().strip()
        if line != expected:
            proc.kill()
            _, err = proc.communicate(timeout=10)
            raise AssertionError(f"worker printed {line!r}, expected {expected!r}; stderr:\n{err}")
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def _store(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> tuple[ChatStore, str, str]:
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'crash.db'}"
        return SQLiteStore(url), url, ""
    from beamfilter_memory import PostgresStore

    url = request.getfixturevalue("postgres_url")
    prefix = f"crash{uuid.uuid4().hex[:8]}_"
    return PostgresStore(url, prefix=prefix), url, prefix


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@pytest.mark.parametrize("phase", ["stream", "tool"])
async def test_a_worker_killed_mid_turn_loses_nothing_and_duplicates_nothing(
    kind: str, phase: str, tmp_path: Path, llmock: Peer, request: pytest.FixtureRequest
) -> None:
    store, url, prefix = _store(kind, tmp_path, request)
    second: dict[str, object]
    if phase == "stream":
        second = {"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 30}
    else:
        second = {"type": "reply", "tool_calls": [{"name": "lookup", "arguments": {"city": "Oslo"}}]}
    scenario(llmock, {"type": "reply", "text": "first answer"}, second)
    try:
        proc = _spawn(phase, url, prefix, "c1", llmock)
        _kill_at(proc, ["turn 1 stored", f"mid-{phase}"])
        turn1 = [U("first question"), A("first answer")]
        assert await store.load("c1") == turn1
        assert await store.load_pause("c1") is None

        scenario(llmock, {"type": "reply", "text": "third answer"})
        seq = max((r["seq"] for r in llmock.get("/_llmock/requests")["requests"]), default=0)
        fresh = _spawn("continue", url, prefix, "c1", llmock)
        out, err = fresh.communicate(timeout=60)
        assert fresh.returncode == 0, err
        assert out.strip() == "done: third answer"
        # The fresh process sent the stored history once, then its own question.
        (sent,) = [r for r in llmock.get("/_llmock/requests")["requests"] if r["seq"] > seq]
        assert [(m["role"], m["content"]) for m in sent["body"]["messages"]] == [
            ("user", "first question"),
            ("assistant", "first answer"),
            ("user", "third question"),
        ]
        assert await store.load("c1") == [*turn1, U("third question"), A("third answer")]
    finally:
        await store.aclose()
