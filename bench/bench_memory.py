"""Memory store benchmarks (issue 6): a 1,000-message conversation per store, and
concurrent turns through a Kernel with the memory filter.

A script, not a timed test. PostgreSQL and Redis are real servers started here on
127.0.0.1 (the same start-up code as the tests, ``tests/memory/_servers.py``); PostgreSQL
runs with ``fsync=on`` (its default), SQLite in WAL mode with ``synchronous=NORMAL`` (the
store's default), Redis without persistence. Stores whose server is not installed are
skipped with a note. Figures are wall-clock medians of ``--rounds`` rounds.

Section 3 is a paired comparison in one process: the stores of a baseline commit (its
``beamfilter_memory`` extracted with ``git archive`` as ``beamfilter_memory_baseline``) and
this tree's, alternating round by round, CPU time per operation; the ratio (median of the
per-round ratios) is the figure to read on a loaded machine.

Run it with::

    .venv/bin/python bench/bench_memory.py            # full run, about a minute
    .venv/bin/python bench/bench_memory.py --quick    # a fast smoke run
    .venv/bin/python bench/bench_memory.py --baseline 692325e --store memory --store sqlite
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import io
import os
import platform
import statistics
import subprocess
import sys
import tarfile
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
ROOT = Path(__file__).resolve().parents[1]
DEFAULT_BASELINE = "692325e"  # main just before the stores were written over StoreBase
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


def extract(rev: str, into: Path) -> Any:
    """The baseline's ``beamfilter_memory``, imported as ``beamfilter_memory_baseline`` (its
    modules import each other relatively, so both versions load side by side)."""
    archive = subprocess.run(
        ["git", "archive", rev, "beamfilter_memory/src/beamfilter_memory"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "beamfilter_memory" / "src" / "beamfilter_memory").rename(into / "beamfilter_memory_baseline")
    sys.path.insert(0, str(into))
    return importlib.import_module("beamfilter_memory_baseline")


async def cpu_ms(store: Any, messages: list[Message], turns: Kernel) -> dict[str, float]:
    """CPU ms of append(messages) + load() + load(50), and CPU us per memory-filter turn."""
    cid = f"ab-{time.monotonic_ns()}"
    started = time.process_time()
    await store.append(cid, messages)
    await store.load(cid)
    await store.load(cid, 50)
    storage = (time.process_time() - started) * 1000
    await store.clear(cid)
    started = time.process_time()
    for n in range(20):
        await turns.run(f"message {n}", context={"conversation_id": cid})
    turn = (time.process_time() - started) / 20 * 1e6
    await store.clear(cid)
    return {"append+load": storage, "turn": turn}


async def paired(args: argparse.Namespace, urls: dict[str, str]) -> None:
    print(f"\n3. baseline {args.baseline} vs this tree, one process, rounds alternate; CPU per operation")
    print(f"{'store':<10}{'operation':<26}{'baseline':>10}{'this tree':>11}{'ratio':>8}")
    messages = conversation(args.size)
    with tempfile.TemporaryDirectory(prefix="beamfilter-baseline-") as tmp:
        baseline = extract(args.baseline, Path(tmp))
        for kind, url in urls.items():
            if kind not in ("memory", "sqlite"):
                continue  # the network stores' time is the server's: compare them in section 1
            folder = Path(tmp) / kind
            folder.mkdir()
            pairs = []
            for side, package in (("before", baseline), ("after", sys.modules["beamfilter_memory"])):
                side_url = url if kind == "memory" else f"sqlite:///{folder}/{side}.db"
                store = package.open_store(side_url)
                pairs.append((store, Kernel(FixedModel(), filters=[package.memory_filter(store)])))
            samples: dict[str, list[tuple[float, float]]] = {"append+load": [], "turn": []}
            try:
                for _ in range(2):  # warm-up
                    for store, kernel in pairs:
                        await cpu_ms(store, messages, kernel)
                for _ in range(args.rounds * 2):
                    before = await cpu_ms(pairs[0][0], messages, pairs[0][1])
                    after = await cpu_ms(pairs[1][0], messages, pairs[1][1])
                    for key in samples:
                        samples[key].append((before[key], after[key]))
            finally:
                for store, _ in pairs:
                    await store.aclose()
            for key, unit in (("append+load", f"{args.size} msgs, ms"), ("turn", "memory turn, us")):
                b = statistics.median(x for x, _ in samples[key])
                a = statistics.median(y for _, y in samples[key])
                ratio = statistics.median(y / x for x, y in samples[key])
                print(f"{kind:<10}{key + ' (' + unit + ')':<26}{b:>10.2f}{a:>11.2f}{ratio:>8.3f}")


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
        if args.baseline:
            await paired(args, urls)
    return 1 if failed and not args.quick else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--size", type=int, default=1000, help="messages in the conversation")
    parser.add_argument("--conversations", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--store", action="append", choices=KINDS, help="only these stores (repeatable)")
    parser.add_argument(
        "--baseline", nargs="?", const=DEFAULT_BASELINE, help="also compare with this commit's stores (section 3)"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.conversations, args.turns = 3, 10, 5
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
