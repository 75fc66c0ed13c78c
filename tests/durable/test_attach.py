"""Attaching to a turn's stream from another process: a turn killed mid-stream, recovered
by a second process, read by a third that sees its text and its tool calls once."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from durable._helpers import APP, Local, app_env
from durable.durable_app import create_ledger, read_ledger

from beamfilter_core import Event, RunFinished, TextDelta
from beamfilter_core.errors import DurableError

pytestmark = pytest.mark.slow

ANSWER = "Turn att is done after 1 tool calls: applied 1 for att."


def _config(folder: Path) -> Path:
    path = folder / "attach.toml"
    path.write_text(
        '[model]\nuse = "scripted"\nscript = ["unused"]\n\n'
        f'[durable]\nuse = "dbos"\ndatabase = "sqlite:///{folder / "dbos.db"}"\nkernel = "{APP}"\n'
    )
    return path


def _start(folder: Path, env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "beamfilter_core", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=folder,
    )


def test_a_caller_attached_from_a_third_process_sees_a_recovered_turn_once(tmp_path: Path) -> None:
    config = _config(tmp_path)
    ledger, memory = f"sqlite:///{tmp_path / 'ledger.db'}", f"sqlite:///{tmp_path / 'memory.db'}"
    create_ledger(ledger)
    # slow tokens (14 chunks of 4 characters, 1 s each): the kill lands mid-answer however
    # late the processes are scheduled
    env = {**app_env(ledger, memory), "BF_TOKEN_SECONDS": "1.0"}

    first = _start(tmp_path, env, "run", str(config), "turn att: 1", "--conversation-id", "att")
    assert first.stdout is not None
    shown = first.stdout.read(8)
    assert shown == b"Turn att"
    # attached while the first process streams: what it reads was published (what the
    # first process printed may not be yet), so the kill below comes after it
    reader = _start(tmp_path, env, "durable", "attach", str(config), "att:turn-1")
    assert reader.stdout is not None
    head = reader.stdout.read(8)
    assert head == b"Turn att"
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=30)

    heir = _start(tmp_path, env, "durable", "worker", str(config), "--executor-id", "heir", "--recover", "local")
    try:
        tail, err = reader.communicate(timeout=300)
    finally:
        heir.send_signal(signal.SIGTERM)
        heir_out, heir_err = heir.communicate(timeout=60)
    assert reader.returncode == 0, err.decode()
    assert (head + tail).decode() == ANSWER + "\n"  # the text once: the re-run LLM step's prefix is not repeated
    assert err.decode() == "[tool effect]\n[tool effect done]\n"
    assert heir_out.decode() == "worker heir ready\n", heir_err.decode()[-2000:]
    assert b"recovering 1 turns of local" in heir_err

    # the tool step completed before the kill: replayed, never run again
    effects = read_ledger(ledger)["effects"]
    assert [(turn, amount) for _key, turn, amount in effects] == [("att", 1)]
    listed = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "durable", "list", str(config)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=120,
    )
    assert listed.stdout.startswith("att:turn-1  SUCCESS "), listed.stderr


def test_attaching_to_a_paused_streamed_turn_ends_at_its_pause_and_again_after_the_decision(local: Local) -> None:
    runner = local.runner

    async def collect(events: AsyncIterator[Event]) -> list[Event]:
        return [event async for event in events]

    streamed = local.call(collect(runner.run_stream("turn pst: pay", turn_id="pst")))
    finished = streamed[-1]
    assert isinstance(finished, RunFinished)
    assert finished.result.status == "paused"
    attached = local.call(collect(runner.attach("pst")))
    assert attached == streamed  # the same events, ending at the pause
    local.call(runner.decide("pst", {"pst-pay": "approve"}))
    result = local.call(runner.result("pst", decided="pst:pause-1"))
    assert result.text == "Turn pst is done after 1 tool calls: transferred 5 for pst."
    after = local.call(collect(runner.attach("pst")))
    # the decided pause no longer ends the stream: the approved call, the answer, the result
    assert [type(e).__name__ for e in after if not isinstance(e, TextDelta)] == [
        "ToolCallStarted",
        "ToolCallFinished",
        "RunFinished",
    ]
    assert "".join(e.text for e in after if isinstance(e, TextDelta)) == result.text
    assert after[-1] == RunFinished(result)


def test_attaching_to_an_unknown_turn_is_refused(local: Local) -> None:
    async def first() -> Event:
        return await anext(local.runner.attach("nope"))

    with pytest.raises(DurableError, match=r"^No durable turn 'nope' exists; `beamfilter durable list` shows"):
        local.call(first())
