"""The gateway in other clients' dialects: Anthropic's Messages (``POST /v1/messages``) and
OpenAI's Responses (``POST /v1/responses``).

A dialect request is parsed into the :class:`~._wire.ChatCall` the chat route runs and goes
through :class:`~._gateway.Gateway` as that route's does (the same filters, keys, inbox,
``Beamfilter-Wait``, ``Idempotency-Key`` and consumer view); only the answer's shape
differs. The shapes are in :mod:`._anthropic_dialect` and :mod:`._responses_dialect`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, Protocol

import attrs
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from beamfilter_core.errors import GatewayError

from . import _anthropic_dialect as anthropic
from . import _responses_dialect as responses
from ._answers import stream_error
from ._gateway import Gateway
from ._idempotency import fingerprint, idempotency_key
from ._wire import ChatCall
from ._wire import error_body as openai_error_body

__all__ = ["ANTHROPIC", "RESPONSES", "Dialect", "dialect_handler"]

Item = dict[str, Any] | str


class Events(Protocol):
    """A stream's translator: the gateway's chat chunks in, the dialect's events out."""

    def feed(self, item: Mapping[str, Any] | str) -> list[Item]: ...

    def close(self) -> list[Item]: ...

    def fail(self, error: GatewayError) -> list[Item]: ...


class _Client(Protocol):
    @property
    def client(self) -> str | None: ...


@attrs.frozen(slots=True)
class Dialect:
    """One client wire: how its request becomes a chat call, and how the chat answer, the
    chat chunks and an error look in it."""

    name: str
    parse: Callable[..., ChatCall]
    render: Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]
    events: Callable[[Mapping[str, Any]], Events]
    error_body: Callable[[GatewayError], dict[str, Any]]


ANTHROPIC = Dialect(
    "anthropic",
    anthropic.parse_messages_request,
    lambda answer, body: anthropic.message_object(answer),
    lambda body: anthropic.AnthropicEvents(),
    anthropic.error_body,
)
RESPONSES = Dialect(
    "responses",
    responses.parse_responses_request,
    responses.response_object,
    responses.ResponsesEvents,
    openai_error_body,
)


def _sse(item: Item) -> bytes:
    if isinstance(item, str):
        return f": {item}\n\n".encode()
    data = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    return f"event: {item['type']}\ndata: {data}\n\n".encode()


async def _events(translate: Events, first: Item, items: AsyncIterator[Item]) -> AsyncIterator[bytes]:
    try:
        for event in translate.feed(first):
            yield _sse(event)
        async for item in items:
            for event in translate.feed(item):
                yield _sse(event)
        for event in translate.close():
            yield _sse(event)
    except Exception as exc:  # noqa: BLE001  # the status is sent: the error goes in the stream
        for event in translate.fail(stream_error(exc)):
            yield _sse(event)
    finally:
        with contextlib.suppress(Exception):
            await items.aclose()  # type: ignore[attr-defined]


def dialect_handler(
    gateway: Gateway, dialect: Dialect, read_body: Callable[[Request, int], Awaitable[Any]]
) -> Callable[[Request, Any], Awaitable[Response]]:
    """The route handler of ``dialect``: its requests through ``gateway``, its answers in its shape.

    A paused turn answers 202 with a ``Location`` header naming the poll URL, as on the chat
    route; the poll and the decision API answer in the chat route's shape.
    """

    async def handle(request: Request, caller: _Client) -> Response:
        body = await read_body(request, gateway.options.max_body_bytes)
        call = dialect.parse(body, max_messages=gateway.options.max_messages)
        who = gateway.caller(request.headers, call, caller.client)
        wait = gateway.wait_seconds(request.headers)
        key = idempotency_key(request.headers)
        digest = fingerprint(body) if key is not None else ""
        if not call.stream:
            status, answer = await gateway.complete(call, who, wait, key, digest)
            headers = {"Location": answer["beamfilter"]["poll"]} if status == 202 else None
            return JSONResponse(dialect.render(answer, body), status_code=status, headers=headers)
        items = gateway.stream(call, who, wait, key, digest)
        first = await anext(items)  # errors before the first chunk get their own status
        return StreamingResponse(
            _events(dialect.events(body), first, items),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    return handle
