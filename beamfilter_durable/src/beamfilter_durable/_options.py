"""The ``[durable]`` config section: its JSON schema and the validated options."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["DEFAULT_DATABASE", "DURABLE_OPTIONS", "DurableOptions", "QueueOptions"]

DEFAULT_DATABASE = "sqlite:///beamfilter-durable.db"
#: How long a paused turn waits for its decision before it fails (one week).
DEFAULT_DECISION_TIMEOUT = 7 * 24 * 3600.0

DURABLE_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "use": {"enum": ["dbos"], "description": "The durable-execution engine (only 'dbos' today)."},
        "database": {
            "type": "string",
            "pattern": "^(sqlite|postgresql|postgres)(\\+[a-z0-9]+)?://",
            "description": "The engine's system database: sqlite:///path.db or postgresql://user@host/db.",
        },
        "queue": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "pattern": "^[A-Za-z0-9_.-]+$"},
                "concurrency": {"type": "integer", "minimum": 1},
                "worker_concurrency": {"type": "integer", "minimum": 1},
            },
            "required": ["name"],
            "additionalProperties": False,
            "description": "Run turns through a queue; concurrency is enforced across all workers.",
        },
        "executor_id": {
            "type": "string",
            "minLength": 1,
            "description": "This worker's id: a restarted worker recovers the turns its id left unfinished.",
        },
        "kernel": {
            "type": "string",
            "pattern": "^[A-Za-z_][A-Za-z0-9_.]*:[A-Za-z_][A-Za-z0-9_.]*$",
            "description": "'module:attribute' naming the Kernel (or a function returning it) whose turns "
            "run durably, for kernels with tools or models given in code; default: this config file.",
        },
        "app_version": {"type": "string", "minLength": 1, "description": "Workers recover turns of their version."},
        "decision_timeout": {"type": "number", "exclusiveMinimum": 0, "description": "Seconds a pause waits."},
    },
    "required": ["use"],
    "additionalProperties": False,
}


@attrs.frozen(slots=True)
class QueueOptions:
    """``queue = { name = "turns", concurrency = 8 }``: turns are enqueued and any worker runs them."""

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None


@attrs.frozen(slots=True)
class DurableOptions:
    """The validated ``[durable]`` section."""

    use: str = "dbos"
    database: str = DEFAULT_DATABASE
    queue: QueueOptions | None = None
    executor_id: str | None = None
    kernel: str | None = None
    app_version: str | None = None
    decision_timeout: float = DEFAULT_DECISION_TIMEOUT
