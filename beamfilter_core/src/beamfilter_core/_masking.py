"""Whole-text masking with the secret rule set, for log lines and messages.

``redact`` streams with its own engine (in beamfilter-builtins); what is written to a log is
a whole text, so one combined regular expression is enough here. A match a rule's check
keeps is left as it is and the search goes on from the next character, as ``redact`` does,
so a log line is masked exactly where the answer would be.
"""

from __future__ import annotations

import functools
import logging
import re
from collections.abc import Iterable, Mapping

from ._secret_rules import DEFAULT_RULES, SecretRule
from ._secrets import MASK, mask_credentials

__all__ = ["MaskingFilter", "SecretMasker", "escape_controls", "mask_secrets"]

_SECRET_GROUP = "(?P<secret>"


class SecretMasker:
    """Replaces what ``rules`` match in a whole text by ``replacement``.

    Example::

        >>> SecretMasker().mask("key sk-abcdefghijklmnopqrstuvwx here")
        'key *** here'
    """

    __slots__ = ("_combined", "_rules", "_secret", "replacement")

    def __init__(self, rules: Iterable[SecretRule] = DEFAULT_RULES, replacement: str = MASK) -> None:
        self._rules = tuple(rules)
        self.replacement = replacement
        # one alternative per rule, each in its own group: the first rule that matches at a
        # position wins, as in redact; the rules' ``secret`` groups are renamed apart
        parts = [f"(?P<r{i}>{rule.pattern.replace(_SECRET_GROUP, f'(?P<s{i}>')})" for i, rule in enumerate(self._rules)]
        self._combined = re.compile("|".join(parts)) if parts else None
        self._secret = tuple(_SECRET_GROUP in rule.pattern for rule in self._rules)

    def __repr__(self) -> str:
        return f"SecretMasker({len(self._rules)} rules, replacement={self.replacement!r})"

    def mask(self, text: str) -> str:
        """``text`` with every secret the rules find replaced."""
        combined = self._combined
        if combined is None or not text:
            return text
        out: list[str] = []
        pos = 0
        kept = 0  # text before this index is in ``out``
        while (m := combined.search(text, pos)) is not None:
            index = next(i for i in range(len(self._rules)) if m.start(f"r{i}") >= 0)
            rule = self._rules[index]
            start, end = m.span(f"s{index}") if self._secret[index] else m.span()
            if rule.check is not None and not rule.check(text[start:end]):
                pos = m.start() + 1  # kept by its check: look again from the next character
                continue
            out.append(text[kept:start])
            out.append(self.replacement)
            kept = end
            pos = max(m.end(), m.start() + 1)
        out.append(text[kept:])
        return "".join(out)


@functools.cache
def _default() -> SecretMasker:
    # compiled on first use: importing the CLI does not pay for it
    return SecretMasker()


def mask_secrets(text: str) -> str:
    """``text`` with credentials in URLs (:func:`mask_credentials`) and every secret of the
    default rule set (API keys, tokens, ``Bearer ...``, ``password=...``) shown as ``***``.

    Example::

        >>> mask_secrets("upstream said: invalid key Bearer sk-abcdefghijklmnopqrstuvwx")
        'upstream said: invalid key Bearer ***'
    """
    return _default().mask(mask_credentials(text))


# C0/C1 controls, and the format (Cf), line and paragraph separators that change how text
# reads without being seen (bidi overrides and isolates, zero-width characters)
_CONTROLS = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u061c\u180e\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb]"
)


def _escaped(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_controls(text: str) -> str:
    """``text`` with control, format and bidi characters written as ``\\xNN`` / ``\\uNNNN``,
    so a value cannot start a new log line or reorder what a reader sees.

    Example::

        >>> escape_controls("alice\\nINFO forged")
        'alice\\\\x0aINFO forged'
    """
    return _CONTROLS.sub(_escaped, text)


def _clean(value: object) -> object:
    """A log argument masked and on one line; numbers stay numbers (``%d`` needs them)."""
    if value is None or isinstance(value, bool | int | float):
        return value
    return escape_controls(mask_secrets(value if isinstance(value, str) else str(value)))


class MaskingFilter(logging.Filter):
    """A logging filter that masks secrets in every record and escapes control characters
    (one record is one line). Add it to a handler to mask every line the handler writes.

    The message and each argument are cleaned apart, so a formatter that reads the
    arguments itself (Uvicorn's access log) still finds them; the formatted line is
    checked once more, for a secret that only the formatting put together.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = escape_controls(mask_secrets(record.msg))
        args = record.args
        if isinstance(args, tuple):
            record.args = tuple(_clean(arg) for arg in args)
        elif isinstance(args, Mapping):
            record.args = {key: _clean(value) for key, value in args.items()}
        try:
            message = record.getMessage()
        except (TypeError, ValueError):  # a malformed record: the handler reports it as it would
            pass
        else:
            masked = mask_secrets(message)
            if masked != message:
                record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = mask_secrets(record.exc_text)
        return True
