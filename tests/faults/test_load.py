"""Load: 200 concurrent turns on one event loop against llmock, each in its own
conversation in one SQLite store. All complete, every conversation is stored whole,
no socket or file descriptor leaks, and memory stays flat over three repetitions.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from pathlib import Path

import pytest
from faults._faults import peer_model, scenario
from peers._peer import Peer

from beamfilter_core import Kernel, Message
from beamfilter_memory import SQLiteStore, memory_filter

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.slow]

TURNS = 200
ROUNDS = 3


def _rss() -> int:
    """Resident memory of this process in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fds() -> dict[str, int]:
    """Open descriptors of this process by kind (socket, file, other)."""
    counts = {"socket": 0, "file": 0, "other": 0}
    for name in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        kind = "socket" if target.startswith("socket:") else "file" if target.startswith("/") else "other"
        counts[kind] += 1
    return counts


async def test_200_concurrent_turns_complete_without_leaks(tmp_path: Path, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": "Fine, thanks.", "times": TURNS * ROUNDS})
    baseline = _fds()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'load.db'}")
    model = peer_model(llmock, timeout=60)
    kernel = Kernel(model, filters=[memory_filter(store)])
    sizes: list[int] = []
    sockets: list[int] = []
    try:
        for round_ in range(ROUNDS):
            started = time.monotonic()
            results = await asyncio.gather(
                *(kernel.run(f"hello {i}", context={"conversation_id": f"r{round_}-c{i}"}) for i in range(TURNS))
            )
            elapsed = time.monotonic() - started
            assert [r.status for r in results] == ["completed"] * TURNS
            assert {r.text for r in results} == {"Fine, thanks."}
            assert elapsed < 60, f"round {round_} took {elapsed:.1f} s"
            for i in (0, TURNS // 2, TURNS - 1):
                stored = await store.load(f"r{round_}-c{i}")
                assert stored == [Message.user(f"hello {i}"), Message.assistant("Fine, thanks.")]
            del results
            gc.collect()
            sizes.append(_rss())
            sockets.append(_fds()["socket"])
    finally:
        await model.aclose()
        await store.aclose()
    # httpx keeps at most 100 connections (its pool limit), however many turns ran.
    assert max(sockets) <= baseline["socket"] + 100, sockets
    # Flat memory (RSS; tracemalloc would triple the run time): after the first round has
    # warmed caches and the pool, each further round of 200 turns adds less than 4 MiB (20 KiB a turn).
    assert sizes[1] - sizes[0] < 4 << 20, sizes
    assert sizes[2] - sizes[1] < 4 << 20, sizes
    # Closing the model and the store gives every descriptor back.
    gc.collect()
    assert _fds() == baseline
    print(f"rounds of {TURNS} turns: sockets {sockets}, RSS {[round(b / 2**20, 1) for b in sizes]} MiB")
    records = [r for r in llmock.get("/_llmock/requests")["requests"] if r["body"]]
    assert sum(1 for r in records if r["body"]["messages"][-1]["content"].startswith("hello ")) >= TURNS
