"""The secret rule set, public: one set of rules for ``redact``, ``tool_output_guard``,
``logging``, the gateway's log and the CLI's messages.

A plugin that hides secrets builds on these names (``select_rules`` for a filter's
``exclude``/``emails`` options; :class:`SecretMasker` or :func:`mask_secrets` for whole
texts; :class:`MaskingFilter` for a log handler), so every part of beamfilter hides the
same formats.

Example::

    from beamfilter_core.secrets import mask_secrets

    assert mask_secrets("password=hunter2hunter2") == "password=***"
"""

from __future__ import annotations

from ._masking import MaskingFilter, SecretMasker, escape_controls, mask_secrets
from ._secret_rules import (
    CATEGORIES,
    DEFAULT_RULES,
    EMAIL_RULE,
    SecretRule,
    basic_credentials,
    entropy,
    has_digit,
    looks_random,
    not_placeholder,
    password_value,
    select_rules,
)
from ._secrets import MASK, mask_credentials

__all__ = [
    "CATEGORIES",
    "DEFAULT_RULES",
    "EMAIL_RULE",
    "MASK",
    "MaskingFilter",
    "SecretMasker",
    "SecretRule",
    "basic_credentials",
    "entropy",
    "escape_controls",
    "has_digit",
    "looks_random",
    "mask_credentials",
    "mask_secrets",
    "not_placeholder",
    "password_value",
    "select_rules",
]
