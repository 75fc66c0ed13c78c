"""Bounded resources, against real servers on 127.0.0.1 that misbehave on purpose.

A server that never stops streaming meets the per-call ``deadline``; a line that never
ends, an answer or tool arguments that never end meet their caps (typed errors, memory
bounded); hung sync tools fill only the tool threads, never the loop's default executor,
so a model call to a refused port still fails fast as a connection error. Every server
loop is bounded and stops by itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from core.models._mock import REQUEST

from beamfilter_core import (
    ChatResponse,
    Kernel,
    OpenAIChatModel,
    ScriptedModel,
    ToolCall,
    _tools,
    tool,
)
from beamfilter_core.errors import ProviderConnectionError, ProviderTimeoutError, ResponseTooLargeError

pytestmark = pytest.mark.anyio

Writer = Callable[[asyncio.StreamWriter], Awaitable[None]]


@contextlib.asynccontextmanager
async def http_server(body: Writer, content_type: str = "text/event-stream") -> AsyncIterator[str]:
    """A server answering every POST with 200 and whatever ``body`` writes; yields the base URL."""

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.lower().split(b"\r\n")
            length = next((int(line.split(b":")[1]) for line in lines if line.startswith(b"content-length")), 0)
            await reader.readexactly(length)
            writer.write(f"HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\nconnection: close\r\n\r\n".encode())
            await body(writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client gave up, as it should (or the test ended)
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.close()
        await server.wait_closed()


def chunk(**delta: object) -> bytes:
    return f"data: {json.dumps({'choices': [{'index': 0, 'delta': delta}]})}\n\n".encode()


async def test_a_server_that_never_stops_streaming_meets_the_deadline() -> None:
    async def forever(writer: asyncio.StreamWriter) -> None:
        piece = chunk(content="x" * 4000)
        stop = time.monotonic() + 10  # bounded: the client must give up long before
        while time.monotonic() < stop:
            writer.write(piece)
            await writer.drain()
            await asyncio.sleep(0.001)

    async with http_server(forever) as url:
        # silence never reaches timeout=3: only the deadline can end this call
        model = OpenAIChatModel("m", base_url=url, timeout=3, deadline=2, max_answer_chars=10**9)
        start = time.monotonic()
        with pytest.raises(ProviderTimeoutError) as caught:
            await model.stream(REQUEST, lambda _: None)
        elapsed = time.monotonic() - start
        await model.aclose()
    assert str(caught.value) == (
        f"The call to {url}/chat/completions took longer than deadline=2 s (retries and waits included); "
        "raise deadline= if such answers are expected."
    )
    assert 1.9 < elapsed < 5.0  # generous: CI machines are busy


async def test_the_deadline_includes_retries_and_their_waits() -> None:
    async def stalls(writer: asyncio.StreamWriter) -> None:
        await asyncio.sleep(5)  # no byte: each attempt times out after timeout=0.4

    async with http_server(stalls) as url:
        model = OpenAIChatModel("m", base_url=url, timeout=0.4, deadline=1.5, max_retries=10)
        start = time.monotonic()
        with pytest.raises(ProviderTimeoutError, match=r"took longer than deadline=1\.5 s"):
            await model.complete(REQUEST)
        await model.aclose()
    assert time.monotonic() - start < 4.0


async def test_a_line_that_never_ends_is_refused_at_the_cap() -> None:
    sent = [0]

    async def endless_line(writer: asyncio.StreamWriter) -> None:
        writer.write(b"data: ")
        piece = b"x" * 65536
        while sent[0] < 50_000_000:  # bounded; the cap is 1 MB
            writer.write(piece)
            await writer.drain()
            sent[0] += len(piece)

    async with http_server(endless_line) as url:
        model = OpenAIChatModel("m", base_url=url, max_event_chars=1_000_000)
        with pytest.raises(ResponseTooLargeError) as caught:
            await model.stream(REQUEST, lambda _: None)
        await model.aclose()
    assert str(caught.value) == (
        "The stream sent more than max_event_chars=1000000 characters without completing an event "
        "(one SSE line or event that large); raise the limit if such chunks are expected."
    )
    assert sent[0] < 20_000_000  # the client stopped reading near the cap (socket buffers aside)


async def test_an_answer_over_the_cap_is_refused_and_not_retried() -> None:
    calls = [0]

    async def long_answer(writer: asyncio.StreamWriter) -> None:
        calls[0] += 1
        for _ in range(200):  # 200 x 1000 characters, the cap is 50,000
            writer.write(chunk(content="y" * 1000))
            await writer.drain()

    async with http_server(long_answer) as url:
        model = OpenAIChatModel("m", base_url=url, max_answer_chars=50_000, max_retries=3)
        with pytest.raises(ResponseTooLargeError, match=r"longer than max_answer_chars=50000"):
            await model.stream(REQUEST, lambda _: None)
        await model.aclose()
    assert calls == [1]


async def test_streamed_tool_arguments_over_the_cap_are_refused() -> None:
    async def huge_arguments(writer: asyncio.StreamWriter) -> None:
        writer.write(chunk(tool_calls=[{"index": 0, "id": "c1", "function": {"name": "add", "arguments": '{"a": "'}}]))
        for _ in range(800):  # 800 x 65,536 = 52 MB unless the client stops
            writer.write(chunk(tool_calls=[{"index": 0, "function": {"arguments": "z" * 65536}}]))
            await writer.drain()

    async with http_server(huge_arguments) as url:
        model = OpenAIChatModel("m", base_url=url)
        with pytest.raises(ResponseTooLargeError) as caught:
            await model.stream(REQUEST, lambda _: None)
        await model.aclose()
    assert str(caught.value) == (
        "The arguments of tool call 'add' are longer than max_argument_chars=1000000; "
        "raise the limit if such answers are expected."
    )


async def test_a_non_streamed_body_over_the_cap_is_refused() -> None:
    async def huge_body(writer: asyncio.StreamWriter) -> None:
        for _ in range(100):  # 6.5 MB unless the client stops; the cap is 6 x 10,000 + 64 KiB
            writer.write(b" " * 65536)
            await writer.drain()

    async with http_server(huge_body, "application/json") as url:
        model = OpenAIChatModel("m", base_url=url, max_answer_chars=10_000)
        with pytest.raises(ResponseTooLargeError, match=r"answered with a body longer than max_answer_chars=10000"):
            await model.complete(REQUEST)
        await model.aclose()


async def test_non_streamed_tool_arguments_over_the_cap_are_refused() -> None:
    body = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": "q" * 2001}}]},
            }
        ]
    }

    async def answer(writer: asyncio.StreamWriter) -> None:
        writer.write(json.dumps(body).encode())

    async with http_server(answer, "application/json") as url:
        model = OpenAIChatModel("m", base_url=url, max_argument_chars=2000)
        with pytest.raises(ResponseTooLargeError, match=r"tool call 'add' are longer than max_argument_chars=2000"):
            await model.complete(REQUEST)
        await model.aclose()


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def test_hung_sync_tools_starve_nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_tools, "SYNC_TOOL_THREADS", 6)
    release = threading.Event()
    ran: list[str] = []

    @tool(timeout=0.2)
    def hang() -> str:
        """Hangs until released (10 s at most)."""
        release.wait(10)
        return "late"

    @tool
    def healthy() -> str:
        """Answers at once."""
        ran.append("healthy")
        return "ok"

    hung = ChatResponse.tool_calls(*(ToolCall("hang", {}, f"h{i}") for i in range(6)))
    try:
        first = Kernel(ScriptedModel([hung, "done"]), tools=[hang])
        result = await first.run("hang six")
        assert [m.text for m in result.messages if m.role == "tool"] == ["Tool 'hang' timed out after 0.2 s."] * 6
        # the six threads still hang: a new sync call fails fast as transient ...
        script = [ChatResponse.tool_calls(ToolCall("healthy", {}, "c1")), "done"]
        start = time.monotonic()
        result = await Kernel(ScriptedModel(script), tools=[healthy]).run("go")
        assert time.monotonic() - start < 3.0
        assert [m.text for m in result.messages if m.role == "tool"] == [
            "Tool 'healthy' was not run: all 6 threads for sync tools are busy "
            "(tools that hang past their timeout keep theirs); try again later."
        ]
        assert ran == []
        # ... and nothing else starves: the default executor and a model call's DNS
        # lookup are free, so a refused port fails fast as a connection error
        assert await asyncio.get_running_loop().run_in_executor(None, lambda: 42) == 42
        model = OpenAIChatModel("m", base_url=f"http://localhost:{_refused_port()}/v1", max_retries=0, timeout=8)
        start = time.monotonic()
        with pytest.raises(ProviderConnectionError):  # not a ProviderTimeoutError after 8 s
            await model.complete(REQUEST)
        assert time.monotonic() - start < 4.0
        await model.aclose()
    finally:
        release.set()
    for _ in range(100):  # the released threads give their places back
        if _tools._SyncCalls.busy == 0:
            break
        await asyncio.sleep(0.02)
    assert _tools._SyncCalls.busy == 0
    await Kernel(ScriptedModel(script), tools=[healthy]).run("again")
    assert ran == ["healthy"]
