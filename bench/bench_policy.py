"""tool_policy benchmark: the per-call cost of checking a shell command, before and after
the parser-based rules, in µs per call.

A script, not a timed test. For a few typical commands it times the shell rule's
decision (what ``tool_policy`` computes once per shell argument): *after* for a command
seen for the first time, *allow-list* the same with ``allow_commands``, *repeated* for a
command the rule decided on before (verdicts of the last 256 commands are kept). Next to
them:

- *before*: the regular-expression/``shlex`` rule of commit 711a9f2, loaded from git in
  the same run (skipped with a note when git or that commit is not there);
- *shlex floor*: ``shlex.split`` of the same command, the least any rule that splits words
  in Python pays.

Figures are the best of ``--rounds`` rounds, in CPU time of the process. Run it with::

    .venv/bin/python bench/bench_policy.py            # about 20 s
    .venv/bin/python bench/bench_policy.py --quick    # a short smoke run
"""

from __future__ import annotations

import argparse
import importlib.util
import re
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from beamfilter_builtins._shell_rule import ShellRule
from beamfilter_builtins._tool_policy import ToolPolicy

ROOT = Path(__file__).resolve().parents[1]
BEFORE = "711a9f2"
COMMANDS = [
    "ls -la",
    "git status --short && git diff --stat",
    "grep -rn 'TODO' src | sort | uniq -c | head -20",
    "cd build && cmake .. -DCMAKE_BUILD_TYPE=Release && make -j4 2>&1 | tail -5",
    "find . -name '*.pyc' -delete; python3 -m pytest -q tests/unit > out.log 2>&1",
    'for f in *.txt; do wc -l "$f"; done',
]


def load_before() -> Callable[[str], str | None] | None:
    """The shell rule of BEFORE, imported from git into a temporary module, or None."""
    path = "beamfilter_builtins/src/beamfilter_builtins/_policy_rules.py"
    try:
        source = subprocess.run(
            ["git", "show", f"{BEFORE}:{path}"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    with tempfile.TemporaryDirectory() as folder:
        path_before = Path(folder) / "_policy_rules_before.py"
        path_before.write_text(source)
        spec = importlib.util.spec_from_file_location("_policy_rules_before", path_before)
        if spec is None or spec.loader is None:
            return None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    rule = module.ShellRule([re.compile(r"\bgit\s+push\s+--force\b")], None, True)
    check: Callable[[str], str | None] = rule.check
    return check


def per_call(function: Callable[[str], object], command: str, calls: int, rounds: int) -> float:
    """Best CPU time of one call, in µs, over ``rounds`` rounds of ``calls`` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(calls):
            function(command)
        best = min(best, (time.process_time() - start) / calls)
    return best * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    calls, rounds = (200, 2) if options.quick else (2000, options.rounds)

    rule = ShellRule([re.compile(r"\bgit\s+push\s+--force\b")], None, True)
    after = rule._analyse  # uncached: a command seen for the first time
    repeated = rule.check  # a command the rule has decided on before (its verdict is cached)
    allow_list = ShellRule(
        [],
        frozenset({"ls", "git", "grep", "sort", "uniq", "head", "cd", "cmake", "make", "tail", "find", "python3"}),
        True,
    )._analyse
    before = load_before()
    if before is None:
        print(f"(before: git or commit {BEFORE} not available; only the new rule is timed)")

    start = time.process_time()
    for _ in range(50):
        ToolPolicy([{"tool": "shell", "kind": "shell", "deny_patterns": [r"\bgit\s+push\s+--force\b"]}])
    assembly = (time.process_time() - start) / 50 * 1e6

    print(
        f"{'command':<52} {'before':>9} {'after':>9} {'after/before':>12} {'allow-list':>10} {'repeated':>9} "
        f"{'shlex floor':>11} {'after/floor':>11}"
    )
    for command in COMMANDS:
        floor = per_call(shlex.split, command, calls, rounds)
        now = per_call(after, command, calls, rounds)
        listed = per_call(allow_list, command, calls, rounds)
        again = per_call(repeated, command, calls, rounds)
        then = per_call(before, command, calls, rounds) if before is not None else float("nan")
        shown = command if len(command) <= 50 else command[:47] + "..."
        print(
            f"{shown:<52} {then:>7.1f}us {now:>7.1f}us {now / then:>11.1f}x {listed:>8.1f}us {again:>7.1f}us "
            f"{floor:>9.1f}us {now / floor:>10.1f}x"
        )
    print(f"assembly: ToolPolicy with one shell rule, built once per filter: {assembly:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
