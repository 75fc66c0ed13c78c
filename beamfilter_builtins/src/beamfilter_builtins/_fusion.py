"""Combining ranked lists: reciprocal-rank fusion, interleaving, and one list per step of a request.

A request such as "clone the repo, then open an issue about the failing test" needs one
tool per step; :func:`split_steps` cuts it at the words that chain steps (and at commas
and "and" between clauses of two content words or more), each step is searched alone,
and :func:`interleave` takes the best of each step in turn, so a five-name result holds
what every step needs.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from beamfilter_core.text import analyze

__all__ = ["interleave", "reciprocal_rank_fusion", "split_steps"]

# "then", "and then", "after that", "afterwards", "finally", ";" and their French,
# German and Spanish counterparts chain steps of a request.
_STEP_BREAK = re.compile(
    r"\s*(?:[;\n]|,?\s*\b(?:and\s+then|then|after\s+that|afterwards|finally|and\s+finally"
    r"|puis|ensuite|dann|danach|luego|después)\b)\s*",
    re.IGNORECASE,
)
# A comma or "and" joins clauses ("open the login page, fill in the name and click sign
# in") but also words of one clause ("issues and pull requests"): cut only when every
# piece keeps two content words or more.
_CLAUSE_BREAK = re.compile(r"\s*(?:,\s*(?:and\s+)?|\band\s+)", re.IGNORECASE)
_CLAUSE_WORDS = 2
_MAX_STEPS = 4


def _clauses(step: str) -> list[str]:
    pieces = [piece.strip(" ,.") for piece in _CLAUSE_BREAK.split(step)]
    pieces = [piece for piece in pieces if piece]
    if len(pieces) > 1 and all(len(analyze(piece)) >= _CLAUSE_WORDS for piece in pieces):
        return pieces
    return [step]


def split_steps(query: str) -> list[str]:
    """The steps of ``query`` (at most four; the whole query when it has one step).

    Example::

        split_steps("clone the repo, then open an issue") == ["clone the repo", "open an issue"]
        split_steps("open the login page and click sign in") == ["open the login page", "click sign in"]
        split_steps("search for cats and dogs") == ["search for cats and dogs"]
    """
    steps = [part.strip(" ,.") for part in _STEP_BREAK.split(query)]
    steps = [clause for step in steps if step for clause in _clauses(step)]
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


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[str]], limit: int, *, k: float = 60.0, weights: Sequence[float] | None = None
) -> list[str]:
    """Names by the sum of ``weight / (k + rank)`` over the rankings (rank from 1; every
    weight 1 by default), ties by the best single rank, then by name."""
    if weights is None:
        weights = [1.0] * len(rankings)
    scores: dict[str, float] = {}
    best: dict[str, int] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, name in enumerate(ranking, start=1):
            scores[name] = scores.get(name, 0.0) + weight / (k + rank)
            best[name] = min(best.get(name, rank), rank)
    ordered = sorted(scores, key=lambda name: (-scores[name], best[name], name))
    return ordered[:limit]
