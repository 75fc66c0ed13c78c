"""``redact``: replace secrets in the answer, even when a secret is split across tokens.

The transform holds back only the shortest tail of the stream that could still grow
into a match (see :mod:`._partial`), so ordinary text flows with no delay and a secret
cut into any number of chunks is still caught whole.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from re import _parser  # type: ignore[attr-defined]  # width of a pattern
from typing import Any, Literal

from beamfilter_core import Filter, FilterSpec, TokenTransform
from beamfilter_core.errors import ConfigError

from ._partial import context_width, first_chars, first_source, full_source, prefix_source

__all__ = ["DEFAULT_PATTERNS", "EMAIL_PATTERN", "SPEC", "redact_filter"]

#: The secrets redacted by default, by name. Every pattern has a bounded length.
DEFAULT_PATTERNS: Mapping[str, str] = {
    "openai_key": r"sk-[A-Za-z0-9_-]{16,200}",
    "bearer_token": r"(?i:bearer)[ \t]{1,4}[A-Za-z0-9._~+/=-]{8,512}",
    "aws_access_key": r"(?:AKIA|ASIA)[0-9A-Z]{16}",
    "github_token": r"gh[pousr]_[A-Za-z0-9]{36,255}",
}
#: Added when ``emails=True``.
EMAIL_PATTERN = r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63}){0,8}\.[A-Za-z]{2,24}"

_OWNER = "redact_filter"
_CACHED_TEXT = 32  # scans of texts up to this length are remembered
_MAX_WIDTH = _parser.MAXREPEAT - 1  # what getwidth() reports for unbounded patterns


def _compile(index: str, value: Any) -> re.Pattern[str]:
    if isinstance(value, re.Pattern):
        pattern = value
    elif isinstance(value, str):
        try:
            pattern = re.compile(value)
        except re.error as exc:
            msg = f"{_OWNER}: pattern {index} {value!r} is not a valid regular expression: {exc}."
            raise ConfigError(msg) from None
    else:
        msg = f"{_OWNER}: pattern {index} is {value!r}; give a regular expression string."
        raise ConfigError(msg)
    if pattern.fullmatch(""):
        msg = f"{_OWNER}: pattern {index} {pattern.pattern!r} matches the empty text; make it match 1+ characters."
        raise ConfigError(msg)
    return pattern


def _width(pattern: re.Pattern[str], max_length: int) -> int:
    high = int(_parser.parse(pattern.pattern, pattern.flags).getwidth()[1])
    return max_length if high >= _MAX_WIDTH or high > max_length else high


class _Redactor:
    """The scanning state machine; ``step``/``flush`` are the transform's functions."""

    __slots__ = (
        "cache",
        "context",
        "first",
        "full",
        "hold",
        "lead",
        "limit",
        "min_width",
        "replacement",
        "search",
        "step",
    )

    def __init__(self, patterns: Sequence[re.Pattern[str]], replacement: str, limit: int, cache_size: int) -> None:
        try:
            full = "|".join(full_source(p) for p in patterns)
        except ValueError as exc:
            msg = f"{_OWNER}: {exc}; rewrite it without back references."
            raise ConfigError(msg) from None
        self.full = re.compile(full)
        self.search = self.full.search
        # Every match, and every tail that could still become one, starts with a lead char.
        chars = [first_chars(p) for p in patterns]
        self.first: frozenset[str] | None = None if None in chars else frozenset().union(*chars)  # type: ignore[arg-type]
        if self.first is not None:  # a plain character class is the fastest to search for
            lead = "[" + "".join(re.escape(c) for c in sorted(self.first)) + "]"
        else:
            lead = "|".join(first_source(p) for p in patterns)
        self.lead = re.compile(lead).search
        # The leftmost tail that could still become a match, found in one search.
        prefixes = "|".join(prefix_source(p) for p in patterns)
        self.hold = re.compile(f"(?=(?:{lead}))(?:{prefixes})\\Z").search
        self.replacement = replacement
        self.limit = limit
        # Streams repeat a small vocabulary of tokens, and a short scan depends only on
        # its text: remember the results (bounded) so most tokens cost one dict lookup.
        self.cache: dict[str, tuple[Sequence[str], str]] = {}
        self.min_width = min(int(_parser.parse(p.pattern, p.flags).getwidth()[0]) for p in patterns)
        # Characters before the held tail that \b, ^ and lookbehinds need to see (0: none).
        self.context = max(context_width(p) for p in patterns)
        self.step = self._make_step(cache_size)

    def _hold_start(self, text: str, start: int) -> int:
        """The leftmost position from ``start`` whose tail could still become a match."""
        end = len(text)
        m = self.hold(text, max(start, end - self.limit + 1))
        return end if m is None else m.start()

    def scan(self, text: str, base: int = 0) -> tuple[Sequence[str], str]:
        """Split ``text[base:]`` into what can be emitted (secrets replaced) and the held tail.

        ``text[:base]`` is context already emitted, seen only by ``\\b``, ``^`` and lookbehinds.
        """
        lead = self.lead
        m = lead(text, base)
        if m is None:  # the common case: nothing here can start a secret
            return (text[base:],), ""
        if len(text) - base < self.min_width:
            # Too short to hold a whole secret: at most a tail is held back.
            m = self.hold(text, m.start())
            if m is None:
                return (text[base:],), ""
            i = m.start()
            return ((text[base:i],) if i > base else ()), text[i:]
        out: list[str] = []
        pos = base
        search, replacement = self.search, self.replacement
        start = m.start()
        while True:
            held = self._hold_start(text, start)
            m = search(text, start)
            if m is None or m.start() >= held:
                if held > pos:
                    out.append(text[pos:held])
                return out, text[held:]
            if m.start() > pos:
                out.append(text[pos : m.start()])
            out.append(replacement)
            pos = start = m.end()

    def _make_step(self, cache_size: int) -> Callable[[str, str], tuple[Sequence[str], str]]:
        """The per-token function, with everything it needs bound as locals."""
        cache = self.cache
        remembered = cache.get
        first = self.first
        scan = self.scan

        def miss(text: str, held: str, token: str) -> tuple[Sequence[str], str]:
            if not held and first is not None and first.isdisjoint(token):  # no lead character at all
                result: tuple[Sequence[str], str] = ((token,), "")
            else:
                out, rest = scan(text)
                result = (tuple(out), rest)
            if cache_size and len(text) <= _CACHED_TEXT:
                if len(cache) >= cache_size:
                    cache.clear()
                cache[text] = result
            return result

        def step(token: str, held: str) -> tuple[Sequence[str], str]:
            text = held + token if held else token
            found = remembered(text)
            if found is not None:
                return found
            return miss(text, held, token)

        return step

    def flush(self, held: str) -> list[str]:
        if not held:
            return []
        replacement = self.replacement
        return [self.full.sub(lambda _: replacement, held)]

    def step_in_context(self, token: str, state: tuple[str, str]) -> tuple[Sequence[str], tuple[str, str]]:
        """``step`` for patterns that look back: the state keeps the text before the held tail."""
        context, held = state
        text = context + held + token
        out, rest = self.scan(text, len(context))
        cut = len(text) - len(rest)
        return out, (text[max(0, cut - self.context) : cut], rest)

    def flush_in_context(self, state: tuple[str, str]) -> list[str]:
        context, held = state
        if not held:
            return []
        text = context + held
        out: list[str] = []
        pos = len(context)
        for m in self.full.finditer(text, pos):
            out.append(text[pos : m.start()])
            out.append(self.replacement)
            pos = m.end()
        out.append(text[pos:])
        return ["".join(out)]


