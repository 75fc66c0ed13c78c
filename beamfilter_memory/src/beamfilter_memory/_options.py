"""The options of the memory filters: their JSON schemas, the one source of truth.

The core checks a config's options against them; ``@options_schema`` checks Python calls
of :func:`memory_filter` and :func:`long_term_memory_filter` against the same schemas.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LONG_TERM_OPTIONS", "MEMORY_OPTIONS"]

_COUNT: dict[str, Any] = {"type": "integer", "minimum": 0, "x-hint": "a whole number >= 0"}

MEMORY_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "store": {
            "type": "string",
            "pattern": "^[A-Za-z][A-Za-z0-9+.-]*://",
            "description": "Store URL: memory://, sqlite:///path.db (default sqlite:///beamfilter.db), "
            "postgresql://..., redis://...",
            "x-hint": "a store URL such as 'sqlite:///chats.db' or a store object",
        },
        "window": {
            "type": "integer",
            "minimum": 1,
            "description": "Send only the last N stored messages.",
            "x-hint": "a positive number of messages, or None for all",
        },
    },
    "additionalProperties": False,
}

LONG_TERM_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "store": MEMORY_OPTIONS["properties"]["store"],
        "extract": {
            "enum": ["rules", "model"],
            "description": "How facts are found (default rules).",
            "x-hint": "'rules' or 'model'",
        },
        "rules": {
            "type": "array",
            "x-parsed-by": "the rule compiler (Python callers may give (pattern, subject, fact) tuples)",
            "items": {
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "minLength": 1},
                    "subject": {"type": "string", "minLength": 1},
                    "fact": {"type": "string", "minLength": 1},
                },
                "required": ["pattern", "subject", "fact"],
                "additionalProperties": False,
            },
            "description": "Patterns with {value}, e.g. 'I work at {value}'.",
        },
        "model": {"type": "string", "minLength": 1, "description": "A model of [models] (default the kernel's)."},
        "prompt": {
            "type": "string",
            "pattern": "\\{messages\\}",
            "x-hint": "a str with '{messages}' (and optionally '{facts}')",
        },
        "top_k": _COUNT,
        "recent": _COUNT,
        "header": {"type": "string", "minLength": 1, "pattern": "\\S", "x-hint": "a non-empty str"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}
