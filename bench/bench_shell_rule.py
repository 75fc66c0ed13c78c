"""The shell rule's worst cases: ms per first-time decision of adversarial commands, against the 10 ms goal.

A script, not a timed test. Each row is a shape an attacker controls (a chain of ``cd`` or
``pushd``, nesting, a long pipeline, many words, here-documents, quoting, wrappers, 100 KB
inputs). For each shape it finds the largest size the rule still reads in full (past its
budgets a command is unreadable, hence opaque), and times ``ShellRule._analyse`` (no
verdict cache) there, at twice that size, and at about 100 KB, for the deny-list rule and
for the ``allow_commands`` rule. The figure is the best of ``--rounds`` runs in wall time;
the ratio is against the 10 ms goal and against ``ls -la`` decided in the same run.

With ``--before COMMIT`` it times the shapes that were slow or crashed before (a 2.1 KB
``cd`` chain, 250 nested ``$(``, ...) on that commit and on HEAD, each in its own process
(a row that takes over 60 s is reported as such). With ``--baseline COMMIT`` it times the
typical commands of ``bench/bench_policy.py`` on that commit and on HEAD, alternately::

    .venv/bin/python bench/bench_shell_rule.py
    .venv/bin/python bench/bench_shell_rule.py --before dc6cfe7
    .venv/bin/python bench/bench_shell_rule.py --baseline b5e0b8e
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from beamfilter_builtins._shell_rule import ShellRule

ROOT = Path(__file__).resolve().parents[1]
GOAL_MS = 10.0
HUNDRED_KB = 100_000
DENY = ShellRule([], None, True)
STRICT = ShellRule([], frozenset({"ls", "cat", "cd", "pushd", "echo", "grep", "rm", "tee", "git", "sudo"}), True)


def _cd(n: int) -> str:
    return " && ".join(f"cd d{i}" for i in range(n)) + " && echo x > f && rm -rf x"


SHAPES: dict[str, Callable[[int], str]] = {
    "cd chain": _cd,
    "pushd chain": lambda n: "; ".join(f"pushd d{i}" for i in range(n)) + "; rm -rf x",
    "cd to 8 places": lambda n: "; ".join(f"cd d{i % 8}; echo x > f{i}" for i in range(n)),
    "nested $(": lambda n: "echo " + "$(" * n + "ls" + ")" * n,
    "nested { }": lambda n: "{ " * n + "ls; " + "}; " * n,
    "nested if": lambda n: "if true; then " * n + "ls; " + "fi; " * n,
    "nested bash -c": lambda n: "bash -c " * n + "ls",
    "pipeline": lambda n: " | ".join(["cat"] * n),
    "pipeline a|a": lambda n: "|".join(["a"] * n),
    "&& list": lambda n: " && ".join(["ls"] * n),
    "words": lambda n: "echo " + "a " * n,
    "absolute paths": lambda n: "rm -rf " + " ".join(f"/srv/x{i}" for i in range(n)),
    "system globs": lambda n: "rm -rf " + " ".join(f"/u?r{i}" for i in range(n)),
    "descriptor paths": lambda n: "cat x " + " ".join(f"/dev/fd/{i}" for i in range(n)),
    "wrapper chain": lambda n: "sudo timeout 5 nice env " * n + "ls",
    "brace expansion": lambda n: "echo " + " ".join("{1..200}" for _ in range(n)),
    "quoted words": lambda n: "echo " + " ".join(f"'a{i}'" for i in range(n)),
    "git -c settings": lambda n: "git " + "-c a.b=c " * n + "log",
    "here-document": lambda n: "cat <<'EOF' > f\n" + "x" * n + "\nEOF",
    "here-doc into sh": lambda n: "cat <<EOF | sh\n" + "ls\n" * n + "EOF",
    "one long word": lambda n: "echo " + "a" * n,
    "ANSI-C escapes": lambda n: "echo $'" + "\\x41" * n + "'",
}


def best_ms(rule: ShellRule, command: str, rounds: int) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        rule._analyse(command)
        best = min(best, time.perf_counter() - started)
    return best * 1000


def read_in_full(command: str) -> bool:
    reason = DENY._analyse(command).reason or ""
    return not ("in bounded time" in reason or "longer than" in reason or "nests" in reason)


def largest_read(shape: Callable[[int], str]) -> int:
    """The largest size the rule still reads in full (sizes double, then bisect)."""
    low, high = 1, 2
    while read_in_full(shape(high)) and len(shape(high)) < HUNDRED_KB:
        low, high = high, high * 2
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if read_in_full(shape(middle)) else (low, middle)
    return low


def hundred_kb(shape: Callable[[int], str]) -> str:
    size = 1
    while len(shape(size)) < HUNDRED_KB:
        size *= 2
    return shape(size)[: HUNDRED_KB + 10] if shape is SHAPES["one long word"] else shape(size)


def worst_cases(rounds: int) -> None:
    floor = best_ms(DENY, "ls -la", rounds * 20)
    print(f"ls -la: {floor * 1000:.0f} us per decision (the ratio's floor); goal {GOAL_MS:.0f} ms\n")
    print(f"{'shape':<20}{'size':>7}{'chars':>8}{'deny':>9}{'strict':>9}{'x2 deny':>9}{'100 KB':>9}{'/goal':>7}")
    worst = 0.0
    for name, shape in SHAPES.items():
        size = largest_read(shape)
        command = shape(size)
        deny, strict = best_ms(DENY, command, rounds), best_ms(STRICT, command, rounds)
        doubled = best_ms(DENY, shape(size * 2), rounds)
        big = best_ms(DENY, hundred_kb(shape), rounds)
        row = max(deny, strict, doubled, big)
        worst = max(worst, row)
        print(
            f"{name:<20}{size:>7}{len(command):>8}{deny:>7.2f}ms{strict:>7.2f}ms{doubled:>7.2f}ms{big:>7.2f}ms"
            f"{row / GOAL_MS:>6.2f}x"
        )
    print(f"\nworst decision: {worst:.2f} ms = {worst / GOAL_MS:.2f}x the goal, {worst / floor:.0f}x ls -la")


BEFORE_ROWS = {
    "cd chain, 50 (0.5 KB)": _cd(50),
    "cd chain, 100 (1 KB)": _cd(100),
    "cd chain, 200 (2.1 KB)": _cd(200),
    "pushd chain, 100": SHAPES["pushd chain"](100),
    "250 nested $(": SHAPES["nested $("](250),
    "pipeline of 2000": SHAPES["pipeline"](2000),
    "49 000 words (100 KB)": SHAPES["words"](49_000),
}
ONE = """
import sys, time
sys.path.insert(0, sys.argv[1])
sys.setrecursionlimit(1000)
from beamfilter_builtins._shell_rule import ShellRule
rule = ShellRule([], None, True)
started = time.perf_counter()
try:
    rule._analyse(sys.argv[2])
    print(f"{(time.perf_counter() - started) * 1000:.2f}")
