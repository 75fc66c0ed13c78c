"""The shell rule against an earlier commit: CPU µs per first-time decision, and the ratio.

A script, not a timed test. It extracts ``beamfilter_builtins`` of ``--baseline`` (a git
commit) and of the working tree's HEAD into temporary folders, then times
``ShellRule._analyse`` (no verdict cache) on the commands of ``bench/bench_policy.py``,
the two versions alternately in separate processes, ``--runs`` times each; the figure is
the best over all runs (best of 5 rounds of 500 calls in each). Run it with::

    .venv/bin/python bench/bench_shell_rule.py --baseline b5e0b8e
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from bench_policy import COMMANDS  # the same typical commands

ROOT = Path(__file__).resolve().parents[1]
TIMER = """
import sys, time
sys.path.insert(0, sys.argv[1])
from beamfilter_builtins._shell_rule import ShellRule
rule = ShellRule([], None, True)
figures = []
for command in sys.argv[2:]:
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for _ in range(500):
            rule._analyse(command)
        best = min(best, (time.process_time() - start) / 500)
    figures.append(best * 1e6)
print(" ".join(f"{figure:.1f}" for figure in figures))
"""


def extract(commit: str, folder: Path) -> Path:
    archive = subprocess.run(
        ["git", "archive", commit, "beamfilter_builtins/src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "beamfilter_builtins" / "src"


def time_once(source: Path) -> list[float]:
    output = subprocess.run(
        [sys.executable, "-c", TIMER, str(source), *COMMANDS], capture_output=True, text=True, check=True
    ).stdout
    return [float(figure) for figure in output.split()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", required=True, help="the commit to compare with")
    parser.add_argument("--runs", type=int, default=3)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as before_dir, tempfile.TemporaryDirectory() as after_dir:
        before_src = extract(options.baseline, Path(before_dir))
        after_src = extract("HEAD", Path(after_dir))
        before = [float("inf")] * len(COMMANDS)
        after = [float("inf")] * len(COMMANDS)
        for _ in range(options.runs):  # alternate, so that a change of load hits both
            before = [min(a, b) for a, b in zip(before, time_once(before_src), strict=True)]
            after = [min(a, b) for a, b in zip(after, time_once(after_src), strict=True)]
    print(f"{'command':<56}{options.baseline:>10}{'HEAD':>10}{'ratio':>8}")
    for command, old, new in zip(COMMANDS, before, after, strict=True):
        shown = command if len(command) <= 54 else command[:51] + "..."
        print(f"{shown:<56}{old:>8.1f}us{new:>8.1f}us{new / old:>7.2f}x")


if __name__ == "__main__":
    main()
