"""The ``beamfilter`` command (placeholder until the CLI lands)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``beamfilter`` command."""
    print("beamfilter: the command line is not built yet", file=sys.stderr)
    return 2
