"""OpenAIChatModel against aimock, a real OpenAI-compatible mock server written by others.

The answers come from ``aimock_fixtures.json``; every request aimock received is read
back from its journal (``/__aimock/journal``) to count attempts and check bodies.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from peers._aimock_common import CALLS, ask, cancel_streams, fresh, get_time, get_weather
from peers._peer import AIMOCK_KEY, Peer

from beamfilter_core import ChatRequest, Kernel, Message, OpenAIChatModel, ToolCall, Usage
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    InternalServerError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)
from beamfilter_core.testing import run_turn

pytestmark = [pytest.mark.peers, pytest.mark.anyio]


@pytest.fixture
def peer(aimock: Peer) -> Peer:
    return fresh(aimock)


def model(peer: Peer, **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", AIMOCK_KEY)
    return OpenAIChatModel("gpt-4o-mini", base_url=peer.base_url, **options)


def journal(peer: Peer) -> list[dict[str, Any]]:
    return [e for e in peer.get("/__aimock/journal") if e["path"] == "/v1/chat/completions"]


async def test_text_complete(peer: Peer) -> None:
    async with model(peer) as m:
        response = await m.complete(ask("sea"))
    assert response.text == "The sea is wide. The sea is deep. The sea is old."
    assert response.finish_reason == "stop"
    assert response.usage == Usage(1, 13, 14)
    (entry,) = journal(peer)
    assert entry["body"]["messages"] == [{"role": "user", "content": "sea"}]
    assert "stream" not in entry["body"]


async def test_text_stream_delivers_every_token(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer) as m:
        response = await m.stream(ask("sea"), tokens.append)
    assert "".join(tokens) == "The sea is wide. The sea is deep. The sea is old."
    assert tokens[0] == "The sea is wide. The"  # aimock cuts text every 20 characters
    assert len(tokens) == 3
    assert response.text == "".join(tokens)
    assert response.finish_reason == "stop"
    assert response.usage is not None
    assert response.usage.completion_tokens > 0
    (entry,) = journal(peer)
    assert entry["body"]["stream"] is True
    assert entry["body"]["stream_options"] == {"include_usage": True}


@pytest.mark.parametrize("streaming", [False, True])
async def test_one_tool_call(peer: Peer, streaming: bool) -> None:
    async with model(peer) as m:
        request = ask("what is the weather in Paris?", tools=True)
        response = await (m.stream(request, lambda _: None) if streaming else m.complete(request))
    assert response.finish_reason == "tool_calls"
    assert response.message.content is None
    (call,) = response.message.tool_calls
    assert call.name == "get_weather"
    assert call.arguments == {"city": "Paris", "unit": "c"}
    assert call.raw_arguments is None
    assert call.id.startswith("call_")
    (entry,) = journal(peer)
    sent = entry["body"]["tools"]
    assert [t["function"]["name"] for t in sent] == ["get_weather", "get_time"]
    assert sent[0]["function"]["parameters"]["required"] == ["city"]


@pytest.mark.parametrize("streaming", [False, True])
async def test_two_parallel_tool_calls(peer: Peer, streaming: bool) -> None:
    async with model(peer) as m:
        request = ask("two tools please", tools=True)
        response = await (m.stream(request, lambda _: None) if streaming else m.complete(request))
    calls = response.message.tool_calls
    assert [(c.name, dict(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert calls[0].id != calls[1].id


@pytest.mark.parametrize("streaming", [False, True])
async def test_full_tool_loop_through_kernel(peer: Peer, streaming: bool) -> None:
    async with model(peer) as m:
        kernel = Kernel(m, tools=[get_weather, get_time], system_prompt="You are terse.")
        result, text = await run_turn(kernel, "What is the weather in Paris?", streaming)
    assert text == ("It is 18 C and cloudy in Paris." if streaming else None)
    assert result.text == "It is 18 C and cloudy in Paris."
    assert result.iterations == 2
    assert result.tool_calls_made == 1
    assert CALLS == [{"city": "Paris", "unit": "c"}]
    first, second = journal(peer)
    assert first["body"]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]
    call = result.messages[1].tool_calls[0]
    assert second["body"]["messages"][2:] == [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call.id,
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": call.arguments_json},
                }
            ],
        },
        {"role": "tool", "content": '{"temp": 18, "sky": "cloudy"}', "tool_call_id": call.id},
    ]


async def test_malformed_tool_arguments_become_a_semantic_tool_error(peer: Peer) -> None:
    async with model(peer) as m:
        response = await m.stream(ask("bad arguments", tools=True), lambda _: None)
        (call,) = response.message.tool_calls
        assert call.raw_arguments == '{"city": "Par'
        assert call.arguments == {}
        result = await Kernel(m, tools=[get_weather]).run("bad arguments")
    assert result.text == "Sorry, my arguments were broken."
    assert CALLS == []
    tool_message = result.messages[2]
    assert tool_message.role == "tool"
    assert tool_message.content == (
        "Arguments for tool 'get_weather' are not a JSON object: '{\"city\": \"Par'. "
        "Call the tool again with a JSON object of arguments."
    )
    # The broken text goes back to the server verbatim, so the model sees what it sent.
    assert journal(peer)[-1]["body"]["messages"][1]["tool_calls"][0]["function"]["arguments"] == '{"city": "Par'


async def test_401_is_an_authentication_error_and_not_retried(peer: Peer) -> None:
    async with model(peer, api_key="wrong-key") as m:
        with pytest.raises(AuthenticationError) as caught:
            await m.complete(ask("sea"))
    error = caught.value
    assert error.status_code == 401
    assert error.message == "Invalid API key"
    assert error.code == "invalid_api_key"
    assert error.error_type == "authentication_error"
    assert str(error) == "HTTP 401: Invalid API key"


@pytest.mark.parametrize("streaming", [False, True])
async def test_400_is_a_bad_request_error_and_not_retried(peer: Peer, streaming: bool) -> None:
    async with model(peer) as m:
        request = ask("trigger 400")
        with pytest.raises(BadRequestError) as caught:
            await (m.stream(request, lambda _: None) if streaming else m.complete(request))
    error = caught.value
    assert (error.status_code, error.code, error.error_type) == (
        400,
        "string_above_max_length",
        "invalid_request_error",
    )
    assert error.message == "Invalid 'messages[0].content': string too long."
    assert len(journal(peer)) == 1


async def test_429_waits_for_retry_after_then_gives_up(peer: Peer) -> None:
    async with model(peer, max_retries=1) as m:
        started = time.monotonic()
        with pytest.raises(RateLimitError) as caught:
            await m.complete(ask("trigger 429"))
        elapsed = time.monotonic() - started
    assert caught.value.retry_after == 1.0
    assert caught.value.message == "Rate limit reached for requests"
    assert len(journal(peer)) == 2
    assert 1.0 <= elapsed < 3.0


async def test_429_insufficient_quota_is_not_retried(peer: Peer) -> None:
    async with model(peer, max_retries=2) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(ask("trigger quota"))
    assert caught.value.code == "insufficient_quota"
    assert "retrying will not help" in caught.value.message
    assert len(journal(peer)) == 1


async def test_500_is_retried_with_backoff_then_raised(peer: Peer) -> None:
    async with model(peer, max_retries=1) as m:
        started = time.monotonic()
        with pytest.raises(InternalServerError) as caught:
            await m.stream(ask("trigger 500"), lambda _: None)
        elapsed = time.monotonic() - started
    assert caught.value.message == "The server had an error while processing your request."
    assert len(journal(peer)) == 2
    assert elapsed >= 0.375  # first backoff: 0.5 s times a jitter factor in (0.75, 1]


async def test_truncated_stream_is_an_error_and_not_silently_retried(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer) as m:
        # aimock truncates by closing the chunked body early: an incomplete stream.
        with pytest.raises(IncompleteStreamError, match=r"dropped after 2 stream chunk\(s\)"):
            await m.stream(ask("trigger truncation"), tokens.append)
    assert tokens == ["This stream will be "]  # chunks: role, first text, then the cut
    assert len(journal(peer)) == 1  # text reached the consumer: no silent retry


async def test_disconnect_mid_stream_is_an_error(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer) as m:
        with pytest.raises(IncompleteStreamError, match="dropped after"):
            await m.stream(ask("trigger disconnect"), tokens.append)
    assert tokens
    assert "".join(tokens) != ""
    assert len(journal(peer)) == 1


async def test_malformed_body_is_a_response_error_after_retries(peer: Peer) -> None:
    async with model(peer, max_retries=1) as m:
        with pytest.raises(ProviderResponseError, match=r"answered a stream request with invalid JSON"):
            await m.stream(ask("trigger malformed"), lambda _: None)
    assert len(journal(peer)) == 2


async def test_stall_past_the_timeout(peer: Peer) -> None:
    async with model(peer, timeout=0.5, max_retries=0) as m:
        started = time.monotonic()
        with pytest.raises(ProviderTimeoutError, match=r"within timeout=0\.5 s"):
            await m.stream(ask("trigger stall"), lambda _: None)
        elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 2.5  # the server would have waited 3 s


async def test_100_cancelled_streams_leave_no_connection_behind(peer: Peer) -> None:
    client = httpx.AsyncClient()
    try:
        await cancel_streams(model(peer, client=client), client, 100)
    finally:
        await client.aclose()


async def test_a_finished_stream_leaves_its_connection_for_reuse(peer: Peer) -> None:
    async with httpx.AsyncClient() as client:
        m = model(peer, client=client)
        for _ in range(3):
            assert (await m.stream(ask("sea"), lambda _: None)).finish_reason == "stop"
        pool = client._transport._pool  # type: ignore[attr-defined]
        assert len(pool.connections) == 1  # read to the end after [DONE], then reused
    assert len(journal(peer)) == 3


async def test_cancel_token_cancels_a_streaming_run(peer: Peer) -> None:
    from beamfilter_core import CancelToken, TextDelta

    async with model(peer) as m:
        kernel = Kernel(m)
        token = CancelToken()
        seen: list[str] = []
        async for event in kernel.run_stream("slow story", cancel=token):
            if isinstance(event, TextDelta):
                seen.append(event.text)
                token.cancel()
            else:
                result = event.result  # type: ignore[union-attr]
        assert m._client is not None
        assert m._client._transport._pool.connections == []  # type: ignore[attr-defined]
    assert result.status == "cancelled"
    assert seen == ["Once"]


async def test_tool_call_ids_survive_a_round_trip(peer: Peer) -> None:
    call = ToolCall("get_weather", {"city": "Paris"}, "call_abc")
    request = ChatRequest(
        (
            Message.user("weather in Paris"),
            Message.assistant(None, (call,)),
            Message.tool("call_abc", "sunny", "get_weather"),
        ),
        tools=(get_weather,),
    )
    async with model(peer) as m:
        response = await m.complete(request)
    assert response.text == "It is 18 C and cloudy in Paris."
