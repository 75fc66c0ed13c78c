"""Sandbox benchmark: what running a command in the bubblewrap sandbox adds per command.

A script, not a timed test. Each row runs one short command many times, the rows taking
turns (so that a change of load reaches all of them), in one event loop, and reports the
median and 90th percentile of the wall-clock time of one whole command (start, output
read, exit):

- *plain subprocess*: ``asyncio.create_subprocess_exec`` + ``communicate()``, the floor;
- *run_sandboxed, sandbox="none"*: the same runner without bubblewrap (its own cost:
  cleared environment, capped readers, process-group handling);
- *run_sandboxed* (the shell toolset's default): bubblewrap with every namespace, network
  off;
- *run_sandboxed, network=True*: the same without a new network namespace.

The *added* column is the sandbox's median minus the plain median measured in the same
run; the goal is at most 15 ms added per command. Run it with::

    .venv/bin/python bench/bench_sandbox.py            # about 10 s
    .venv/bin/python bench/bench_sandbox.py --quick    # a short smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

from beamfilter_builtins import run_sandboxed

GOAL_MS = 15.0
COMMANDS = {"true": ["true"], "echo": ["echo", "hello"]}


async def _plain(argv: list[str], workdir: str) -> None:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, cwd=workdir
    )
    await process.communicate()


def _p90(times: list[float]) -> float:
    return sorted(times)[max(0, int(len(times) * 0.9) - 1)]


async def _rows(rows: list[tuple[str, Callable[[], Awaitable[object]]]], count: int) -> dict[str, list[float]]:
    """Each runner ``count`` times, interleaved (one of each in turn), so that a change in
    the machine's load reaches every row alike."""
    times: dict[str, list[float]] = {label: [] for label, _ in rows}
    for _, run in rows:
        await run()  # warm: the first start pays for the page cache
    for _ in range(count):
        for label, run in rows:
            started = time.perf_counter()
            await run()
            times[label].append((time.perf_counter() - started) * 1000)
    return times


async def main(count: int) -> int:
    if shutil.which("bwrap") is None:
        print("bubblewrap is not installed (apt-get install bubblewrap): nothing to measure")
        return 1
    workdir = tempfile.mkdtemp(prefix="bench-sandbox-")
    print(f"sandbox start cost per command, {count} runs each, wall clock in ms (goal: <= {GOAL_MS:g} ms added)")
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} ({os.cpu_count()} CPUs)")
    print(f"{'command':<8} {'runner':<34} {'median':>8} {'p90':>8} {'added':>8} {'ratio':>7}  verdict")
    worst = 0.0
    for name, argv in COMMANDS.items():
        rows: list[tuple[str, Callable[[], Awaitable[object]]]] = [
            ("plain subprocess", lambda argv=argv: _plain(argv, workdir)),
            ('run_sandboxed, sandbox="none"', lambda argv=argv: run_sandboxed(argv, workdir=workdir, sandbox="none")),
            ("run_sandboxed (bubblewrap)", lambda argv=argv: run_sandboxed(argv, workdir=workdir)),
            ("run_sandboxed, network=True", lambda argv=argv: run_sandboxed(argv, workdir=workdir, network=True)),
        ]
        times = await _rows(rows, count)
        plain = statistics.median(times["plain subprocess"])
        for label, _ in rows:
            median = statistics.median(times[label])
            added = median - plain
            verdict = "" if label == "plain subprocess" else ("ok" if added <= GOAL_MS else "over the goal")
            if "bubblewrap" in label:
                worst = max(worst, added)
            print(
                f"{name:<8} {label:<34} {median:>8.2f} {_p90(times[label]):>8.2f} {added:>+8.2f} "
                f"{median / plain:>6.2f}x  {verdict}"
            )
    shutil.rmtree(workdir)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"worst added by the default sandbox: {worst:.2f} ms per command (goal <= {GOAL_MS:g} ms)")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="20 runs per row instead of 300")
    parser.add_argument("--runs", type=int, default=None, help="runs per row")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.runs or (20 if args.quick else 300))))
