"""The ``[server]`` config section: its JSON schema and the validated options."""

from __future__ import annotations

from typing import Any

import attrs

__all__ = ["SERVER_OPTIONS", "ServerOptions"]

_KEYS = {
    "type": "array",
    "items": {"type": "string", "minLength": 16},
    "description": 'Keys as { "$env" = "NAME" } (at least 16 characters each); never written in the file.',
}

SERVER_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "api_keys": _KEYS,
        "inbox_keys": {
            **_KEYS,
            "description": "Keys of the human reviewers (/inbox, the decision API); required when a filter can pause.",
        },
        "allow_literal_keys": {
            "type": "boolean",
            "description": "Accept keys written in the file rather than from $env (default false: refused).",
        },
        "model_name": {
            "type": "string",
            "pattern": "^[A-Za-z0-9][A-Za-z0-9_.:/-]{0,127}$",
            "description": "The model id clients name and GET /v1/models lists (default 'beamfilter').",
        },
        "max_body_bytes": {"type": "integer", "minimum": 1024, "description": "Largest request body (default 1 MB)."},
        "max_messages": {"type": "integer", "minimum": 1, "description": "Most messages in one request (default 256)."},
        "max_answer_chars": {"type": "integer", "minimum": 1, "description": "Longest answer (default 200000)."},
        "max_wait": {
            "type": "number",
            "minimum": 0,
            "description": "Longest a client may hold a request open for a decision (Beamfilter-Wait, default 300 s).",
        },
        "cors_origins": {
            "type": "array",
            "items": {"type": "string", "pattern": "^https?://[^/]+$"},
            "description": "Browser origins allowed to call /v1 (CORS); none by default.",
        },
        "public_url": {
            "type": "string",
            "pattern": "^https?://",
            "description": "The gateway's URL as clients see it, for the inbox links of paused answers.",
        },
        "shutdown_grace": {
            "type": "number",
            "minimum": 0,
            "description": "Seconds SIGTERM lets running requests and streams finish (default 30).",
        },
    },
    "additionalProperties": False,
}


def _keys(value: Any) -> tuple[str, ...]:
    return tuple(value)


@attrs.frozen(slots=True)
class ServerOptions:
    """The validated ``[server]`` section. The keys never appear in its repr."""

    api_keys: tuple[str, ...] = attrs.field(default=(), converter=_keys, repr=False)
    inbox_keys: tuple[str, ...] = attrs.field(default=(), converter=_keys, repr=False)
    model_name: str = "beamfilter"
    max_body_bytes: int = 1_000_000
    max_messages: int = 256
    max_answer_chars: int = 200_000
    max_wait: float = 300.0
    cors_origins: tuple[str, ...] = attrs.field(default=(), converter=tuple)
    public_url: str | None = None
    shutdown_grace: float = 30.0
    allow_literal_keys: bool = False
