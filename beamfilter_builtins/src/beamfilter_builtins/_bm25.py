"""A small BM25 keyword index (tool search, skills, the RAG retriever) and its default tokenizer.

The index takes any analyzer (``text -> terms``; tool search uses
:func:`~._analysis.analyze`). The default, :func:`tokenize`, lower-cases and splits
``camelCase``, ``snake_case`` and ``HTTPServer`` style names; runs of CJK characters
become overlapping bigrams (a single CJK character stays one token). Its scores are
pinned by tests: the skills router compares them with ``min_score``.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

__all__ = ["BM25Index", "tokenize"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A word is a run of CJK characters, or a latin piece: an acronym before a capitalised
# word (HTTP|Server), a capitalised or lower-case word, an upper-case run, or digits.
_PIECE = re.compile(rf"[{_CJK}]+|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")


def tokenize(text: str) -> list[str]:
    """Lower-case tokens of ``text``.

    Example::

        tokenize("getHTTPServer_status") == ["get", "http", "server", "status"]
        tokenize("天气预报") == ["天气", "气预", "预报"]
    """
    tokens: list[str] = []
    for piece in _PIECE.findall(text):
        if _CJK_RUN.match(piece):
            if len(piece) == 1:
                tokens.append(piece)
            else:
                tokens.extend(piece[i : i + 2] for i in range(len(piece) - 1))
        else:
            tokens.append(piece.lower())
    return tokens


class BM25Index:
    """Okapi BM25 over documents made of weighted fields.

    Each document is ``(key, fields)`` where ``fields`` is a sequence of
    ``(text, weight)``; a field of weight 3 counts each of its terms three times (how
    tool names are boosted; weights may be fractions). ``analyzer`` turns text into terms
    (default :func:`tokenize`), for the documents and the queries alike. Results are sorted
    by score, then by key; zero scores are dropped.
    """

    def __init__(
        self,
        documents: Iterable[tuple[str, Sequence[tuple[str, float]]]],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: Callable[[str], list[str]] = tokenize,
    ) -> None:
        self.k1 = k1
        self.b = b
        self.analyzer = analyzer
        self._keys: list[str] = []
        self._freqs: list[dict[str, float]] = []
        self._lengths: list[float] = []
        doc_freq: Counter[str] = Counter()
        for key, fields in documents:
            counts: dict[str, float] = {}
            for text, weight in fields:
                for token in analyzer(text):
                    counts[token] = counts.get(token, 0) + weight
            self._keys.append(key)
            self._freqs.append(counts)
            self._lengths.append(sum(counts.values()))
            doc_freq.update(counts.keys())
        self._doc_freq = dict(doc_freq)
        count = len(self._keys)
        self._average = (sum(self._lengths) / count) if count else 0.0
        # BM25+-style idf that stays positive for terms in most documents.
        self._idf = {term: math.log(1 + (count - df + 0.5) / (df + 0.5)) for term, df in doc_freq.items()}

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def vocabulary(self) -> frozenset[str]:
        """Every term some document contains."""
        return frozenset(self._idf)

    def document_frequency(self, term: str) -> int:
        """How many documents contain ``term``."""
        return self._doc_freq.get(term, 0)

    def scores(self, query: str) -> list[tuple[str, float]]:
        """Every document with a positive score for ``query``, best first (ties by key)."""
        return self.term_scores([(term, 1.0) for term in self.analyzer(query)])

    def term_scores(self, terms: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
        """Like :meth:`scores` for analysed query terms, each ``(term, weight)``; a repeated
        term counts once per occurrence."""
        if not terms or not self._keys:
            return []
        k1, b, average, idf = self.k1, self.b, self._average or 1.0, self._idf
        found: list[tuple[str, float]] = []
        for key, freqs, length in zip(self._keys, self._freqs, self._lengths, strict=True):
            score = 0.0
            norm = k1 * (1 - b + b * length / average)
            for term, weight in terms:
                tf = freqs.get(term)
                if tf:
                    score += weight * idf[term] * tf * (k1 + 1) / (tf + norm)
            if score > 0:
                found.append((key, score))
        found.sort(key=lambda item: (-item[1], item[0]))
        return found

    def search(self, query: str, limit: int) -> list[str]:
        """The keys of the best ``limit`` documents for ``query``."""
        return [key for key, _ in self.scores(query)[:limit]]
