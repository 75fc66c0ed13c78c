"""A request's JSON body: its size capped while it arrives, parsed, and refused with a 400
when it holds text no UTF-8 can carry (JSON lets a lone ``"\\ud800"`` through). Every
route that reads JSON reads it here: the chat route, each dialect and the decision API."""

from __future__ import annotations

import json
from typing import Any

from starlette.requests import Request

from beamfilter_core.errors import GatewayError

__all__ = ["check_text", "read_json"]


async def _raw(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    too_large = GatewayError(
        f"The request body is larger than max_body_bytes={limit}.", status=413, code="request_too_large"
    )
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_large
    parts: list[bytes] = []
    size = 0
    async for part in request.stream():
        size += len(part)
        if size > limit:
            raise too_large
        parts.append(part)
    return b"".join(parts)


async def read_json(request: Request, limit: int) -> Any:
    """The parsed JSON body of ``request``, at most ``limit`` bytes.

    Raises:
        GatewayError: 413 when larger, 400 when not JSON or holding a lone surrogate (naming where).
    """
    raw = await _raw(request, limit)
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError):
        msg = "The request body is not valid JSON."
        raise GatewayError(msg, status=400, code="invalid_json") from None
    check_text(body)
    return body


def _path(where: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{where}[{key}]"
    return f"{where}.{key}" if where else key


def _surrogate_at(value: Any, where: str) -> str | None:
    """The path of the first string in ``value`` that holds a lone surrogate, else None."""
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            return where
        return None
    pairs: list[tuple[str | int, Any]] = []
    if isinstance(value, dict):
        pairs = list(value.items())
    elif isinstance(value, list):
        pairs = list(enumerate(value))
    for key, inner in pairs:
        if isinstance(key, str) and _surrogate_at(key, where) is not None:
            return where or "the body"  # a key itself
        found = _surrogate_at(inner, _path(where, key))
        if found is not None:
            return found
    return None


def check_text(body: Any) -> None:
    """Refuse a body holding a lone surrogate (JSON lets ``"\\ud800"`` through): no text of it
    could be sent on, logged or answered in UTF-8.

    Raises:
        GatewayError: 400 naming the field.
    """
    try:
        json.dumps(body, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        where = _surrogate_at(body, "") or "the body"
        msg = f"{where} holds a lone surrogate (an unpaired \\ud800-\\udfff escape); send valid Unicode text."
        raise GatewayError(msg, status=400, param=where) from None
