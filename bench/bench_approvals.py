"""Approval benchmarks (issue 11): signing and verifying a pause, the compare-and-swap
that consumes a pause in each store, and the cost of all of it for turns that never
pause (target: within 5 % of the baseline commit, measured in this same run).

A script, not a timed test. The turn figures load the baseline commit's ``beamfilter_core``
(extracted with ``git archive``, as ``beamfilter_core_baseline``) next to this working
tree's in one process and alternate between them round by round, so both see the same
machine load; the ratio is the median of the per-round ratios. PostgreSQL and Redis are
real servers started here (``tests/memory/_servers.py``).

Run it with::

    .venv/bin/python bench/bench_approvals.py             # full run, about a minute
    .venv/bin/python bench/bench_approvals.py --quick     # a fast smoke run
    .venv/bin/python bench/bench_approvals.py --baseline 711a9f2   # another baseline
    .venv/bin/python bench/bench_approvals.py --turns-only         # only section 3
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beamfilter_core import ChatResponse, Decision, Kernel, Message, PauseState, ScriptedModel, ToolCall, tool
from beamfilter_core._pause import PauseKeys, sign, verify
from beamfilter_memory import open_store

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))
from bench_memory import servers  # noqa: E402  # after the path set-up

KINDS = ("memory", "sqlite", "postgres", "redis")
DEFAULT_BASELINE = "499cee3"  # main just before the approvals work landed
TARGET_TURN_RATIO = 1.05


def make_pause(size: int) -> PauseState:
    """A realistic pause: ``size`` transcript messages, then one awaited call."""

    @tool(sensitive=True)
    def transfer(to: str, amount: int) -> str:
        """Move money."""
        return "ok"

    history: list[Any] = []
    for i in range(size // 2):
        history += [f"question {i} " * 8, f"answer {i} " * 12]
    calls = [ToolCall("transfer", {"to": "bob", "amount": 5}, "t1")]
    script = [ChatResponse.tool_calls(*calls)]
    kernel = Kernel(ScriptedModel(script), tools=[transfer], gate=lambda c, t, x: "pause", pause_key="b" * 32)
    messages = [Message("user" if n % 2 == 0 else "assistant", text) for n, text in enumerate(history)]
    result = kernel.run_sync([*messages, Message.user("pay bob 5")], context={"user": "ada", "tenant": "acme"})
    assert result.pause is not None
    return result.pause


def per_call_us(fn: Any, rounds: int, inner: int) -> float:
    samples = []
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(inner):
            fn()
        samples.append((time.process_time() - started) / inner * 1e6)
    return statistics.median(samples)


def bench_signing(rounds: int) -> None:
    keys = PauseKeys("b" * 32)
    print("\n1. signing a pause (HMAC-SHA256 over canonical JSON), CPU us per call, median")
    print(f"{'pause':<28}{'json bytes':>11}{'sign':>10}{'verify':>10}{'to_json':>10}{'from_json':>11}")
    for size in (2, 20, 200):
        pause = make_pause(size)
        text = pause.to_json()
        inner = max(10, 2000 // size)
        s = per_call_us(lambda p=pause: sign(p, keys), rounds, inner)
        v = per_call_us(lambda p=pause: verify(p, keys), rounds, inner)
        dump = per_call_us(pause.to_json, rounds, inner)
        load = per_call_us(lambda t=text: PauseState.from_json(t), rounds, inner)
        label = f"{len(pause.messages)} messages, 1 call"
        print(f"{label:<28}{len(text):>11}{s:>10.1f}{v:>10.1f}{dump:>10.1f}{load:>11.1f}")


async def bench_cas(urls: dict[str, str], pause: PauseState, rounds: int, repeat: int) -> None:
    print("\n2. consuming a pause, per store, wall-clock ms per operation (median of rounds)")
    print(f"{'store':<10}{'save':>9}{'take(id)':>10}{'stale take':>11}{'claim':>9}{'claim again':>12}")
    for kind, url in urls.items():
        store: Any = open_store(url)
        figures: dict[str, list[float]] = {k: [] for k in ("save", "take", "stale", "claim", "again")}
        try:
            for r in range(rounds):
                cid = f"bench-{os.getpid()}-{r}"
                times = dict.fromkeys(figures, 0.0)
                for n in range(repeat):
                    started = time.perf_counter()
                    await store.save_pause(cid, pause)
                    times["save"] += time.perf_counter() - started
                    started = time.perf_counter()
                    assert await store.take_pause(cid, "0" * 32) is None
                    times["stale"] += time.perf_counter() - started
                    started = time.perf_counter()
                    assert await store.take_pause(cid, pause.pause_id) is not None
                    times["take"] += time.perf_counter() - started
                    pid = f"{cid}-{n}"
                    started = time.perf_counter()
                    assert await store.claim_pause(pid) is True
                    times["claim"] += time.perf_counter() - started
                    started = time.perf_counter()
                    assert await store.claim_pause(pid) is False
                    times["again"] += time.perf_counter() - started
                for key, total in times.items():
                    figures[key].append(total / repeat * 1e3)
        finally:
            await store.aclose()
        m = {k: statistics.median(v) for k, v in figures.items()}
        print(f"{kind:<10}{m['save']:>9.3f}{m['take']:>10.3f}{m['stale']:>11.3f}{m['claim']:>9.3f}{m['again']:>12.3f}")


def extract(rev: str, into: Path) -> str:
    """The baseline's ``beamfilter_core`` as the package ``beamfilter_core_baseline`` under ``into``
    (its modules import each other relatively, so both versions load side by side)."""
    archive = subprocess.run(
        ["git", "archive", rev, "beamfilter_core/src/beamfilter_core"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "beamfilter_core" / "src" / "beamfilter_core").rename(into / "beamfilter_core_baseline")
    return "beamfilter_core_baseline"


def turn_makers(core: Any) -> dict[str, Callable[[], Any]]:
    """Kernels of one version of the core: no gate, three pass-through chat and tool filters."""

    @core.tool
    async def lookup(city: str) -> str:
        """Weather."""
        return "sunny"

    async def passthrough(request: Any, state: Any, call_next: Any) -> Any:
        return await call_next(request)

    filters = [core.Filter(f"f{i}", around_chat=passthrough, around_tool=passthrough) for i in range(3)]
    call = core.ToolCall("lookup", {"city": "Oslo"}, "c1")
    return {
        "no-tool turn": lambda: core.Kernel(core.ScriptedModel(["Hi."] * 10**6), tools=[lookup], filters=filters),
        "one tool round": lambda: core.Kernel(
            core.ScriptedModel([core.ChatResponse.tool_calls(call), "Sunny."] * 10**6), tools=[lookup], filters=filters
        ),
    }


async def per_turn_us(kernel: Any, turns: int) -> float:
    started = time.process_time()
    for _ in range(turns):
        await kernel.run("weather in Oslo?")
    return (time.process_time() - started) / turns * 1e6


async def paired(baseline: Any, current: Any, rounds: int, turns: int) -> dict[str, tuple[float, float, float]]:
    out = {}
    for name in current:
        before_kernel, after_kernel = baseline[name](), current[name]()
        await per_turn_us(before_kernel, turns)  # warm up both
        await per_turn_us(after_kernel, turns)
        before, after, ratios = [], [], []
        for n in range(rounds):
            # alternate which goes first, so a load change hits both sides alike
            if n % 2:
                a = await per_turn_us(after_kernel, turns)
                b = await per_turn_us(before_kernel, turns)
            else:
                b = await per_turn_us(before_kernel, turns)
                a = await per_turn_us(after_kernel, turns)
            before.append(b)
            after.append(a)
            ratios.append(a / b)
        out[name] = (statistics.median(before), statistics.median(after), statistics.median(ratios))
    return out


def bench_turns(baseline: str, rounds: int, turns: int) -> bool:
    print(f"\n3. turns that never pause: baseline {baseline} vs this tree, CPU us per turn, one process")
    print(f"   {rounds} rounds of {turns} turns per side, alternating; ratio = median of the per-round ratios")
    import importlib

    import beamfilter_core

    with tempfile.TemporaryDirectory(prefix="beamfilter-baseline-") as tmp:
        name = extract(baseline, Path(tmp))
        sys.path.insert(0, tmp)
        try:
            base = importlib.import_module(name)
        finally:
            sys.path.remove(tmp)
        figures = asyncio.run(paired(turn_makers(base), turn_makers(beamfilter_core), rounds, turns))
    ok = True
    print(f"{'turn':<18}{'baseline':>10}{'this tree':>11}{'ratio':>8}   target")
    for label, (b, a, ratio) in figures.items():
        hit = ratio <= TARGET_TURN_RATIO
        ok &= hit
        print(f"{label:<18}{b:>10.2f}{a:>11.2f}{ratio:>8.3f}   <= {TARGET_TURN_RATIO:.2f}: {'ok' if hit else 'MISS'}")
    print("   (3 pass-through chat+tool filters, no gate: the path every run without approvals takes)")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a fast smoke run")
    parser.add_argument("--baseline", default=DEFAULT_BASELINE, help="the commit to compare turns against")
    parser.add_argument("--store", action="append", choices=KINDS, help="only these stores (repeatable)")
    parser.add_argument("--turns-only", action="store_true", help="only the turns that never pause (section 3)")
    args = parser.parse_args(argv)
    rounds, repeat, turn_rounds, turns = (3, 20, 6, 100) if args.quick else (9, 100, 40, 300)
    print(
        f"python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    if not args.turns_only:
        bench_signing(rounds)
        with servers(args.store or list(KINDS)) as urls:
            asyncio.run(bench_cas(urls, make_pause(20), rounds, repeat))
    ok = bench_turns(args.baseline, turn_rounds, turns)
    assert Decision  # the records the figures are about
    return 0 if ok or args.quick else 1


if __name__ == "__main__":
    raise SystemExit(main())
