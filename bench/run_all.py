"""Run every ``bench/bench_*.py`` script, each in its own process, and print its output.

Each script runs with the same Python as this one, from the repository root. The
options below are this runner's; every other argument is passed through to each script
(e.g. ``--quick``, which every script accepts). A script that fails does not stop the
others; the exit status is 1 if any failed.

Run it with::

    .venv/bin/python bench/run_all.py                  # or: ./run bench
    .venv/bin/python bench/run_all.py --quick          # fast smoke run of every script
    .venv/bin/python bench/run_all.py --list           # the scripts that would run
    .venv/bin/python bench/run_all.py --skip peers     # all but bench_peers.py
    .venv/bin/python bench/run_all.py --script core --script memory --quick
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


def scripts() -> list[Path]:
    """The benchmark scripts, in name order (the side-by-side peers run on their own:
    ``python bench/bench_peers.py`` or ``nox -s bench_peers``)."""
    return sorted(p for p in BENCH_DIR.glob("bench_*.py") if p.name != "bench_peers.py")


def short_name(script: Path) -> str:
    """``bench_core.py`` -> ``core``: the name ``--script`` and ``--skip`` take."""
    return script.stem.removeprefix("bench_")


def select(found: Sequence[Path], only: Sequence[str], skip: Sequence[str]) -> list[Path]:
    """The scripts named in ``only`` (all if empty), minus those named in ``skip``.

    Names may be given as ``core``, ``bench_core`` or ``bench_core.py``.
    """
    known = {short_name(script) for script in found}
    wanted = [name.removeprefix("bench_").removesuffix(".py") for name in (*only, *skip)]
    unknown = sorted(set(wanted) - known)
    if unknown:
        msg = f"no bench script named {', '.join(unknown)}; the scripts are: {', '.join(sorted(known))}"
        raise SystemExit(msg)
    keep = {name.removeprefix("bench_").removesuffix(".py") for name in only} or known
    drop = {name.removeprefix("bench_").removesuffix(".py") for name in skip}
    return [script for script in found if short_name(script) in keep - drop]


def run_one(script: Path, args: Sequence[str]) -> int:
    """Run ``script`` in a fresh process, streaming its output; return its exit status."""
    print(f"=== {script.relative_to(ROOT)} {' '.join(args)}".rstrip(), flush=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, str(script), *args], cwd=ROOT, check=False)
    elapsed = time.perf_counter() - started
    status = "ok" if done.returncode == 0 else f"FAILED (exit status {done.returncode})"
    print(f"=== {script.name}: {status} in {elapsed:.1f} s\n", flush=True)
    return done.returncode


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Run every bench/bench_*.py in its own process; other arguments go to each script."
    )
    parser.add_argument("--list", action="store_true", help="print the scripts that would run, and stop")
    parser.add_argument("--script", action="append", default=[], metavar="NAME", help="run this script (repeatable)")
    parser.add_argument("--skip", action="append", default=[], metavar="NAME", help="do not run this script")
    options, passed = parser.parse_known_args(sys.argv[1:] if argv is None else argv)
    found = select(scripts(), options.script, options.skip)
    if not found:
        print(f"no bench_*.py scripts to run in {BENCH_DIR}", file=sys.stderr)
        return 1
    if options.list:
        for script in found:
            print(script.relative_to(ROOT))
        return 0
    failed = [script.name for script in found if run_one(script, passed) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(found)} benchmark script(s) finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
