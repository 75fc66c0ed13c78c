"""Run every ``bench/bench_*.py`` script, each in its own process, and print its output.

Each script runs with the same Python as this one, from the repository root, with the
arguments given here passed through (e.g. ``--quick``). A script that fails does not
stop the others; the exit status is 1 if any failed.

Run it with::

    .venv/bin/python bench/run_all.py            # or: ./run bench
    .venv/bin/python bench/run_all.py --quick    # fast smoke run of every script
    .venv/bin/python bench/run_all.py --list     # the scripts that would run
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent


def scripts() -> list[Path]:
    """The benchmark scripts, in name order."""
    return sorted(BENCH_DIR.glob("bench_*.py"))


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
    args = list(sys.argv[1:] if argv is None else argv)
    found = scripts()
    if not found:
        print(f"no bench_*.py scripts in {BENCH_DIR}", file=sys.stderr)
        return 1
    if args == ["--list"]:
        for script in found:
            print(script.relative_to(ROOT))
        return 0
    failed = [script.name for script in found if run_one(script, args) != 0]
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"all {len(found)} benchmark script(s) finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
