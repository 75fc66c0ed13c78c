"""OpenAI Responses, Azure OpenAI and Bedrock Converse against aimock, a third-party mock server.

aimock serves ``/v1/responses``, ``/openai/deployments/{d}/chat/completions`` and
``/model/{id}/converse(-stream)`` from one fixture file (``aimock_provider_fixtures.json``),
translating each native request into its chat form to match a fixture (the journal keeps
that translated form: a ``function_call_output`` or ``toolResult`` we sent shows up there as
a ``tool`` message). It runs twice: with an API key (the session's ``aimock``) and, for
SigV4-signed Bedrock requests, which its key check does not know, without one.

Where aimock differs from the real services (each pinned by a test below; the captures in
``tests/core/models/provider_captures`` hold the real shapes):

- usage is all zeros unless a fixture sets it (the real APIs always count);
- Responses events carry no ``sequence_number``; Bedrock events carry no ``p`` padding
  field and aimock sends a ``contentBlockStart`` for text blocks too (Bedrock sends it only
  for ``toolUse``);
- a Bedrock error body is ``{"type": "error", "error": {...}}`` (Anthropic's shape)
  instead of ``{"message": ...}`` with an ``x-amzn-ErrorType`` header;
- aimock ignores the reasoning items and ``reasoningContent`` blocks sent back.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from _support import record_retry_waits
from peers._aimock_common import get_time, get_weather
from peers._peer import AIMOCK_KEY, HERE, Peer, aimock_running

from beamfilter_builtins import redact_filter
from beamfilter_core import (
    AzureOpenAIChatModel,
    BedrockChatModel,
    ChatRequest,
    Kernel,
    Message,
    OpenAIChatModel,
    Usage,
)
from beamfilter_core._models._bedrock_wire import EventStreamDecoder
from beamfilter_core.errors import AuthenticationError, BadRequestError, RateLimitError
from beamfilter_core.testing import collect_stream, run_turn

pytestmark = [pytest.mark.peers, pytest.mark.packages, pytest.mark.anyio]

FIXTURES = HERE / "aimock_provider_fixtures.json"
SEA = "The sea is wide. The sea is deep. The sea is old."
SECRET = "sk-proj-Xb7Qz9LmN2pR4tV6wY8aC1eG3iK5oU0s"
MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"


@pytest.fixture(scope="session")
def open_aimock() -> Iterator[Peer]:
    """aimock without API keys, on the provider fixtures."""
    with aimock_running("aimock-open", FIXTURES, key=None) as peer:
        yield peer


@pytest.fixture
def peer(open_aimock: Peer) -> Peer:
    open_aimock.post("/__aimock/reset/journal")
    return open_aimock


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return record_retry_waits(monkeypatch)


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)


def responses(peer: Peer, **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", AIMOCK_KEY)
    return OpenAIChatModel("gpt-4o-mini", base_url=peer.base_url, api="responses", **options)


def azure(peer: Peer, **options: Any) -> AzureOpenAIChatModel:
    options.setdefault("api_key", AIMOCK_KEY)
    return AzureOpenAIChatModel("gpt-4o-prod", base_url=peer.url, **options)


def bedrock(peer: Peer, **options: Any) -> BedrockChatModel:
    return BedrockChatModel(MODEL_ID, region="us-east-1", base_url=peer.url, **options)


MODELS = {"responses": responses, "azure": azure, "bedrock": bedrock}


def journal(peer: Peer) -> list[dict[str, Any]]:
    return [e for e in peer.get("/__aimock/journal") if not e["path"].startswith("/__aimock")]


def ask(text: str, *, tools: bool = False, system: bool = False) -> ChatRequest:
    messages = (Message.system("Be brief."), Message.user(text)) if system else (Message.user(text),)
    return ChatRequest(messages, tools=(get_weather, get_time) if tools else ())


PATHS = {
    "responses": "/v1/responses",
    "azure": "/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21",
    "bedrock": "/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse",
}


@pytest.mark.parametrize("provider", list(MODELS))
async def test_plain_answer_with_the_system_prompt(peer: Peer, provider: str) -> None:
    async with MODELS[provider](peer) as m:
        result = await m.complete(ask("sea", system=True))
    assert (result.text, result.finish_reason) == (SEA, "stop")
    # aimock's chat endpoint estimates counts; its Responses and Converse ones count nothing
    # unless a fixture sets usage (the real APIs always count)
    assert result.usage == {"azure": Usage(3, 13, 16)}.get(provider, Usage(0, 0, 0))
    (entry,) = journal(peer)
    assert entry["path"] == PATHS[provider]
    # aimock read the system prompt from the native field (instructions, system[], messages)
    assert entry["body"]["messages"][0] == {"role": "system", "content": "Be brief."}


@pytest.mark.parametrize("provider", list(MODELS))
async def test_stream_deltas_join_to_the_answer(peer: Peer, provider: str) -> None:
    tokens: list[str] = []
    async with MODELS[provider](peer) as m:
        result = await m.stream(ask("sea"), tokens.append)
    assert "".join(tokens) == result.text == SEA
    assert tokens[0] == "The sea is wide. The"  # aimock cuts every 20 characters
    assert result.finish_reason == "stop"
    (entry,) = journal(peer)
    suffix = {"responses": "", "azure": "", "bedrock": "-stream"}[provider]
    assert entry["path"] == PATHS[provider] + suffix


@pytest.mark.parametrize("provider", list(MODELS))
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_tool_round_in_native_shapes(peer: Peer, provider: str, streaming: bool) -> None:
    async with MODELS[provider](peer) as m:
        kernel = Kernel(m, tools=[get_weather, get_time])
        result, text = await run_turn(kernel, "what is the weather in Paris?", streaming)
    assert text == (result.text if streaming else None)
    assert result.text == "It is 18 C and cloudy in Paris."
    (call,) = result.messages[1].tool_calls
    assert (call.name, dict(call.arguments)) == ("get_weather", {"city": "Paris", "unit": "c"})
    first, second = journal(peer)
    assert [t["function"]["name"] for t in first["body"]["tools"]] == ["get_weather", "get_time"]
    # the call went back as function_call / tool_calls / toolUse, the result as its answer
    (sent_call,) = second["body"]["messages"][1]["tool_calls"]
    assert (sent_call["id"], sent_call["function"]["name"]) == (call.id, "get_weather")
    assert second["body"]["messages"][2] == {
        "role": "tool",
        "content": '{"temp": 18, "sky": "cloudy"}',
        "tool_call_id": call.id,
    }


@pytest.mark.parametrize("provider", list(MODELS))
async def test_parallel_tool_calls(peer: Peer, provider: str) -> None:
    async with MODELS[provider](peer) as m:
        probe = await m.stream(ask("two tools", tools=True), lambda _: None)
        result = await Kernel(m, tools=[get_weather, get_time]).run("two tools")
    assert probe.finish_reason == "tool_calls"
    assert [(c.name, dict(c.arguments)) for c in probe.message.tool_calls] == [
        ("get_weather", {"city": "Paris", "unit": "c"}),
        ("get_time", {"city": "Tokyo"}),
    ]
    assert result.text == "Paris is cloudy; it is 09:00 in Tokyo."
    assert result.tool_calls_made == 2


@pytest.mark.parametrize("provider", list(MODELS))
async def test_429_is_retried_after_retry_after_then_raised(peer: Peer, provider: str, waits: list[float]) -> None:
    async with MODELS[provider](peer) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(ask("trigger 429"))
    assert caught.value.message == "Rate limit reached for requests"
    assert (caught.value.retry_after, waits) == (1.0, [1.0, 1.0])
    assert len(journal(peer)) == 3


@pytest.mark.parametrize("provider", list(MODELS))
async def test_a_bad_request_is_not_retried(peer: Peer, provider: str, waits: list[float]) -> None:
    async with MODELS[provider](peer) as m:
        with pytest.raises(BadRequestError) as caught:
            await m.stream(ask("trigger 400"), lambda _: None)
    assert caught.value.message == "Invalid request: the conversation is malformed."
    assert (len(journal(peer)), waits) == (1, [])


@pytest.mark.parametrize("provider", ["responses", "bedrock"])
async def test_usage_when_the_fixture_counts(peer: Peer, provider: str) -> None:
    async with MODELS[provider](peer) as m:
        plain = await m.complete(ask("count tokens"))
        streamed = await m.stream(ask("count tokens"), lambda _: None)
    assert plain.usage == streamed.usage == Usage(12, 3, 15)


@pytest.mark.parametrize("provider", list(MODELS))
async def test_a_streamed_secret_is_redacted(peer: Peer, provider: str) -> None:
    async with MODELS[provider](peer) as m:
        kernel = Kernel(m, filters=[redact_filter()])
        text, events = await collect_stream(kernel.run_stream("leak the key"))
    result = events[-1].result  # type: ignore[union-attr]
    assert text == result.text == "Use the key [REDACTED] for the staging bucket, then rotate it."
    assert SECRET not in str(result.messages)


async def test_bedrock_requests_are_sigv4_signed(peer: Peer) -> None:
    sent: list[httpx.Request] = []

    async def record(request: httpx.Request) -> None:
        sent.append(request)

    async with httpx.AsyncClient(event_hooks={"request": [record]}) as client, bedrock(peer, client=client) as m:
        assert (await m.stream(ask("sea"), lambda _: None)).text == SEA
    assert journal(peer)[0]["headers"]["authorization"] == "[REDACTED]"  # aimock hides it; the hook shows it
    authorization = sent[0].headers["authorization"]
    assert authorization.startswith("AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/")
    assert (
        "/us-east-1/bedrock/aws4_request, SignedHeaders=accept;content-type;host;x-amz-date, Signature="
        in authorization
    )


async def test_the_keyed_aimock_takes_each_providers_key_header(aimock: Peer) -> None:
    aimock.post("/__aimock/reset/journal")
    async with responses(aimock) as m:
        assert (await m.complete(ask("sea"))).text.startswith("The sea is wide.")
    async with azure(aimock) as m:
        assert (await m.complete(ask("sea"))).text.startswith("The sea is wide.")
    async with bedrock(aimock, api_key=AIMOCK_KEY) as m:  # a Bedrock API key: Authorization: Bearer
        assert (await m.complete(ask("sea"))).text.startswith("The sea is wide.")
    # the key check passed for all three (aimock journals the key headers as [REDACTED])
    headers = [e["headers"] for e in journal(aimock)]
    assert [sorted(k for k, v in h.items() if v == "[REDACTED]") for h in headers] == [
        ["authorization"],
        ["api-key"],
        ["authorization"],
    ]
    for make in (responses, azure):
        async with make(aimock, api_key="wrong-key") as m:
            with pytest.raises(AuthenticationError) as caught:
                await m.complete(ask("sea"))
        assert caught.value.message == "Invalid API key"
        assert "wrong-key" not in repr(m) + str(caught.value)


async def test_where_aimock_differs_from_the_real_services(peer: Peer) -> None:
    # the raw wire, read without beamfilter: what the decoders must not rely on
    async with httpx.AsyncClient(base_url=peer.url) as client:
        sse = await client.post("/v1/responses", json={"model": "gpt-4o-mini", "input": "sea", "stream": True})
        frames = await client.post(
            "/model/m/converse-stream", json={"messages": [{"role": "user", "content": [{"text": "sea"}]}]}
        )
        error = await client.post(
            "/model/m/converse", json={"messages": [{"role": "user", "content": [{"text": "trigger 400"}]}]}
        )
    events = [json.loads(line[6:]) for line in sse.text.splitlines() if line.startswith("data: ")]
    assert [e["type"] for e in events][:2] == ["response.created", "response.in_progress"]
    assert not [e for e in events if "sequence_number" in e]  # the real API numbers every event
    decoder = EventStreamDecoder()
    decoded = [(h[":event-type"], json.loads(p)) for h, p in decoder.feed(frames.content)]
    assert decoded[1] == ("contentBlockStart", {"contentBlockIndex": 0, "start": {}})  # Bedrock: toolUse only
    assert not [p for _, p in decoded if "p" in p]  # Bedrock pads every event with "p"
    assert frames.headers["content-type"] == "application/vnd.amazon.eventstream"
    assert error.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "Invalid request: the conversation is malformed."},
    }  # Bedrock: {"message": ...} and the x-amzn-ErrorType header
    assert "x-amzn-errortype" not in error.headers
