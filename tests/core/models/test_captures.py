"""Every recorded wire capture, replayed through httpx.MockTransport.

The captures (``captures/``) were recorded from aimock, llama.cpp's server (xllamacpp)
and llama-cpp-python. Streams are replayed whole, cut every few bytes (inside lines and
UTF-8 characters) and with ``\\r\\n`` line endings: the result must not change.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _support import record_retry_waits
from core.models._mock import CAPTURES, REQUEST, Server, load_capture, response

from beamfilter_core import ChatResponse, Message, ToolCall, Usage
from beamfilter_core.errors import BadRequestError, RateLimitError

pytestmark = pytest.mark.anyio

SPLITS = [None, 1, 3, 7, 64]


def test_every_capture_is_covered() -> None:
    covered = {
        "aimock_429.http",
        "aimock_two_tool_calls_stream.http",
        "llama_cpp_python_forced_tool_stream.sse",
        "llamacpp_xllamacpp_400_context.http",
        "llamacpp_xllamacpp_smollm2_text_stream.http",
    }
    assert {p.name for p in Path(CAPTURES).iterdir()} == covered


async def replay(name: str, chunk: int | None, *, crlf: bool = False) -> tuple[ChatResponse, list[str], Server]:
    status, headers, body = load_capture(name)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    server = Server([lambda _: response(status, body, headers=headers, chunk=chunk)])
    tokens: list[str] = []
    async with server.model(max_retries=0) as model:
        result = await model.stream(REQUEST, tokens.append)
    return result, tokens, server


@pytest.mark.parametrize("chunk", SPLITS)
@pytest.mark.parametrize("crlf", [False, True])
async def test_aimock_two_parallel_tool_calls(chunk: int | None, crlf: bool) -> None:
    result, tokens, _ = await replay("aimock_two_tool_calls_stream.http", chunk, crlf=crlf)
    assert result == ChatResponse(
        Message(
            "assistant",
            None,
            (
                ToolCall("get_weather", {"city": "Paris", "unit": "c"}, "call_nN6NF0uTkQJDsbdO"),
                ToolCall("get_time", {"city": "Tokyo"}, "call_xxh_usWD9nkx_YRM"),
            ),
        ),
        "tool_calls",
        Usage(4, 16, 20),
    )
    assert tokens == []


@pytest.mark.parametrize("chunk", SPLITS)
async def test_llama_cpp_python_repeats_id_and_name_in_every_fragment(chunk: int | None) -> None:
    result, tokens, _ = await replay("llama_cpp_python_forced_tool_stream.sse", chunk)
    (call,) = result.message.tool_calls
    assert call.name == "get_weather"  # not get_weatherget_weather...
    assert call.id == "call__0_get_weather_cmpl-bf198ae1-16a3-4930-84c1-5dc06eea3068"
    assert call.arguments == {"city": "Paris", "unit": "c"}
    assert call.raw_arguments is None
    assert result.finish_reason == "tool_calls"
    assert result.usage is None  # this server sends no usage chunk
    assert result.message.content is None
    assert tokens == []


@pytest.mark.parametrize("chunk", SPLITS)
@pytest.mark.parametrize("crlf", [False, True])
async def test_llama_cpp_text_stream_with_usage_and_timings(chunk: int | None, crlf: bool) -> None:
    result, tokens, server = await replay("llamacpp_xllamacpp_smollm2_text_stream.http", chunk, crlf=crlf)
    assert tokens == ["Hello", "!", " I", "'m", " here", " to", " help", " with", " any", " kind", " of", " creative"]
    assert result == ChatResponse(
        Message("assistant", "Hello! I'm here to help with any kind of creative"), "length", Usage(33, 12, 45)
    )
    (body,) = server.bodies
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}


async def test_llama_cpp_context_overflow_is_a_bad_request_with_an_integer_code() -> None:
    status, headers, body = load_capture("llamacpp_xllamacpp_400_context.http")
    server = Server([response(status, body, headers=headers)])
    async with server.model() as model:
        with pytest.raises(BadRequestError) as caught:
            await model.stream(REQUEST, lambda _: None)
    error = caught.value
    assert error.status_code == 400
    assert error.code == "400"
    assert error.error_type == "exceed_context_size_error"
    assert error.message == (
        "request (6031 tokens) exceeds the available context size (4096 tokens), try increasing it"
    )
    assert error.body["error"]["n_ctx"] == 4096
    assert len(server.requests) == 1  # a 400 is never retried


async def test_aimock_429_retries_after_the_servers_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    waits = record_retry_waits(monkeypatch)
    status, headers, body = load_capture("aimock_429.http")
    server = Server([lambda _: response(status, body, headers=headers)])
    async with server.model(max_retries=2) as model:
        with pytest.raises(RateLimitError) as caught:
            await model.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.code, error.error_type) == (429, "rate_limit_exceeded", "requests")
    assert error.message == "Rate limit reached for requests"
    assert error.retry_after == 7.0
    assert waits == [7.0, 7.0]
    assert len(server.requests) == 3
