"""Entry-point module of beamfilter-memory (its hook implementations)."""

from __future__ import annotations

from typing import Any

from beamfilter_core import FilterSpec, StoreSpec, hookimpl

from ._filter import memory_filter
from ._stores import open_store

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

_NO_OPTIONS: dict[str, Any] = {"type": "object", "additionalProperties": False}

SQLITE_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timeout": {"type": "number", "minimum": 0},
        "synchronous": {"enum": ["OFF", "NORMAL", "FULL", "EXTRA"]},
    },
    "additionalProperties": False,
}

POSTGRES_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "min_size": {"type": "integer", "minimum": 0},
        "max_size": {"type": "integer", "minimum": 1},
        "prefix": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
}

REDIS_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prefix": {"type": "string"},
        "ttl": {"type": ["integer", "null"], "minimum": 1},
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


@hookimpl
def beamfilter_register_stores() -> list[StoreSpec]:
    """The ``memory://``, ``sqlite:///``, ``postgresql://`` and ``redis://`` stores."""
    return [
        StoreSpec("memory", open_store, ("memory",), _NO_OPTIONS, "In-process store (tests, notebooks)."),
        StoreSpec("sqlite", open_store, ("sqlite",), SQLITE_OPTIONS, "One SQLite file, WAL (the embedded default)."),
        StoreSpec(
            "postgresql",
            open_store,
            ("postgresql", "postgres"),
            POSTGRES_OPTIONS,
            "PostgreSQL shared by many workers (extra: postgres).",
        ),
        StoreSpec(
            "redis",
            open_store,
            ("redis", "rediss", "unix"),
            REDIS_OPTIONS,
            "Redis shared by many workers, optional TTL (extra: redis).",
        ),
    ]
