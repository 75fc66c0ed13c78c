"""Memory store benchmarks (issue 6): a 1,000-message conversation per store, and
concurrent turns through a Kernel with the memory filter.

A script, not a timed test. PostgreSQL and Redis are real servers started here on
127.0.0.1 (the same start-up code as the tests, ``tests/memory/_servers.py``); PostgreSQL
runs with ``fsync=on`` (its default), SQLite in WAL mode with ``synchronous=NORMAL`` (the
store's default), Redis without persistence. Stores whose server is not installed are
skipped with a note. Figures are wall-clock medians of ``--rounds`` rounds.

Run it with::

    .venv/bin/python bench/bench_memory.py            # full run, about a minute
    .venv/bin/python bench/bench_memory.py --quick    # a fast smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from beamfilter_core import ChatRequest, ChatResponse, Kernel, Message, ToolCall
from beamfilter_memory import ChatStore, memory_filter, open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from memory._servers import postgres_bindir, postgres_server, redis_binary, redis_server

TARGET_SQLITE_MS = 20.0
KINDS = ("memory", "sqlite", "postgres", "redis")


def conversation(n: int) -> list[Message]:
    """``n`` messages shaped like a real agent transcript: questions, tool rounds, answers."""
    out: list[Message] = []
    i = 0
    while len(out) < n:
        out.append(Message.user(f"Question {i}: what is the weather in city number {i}? " * 2))
        call = ToolCall("weather", {"city": f"city-{i}", "units": "metric"}, f"call_{i}")
        out.append(Message.assistant(None, (call,)))
        out.append(Message.tool(f"call_{i}", f'{{"city": "city-{i}", "temp": 21, "sky": "clear"}}', "weather"))
        out.append(Message.assistant(f"In city {i} it is 21 degrees and clear. " * 3))
        i += 1
    return out[:n]


class FixedModel:
    """A ChatModel that answers every call with the same text (records nothing)."""

    def __init__(self) -> None:
        self.answer = ChatResponse.from_text("Noted, thanks.")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.answer

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        on_token(self.answer.text)
        return self.answer


def median_ms(samples: Sequence[float]) -> float:
    return statistics.median(samples) * 1000


async def bench_conversation(store: ChatStore, size: int, rounds: int) -> dict[str, float]:
    """Median wall and CPU milliseconds of append(size messages), load(), load(50)."""
    messages = conversation(size)
    samples: dict[str, list[float]] = {k: [] for k in ("append", "load", "window50", "cpu")}
    await store.append("warm-up", messages[:4])
    await store.load("warm-up")
    wall, cpu = time.perf_counter, time.process_time
    for r in range(rounds):
        cid = f"bench-{r}-{time.monotonic_ns()}"
        c0, t0 = cpu(), wall()
        await store.append(cid, messages)
        t1 = wall()
        loaded = await store.load(cid)
        t2, c2 = wall(), cpu()
        window = await store.load(cid, 50)
        t3 = wall()
        if loaded != messages or len(window) > 50:
            raise SystemExit(f"{store!r}: the loaded conversation differs from the appended one")
        samples["append"].append(t1 - t0)
        samples["load"].append(t2 - t1)
        samples["window50"].append(t3 - t2)
        samples["cpu"].append(c2 - c0)  # this process's CPU time, worker threads included
        await store.clear(cid)
    figures = {k: median_ms(v) for k, v in samples.items()}
    totals = [a + b for a, b in zip(samples["append"], samples["load"], strict=True)]
    figures["best"] = min(totals) * 1000
    return figures


async def bench_turns(store: ChatStore, conversations: int, turns: int) -> tuple[float, float]:
    kernel = Kernel(FixedModel(), filters=[memory_filter(store)])
    stamp = time.monotonic_ns()
    latencies: list[float] = []

    async def talk(n: int) -> None:
        context = {"conversation_id": f"turns-{stamp}-{n}"}
        for t in range(turns):
            started = time.perf_counter()
            await kernel.run(f"message {t}", context=context)
            latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(talk(n) for n in range(conversations)))
    elapsed = time.perf_counter() - started
    for n in range(conversations):
        cid = f"turns-{stamp}-{n}"
        if len(await store.load(cid)) != 2 * turns:
            raise SystemExit(f"{store!r}: conversation {cid} lost or duplicated messages")
        await store.clear(cid)
    return conversations * turns / elapsed, median_ms(latencies)


@contextlib.contextmanager
def servers(kinds: Sequence[str]) -> Iterator[dict[str, str]]:
    urls: dict[str, str] = {}
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="beamfilter-bench-"))
        for kind in kinds:
            if kind == "memory":
                urls[kind] = "memory://"
            elif kind == "sqlite":
                urls[kind] = f"sqlite:///{tmp}/bench.db"
            elif kind == "postgres":
                if postgres_bindir() is None:
                    print("postgres: skipped (PostgreSQL is not installed)")
                    continue
                urls[kind] = stack.enter_context(postgres_server(fsync=True))
            elif kind == "redis":
                if redis_binary() is None:
                    print("redis: skipped (redis-server is not installed)")
                    continue
                urls[kind] = stack.enter_context(redis_server())
        yield urls


async def run(args: argparse.Namespace) -> int:
    kinds = args.store or list(KINDS)
    failed = False
    with servers(kinds) as urls:
        load = os.getloadavg()[0]
        print(
            f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
            f"load average {load:.2f}, rounds={args.rounds}"
        )
        print(f"\n1. append + load of a {args.size}-message conversation (one append = one transaction), ms")
        print("   wall-clock medians; 'best' = fastest round; 'cpu' = this process's CPU time for append + load")
        print(f"{'store':<10}{'append':>9}{'load':>9}{'total':>9}{'best':>9}{'cpu':>9}{'load(50)':>10}   target")
        for kind, url in urls.items():
            store: Any = open_store(url, max_size=20) if kind == "postgres" else open_store(url)
            try:
                figures = await bench_conversation(store, args.size, args.rounds)
            finally:
                await store.aclose()
            total = figures["append"] + figures["load"]
            verdict = ""
            if kind == "sqlite":
                ok = total <= TARGET_SQLITE_MS
                failed |= not ok
                verdict = f"<= {TARGET_SQLITE_MS:g} ms (wall median): {'ok' if ok else 'MISSED'}"
            print(
                f"{kind:<10}{figures['append']:>9.2f}{figures['load']:>9.2f}{total:>9.2f}{figures['best']:>9.2f}"
                f"{figures['cpu']:>9.2f}{figures['window50']:>10.2f}   {verdict}"
            )
        c, t = args.conversations, args.turns
        print(f"\n2. concurrent turns: {c} conversations x {t} turns through one Kernel + memory filter")
        print(f"{'store':<10}{'turns/s':>10}{'median turn ms':>16}")
        for kind, url in urls.items():
            store = open_store(url, max_size=20) if kind == "postgres" else open_store(url)
            try:
                rate, latency = await bench_turns(store, c, t)
            finally:
                await store.aclose()
            print(f"{kind:<10}{rate:>10.0f}{latency:>16.2f}")
    return 1 if failed and not args.quick else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=1000, help="messages in the conversation")
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--store", action="append", choices=KINDS, help="only these stores (repeatable)")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.conversations, args.turns = 3, 10, 5
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
