"""The default ``tool_search`` backend: fielded BM25 over tool definitions with a typo pass.

Each tool becomes one document of weighted fields: the tool's own name words, its server
prefix (``github__create_issue`` -> ``github``, a field of its own with a low weight so a
server's name does not crowd out the tools of other servers), the description, and the
parameter names and descriptions. Text goes through :func:`beamfilter_core.text.analyze` (Unicode
words, split identifiers, stop words, a light stemmer). A query term the catalog lacks is
replaced by its close spellings (:class:`~._typos.TypoCorrector`); a query that still
finds nothing falls back to terms sharing character trigrams.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from beamfilter_core import Tool
from beamfilter_core.text import STOP_WORDS, BM25Index, analyze, stem, words

from ._fusion import carry_names, interleave, split_steps
from ._tool_synonyms import QueryExpander
from ._typos import TypoCorrector

__all__ = ["BM25ToolIndex", "tool_text_fields"]

_WORD = re.compile(r"[^\W\d_]+")
# Nested schemas deeper than this add nothing a user would search for.
_MAX_SCHEMA_DEPTH = 3


def split_server(name: str) -> tuple[str, str]:
    """``("github", "create_issue")`` for ``github__create_issue``; ``("", name)`` without prefix."""
    server, separator, rest = name.partition("__")
    if separator and server and rest:
        return server, rest
    return "", name


def _schema_texts(schema: Any, depth: int = 0) -> Iterator[tuple[str, str]]:
    """``(parameter name, parameter description)`` of a JSON schema's properties, nested ones too."""
    if not isinstance(schema, Mapping) or depth > _MAX_SCHEMA_DEPTH:
        return
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        for key, sub in properties.items():
            description = sub.get("description", "") if isinstance(sub, Mapping) else ""
            yield str(key), description if isinstance(description, str) else ""
            yield from _schema_texts(sub, depth + 1)
    items = schema.get("items")
    if isinstance(items, Mapping):
        yield from _schema_texts(items, depth + 1)


def tool_text_fields(tool: Tool) -> dict[str, str]:
    """The searchable text of ``tool`` by field: ``server``, ``name``, ``description``,
    ``parameter_names``, ``parameter_descriptions``."""
    server, own = split_server(tool.name)
    pairs = list(_schema_texts(tool.parameters))
    return {
        "server": server,
        "name": own,
        "description": tool.description,
        "parameter_names": " ".join(name for name, _ in pairs),
        "parameter_descriptions": " ".join(text for _, text in pairs if text),
    }


