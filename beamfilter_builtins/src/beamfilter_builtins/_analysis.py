"""Text analysis for keyword search: Unicode words, identifier splitting, stop words, stemming.

One analyzer serves every lexical index that wants it (tool search today; the RAG
retriever and long-term memory can move to it). :func:`words` keeps letters of every
script (``café``, ``spät``, ``Tokio``), splits identifiers (``snake_case``,
``camelCase``, ``HTTPServer``, ``github__create_issue``) and turns CJK runs into
overlapping bigrams; :func:`analyze` then drops English stop words and applies
:func:`stem`, a light suffix stripper that maps ``unstages``, ``unstaged`` and ``unstage``
to one term.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["STOP_WORDS", "analyze", "stem", "words"]

_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
# A run of CJK characters, or a run of other letters and digits (the underscore excluded,
# so snake_case and ``__`` prefixes split here).
_RUN = re.compile(rf"[{_CJK}]+|[^\W_{_CJK}]+")
_CJK_RUN = re.compile(rf"^[{_CJK}]+$")

#: English words that say nothing about which tool or document fits, plus the politeness
#: and request phrasing of a user ("please", "could you", "I want to").
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
        words("Wie spät ist es in Tōkyō?") == ["wie", "spät", "ist", "es", "in", "tōkyō"]
    """
    found: list[str] = []
    for run in _RUN.findall(unicodedata.normalize("NFC", text)):
        if _CJK_RUN.match(run):
            if len(run) == 1:
                found.append(run)
            else:
                found.extend(run[i : i + 2] for i in range(len(run) - 1))
            continue
        found.extend(part.casefold() for part in _split_identifier(run))
    return found


# Suffixes stripped, longest first, each only when at least three characters remain.
_SUFFIXES = ("ational", "ations", "ation", "ingly", "ings", "ing", "edly", "ied", "ies", "ed", "es", "s")
_KEEP_ENDINGS = ("ss", "us", "is", "ys")


def stem(word: str) -> str:
    """A light English stemmer: plural, ``-ed``, ``-ing`` and ``-ation`` endings, a final ``e``.

    ``files``/``file`` -> ``fil``; ``creating``/``created``/``creation`` -> ``creat``;
    ``queries``/``query`` -> ``query``; ``running`` -> ``run``. Words of three letters or
    fewer, digits and non-Latin words are returned unchanged.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    base = word
    for suffix in _SUFFIXES:
        if not base.endswith(suffix) or len(base) - len(suffix) < 3:
            continue
        if suffix == "s" and base.endswith(_KEEP_ENDINGS):
            break
        if suffix in ("ies", "ied"):
            base = base[: -len(suffix)] + "y"
        elif suffix in ("ational", "ations", "ation"):
            base = base[: -len(suffix)] + "at"
        else:
            base = base[: -len(suffix)]
            # running -> runn -> run; but keep "ll"/"ss"/"zz" (installed -> install)
            doubled = len(base) > 3 and base[-1] == base[-2] and base[-1] not in "lsz"
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
    Latin letters (the ``s`` of "what's"), stemmed."""
    return [
        stem(word)
        for word in words(text)
        if word not in STOP_WORDS and not (len(word) == 1 and word.isascii() and word.isalpha())
    ]
