"""Typo correction against an index's vocabulary: one-edit neighbours and character trigrams.

Built once per catalog (at index time), asked only for query terms the vocabulary lacks:
``sned`` -> ``send`` (a transposition), ``mesag`` -> ``messag`` (a dropped letter),
``slak`` -> ``slack``. One-edit neighbours are found through shared single-deletion
variants (the SymSpell idea: two words one insertion, deletion, substitution or
transposition apart share a variant), longer misspellings through character-trigram overlap.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

__all__ = ["TypoCorrector", "trigrams"]

# Below these lengths a one-letter change makes another word too easily (``cat``/``car``).
_MIN_EDIT_LENGTH = 4
_MIN_TRIGRAM_LENGTH = 6
_EDIT_SIMILARITY = 0.8


def trigrams(word: str) -> frozenset[str]:
    """The character trigrams of ``word`` padded with one space each side."""
    padded = f" {word} "
    return frozenset(padded[i : i + 3] for i in range(len(padded) - 2))


def _deletions(word: str) -> set[str]:
    return {word[:i] + word[i + 1 :] for i in range(len(word))}


def _one_edit_apart(left: str, right: str) -> bool:
    """True when one insertion, deletion, substitution or adjacent transposition turns one into the other."""
    if left == right or abs(len(left) - len(right)) > 1:
        return False
    if len(left) == len(right):
        diff = [i for i in range(len(left)) if left[i] != right[i]]
        if len(diff) == 1:
            return True
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and left[diff[0]] == right[diff[1]]
            and left[diff[1]] == right[diff[0]]
        )
    short, long = (left, right) if len(left) < len(right) else (right, left)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


class TypoCorrector:
    """Suggests vocabulary terms for a misspelt term, each with a similarity in (0, 1].

    A one-edit correction keeps the first letter (typos rarely touch it, and ``call`` is
    not ``fall``); equally close candidates are ranked by how common they are.

    Args:
        vocabulary: the terms an index knows, or a mapping of each to its frequency.
        min_trigram_similarity: the Jaccard overlap of trigrams a longer word needs.
    """

    def __init__(self, vocabulary: Iterable[str] | Mapping[str, int], *, min_trigram_similarity: float = 0.5) -> None:
        self.min_trigram_similarity = min_trigram_similarity
        self._frequency: Mapping[str, int] = vocabulary if isinstance(vocabulary, Mapping) else {}
        self._vocabulary = frozenset(vocabulary)
        self._by_variant: dict[str, set[str]] = defaultdict(set)
        self._by_trigram: dict[str, set[str]] = defaultdict(set)
        for term in self._vocabulary:
            if len(term) >= _MIN_EDIT_LENGTH - 1:
                for variant in _deletions(term) | {term}:
                    self._by_variant[variant].add(term)
            if len(term) >= _MIN_TRIGRAM_LENGTH - 1:
                for gram in trigrams(term):
                    self._by_trigram[gram].add(term)

    def corrections(self, term: str, limit: int = 3) -> list[tuple[str, float]]:
        """Up to ``limit`` known terms close to ``term``, most similar first (ties by term);
        none for a known term or a short one."""
        if term in self._vocabulary or len(term) < _MIN_EDIT_LENGTH:
            return []
        found: dict[str, float] = {}
        for variant in _deletions(term) | {term}:
            for candidate in self._by_variant.get(variant, ()):
                if candidate[0] == term[0] and _one_edit_apart(term, candidate):
                    found[candidate] = _EDIT_SIMILARITY
        if len(term) >= _MIN_TRIGRAM_LENGTH:
            grams = trigrams(term)
            shared: dict[str, int] = defaultdict(int)
            for gram in grams:
                for candidate in self._by_trigram.get(gram, ()):
                    shared[candidate] += 1
            for candidate, count in shared.items():
                similarity = count / len(grams | trigrams(candidate))
                if similarity >= self.min_trigram_similarity and similarity > found.get(candidate, 0.0):
                    found[candidate] = similarity
        return self._ranked(found, limit)

    def _ranked(self, scored: Mapping[str, float], limit: int) -> list[tuple[str, float]]:
        frequency = self._frequency
        ranked = sorted(scored.items(), key=lambda item: (-item[1], -frequency.get(item[0], 0), item[0]))
        return ranked[:limit]

    def overlapping(self, term: str, limit: int = 3) -> list[tuple[str, float]]:
        """Known terms whose first three letters stand inside ``term`` (the last resort for
        a query that found nothing: ``mkdir`` holds the start of ``directori``), by Jaccard
        similarity of their trigrams.

        A trigram shared anywhere was too loose: ``quantum`` met ``queri`` on ``qu`` and a
        request about physics found a SQL tool. A word's opening is what an abbreviation or
        a compound keeps (``mkdir``, ``gitlog``, ``nodeinfo``)."""
        grams = trigrams(term)
        scored: dict[str, float] = {}
        for candidate in self._vocabulary:
            if len(candidate) >= 3 and candidate[:3] in term:
                scored[candidate] = len(grams & trigrams(candidate)) / len(grams | trigrams(candidate))
        return self._ranked(scored, limit)
