"""Shared harness of the side-by-side scenario scripts: timing, the floor, footprint, JSON.

Every scenario script (``bench_<framework>.py``) imports this module, builds the same four
scenarios with its framework's own agent, fake in-process model and middleware/filter
mechanism, and prints one JSON object (see :func:`emit`). ``bench/bench_peers.py`` runs the
scripts one process each and prints the table.

Timing: a round times a loop of calls sized to take about ``round_seconds`` of the process's
CPU time (see :class:`Timer`); every figure is the median of ``rounds`` rounds, and its
spread ``(max - min) / median`` is reported too, so the noise of a shared machine is visible
next to the figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

LAYERS = (0, 1, 5, 10, 20)
TOKENS = 10_000
QUESTION = "What is 1 + 2?"
ANSWER_TEXT = "The answer is 3."
#: The streamed answer: 10,000 tokens, the same list in every framework.
STREAM_TOKENS = tuple(f"t{i % 10} " for i in range(TOKENS))
STREAM_TEXT = "".join(STREAM_TOKENS)
FOOTPRINT_RUNS = 5

Body = Callable[[int], Awaitable[None]]


class BenchError(RuntimeError):
    """A scenario did not do what it claims (wrong answer, layers not called, ...)."""


def check(condition: bool, what: str) -> None:
    """Fail loudly when a scenario's sanity check does not hold."""
    if not condition:
        msg = f"sanity check failed: {what}"
        raise BenchError(msg)


# -- timing -----------------------------------------------------------------------------


class Timer:
    """Median microseconds per loop iteration over ``rounds`` rounds, with the spread.

    The clock is the process's CPU time (``time.process_time``: every thread of the
    process, nothing while it waits for a core), because this machine is shared and busy:
    wall-clock rounds also count whatever else ran meanwhile. The scenarios never wait on
    I/O or timers (the models are in-process fakes), so CPU time is their whole cost.
    Wall-clock medians are kept too (``wall``), to show how much the load inflated them.
    """

    def __init__(self, rounds: int, round_seconds: float, layers: Sequence[int] = LAYERS) -> None:
        self.rounds = rounds
        self.round_seconds = round_seconds
        #: The layer counts N of the layer series (carried here so scripts need not know).
        self.layers = tuple(layers)

    async def _once(self, body: Body, loops: int) -> tuple[float, float]:
        gc.collect()
        wall = time.perf_counter()
        cpu = time.process_time()
        await body(loops)
        return time.process_time() - cpu, time.perf_counter() - wall

    async def _calibrate(self, body: Body) -> tuple[int, tuple[float, float] | None]:
        """The loop size of a round, and the calibration run itself when it was one call
        as long as a round (a slow body, e.g. a 10,000-token stream: it counts as round 1)."""
        loops = 1
        while True:  # grow until one run takes a tenth of a round
            sample = await self._once(body, loops)
            elapsed = sample[0]
            if elapsed >= self.round_seconds / 10 or loops >= 10_000_000:
                break
            loops *= 4
        size = max(1, int(loops * self.round_seconds / max(elapsed, 1e-9)))
        return size, sample if loops == 1 and size == 1 else None

    async def compare(self, *bodies: Body) -> list[tuple[float, float, float]]:
        """``(median CPU us, spread, median wall us)`` of each body, rounds interleaved."""
        calibrated = [await self._calibrate(body) for body in bodies]
        cpu: list[list[float]] = [[sample[0]] if sample else [] for _, sample in calibrated]
        wall: list[list[float]] = [[sample[1]] if sample else [] for _, sample in calibrated]
        for _ in range(self.rounds):
            for body, (loops, _), cpu_out, wall_out in zip(bodies, calibrated, cpu, wall, strict=True):
                if len(cpu_out) >= self.rounds:
                    continue
                spent, elapsed = await self._once(body, loops)
                cpu_out.append(spent / loops)
                wall_out.append(elapsed / loops)
        results = []
        for cpu_out, wall_out in zip(cpu, wall, strict=True):
            median = statistics.median(cpu_out)
            spread = (max(cpu_out) - min(cpu_out)) / median if median else 0.0
            results.append((median * 1e6, spread, statistics.median(wall_out) * 1e6))
        return results

    async def measure(self, body: Body) -> tuple[float, float, float]:
        """``(median CPU us, spread, median wall us)`` of one body."""
        return (await self.compare(body))[0]


