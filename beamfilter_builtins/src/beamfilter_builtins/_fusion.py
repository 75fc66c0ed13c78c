"""Combining ranked lists: reciprocal-rank fusion, interleaving, and one list per step of a request.

A request such as "clone the repo, then open an issue about the failing test" needs one
tool per step; :func:`split_steps` cuts it at the words that chain steps, each step is
searched alone, and :func:`interleave` takes the best of each step in turn, so a
five-name result holds what every step needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["interleave", "reciprocal_rank_fusion", "split_steps"]

# "then", "and then", "after that", "afterwards", "finally", ";" and their French,
# German and Spanish counterparts chain steps of a request.
_STEP_BREAK = re.compile(
    r"\s*(?:[;\n]|,?\s*\b(?:and\s+then|then|after\s+that|afterwards|finally|and\s+finally"
    r"|puis|ensuite|dann|danach|luego|después)\b)\s*",
    re.IGNORECASE,
)
_MAX_STEPS = 4


def split_steps(query: str) -> list[str]:
    """The steps of ``query`` (at most four; the whole query when it has one step).

    Example::

        split_steps("clone the repo, then open an issue") == ["clone the repo", "open an issue"]
    """
    steps = [part.strip(" ,.") for part in _STEP_BREAK.split(query)]
    steps = [step for step in steps if step]
    if len(steps) <= 1:
        return [query]
    if len(steps) > _MAX_STEPS:
        steps = [*steps[: _MAX_STEPS - 1], " ".join(steps[_MAX_STEPS - 1 :])]
    return steps


def interleave(rankings: Sequence[Sequence[str]], limit: int) -> list[str]:
    """The first of each ranking, then the second of each, ...; duplicates kept once."""
    merged: dict[str, None] = {}
    depth = max((len(ranking) for ranking in rankings), default=0)
    for position in range(depth):
        for ranking in rankings:
            if position < len(ranking):
                merged.setdefault(ranking[position])
                if len(merged) >= limit:
                    return list(merged)
    return list(merged)


def reciprocal_rank_fusion(rankings: Sequence[Sequence[str]], limit: int, *, k: float = 60.0) -> list[str]:
    """Names by the sum of ``1 / (k + rank)`` over the rankings (rank from 1), ties by the
    best single rank, then by name."""
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking in rankings:
        for rank, name in enumerate(ranking, start=1):
            scores[name] = scores.get(name, 0.0) + 1.0 / (k + rank)
            best[name] = min(best.get(name, rank), rank)
    ordered = sorted(scores, key=lambda name: (-scores[name], best[name], name))
    return ordered[:limit]
