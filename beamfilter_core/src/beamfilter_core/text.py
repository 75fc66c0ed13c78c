"""Keyword search text shared by every lexical index: words, stop words, a stemmer, BM25.

One implementation serves the tool search, skills and RAG built-ins and long-term memory
(plugin packages cannot import each other; core is the one package they all depend on).
:func:`words` keeps letters of every script (``café``, ``spät``), splits identifiers
(``snake_case``, ``camelCase``, ``HTTPServer``, ``github__create_issue``) and turns CJK
runs into overlapping bigrams; :func:`analyze` then drops :data:`STOP_WORDS` and applies
:func:`stem`; :class:`BM25Index` is Okapi BM25 over weighted fields with any analyzer.

This module is not imported by ``import beamfilter_core``: only code that searches pays
for it.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

__all__ = ["STOP_WORDS", "BM25Index", "analyze", "stem", "words"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A run of CJK characters, or a run of other letters and digits (the underscore excluded,
# so snake_case and ``__`` prefixes split here).
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

#: English words that say nothing about which document fits, plus the politeness and
#: request phrasing of a user ("please", "could you", "I want to"). The one stop-word list.
STOP_WORDS = frozenset(
    """
    a about above after again all also am an and any are as at be because been before being
    below between both but by can could did do does doing done down during each either else
    ever few for from further had has have having he her here hers herself him himself his
    how i if in into is it its itself just let lets like may me might mine more most must my
    myself need needs no nor not now of off on once only or other our ours ourselves out
    over own please same shall she should so some such than thank thanks that the their
    theirs them themselves then there these they this those through to too under until up us
    very want wants was we were what whatever when where whether which while who whom whose
    why will with would yet you your yours yourself yourselves
    """.split()  # noqa: SIM905  (a word list reads better as text)
)


def _split_identifier(piece: str) -> list[str]:
    """``getHTTPServer2`` -> ``get``, ``HTTP``, ``Server``, ``2`` (any script's case)."""
    parts: list[str] = []
    start = 0
    for i in range(1, len(piece)):
        prev, cur = piece[i - 1], piece[i]
        nxt = piece[i + 1] if i + 1 < len(piece) else ""
        boundary = (
            (prev.islower() and cur.isupper())
            or (prev.isdigit() != cur.isdigit())
            or (prev.isupper() and cur.isupper() and nxt.islower())
        )
        if boundary:
            parts.append(piece[start:i])
            start = i
    parts.append(piece[start:])
    return parts


def words(text: str) -> list[str]:
    """Lower-case words of ``text``, identifiers split, accents kept, CJK as bigrams.

    Example::

        words("github__createIssue") == ["github", "create", "issue"]
        words("getHTTPServer_status") == ["get", "http", "server", "status"]
        words("Wie spät ist es in Tōkyō?") == ["wie", "spät", "ist", "es", "in", "tōkyō"]
        words("天气预报") == ["天气", "气预", "预报"]
    """
    found: list[str] = []
    for run in _RUN.findall(unicodedata.normalize("NFC", text)):
        if run.islower() and run.isalpha():  # the common case: no case or digit boundary inside
            found.append(run.casefold())
        elif _CJK_RUN.match(run):
            if len(run) == 1:
                found.append(run)
            else:
                found.extend(run[i : i + 2] for i in range(len(run) - 1))
        else:
            found.extend(part.casefold() for part in _split_identifier(run))
    return found


# Suffixes stripped, longest first, each only when at least three characters remain.
_SUFFIXES = ("ational", "ations", "ation", "ingly", "ings", "ing", "edly", "ied", "ies", "ed", "es", "s")
_KEEP_ENDINGS = ("ss", "us", "is", "ys")
# A doubled final consonant left by -ing/-ed is undoubled (running -> run), but not ll/ss/zz
# (installed -> install).
_UNDOUBLED = frozenset(letter * 2 for letter in "abcdefghijkmnopqrtuvwxy")


def stem(word: str) -> str:
    """A light English stemmer: plural, ``-ed``, ``-ing`` and ``-ation`` endings, a final ``e``.

    ``files``/``file`` -> ``fil``; ``creating``/``created``/``creation`` -> ``creat``;
    ``queries``/``query`` -> ``queri``; ``running`` -> ``run``. Words of three letters or
    fewer, digits and non-Latin words are returned unchanged.
    """
    if not word.isascii() or not word.isalpha():
        return word
    base = word
    for suffix in _SUFFIXES:
        kept = suffix == "s" and base.endswith(_KEEP_ENDINGS)  # status, process, this, days
        if kept or not base.endswith(suffix) or len(base) - len(suffix) < 3:
            continue
        if suffix in ("ies", "ied"):
            base = base[: -len(suffix)] + "y"
        elif suffix in ("ational", "ations", "ation"):
            base = base[: -len(suffix)] + "at"
        else:
            base = base[: -len(suffix)]
            doubled = len(base) > 3 and base[-2:] in _UNDOUBLED
            if suffix in ("ing", "ed", "ings", "edly", "ingly") and doubled:
                base = base[:-1]
        break
    if base.endswith("y") and len(base) > 3 and base[-2] not in "aeiou":
        base = base[:-1] + "i"  # query/queries/queried -> queri
    if base.endswith("e") and len(base) > 3:
        base = base[:-1]
    return base


def analyze(text: str) -> list[str]:
    """The index terms of ``text``: :func:`words` without :data:`STOP_WORDS` and single
    Latin letters (the ``s`` of "what's"), stemmed.

    Example::

        analyze("Unstages all the staged files") == ["unstag", "stag", "fil"]
    """
    return [
        stem(word)
        for word in words(text)
        if word not in STOP_WORDS and not (len(word) == 1 and word.isascii() and word.isalpha())
    ]


class BM25Index:
    """Okapi BM25 over documents made of weighted fields.

    Each document is ``(key, fields)`` where ``fields`` is a sequence of
    ``(text, weight)``; a field of weight 3 counts each of its terms three times (how
    tool names are boosted; weights may be fractions). ``analyzer`` turns text into terms
    (default :func:`words`), for the documents and the queries alike; ``k1`` and ``b`` are
    fixed when the index is built. The idf is
    ``log(1 + (N - df + 0.5) / (df + 0.5))``, positive even for a term in most documents.
    Results are sorted by score, then by key; zero scores are dropped. Scores are pinned
    by tests: the skills router compares them with ``min_score``.

    Example::

        index = BM25Index([("a", [("apple banana", 1)]), ("b", [("cherry", 1)])])
        index.search("apples or banana?", 5) == ["a"]
    """

    def __init__(
        self,
        documents: Iterable[tuple[str, Sequence[tuple[str, float]]]],
        *,
        k1: float = 1.2,
        b: float = 0.75,
        analyzer: Callable[[str], list[str]] = words,
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
        # Length normalisation, once per document (1.0 stands in for an average of 0, where
        # no document holds a term and the value is never used).
        average = sum(self._lengths) / max(count, 1) or 1.0
        self._norms = [k1 * (1 - b + b * length / average) for length in self._lengths]
        self._saturation = k1 + 1
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
        saturation, idf = self._saturation, self._idf
        found: list[tuple[str, float]] = []
        for key, freqs, norm in zip(self._keys, self._freqs, self._norms, strict=True):
            score = 0.0
            for term, weight in terms:
                tf = freqs.get(term)
                if tf:
                    score += weight * idf[term] * tf * saturation / (tf + norm)
            if score > 0:
                found.append((key, score))
        found.sort(key=lambda item: (-item[1], item[0]))
        return found

    def search(self, query: str, limit: int) -> list[str]:
        """The keys of the best ``limit`` documents for ``query``."""
        return [key for key, _ in self.scores(query)[:limit]]
