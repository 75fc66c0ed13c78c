"""``redact``: replace secrets in the answer, even when a secret is split across tokens.

The rules are the shared secret rule set (:mod:`beamfilter_core.secrets`: API keys of AI, cloud,
VCS, chat, payment and SaaS providers, private keys, JWTs, auth headers, credentials in
URLs and secret-like assignments), optionally extended with your own patterns. The
engine (:mod:`._redactor`) holds back only the shortest tail of the stream that more
text could still change, so ordinary text flows with no delay, and the streamed answer
equals the redaction of the whole answer at every chunk split.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from beamfilter_core import Filter, FilterSpec, TokenTransform, options_schema
from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import DEFAULT_RULES, EMAIL_RULE, SecretRule, select_rules

from ._redactor import Redactor

__all__ = ["DEFAULT_PATTERNS", "EMAIL_PATTERN", "SPEC", "redact_filter", "user_rules"]

#: The default rules' patterns, by rule name.
DEFAULT_PATTERNS: Mapping[str, str] = {rule.name: rule.pattern for rule in DEFAULT_RULES}
#: Added when ``emails=True``.
EMAIL_PATTERN = EMAIL_RULE.pattern

_OWNER = "redact_filter"


def user_rules(
    where: str, option: str, patterns: Sequence[str | re.Pattern[str]] | Mapping[str, str | re.Pattern[str]] | None
) -> list[SecretRule]:
    """Rules from a list of patterns, or a mapping name -> pattern, given in config."""
    if patterns is None:
        return []
    if isinstance(patterns, Mapping):
        named = [(str(key), value) for key, value in patterns.items()]
    elif isinstance(patterns, str | re.Pattern) or not isinstance(patterns, Sequence):
        msg = f"{where}({option}={patterns!r}): give a list of regular expressions or a mapping name -> pattern."
        raise ConfigError(msg)
    else:
        named = [(f"{option}[{index}]", value) for index, value in enumerate(patterns)]
    rules: list[SecretRule] = []
    for name, value in named:
        if isinstance(value, re.Pattern):
            if value.flags & ~(re.UNICODE | re.IGNORECASE | re.MULTILINE | re.DOTALL | re.ASCII):
                msg = f"{where}: pattern {name} uses flags redact cannot carry over; use inline flags like (?i)."
                raise ConfigError(msg)
            letters = "".join(
                c for flag, c in ((re.I, "i"), (re.M, "m"), (re.S, "s"), (re.A, "a")) if value.flags & flag
            )
            source = f"(?{letters}){value.pattern}" if letters else value.pattern
        elif isinstance(value, str):
            source = value
        else:
            msg = f"{where}: pattern {name} is {value!r}; give a regular expression string."
            raise ConfigError(msg)
        rules.append(SecretRule(name, "custom", source))
    return rules


# worded like the other options of the shared secret rules (select_rules)
_NAMES = {
    "type": "array",
    "items": {"type": "string", "minLength": 1},
    "x-hint": "a list of rule names",
    "x-style": "is invalid",
}

OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "patterns": {
            "oneOf": [
                {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
                {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}, "minProperties": 1},
            ],
            "x-hint": "a list of regular expressions or a mapping name -> pattern",
        },
        "exclude": _NAMES,
        "default_rules": {"type": "boolean"},
        "replacement": {"type": "string"},
        "emails": {"type": "boolean"},
        "max_length": {"type": "integer", "minimum": 1, "x-hint": "a positive number of characters"},
        "cache_size": {"type": "integer", "minimum": 0, "x-hint": "an integer >= 0 (0 disables the cache)"},
        "applies_to": {"enum": ["stream", "answer"], "x-hint": "'answer' or 'stream'"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def redact_filter(
    patterns: Sequence[str | re.Pattern[str]] | Mapping[str, str | re.Pattern[str]] | None = None,
    *,
    exclude: Sequence[str] = (),
    default_rules: bool = True,
    replacement: str = "[REDACTED]",
    emails: bool = False,
    max_length: int = 16_384,
    cache_size: int = 8192,
    applies_to: Literal["stream", "answer"] = "answer",
    name: str = "redact",
) -> Filter:
    """A token filter that replaces every secret in the answer by ``replacement``.

    Args:
        patterns: your own regular expressions (a list, or a mapping name -> pattern),
            added to the default rules. Each must have a bounded length (``{1,64}``, not
            ``+``) and no back references; a pattern may name a group ``secret`` to hide
            only that part.
        exclude: names of default rules to switch off, e.g. ``["jwt"]``.
        default_rules: False uses only ``patterns`` (and ``emails``).
        replacement: the text that replaces each secret.
        emails: also redact e-mail addresses (rule ``email``).
        max_length: the longest text a rule may match (with what it looks at after the
            match); it bounds how much of a stream is held back. A longer rule is refused.
        cache_size: how many short scan results to remember (tokens repeat, so most
            tokens then cost one dict lookup); 0 scans every token.
        applies_to: ``"answer"`` (default) rewrites the answer itself, so the streamed
            text, ``TurnResult.text`` and what memory stores are identical;
            ``"stream"`` changes only what the stream consumer sees.
        name: the filter's name.

    Example::

        kernel = Kernel(model, filters=[redact_filter(emails=True, exclude=["jwt"])])
    """
    rules = [*select_rules(_OWNER, exclude, emails, default_rules), *user_rules(_OWNER, "patterns", patterns)]
    if not rules:
        msg = f"{_OWNER}(patterns={patterns!r}, default_rules=False) has no rules; give patterns or keep the defaults."
        raise ConfigError(msg)
    redactor = Redactor(rules, replacement=replacement, max_length=max_length, cache_size=cache_size, where=_OWNER)
    transform = TokenTransform(redactor.step, redactor.start, redactor.flush, applies_to)
    return Filter(name, token=transform, extras={"redactor": redactor})


SPEC = FilterSpec(
    "redact",
    redact_filter,
    OPTIONS,
    "Replaces secrets (90+ token formats, private keys, credentials in URLs and assignments) in the answer, "
    "even split across tokens.",
    ("token",),
)