def loop_of(call: Callable[[], Awaitable[Any]]) -> Body:
    """A loop body awaiting ``call()`` ``loops`` times."""

    async def body(loops: int) -> None:
        for _ in range(loops):
            await call()

    return body


def slope(xs: Sequence[int], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs``."""
    mean_x = statistics.fmean(xs)
    mean_y = statistics.fmean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


# -- the pure-Python floor --------------------------------------------------------------


def nested_closures(n: int, terminal: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """``n`` plain async closures around ``terminal``: the floor of an ``n``-layer onion."""
    call = terminal
    for _ in range(n):

        def wrap(inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
            async def layer(request: Any) -> Any:
                return await inner(request)

            return layer

        call = wrap(call)
    return call


async def floor_series(timer: Timer, layers: Sequence[int] = LAYERS) -> dict[str, Any]:
    """One call through N nested async closures around an async terminal, for each N."""
    response = object()

    async def terminal(request: Any) -> Any:
        return response

    bodies = []
    for n in layers:
        call = nested_closures(n, terminal)

        async def body(loops: int, call: Callable[[Any], Awaitable[Any]] = call) -> None:
            for _ in range(loops):
                await call(None)

        bodies.append(body)
    return _series(layers, await timer.compare(*bodies))


def _series(layers: Sequence[int], timings: Sequence[tuple[float, float, float]]) -> dict[str, Any]:
    keys = [str(n) for n in layers]
    figures = {key: t[0] for key, t in zip(keys, timings, strict=True)}
    return {
        "us": figures,
        "spread": {key: t[1] for key, t in zip(keys, timings, strict=True)},
        "wall_us": {key: t[2] for key, t in zip(keys, timings, strict=True)},
        "slope_us": slope(layers, list(figures.values())),
    }


# -- scenario series --------------------------------------------------------------------


async def layer_series(
    timer: Timer,
    build: Callable[[int], Awaitable[Callable[[], Awaitable[Any]]]],
    layers: Sequence[int] = LAYERS,
) -> dict[str, Any]:
    """Time ``await call()`` for each N in ``layers``, rounds interleaved across N.

    ``build(n)`` returns the call, after checking it does what the scenario claims.
    """
    calls = [await build(n) for n in layers]
    return _series(layers, await timer.compare(*(loop_of(call) for call in calls)))


async def stream_series(
    timer: Timer,
    bare: Callable[[], Awaitable[str]],
    transformed: Callable[[], Awaitable[str]] | None,
    note: str,
) -> dict[str, Any]:
    """Time one full 10,000-token stream, bare and with one upper-casing layer.

    Every timed run checks its text (the bare stream unchanged, the transformed one
    upper-cased), so no separate checking run is needed.
    """

    def body_of(consume: Callable[[], Awaitable[str]], expected: str, what: str) -> Body:
        async def body(loops: int) -> None:
            for _ in range(loops):
                got = await consume()
                check(got == expected, f"{what} (got {got[:30]!r}...)")

        return body

    bodies = [body_of(bare, STREAM_TEXT, "the bare stream delivers the 10,000 tokens unchanged")]
    if transformed is not None:
        bodies.append(body_of(transformed, STREAM_TEXT.upper(), "the transformed stream is upper-cased"))
    timings = await timer.compare(*bodies)
    out: dict[str, Any] = {
        "bare_ms": timings[0][0] / 1000,
        "bare_spread": timings[0][1],
        "bare_wall_ms": timings[0][2] / 1000,
        "note": note,
    }
    if transformed is not None:
        out["transform_ms"] = timings[1][0] / 1000
        out["transform_spread"] = timings[1][1]
        out["transform_wall_ms"] = timings[1][2] / 1000
    else:
        out["transform_ms"] = None
    return out


# -- footprint: import time and resident memory, in fresh interpreters ------------------

_PROBE = """
import sys, time
def rss_kb():
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith('VmRSS:'):
                return int(line.split()[1])
sys.path.insert(0, {here!r})
before = rss_kb()
t0 = time.process_time()
import {module} as m
t1 = time.process_time()
{build}
t2 = time.process_time()
print(repr((t1 - t0, t2 - t1, before, rss_kb())))
"""


def _probe(module: str, build: str) -> tuple[float, float, int, int]:
    here = os.path.dirname(os.path.abspath(__file__))
    code = _PROBE.format(here=here, module=module, build=build)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        msg = f"footprint probe of {module} failed:\n{done.stderr}"
        raise BenchError(msg)
    value: tuple[float, float, int, int] = eval(done.stdout.strip().splitlines()[-1])  # our own repr
    return value


def footprint(module: str, build: str = "m.build_agent()") -> dict[str, Any]:
    """Import time (CPU) and resident memory of ``module`` after ``build``, net of the harness.

    Each figure is the median of :data:`FOOTPRINT_RUNS` fresh interpreters. The harness
    (this module and the stdlib it imports: asyncio, json, statistics, subprocess) is
    probed the same way and subtracted, so what remains is the framework's own cost.
    """
    base = [_probe("_common", "pass") for _ in range(FOOTPRINT_RUNS)]
    runs = [_probe(module, build) for _ in range(FOOTPRINT_RUNS)]
    base_import = statistics.median(b[0] for b in base)
    base_rss = statistics.median(b[3] for b in base)
    return {
        "import_ms": (statistics.median(r[0] for r in runs) - base_import) * 1000,
        "build_ms": statistics.median(r[1] for r in runs) * 1000,
        "rss_mb": (statistics.median(r[3] for r in runs) - base_rss) / 1024,
        "rss_total_mb": statistics.median(r[3] for r in runs) / 1024,
        "harness_import_ms": base_import * 1000,
        "harness_rss_mb": base_rss / 1024,
    }


# -- command line and output ------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """``--rounds`` (default 5), ``--round-seconds`` (default 0.05), ``--quick``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure (median taken), at least 5")
    parser.add_argument("--round-seconds", type=float, default=0.05, help="CPU seconds of one round")
    parser.add_argument("--quick", action="store_true", help="short rounds, for a smoke check")
    parser.add_argument(
        "--layers",
        type=int,
        nargs="+",
        default=list(LAYERS),
        help="the layer counts N (default 0 1 5 10 20; e.g. 0 100 to resolve a small per-layer cost)",
    )
    args = parser.parse_args(argv)
    if len(set(args.layers)) < 2 or min(args.layers) < 0:
        parser.error(f"--layers={args.layers}: give at least two different non-negative layer counts")
    if args.rounds < 5:
        parser.error(f"--rounds={args.rounds}: the medians need at least 5 rounds")
    if args.round_seconds <= 0:
        parser.error(f"--round-seconds={args.round_seconds}: give a positive number of seconds")
    if args.quick:
        args.round_seconds = min(args.round_seconds, 0.02)
    return args


async def run_scenarios(
    framework: str,
    version: str,
    module: str,
    timer: Timer,
    *,
    turn: Callable[[int], Awaitable[Callable[[], Awaitable[Any]]]],
    tool_round: Callable[[int], Awaitable[Callable[[], Awaitable[Any]]]],
    stream: tuple[Callable[[], Awaitable[str]], Callable[[], Awaitable[str]] | None, str],
    mechanism: str,
    notes: Sequence[str] = (),
) -> dict[str, Any]:
    """Run the four scenarios and the floor; return the JSON-ready figures."""
    started = time.perf_counter()
    result: dict[str, Any] = {
        "framework": framework,
        "version": version,
        "python": sys.version.split()[0],
        "mechanism": mechanism,
        "rounds": timer.rounds,
        "round_seconds": timer.round_seconds,
        "notes": list(notes),
    }
    result["layers"] = list(timer.layers)
    result["floor"] = await floor_series(timer, timer.layers)
    result["turn"] = await layer_series(timer, turn, timer.layers)
    result["tool_round"] = await layer_series(timer, tool_round, timer.layers)
    result["stream"] = await stream_series(timer, *stream)
    result["footprint"] = footprint(module)
    result["seconds"] = time.perf_counter() - started
    return result


def emit(result: dict[str, Any]) -> None:
    """Print the figures as one JSON object (the last line of stdout)."""
    print(json.dumps(result, sort_keys=True), flush=True)


def main(scenarios: Callable[[Timer], Coroutine[Any, Any, dict[str, Any]]]) -> None:
    """Parse the command line, run ``scenarios(timer)`` in a fresh event loop, print JSON."""
    args = parse_args()
    timer = Timer(args.rounds, args.round_seconds, sorted(set(args.layers)))
    emit(asyncio.run(scenarios(timer)))
