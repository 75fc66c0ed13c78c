"""Cold start of the ``beamfilter`` command with every plugin installed, against the core's import.

A script, not a timed test. Each command runs in a child process; the rounds interleave
the commands so that a busy machine slows them alike, and each figure is the median CPU
time (user + system) of the child. The baseline, measured in the same run, is
``python -c "import beamfilter_core"``; the goals are ratios to it:

- ``beamfilter --help`` ≤ 3x: listing the commands imports no plugin's heavy dependency
  (DBOS, SQLAlchemy, Starlette);
- ``beamfilter plugins`` ≤ 4x: every plugin's entry point is loaded, none of its engine;
- ``beamfilter chain`` on a config with an MCP toolset is shown for reference: it checks
  the toolset's options without the MCP SDK.

Run it with::

    .venv/bin/python bench/bench_cold_start.py            # 15 rounds
    .venv/bin/python bench/bench_cold_start.py --quick    # 3 rounds
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
sys.path.insert(0, str(ROOT / "tests"))
from e2e.test_cold_start import MCP_CONFIG  # noqa: E402 - the config the cold-start test checks

CHAIN_CONFIG = MCP_CONFIG + '\n[[filters]]\nuse = "redact"\n'


def child_cpu_seconds(argv: list[str], cwd: Path) -> float:
    """The CPU time (user + system) of one run of ``argv``; its output is discarded."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    completed = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if completed.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {completed.returncode}: {completed.stderr.decode()[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds instead of 15")
    parser.add_argument("--rounds", type=int, default=15)
    options = parser.parse_args()
    rounds = 3 if options.quick else options.rounds
    beamfilter = str(BIN / "beamfilter")
    with tempfile.TemporaryDirectory() as folder:
        work = Path(folder)
        (work / "beamfilter.toml").write_text(CHAIN_CONFIG, encoding="utf-8")
        commands = {
            'python -c "import beamfilter_core"': [sys.executable, "-c", "import beamfilter_core"],
            "beamfilter --help": [beamfilter, "--help"],
            "beamfilter plugins": [beamfilter, "plugins"],
            "beamfilter chain (mcp toolset)": [beamfilter, "chain", "beamfilter.toml"],
        }
        goals = {"beamfilter --help": 3.0, "beamfilter plugins": 4.0}
        for argv in commands.values():  # a first run writes the bytecode caches
            child_cpu_seconds(argv, work)
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(rounds):
            for name, argv in commands.items():
                times[name].append(child_cpu_seconds(argv, work))
    loadavg = Path("/proc/loadavg")
    load = " ".join(loadavg.read_text(encoding="utf-8").split()[:3]) if loadavg.exists() else "?"
    print(f"cold start, CPU time of the child, median of {rounds} interleaved rounds (load average {load})\n")
    print("| command | median CPU | x import beamfilter_core | goal | verdict |")
    print("|---|---|---|---|---|")
    base = statistics.median(times['python -c "import beamfilter_core"'])
    for name, values in times.items():
        median = statistics.median(values)
        ratio = median / base
        goal = goals.get(name)
        verdict = "" if goal is None else ("ok" if ratio <= goal else "MISS")
        goal_text = f"≤ {goal:.0f}x" if goal else ""
        print(f"| `{name}` | {median * 1000:.0f} ms | {ratio:.1f}x | {goal_text} | {verdict} |")


if __name__ == "__main__":
    main()
