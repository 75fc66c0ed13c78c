"""Entry-point module of beamfilter-memory (its hook implementations)."""

from __future__ import annotations

from typing import Any

from beamfilter_core import CommandSpec, FilterSpec, StoreSpec, hookimpl

from ._command import configure_command, run_command
from ._filter import memory_filter
from ._long_term import long_term_memory_filter
from ._stores import STORE_SPECS

MEMORY_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "store": {
            "type": "string",
            "pattern": "^[A-Za-z][A-Za-z0-9+.-]*://",
            "description": "Store URL: memory://, sqlite:///path.db (default sqlite:///beamfilter.db), "
            "postgresql://..., redis://...",
        },
        "window": {"type": "integer", "minimum": 1, "description": "Send only the last N stored messages."},
    },
    "additionalProperties": False,
}

LONG_TERM_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "store": MEMORY_OPTIONS["properties"]["store"],
        "extract": {"enum": ["rules", "model"], "description": "How facts are found (default rules)."},
        "rules": {
            "type": "array",
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
        "prompt": {"type": "string", "pattern": "\\{messages\\}"},
        "top_k": {"type": "integer", "minimum": 0},
        "recent": {"type": "integer", "minimum": 0},
        "header": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    """The ``memory`` filter."""
    return [
        FilterSpec(
            "memory",
            memory_filter,
            MEMORY_OPTIONS,
            "Keeps each conversation (context conversation_id) in a store; put it first.",
            scopes=("turn", "chat"),
        )
    ]


# A second implementation of the same hook (pluggy's ``specname``): one function per filter.
@hookimpl(specname="beamfilter_register_filters")
def beamfilter_register_long_term_filters() -> list[FilterSpec]:
    """The ``long_term_memory`` filter."""
    return [
        FilterSpec(
            "long_term_memory",
            long_term_memory_filter,
            LONG_TERM_OPTIONS,
            "Durable facts about each user (context user_id) in a store, told to the model every turn.",
            scopes=("turn", "chat"),
        )
    ]


@hookimpl
def beamfilter_register_stores() -> list[StoreSpec]:
    """The ``memory://``, ``sqlite:///``, ``postgresql://`` and ``redis://`` stores."""
    return list(STORE_SPECS)


@hookimpl
def beamfilter_register_commands() -> list[CommandSpec]:
    """``beamfilter memory migrate URL``."""
    return [CommandSpec("memory", configure_command, run_command, "memory store maintenance (migrate)")]
