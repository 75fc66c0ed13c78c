"""Text helpers shared by the built-in filters: message text, previews, schema errors."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from beamfilter_core import Message

__all__ = ["format_path", "format_schema_error", "joined_text", "preview", "replace_text"]


def joined_text(messages: Iterable[Message], separator: str = "\n") -> str:
    """The text of ``messages`` (text parts of multimodal content included), joined."""
    return separator.join(text for text in (message.text for message in messages) if text)


def preview(text: str, limit: int | None) -> str:
    """``text`` cut to ``limit`` characters, ending in ``"..."`` when cut (None: no cut)."""
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + "..."


def replace_text(message: Message, text: str) -> Message:
    """``message`` with its plain-text content replaced by ``text``."""
    return message.replace(content=text)


def format_path(path: Sequence[Any]) -> str:
    """A readable location inside a JSON document: ``films[1].title``, or ``root``.

    ``path`` is a list of keys and indexes; a leading ``"data"`` (fastjsonschema's name
    for the document) is dropped.
    """
    parts = list(path)
    if parts and parts[0] == "data":
        parts = parts[1:]
    out = ""
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        elif isinstance(part, str) and part.startswith("[") and part.endswith("]") and part[1:-1].isdigit():
            out += part
        else:
            out += f".{part}" if out else str(part)
    return out or "root"


def _shown(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def format_schema_error(exc: Any, path: Sequence[Any] = ()) -> str:
    """One line naming where a JSON value broke its schema and what was expected.

    ``exc`` is a ``fastjsonschema.JsonSchemaValueException``; ``path`` is prepended to
    its own path (for errors found in a sub-document). For ``enum``, ``const`` and
    ``pattern`` the allowed values are named, so a model can fix its answer.
    """
    own = list(getattr(exc, "path", None) or ["data"])
    if own and own[0] == "data":
        own = own[1:]
    where = format_path([*path, *own])
    rule = getattr(exc, "rule", None)
    definition = getattr(exc, "rule_definition", None)
    if rule == "enum":
        allowed = ", ".join(_shown(v) for v in definition or ())
        return f"{where}: must be one of {allowed}"
    if rule == "const":
        return f"{where}: must be exactly {_shown(definition)}"
    if rule == "pattern":
        return f"{where}: must match the pattern {definition}"
    if rule == "required":
        names = ", ".join(_shown(v) for v in definition or ())
        return f"{where}: missing required properties (required: {names})"
    message = str(getattr(exc, "message", exc))
    # fastjsonschema writes "data.x must be ...": keep the "must ..." part.
    _head, sep, tail = message.partition(" must ")
    detail = f"must {tail}" if sep else message
    return f"{where}: {detail}"
