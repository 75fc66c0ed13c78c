"""Abbreviations and short words of software work, expanded into the words tools use.

Users write "PR", "repo", "k8s" or "mkdir"; tool descriptions say "pull request",
"repository", "Kubernetes", "create directory". :class:`QueryExpander` finds such words in
a query (whole words, any case) and returns the words they stand for, which the lexical
index searches next to the query's own words. The list is general software vocabulary,
not fitted to one catalog; :data:`SOFTWARE_SYNONYMS` is the default and any mapping of
word to expansion replaces or extends it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["SOFTWARE_SYNONYMS", "QueryExpander"]

#: A word (or abbreviation) of a request -> the words a tool's definition would use.
SOFTWARE_SYNONYMS: Mapping[str, str] = {
    # version control and code hosting
    "pr": "pull request",
    "prs": "pull requests",
    "mr": "merge request",
    "mrs": "merge requests",
    "repo": "repository",
    "repos": "repositories",
    "ci": "checks status",
    # files
    "dir": "directory",
    "dirs": "directories",
    "folder": "directory",
    "folders": "directories",
    # everyday abbreviations
    "db": "database",
    "dbs": "databases",
    "k8s": "kubernetes",
    "env": "environment",
    "msg": "message",
    "msgs": "messages",
    "dm": "direct message",
    "img": "image",
    "pic": "image",
    "pics": "images",
    "doc": "document",
    "docs": "documents documentation",
    "info": "information",
    "auth": "authentication",
    "cmd": "command",
    "exec": "execute",
    "pkg": "package",
    "deps": "dependencies",
    "tz": "timezone",
    "url": "link",
    "link": "url",
    "webpage": "web page",
}


class QueryExpander:
    """The expansions of the listed words a query contains (matched whole, case ignored).

    Args:
        synonyms: word -> expansion (default :data:`SOFTWARE_SYNONYMS`); an empty mapping
            expands nothing.

    Example::

        QueryExpander().expansions("what files did that PR touch?") == ["pull request"]
    """

    def __init__(self, synonyms: Mapping[str, str] | None = None) -> None:
        table = SOFTWARE_SYNONYMS if synonyms is None else synonyms
        self.synonyms = {word.casefold(): expansion for word, expansion in table.items() if word.strip()}
        # One alternation, longest first, built once: a query costs one regex pass.
        alternatives = "|".join(re.escape(word) for word in sorted(self.synonyms, key=len, reverse=True))
        self._pattern = re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE) if alternatives else None

    def expansions(self, query: str) -> list[str]:
        """The expansion of each listed word in ``query``, in order, each once."""
        if self._pattern is None:
            return []
        found = (self.synonyms[match.group(0).casefold()] for match in self._pattern.finditer(query))
        return list(dict.fromkeys(found))