def redact_filter(
    patterns: Sequence[str | re.Pattern[str]] | Mapping[str, str | re.Pattern[str]] | None = None,
    *,
    replacement: str = "[REDACTED]",
    emails: bool = False,
    max_length: int = 256,
    cache_size: int = 8192,
    applies_to: Literal["stream", "answer"] = "answer",
    name: str = "redact",
) -> Filter:
    """A token filter that replaces every match of ``patterns`` by ``replacement``.

    Args:
        patterns: regular expressions (a list, or a mapping name -> pattern); default
            :data:`DEFAULT_PATTERNS` (API keys like ``sk-...``, bearer tokens, AWS access
            keys, GitHub tokens). Back references are not supported.
        replacement: the text that replaces each match.
        emails: also redact e-mail addresses (:data:`EMAIL_PATTERN`).
        max_length: the longest secret an unbounded pattern (``\\S+``) can match; it caps
            how much text is held back. Bounded patterns use their own maximum width.
        cache_size: how many short scan results to remember (tokens repeat, so most
            tokens then cost one dict lookup); 0 scans every token.
        applies_to: ``"answer"`` (default) rewrites the answer itself, so the streamed
            text, ``TurnResult.text`` and what memory stores are identical;
            ``"stream"`` changes only what the stream consumer sees.
        name: the filter's name.

    Example::

        kernel = Kernel(model, filters=[redact_filter(emails=True)])
    """
    if patterns is None:
        named: list[tuple[str, Any]] = list(DEFAULT_PATTERNS.items())
    elif isinstance(patterns, Mapping):
        named = [(str(key), value) for key, value in patterns.items()]
    elif isinstance(patterns, str | re.Pattern) or not isinstance(patterns, Sequence):
        msg = f"{_OWNER}(patterns={patterns!r}): give a list of regular expressions or a mapping name -> pattern."
        raise ConfigError(msg)
    else:
        named = [(f"[{index}]", value) for index, value in enumerate(patterns)]
    if emails:
        named.append(("email", EMAIL_PATTERN))
    if not named:
        msg = f"{_OWNER}(patterns={patterns!r}) has no patterns; give at least one or leave the default."
        raise ConfigError(msg)
    if isinstance(max_length, bool) or not isinstance(max_length, int) or max_length < 1:
        msg = f"{_OWNER}(max_length={max_length!r}): give a positive number of characters."
        raise ConfigError(msg)
    if applies_to not in ("stream", "answer"):
        msg = f"{_OWNER}(applies_to={applies_to!r}): give 'answer' or 'stream'."
        raise ConfigError(msg)
    if not isinstance(replacement, str):
        msg = f"{_OWNER}(replacement={replacement!r}): give a string."
        raise ConfigError(msg)
    if isinstance(cache_size, bool) or not isinstance(cache_size, int) or cache_size < 0:
        msg = f"{_OWNER}(cache_size={cache_size!r}): give an integer >= 0 (0 disables the cache)."
        raise ConfigError(msg)
    compiled = [_compile(index, value) for index, value in named]
    limit = max(_width(pattern, max_length) for pattern in compiled)
    redactor = _Redactor(compiled, replacement, limit, cache_size)
    if redactor.context:
        transform = TokenTransform(redactor.step_in_context, ("", ""), redactor.flush_in_context, applies_to)
    else:
        transform = TokenTransform(redactor.step, "", redactor.flush, applies_to)
    return Filter(name, token=transform, extras={"redactor": redactor})


SPEC = FilterSpec(
    "redact",
    redact_filter,
    {
        "type": "object",
        "properties": {
            "patterns": {
                "oneOf": [
                    {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                    {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}, "minProperties": 1},
                ]
            },
            "replacement": {"type": "string"},
            "emails": {"type": "boolean"},
            "max_length": {"type": "integer", "minimum": 1},
            "cache_size": {"type": "integer", "minimum": 0},
            "applies_to": {"enum": ["stream", "answer"]},
            "name": {"type": "string", "minLength": 1},
        },
        "additionalProperties": False,
    },
    "Replaces secrets (API keys, tokens, optional e-mails) in the answer, even split across tokens.",
    ("token",),
)
