"""Load: 200 concurrent turns on one event loop against llmock, each in its own
conversation in one SQLite store. All 200 are in flight at once and all complete, every
conversation is stored whole, a turn costs no more CPU among 200 than alone, no socket
or file descriptor leaks, and memory stays flat over three repetitions.

Nothing here depends on how busy the machine is: concurrency is counted, and the cost
of a turn is CPU time of this process compared with a baseline measured in the same
process just before, so other processes on the cores slow both sides alike.
"""

from __future__ import annotations

import asyncio
import gc
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from faults._faults import peer_model, scenario
from peers._peer import Peer

from beamfilter_core import Filter, Kernel, Message, TurnRequest, TurnResult
from beamfilter_memory import SQLiteStore, memory_filter

pytestmark = [pytest.mark.anyio, pytest.mark.peers, pytest.mark.slow]

TURNS = 200
ROUNDS = 3
ALONE = 20  # turns run one after the other for the CPU baseline
#: a turn among 200 concurrent ones may cost this many times its CPU time alone: room for
#: scheduling 200 tasks and a busy connection pool, far below what a quadratic cost or a
#: retry storm adds (measured: about 1.0 to 1.5)
CPU_RATIO = 3.0


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


class InFlight:
    """An outermost turn filter counting the turns in flight and the most at once."""

    def __init__(self) -> None:
        self.now = 0
        self.most = 0

    async def __call__(
        self, request: TurnRequest, state: dict[str, object], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            return await call_next(request)
        finally:
            self.now -= 1


async def test_200_concurrent_turns_complete_without_leaks(tmp_path: Path, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": "Fine, thanks.", "times": (TURNS + ALONE) * ROUNDS})
    baseline = _fds()
    store = SQLiteStore(f"sqlite:///{tmp_path / 'load.db'}")
    # a generous per-call limit: a busy machine may queue a request a long time; a
    # timed-out call would fail the turn, which the status check below reports
    model = peer_model(llmock, timeout=300)
    in_flight = InFlight()
    kernel = Kernel(model, filters=[Filter("in_flight", around_turn=in_flight), memory_filter(store)])
    sizes: list[int] = []
    sockets: list[int] = []
    ratios: list[float] = []
    try:
        for round_ in range(ROUNDS):
            started = time.process_time()
            for i in range(ALONE):
                alone = await kernel.run(f"alone {i}", context={"conversation_id": f"r{round_}-a{i}"})
                assert alone.status == "completed"
            cpu_alone = (time.process_time() - started) / ALONE
            assert in_flight.most == 1
            started = time.process_time()
            results = await asyncio.gather(
                *(kernel.run(f"hello {i}", context={"conversation_id": f"r{round_}-c{i}"}) for i in range(TURNS))
            )
            cpu_together = (time.process_time() - started) / TURNS
            assert [r.status for r in results] == ["completed"] * TURNS
            assert {r.text for r in results} == {"Fine, thanks."}
            # every turn was started before any finished: the kernel serialises nothing
            assert (in_flight.most, in_flight.now) == (TURNS, 0)
            in_flight.most = 0
            ratios.append(cpu_together / cpu_alone)
            assert ratios[-1] < CPU_RATIO, f"round {round_}: CPU per turn {ratios[-1]:.2f}x alone"
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
    rss = [round(b / 2**20, 1) for b in sizes]
    cpu = [round(r, 2) for r in ratios]
    print(f"rounds of {TURNS} turns: CPU per turn {cpu}x alone, sockets {sockets}, RSS {rss} MiB")
    records = [r for r in llmock.get("/_llmock/requests")["requests"] if r["body"]]
    assert sum(1 for r in records if r["body"]["messages"][-1]["content"].startswith("hello ")) >= TURNS
    assert sum(1 for r in records if r["body"]["messages"][-1]["content"].startswith("alone ")) >= ALONE