class BM25ToolIndex:
    """BM25 over tool definitions, fields weighted, stop words dropped, stems matched, typos
    corrected; a request of several steps ("... then ...") is searched step by step.

    Args:
        k1, b: the BM25 parameters.
        name_boost: weight of the tool's own name words (default 2).
        server_weight: weight of the server prefix (``github__``; default 0.5).
        description_weight: weight of the description (default 1).
        parameter_weight: weight of parameter names and descriptions (default 0.3).
        typos: correct query words the catalog does not contain (default True).
        steps: search each step of a multi-step request and interleave (default True).
        synonyms: abbreviations and short words searched with the words they stand for
            ("PR" -> "pull request"; default :data:`SOFTWARE_SYNONYMS`, ``{}`` for none).
        synonym_weight: the weight of those added words (default 1).
        carry: a step that names no server gets the servers the whole request names
            ("get the key from redis, then update it"; default True).
    """

    def __init__(
        self,
        *,
        k1: float = 1.2,
        b: float = 0.75,
        name_boost: float = 2.0,
        server_weight: float = 0.5,
        description_weight: float = 1.0,
        parameter_weight: float = 0.3,
        typos: bool = True,
        steps: bool = True,
        synonyms: Mapping[str, str] | None = None,
        synonym_weight: float = 1.0,
        carry: bool = True,
    ) -> None:
        self.k1, self.b = k1, b
        self.weights = {
            "server": server_weight,
            "name": name_boost,
            "description": description_weight,
            "parameter_names": parameter_weight,
            "parameter_descriptions": parameter_weight,
        }
        self.typos, self.steps = typos, steps
        self.expander = QueryExpander(synonyms)
        self.synonym_weight = synonym_weight
        self.carry = carry
        self.servers: frozenset[str] = frozenset()
        # A listed abbreviation is a word, not a typo: it is never "corrected".
        self._listed = frozenset(term for word in self.expander.synonyms for term in analyze(word))
        self._index = BM25Index((), k1=k1, b=b, analyzer=analyze)
        self._corrector = TypoCorrector(())

    def build(self, tools: Sequence[Tool]) -> None:
        """Index the tools' names, server prefixes, descriptions and parameters."""
        documents = []
        for item in tools:
            fields = tool_text_fields(item)
            documents.append((item.name, [(fields[field], weight) for field, weight in self.weights.items() if weight]))
        self._index = BM25Index(documents, k1=self.k1, b=self.b, analyzer=analyze)
        #: The words of the server prefixes (``github``, ``redis``): the systems a request can name.
        self.servers = frozenset(word for item in tools for word in words(split_server(item.name)[0]))
        vocabulary = self._index.vocabulary
        self._corrector = TypoCorrector({term: self._index.document_frequency(term) for term in vocabulary})
        # The catalog's commonest spelling of each stem, to write a corrected query in words.
        spellings: dict[str, Counter[str]] = {}
        for item in tools:
            for word in words(f"{item.name} {item.description}"):
                spellings.setdefault(stem(word), Counter())[word] += 1
        self._spelling = {term: counts.most_common(1)[0][0] for term, counts in spellings.items()}

    def corrected(self, query: str) -> str:
        """``query`` with each misspelt word replaced by the catalog's closest word
        (``sned a mesage on slak`` -> ``send a message on slack``); other text unchanged."""
        if not self.typos:
            return query
        known = self._index.vocabulary

        def fix(match: re.Match[str]) -> str:
            word = match.group(0)
            pieces = words(word)
            if len(pieces) != 1 or pieces[0] in STOP_WORDS or pieces[0] in self.expander.synonyms:
                return word
            term = stem(pieces[0])
            if term in known:
                return word
            found = self._corrector.corrections(term, limit=1)
            return self._spelling.get(found[0][0], word) if found else word

        return _WORD.sub(fix, query)

    def known_share(self, text: str) -> float:
        """The share of the words of ``text`` (numbers and single letters aside) that are
        English stop words or words of the catalog: low for a request in another language
        (1.0 with no words)."""
        found = [word for word in words(text) if not word.isdigit() and not (len(word) == 1 and word.isascii())]
        if not found:
            return 1.0
        known = self._index.vocabulary
        return sum(1 for word in found if word in STOP_WORDS or stem(word) in known) / len(found)

    def query_terms(self, query: str) -> list[tuple[str, float]]:
        """The weighted terms searched for ``query``: its analysed words, a misspelt one
        replaced by its corrections weighted by similarity, then the words its listed
        abbreviations stand for (``synonym_weight``)."""
        terms: list[tuple[str, float]] = []
        known = self._index.vocabulary
        for term in analyze(query):
            if term in known or not self.typos or term in self._listed:
                terms.append((term, 1.0))
            else:
                terms.extend(self._corrector.corrections(term) or [(term, 1.0)])
        for expansion in self.expander.expansions(query):
            terms.extend((term, self.synonym_weight) for term in analyze(expansion))
        return terms

    def scores(self, query: str) -> list[tuple[str, float]]:
        """Every tool with a positive score for the whole of ``query``, best first (ties by name)."""
        terms = self.query_terms(query)
        found = self._index.term_scores(terms)
        if found or not self.typos:
            return found
        # Nothing at all: try terms sharing character trigrams ("mkdir" -> "directori").
        fallback = [match for term, _ in terms for match in self._corrector.overlapping(term)]
        return self._index.term_scores(fallback)

    def search(self, query: str, limit: int) -> list[str]:
        """The best ``limit`` names; blank queries find nothing."""
        if not query.strip():
            return []
        steps = split_steps(query) if self.steps else [query]
        if len(steps) == 1:
            return [name for name, _ in self.scores(query)[:limit]]
        if self.carry:
            steps = carry_names(steps, self.servers)
        per_step = [[name for name, _ in self.scores(step)[:limit]] for step in steps]
        return interleave(per_step, limit)
