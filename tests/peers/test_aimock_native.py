"""AnthropicChatModel and GeminiChatModel against aimock, which serves Anthropic's
``/v1/messages`` and Gemini's ``generateContent`` from the same fixtures as the OpenAI tests.

Where aimock differs from the real services (each checked here and listed in docs/models.md):

- its journal records the request converted to the OpenAI chat shape, not the native body, so
  the native shapes are proven on the recorded captures (tests/core/models/test_anthropic.py,
  test_gemini.py) and only the content is checked here;
- it reports 0 tokens unless a fixture sets ``usage``, and never cache tokens;
- Gemini: it ends a function-call answer with ``finishReason`` ``FUNCTION_CALL`` (the service
  says ``STOP``), separates events with ``\\n\\n`` (the service with ``\\r\\n\\r\\n``) and puts
  no ``id`` on function calls unless a fixture does;
- Anthropic: its thinking signature is a placeholder, and with ``x-aimock-strict`` it checks
  (as the service does) that a tool round sends the thinking block back first.
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import pytest
from peers._aimock_common import CALLS, ask, cancel_streams, fresh, get_time, get_weather
from peers._peer import AIMOCK_KEY, Peer

from beamfilter_core import (
    AnthropicChatModel,
    ChatRequest,
    GeminiChatModel,
    Kernel,
    Message,
    Reasoning,
    ToolCall,
    Usage,
)
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    ContentBlockedError,
    IncompleteStreamError,
    InternalServerError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)
from beamfilter_core.testing import collect_stream, run_turn

pytestmark = [pytest.mark.peers, pytest.mark.anyio]

PROVIDERS = ["anthropic", "gemini"]
SEA = "The sea is wide. The sea is deep. The sea is old."


@pytest.fixture
def peer(aimock: Peer) -> Peer:
    return fresh(aimock)


def model(peer: Peer, provider: str, **options: Any) -> Any:
    options.setdefault("api_key", AIMOCK_KEY)
    if provider == "anthropic":
        return AnthropicChatModel("claude-sonnet-4-5", base_url=peer.url, **options)
    return GeminiChatModel("gemini-2.5-flash", base_url=peer.url, **options)


def journal(peer: Peer) -> list[dict[str, Any]]:
    return [e for e in peer.get("/__aimock/journal") if e["path"] != "/__aimock/reset/journal"]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_plain_answer_and_its_path(peer: Peer, provider: str) -> None:
    async with model(peer, provider) as m:
        response = await m.complete(ask("sea"))
    assert response.text == SEA
    assert response.finish_reason == "stop"
    assert response.usage == Usage(0, 0, 0)  # aimock counts nothing unless a fixture says so
    (entry,) = journal(peer)
    path = "/v1/messages" if provider == "anthropic" else "/v1beta/models/gemini-2.5-flash:generateContent"
    assert entry["path"] == path
    assert entry["body"]["messages"] == [{"role": "user", "content": "sea"}]  # aimock's OpenAI-shaped record


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_usage_from_a_fixture(peer: Peer, provider: str) -> None:
    async with model(peer, provider) as m:
        plain = await m.complete(ask("count my tokens"))
        streamed = await m.stream(ask("count my tokens"), lambda _: None)
    assert plain.usage == streamed.usage == Usage(7, 2, 9)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_stream_deltas_join_to_the_answer(peer: Peer, provider: str) -> None:
    tokens: list[str] = []
    async with model(peer, provider) as m:
        response = await m.stream(ask("sea"), tokens.append)
    assert tokens == ["The sea is wide. The", " sea is deep. The se", "a is old."]  # aimock cuts every 20 characters
    assert response.text == "".join(tokens) == SEA
    assert response.finish_reason == "stop"
    (entry,) = journal(peer)
    if provider == "gemini":
        assert entry["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_parallel_tool_calls(peer: Peer, provider: str, streaming: bool) -> None:
    async with model(peer, provider) as m:
        request = ask("two tools please", tools=True)
        response = await (m.stream(request, lambda _: None) if streaming else m.complete(request))
    assert response.finish_reason == "tool_calls"  # Gemini via aimock: FUNCTION_CALL, mapped the same
    calls = response.message.tool_calls
    assert [(c.name, dict(c.arguments)) for c in calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert calls[0].id != calls[1].id
    assert response.message.content is None


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_tool_round_through_the_kernel(peer: Peer, provider: str, streaming: bool) -> None:
    async with model(peer, provider) as m:
        kernel = Kernel(m, tools=[get_weather, get_time], system_prompt="You are terse.")
        result, text = await run_turn(kernel, "What is the weather in Paris?", streaming)
    assert text == ("It is 18 C and cloudy in Paris." if streaming else None)
    assert result.text == "It is 18 C and cloudy in Paris."
    assert (result.iterations, result.tool_calls_made) == (2, 1)
    assert CALLS == [{"city": "Paris", "unit": "c"}]
    first, second = journal(peer)
    assert first["body"]["messages"] == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "What is the weather in Paris?"},
    ]
    call = result.messages[1].tool_calls[0]
    assert second["body"]["messages"][2]["tool_calls"][0]["function"]["name"] == "get_weather"
    tool_result = second["body"]["messages"][3]
    assert tool_result["role"] == "tool"
    if provider == "anthropic":
        assert tool_result == {"role": "tool", "content": '{"temp": 18, "sky": "cloudy"}', "tool_call_id": call.id}
    else:  # aimock turns functionResponse.response back into JSON text
        assert tool_result["content"] == '{"result":"{\\"temp\\": 18, \\"sky\\": \\"cloudy\\"}"}'


async def test_anthropic_thinking_goes_back_in_the_tool_round_and_strict_aimock_checks_it(peer: Peer) -> None:
    strict = httpx.AsyncClient(headers={"x-aimock-strict": "true"})
    try:
        m = model(peer, "anthropic", client=strict, options={"thinking": {"type": "enabled", "budget_tokens": 1024}})
        result = await Kernel(m, tools=[get_weather]).run("think about the weather in Paris")
        assert result.text == "It is 18 C and cloudy, as I thought."
        thought = "The user wants the weather in Paris; get_weather gives it."
        block = {"type": "thinking", "thinking": thought, "signature": "EqQBCgIYAhIM-aimock"}
        assert result.messages[1].reasoning == (Reasoning("anthropic", thought, block),)
        text, events = await collect_stream(
            Kernel(m, tools=[get_weather]).run_stream("think about the weather in Paris")
        )
        assert text == events[-1].result.text == "It is 18 C and cloudy, as I thought."  # type: ignore[union-attr]
        tokens: list[str] = []
        streamed = await m.stream(ask("think about the weather in Paris", tools=True), tokens.append)
        assert streamed.message.reasoning == (Reasoning("anthropic", thought, block),)
        assert tokens == []  # thinking is not answer text
        # the same round without the thinking block is what the service refuses; strict aimock too
        call = result.messages[1].tool_calls[0]
        dropped = ChatRequest(
            (
                Message.user("think about the weather in Paris"),
                Message.assistant(None, (call,)),
                Message.tool(call.id, "18 C"),
            ),
            tools=(get_weather,),
            options={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        )
        with pytest.raises(BadRequestError) as caught:
            await m.complete(dropped)
        assert caught.value.error_type == "invalid_request_error"
        assert "thinking" in caught.value.message
    finally:
        await strict.aclose()


async def test_gemini_thought_summaries_are_reasoning_not_text(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer, "gemini") as m:
        streamed = await m.stream(ask("think about the weather in Paris", tools=True), tokens.append)
    assert tokens == []
    assert (
        "".join(r.text for r in streamed.message.reasoning)
        == "The user wants the weather in Paris; get_weather gives it."
    )
    assert streamed.message.tool_calls[0].name == "get_weather"


@pytest.mark.parametrize("streaming", [False, True])
async def test_gemini_safety_is_a_content_blocked_error(peer: Peer, streaming: bool) -> None:
    async with model(peer, "gemini") as m:
        request = ask("trigger safety")
        with pytest.raises(ContentBlockedError) as caught:
            await (m.stream(request, lambda _: None) if streaming else m.complete(request))
    assert caught.value.reason == "SAFETY"
    assert str(caught.value) == "Gemini withheld the answer (finishReason 'SAFETY'); rephrase the request."
    assert len(journal(peer)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_wrong_key_is_an_authentication_error(peer: Peer, provider: str) -> None:
    async with model(peer, provider, api_key="wrong-key") as m:
        with pytest.raises(AuthenticationError) as caught:
            await m.complete(ask("sea"))
    assert (caught.value.status_code, caught.value.message) == (401, "Invalid API key")
    assert "wrong-key" not in str(caught.value)


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_400_is_not_retried(peer: Peer, provider: str) -> None:
    async with model(peer, provider) as m:
        with pytest.raises(BadRequestError) as caught:
            await m.stream(ask("trigger 400"), lambda _: None)
    assert caught.value.message == "Invalid 'messages[0].content': string too long."
    assert len(journal(peer)) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_429_waits_for_retry_after(peer: Peer, provider: str) -> None:
    async with model(peer, provider, max_retries=1) as m:
        started = time.monotonic()
        with pytest.raises(RateLimitError) as caught:
            await m.complete(ask("trigger 429"))
        elapsed = time.monotonic() - started
    assert caught.value.retry_after == 1.0
    assert len(journal(peer)) == 2
    assert 1.0 <= elapsed < 3.0


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("trigger", ["trigger 500", "trigger overload"])
async def test_5xx_and_529_overloaded_are_retried(peer: Peer, provider: str, trigger: str) -> None:
    async with model(peer, provider, max_retries=1) as m:
        with pytest.raises(InternalServerError) as caught:
            await m.stream(ask(trigger), lambda _: None)
    assert caught.value.status_code == (529 if trigger == "trigger overload" else 500)
    assert len(journal(peer)) == 2


async def test_a_truncated_stream_that_delivered_text_is_not_retried(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer, "gemini") as m:
        # aimock cuts after three chunks; the last is cut inside the body
        with pytest.raises(IncompleteStreamError, match=r"dropped after 2 stream chunk\(s\)"):
            await m.stream(ask("trigger truncation"), tokens.append)
    assert tokens == ["This stream will be ", "cut off after three "]
    assert len(journal(peer)) == 1


async def test_a_stream_truncated_before_any_text_is_retried(peer: Peer) -> None:
    tokens: list[str] = []
    async with model(peer, "anthropic", max_retries=1) as m:
        # aimock cuts after three events, before the first text delta is read whole
        with pytest.raises(IncompleteStreamError, match=r"dropped after"):
            await m.stream(ask("trigger truncation"), tokens.append)
    assert tokens == []
    assert len(journal(peer)) == 2  # nothing reached the consumer: retried once, cut again


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_malformed_body_is_a_response_error_after_retries(peer: Peer, provider: str) -> None:
    async with model(peer, provider, max_retries=1) as m:
        with pytest.raises(ProviderResponseError):
            await m.complete(ask("trigger malformed"))
    assert len(journal(peer)) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_a_stall_past_the_timeout(peer: Peer, provider: str) -> None:
    async with model(peer, provider, timeout=0.5, max_retries=0) as m:
        started = time.monotonic()
        with pytest.raises(ProviderTimeoutError, match=r"within timeout=0\.5 s"):
            await m.stream(ask("trigger stall"), lambda _: None)
    assert 0.5 <= time.monotonic() - started < 2.5


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_cancelled_streams_leave_no_connection_behind(peer: Peer, provider: str) -> None:
    client = httpx.AsyncClient()
    try:
        await cancel_streams(model(peer, provider, client=client), client, 20)
    finally:
        await client.aclose()


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_tool_call_ids_survive_a_round_trip(peer: Peer, provider: str) -> None:
    call = ToolCall("get_weather", {"city": "Paris"}, "toolu_abc")
    request = ChatRequest(
        (
            Message.user("weather in Paris"),
            Message.assistant(None, (call,)),
            Message.tool("toolu_abc", "sunny", "get_weather"),
        ),
        tools=(get_weather,),
    )
    async with model(peer, provider) as m:
        response = await m.complete(request)
    assert response.text == "It is 18 C and cloudy in Paris."
    (entry,) = journal(peer)
    assert entry["body"]["messages"][1]["tool_calls"][0]["id"] == "toolu_abc"
