"""model_retry and fallback over real HTTP: OpenAIChatModel against a local scripted server.

The server is a real asyncio TCP server speaking HTTP/1.1 on 127.0.0.1; each request
takes the next scripted answer: a status with headers and a JSON body, or an SSE stream
that may be cut before ``[DONE]``. The model's own retries are off (``max_retries=0``)
so every retry seen here is the filter's.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import attrs
import pytest

from beamfilter_builtins import fallback_filter, model_retry_filter
from beamfilter_core import Kernel, OpenAIChatModel
from beamfilter_core.errors import IncompleteStreamError, RateLimitError
from beamfilter_core.testing import collect_stream

pytestmark = pytest.mark.anyio


@attrs.frozen
class Answer:
    status: int = 200
    headers: dict[str, str] = attrs.field(factory=dict)
    body: Any = None  # JSON for a plain answer
    stream: tuple[str, ...] = ()  # text deltas of an SSE answer
    cut: bool = False  # close the stream before finish_reason / [DONE]


def completion(text: str) -> dict[str, Any]:
    return {
        "id": "c1",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    data = {"id": "c1", "object": "chat.completion.chunk", "model": "m"}
    data["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]  # type: ignore[assignment]
    return b"data: " + json.dumps(data).encode() + b"\n\n"


class ScriptedServer:
    """Answers POST /v1/chat/completions with the scripted answers, in order."""

    def __init__(self, answers: list[Answer]) -> None:
        self.answers = answers
        self.bodies: list[dict[str, Any]] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> ScriptedServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    def model(self) -> OpenAIChatModel:
        return OpenAIChatModel("m", base_url=f"http://127.0.0.1:{self.port}/v1", api_key="sk-test", max_retries=0)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode().split("\r\n")[1:]:
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        self.bodies.append(json.loads(await reader.readexactly(length)))
        answer = self.answers[len(self.bodies) - 1]
        if answer.stream or answer.cut:
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
            writer.write(chunk({"role": "assistant", "content": ""}))
            for text in answer.stream:
                writer.write(chunk({"content": text}))
                await writer.drain()
            if not answer.cut:
                writer.write(chunk({}, "stop") + b"data: [DONE]\n\n")
        else:
            payload = json.dumps(answer.body).encode()
            headers = "".join(f"{k}: {v}\r\n" for k, v in answer.headers.items())
            writer.write(
                f"HTTP/1.1 {answer.status} X\r\ncontent-type: application/json\r\ncontent-length: {len(payload)}\r\n"
                f"{headers}connection: close\r\n\r\n".encode()
                + payload
            )
        await writer.drain()
        writer.close()


RATE_LIMITED = Answer(429, {"retry-after": "0.2"}, {"error": {"message": "slow down", "type": "rate_limit"}})


@pytest.fixture
async def servers() -> AsyncIterator[list[ScriptedServer]]:
    made: list[ScriptedServer] = []
    yield made
    for server in made:
        await server.__aexit__()


async def start(servers: list[ScriptedServer], *answers: Answer) -> ScriptedServer:
    server = await ScriptedServer(list(answers)).__aenter__()
    servers.append(server)
    return server


async def test_retry_after_from_a_real_429_is_honoured(servers: list[ScriptedServer]) -> None:
    server = await start(servers, RATE_LIMITED, Answer(body=completion("hello")))
    async with server.model() as model:
        kernel = Kernel(model, filters=[model_retry_filter(initial_delay=5.0)])
        loop = asyncio.get_running_loop()
        started = loop.time()
        result = await kernel.run("hi")
        elapsed = loop.time() - started
    assert result.text == "hello"
    assert len(server.bodies) == 2
    # the server's 0.2 s, not the 5 s backoff: the bound sits far from both so that a
    # loaded machine (two test processes on two cores) cannot blur the difference
    assert 0.2 <= elapsed < 4.0


async def test_streamed_retry_before_any_text_and_no_retry_after_text(servers: list[ScriptedServer]) -> None:
    server = await start(servers, RATE_LIMITED, Answer(stream=("Hel", "lo")))
    async with server.model() as model:
        text, _ = await collect_stream(Kernel(model, filters=[model_retry_filter()]).run_stream("hi"))
    assert text == "Hello"
    assert len(server.bodies) == 2

    cut = await start(servers, Answer(stream=("Hel",), cut=True), Answer(stream=("never",)))
    async with cut.model() as model:
        kernel = Kernel(model, filters=[model_retry_filter(initial_delay=0.01)])
        with pytest.raises(IncompleteStreamError):
            await collect_stream(kernel.run_stream("hi"))
    assert len(cut.bodies) == 1  # "Hel" reached the consumer: no second answer glued on


async def test_fallback_to_a_second_server_after_the_first_gives_up(servers: list[ScriptedServer]) -> None:
    primary = await start(servers, RATE_LIMITED, RATE_LIMITED)
    backup = await start(servers, Answer(body=completion("from backup")))
    async with primary.model() as first, backup.model() as second:
        kernel = Kernel(
            first,
            filters=[fallback_filter(models=[second]), model_retry_filter(max_retries=1)],
            system_prompt="Be brief.",
        )
        result = await kernel.run("hi")
    assert result.text == "from backup"
    assert len(primary.bodies) == 2  # one try and one retry by model_retry
    assert backup.bodies[0]["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "hi"},
    ]


async def test_rate_limit_error_carries_retry_after(servers: list[ScriptedServer]) -> None:
    server = await start(servers, RATE_LIMITED)
    async with server.model() as model:
        with pytest.raises(RateLimitError) as caught:
            await Kernel(model, filters=[model_retry_filter(max_retries=0)]).run("hi")
    assert caught.value.retry_after == 0.2