except RecursionError:
    print("RecursionError")
"""


def one(source: Path, command: str) -> str:
    try:
        done = subprocess.run(
            [sys.executable, "-c", ONE, str(source), command], capture_output=True, text=True, timeout=60
        )
    except subprocess.TimeoutExpired:
        return "> 60 s"
    figure = done.stdout.strip()
    return figure if figure == "RecursionError" else f"{float(figure):.2f} ms"


def before_after(commit: str) -> None:
    with tempfile.TemporaryDirectory() as before_dir, tempfile.TemporaryDirectory() as after_dir:
        before_src = extract(commit, Path(before_dir))
        after_src = extract("HEAD", Path(after_dir))
        print(f"\n{'shape':<26}{commit:>16}{'HEAD':>12}")
        for name, command in BEFORE_ROWS.items():
            print(f"{name:<26}{one(before_src, command):>16}{one(after_src, command):>12}")


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


def time_once(source: Path, commands: list[str]) -> list[float]:
    output = subprocess.run(
        [sys.executable, "-c", TIMER, str(source), *commands], capture_output=True, text=True, check=True
    ).stdout
    return [float(figure) for figure in output.split()]


def against(baseline: str, runs: int) -> None:
    from bench_policy import COMMANDS  # the same typical commands

    with tempfile.TemporaryDirectory() as before_dir, tempfile.TemporaryDirectory() as after_dir:
        before_src = extract(baseline, Path(before_dir))
        after_src = extract("HEAD", Path(after_dir))
        before = [float("inf")] * len(COMMANDS)
        after = [float("inf")] * len(COMMANDS)
        for _ in range(runs):  # alternate, so that a change of load hits both
            before = [min(a, b) for a, b in zip(before, time_once(before_src, COMMANDS), strict=True)]
            after = [min(a, b) for a, b in zip(after, time_once(after_src, COMMANDS), strict=True)]
    print(f"\n{'command':<56}{baseline:>10}{'HEAD':>10}{'ratio':>8}")
    for command, old, new in zip(COMMANDS, before, after, strict=True):
        shown = command if len(command) <= 54 else command[:51] + "..."
        print(f"{shown:<56}{old:>8.1f}us{new:>8.1f}us{new / old:>7.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs per figure (the best is kept)")
    parser.add_argument("--before", help="also time the shapes that were slow on this commit")
    parser.add_argument("--baseline", help="also compare typical commands with this commit")
    parser.add_argument("--runs", type=int, default=3, help="alternating runs of the baseline comparison")
    options = parser.parse_args()
    worst_cases(options.rounds)
    if options.before:
        before_after(options.before)
    if options.baseline:
        against(options.baseline, options.runs)


if __name__ == "__main__":
    main()
