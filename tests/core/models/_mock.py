"""Replaying recorded HTTP answers through ``httpx.MockTransport`` for OpenAIChatModel tests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import httpx

from beamfilter_core import ChatRequest, Message, OpenAIChatModel

CAPTURES = Path(__file__).parent / "captures"
#: The request of the provider tests that look only at the answer: one user message.
REQUEST = ChatRequest((Message.user("hi"),))
#: Where a replayed answer is cut: whole, every byte, and inside events and lines.
SPLITS = [None, 1, 5, 64]

Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


def load_capture(name: str) -> tuple[int, dict[str, str], bytes]:
    """A capture file as (status, headers, body); ``.sse`` files are bare 200 streams."""
    raw = (CAPTURES / name).read_bytes()
    if name.endswith(".sse"):
        return 200, {"content-type": "text/event-stream"}, raw
    head, _, body = raw.partition(b"\n\n")
    lines = head.decode().splitlines()
    status = int(lines[0].split()[1])
    headers: dict[str, str] = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        if key.lower() not in ("transfer-encoding", "content-length", "connection", "keep-alive"):
            headers[key.strip().lower()] = value.strip()
    return status, headers, body


def pieces(data: bytes, size: int) -> list[bytes]:
    """``data`` cut every ``size`` bytes (cuts land inside lines and UTF-8 characters)."""
    return [data[i : i + size] for i in range(0, len(data), size)] or [b""]


async def _agen(chunks: Iterable[bytes], after: Exception | None = None) -> AsyncIterator[bytes]:
    for chunk in chunks:
        yield chunk
    if after is not None:
        raise after


def response(
    status: int = 200,
    body: bytes | str | Any = b"",
    *,
    headers: dict[str, str] | None = None,
    chunk: int | None = None,
    then_raise: Exception | None = None,
) -> httpx.Response:
    """A response whose body arrives in ``chunk``-byte reads (whole when None)."""
    if not isinstance(body, bytes | str):
        body = json.dumps(body)
    data = body.encode() if isinstance(body, str) else body
    parts = pieces(data, chunk) if chunk else [data]
    return httpx.Response(status, headers=headers or {}, content=_agen(parts, then_raise))


def captured(name: str, chunk: int | None = None) -> httpx.Response:
    """The native provider capture ``name`` (``provider_captures/``) as a response, its body
    in ``chunk``-byte reads."""
    from core.models._provider_captures import load

    status, headers, body = load(name)
    return response(status, body, headers=headers, chunk=chunk)


def replay(name: str, chunk: int | None = None) -> Callable[[httpx.Request], httpx.Response]:
    """A handler answering every request with :func:`captured` ``(name, chunk)``."""
    return lambda _: captured(name, chunk)


def sse(*events: Any, done: bool = True) -> bytes:
    """An SSE body from chunk objects (dicts are JSON-encoded), ending in [DONE]."""
    lines = [f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n" for e in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


def delta(content: str | None = None, *, finish: str | None = None, index: int = 0, **extra: Any) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a delta for choice ``index``."""
    body: dict[str, Any] = dict(extra)
    if content is not None:
        body["content"] = content
    return {"object": "chat.completion.chunk", "choices": [{"index": index, "delta": body, "finish_reason": finish}]}


STREAM = {"content-type": "text/event-stream; charset=utf-8"}


class Server:
    """A scripted transport: answers in order and records every request."""

    def __init__(self, answers: Sequence[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            return answer(request)
        return answer

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]

    def model(self, **options: Any) -> OpenAIChatModel:
        options.setdefault("api_key", "sk-test")
        return OpenAIChatModel(
            "test-model", base_url="http://mock.test/v1", transport=httpx.MockTransport(self.handle), **options
        )
