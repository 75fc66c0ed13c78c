"""The kernel's own options: the one JSON schema of the ``[kernel]`` config section and of
the matching :class:`~beamfilter_core.Kernel` arguments.

It is checked like every other section's options (:mod:`._options`): a config's
``[kernel]`` table by :func:`~._options.check_options` through the same lazily compiled
validator as ``[durable]`` or a filter's options; a Python caller's arguments by the
:func:`~._options.options_schema` decorator on ``Kernel.__init__``. The Kernel's other
arguments (``model``, ``tools``, ``filters``, ``gate``, ``pause_ledger``, ``check_returns``)
are Python objects with no place in a config file.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KERNEL_OPTIONS"]

#: The ``[kernel]`` options (a number must also be finite: TOML's ``nan`` and ``inf`` are refused).
KERNEL_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_iterations": {
            "type": "integer",
            "minimum": 1,
            "description": "At most this many model calls per run (default 10).",
        },
        "tool_timeout": {
            "type": "number",
            "exclusiveMinimum": 0,
            "description": "Seconds a tool call may take (a tool's own timeout wins); no limit if left out.",
        },
        "system_prompt": {"type": "string", "description": "The system prompt sent with each model call."},
        "options": {"type": "object", "description": "Model options sent with each model call."},
        "pause_key": {
            "type": "string",
            "minLength": 16,
            "x-secret": True,
            # Kernel(pause_key=...) also takes bytes: PauseKeys checks what a Python caller gives
            "x-parsed-by": "PauseKeys",
            "x-hint": 'a secret string of at least 16 characters, e.g. { "$env" = "NAME" }',
            "description": "The secret pauses are signed with (see docs/approvals.md).",
        },
        "transient_context": {
            "type": "array",
            "items": {"type": "string"},
            "x-hint": "a list of context keys, e.g. ['day']",
            "description": "Context keys a pause does not keep.",
        },
        "unsafe_unsigned_pauses": {
            "type": "boolean",
            "description": "Accept pause states without a signature (only for states you make yourself).",
        },
    },
    "additionalProperties": False,
}
