"""Decoding a recorded 10k-token stream per provider: beamfilter's decoder against each
official SDK's own streaming parser, in one run. Goal: beamfilter >= 5x faster on every row.

Rows come from the ``bench/provider_decode_*.py`` modules, one per group of providers. A
module lists its rows in ``ROWS`` as ``(name, row)``; without ``ROWS`` every function whose
name ends in ``_row`` is a row, named by its docstring up to the first colon. A row is
``row(rounds, tokens) -> (seconds for beamfilter, seconds for the SDK)``, the best of
``rounds``; an SDK that is not installed skips its row with the command to install it.

    .venv/bin/python bench/bench_provider_decode.py [--rounds 5] [--tokens 10000] [--only NAME] [--quick]

The SDKs are dev dependencies only (requirements-dev.txt): ``anthropic``, ``google-genai``,
``boto3``, ``openai``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent
GOAL = 5.0
Row = Callable[..., tuple[float, float]]


def rows_of(module: ModuleType) -> list[tuple[str, Row]]:
    """A module's ``ROWS``, or its ``*_row`` functions named by their docstrings."""
    listed = getattr(module, "ROWS", None)
    if listed is not None:
        return list(listed)
    found = []
    for name in sorted(vars(module)):
        function = getattr(module, name)
        if name.endswith("_row") and callable(function):
            title = (function.__doc__ or name).strip().split(":", 1)[0]
            found.append((title, function))
    return found


def discover() -> list[tuple[str, Row]]:
    sys.path.insert(0, str(HERE))
    rows: list[tuple[str, Row]] = []
    for path in sorted(HERE.glob("provider_decode_*.py")):
        rows += rows_of(importlib.import_module(path.stem))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=10_000)
    parser.add_argument("--only", default=None, help="run the rows whose name contains this text")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 1 round of a 1,000-token stream")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.tokens = 1, 1_000
    print(f"decode a {args.tokens}-token stream, best of {args.rounds}, 16 KiB reads; goal: >= {GOAL:g}x the SDK")
    print(f"{'provider':24s} {'beamfilter':>12s} {'SDK':>12s} {'ratio':>7s}")
    missed = 0
    for name, row in discover():
        if args.only and args.only.lower() not in name.lower():
            continue
        try:
            ours, sdk = row(args.rounds, args.tokens)
        except ModuleNotFoundError as error:
            print(f"{name:24s} skipped: {error.name} is not installed (pip install -r requirements-dev.txt)")
            continue
        ratio = sdk / ours
        verdict = "ok" if ratio >= GOAL else "MISS"
        missed += verdict == "MISS"
        print(f"{name:24s} {ours * 1000:9.1f} ms {sdk * 1000:9.1f} ms {ratio:6.1f}x  {verdict}")
    return 1 if missed and not args.quick else 0  # a smoke run measures nothing


if __name__ == "__main__":
    raise SystemExit(main())
