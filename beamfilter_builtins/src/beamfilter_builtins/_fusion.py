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

from beamfilter_core.text import analyze, words

__all__ = ["carry_names", "interleave", "reciprocal_rank_fusion", "split_steps"]

# "then", "and then", "after that", "afterwards", "finally", ";", numbered steps ("1. ...
# 2. ...", "2) ...") and the counterparts in French, German, Spanish, Italian, Portuguese,
# Dutch and Japanese chain steps of a request.
_STEP_BREAK = re.compile(
    r"\s*(?:[;\n]|,?\s*\b(?:and\s+then|then|after\s+that|afterwards|and\s+finally|finally"
    r"|et\s+puis|puis|ensuite|und\s+dann|dann|danach|anschließend|y\s+luego|luego|después"
    r"|e\s+poi|poi|quindi|e\s+depois|depois|em\s+seguida|en\s+dan|daarna|vervolgens)\b"
    r"|それから|その後|次に)\s*",
    re.IGNORECASE,
)
# A request that starts "1." or "1)" numbers its steps: "1. clone the repo 2. open an issue".
_NUMBERED = re.compile(r"^\s*1[.)]\s")
_NUMBER = re.compile(r"(?:^|\s)\d{1,2}[.)]\s+")
# "First, ..." opens a list of steps; the word itself says nothing about a tool.
_FIRST = re.compile(r"^\s*(?:first(?:ly)?|zuerst|d'abord|primero|prima|primeiro|eerst)\b[,:]?\s*", re.IGNORECASE)
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
        split_steps("1. clone the repo 2. open an issue") == ["clone the repo", "open an issue"]
    """
    parts = _NUMBER.split(query) if _NUMBERED.match(query) else [_FIRST.sub("", query)]
    steps = [step.strip(" ,.、。") for part in parts for step in _STEP_BREAK.split(part)]
    steps = [clause for step in steps if step for clause in _clauses(step)]
    if len(steps) <= 1:
        return [query]
    if len(steps) > _MAX_STEPS:
        steps = [*steps[: _MAX_STEPS - 1], " ".join(steps[_MAX_STEPS - 1 :])]
    return steps


def carry_names(steps: Sequence[str], names: frozenset[str]) -> list[str]:
    """The steps, each that names none of ``names`` (lower-case words) followed by those the
    whole request names: "get the key config from redis, then update it to v2" searches
    its second step as "update it to v2 (redis)".
    """
    named = [word for step in steps for word in words(step) if word in names]
    if not named:
        return list(steps)
    context = " ".join(dict.fromkeys(named))
    return [step if any(word in names for word in words(step)) else f"{step} ({context})" for step in steps]


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
