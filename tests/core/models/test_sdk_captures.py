"""The native decoders on published recordings of the real APIs.

Each capture here is copied from a recording of the live service that its vendor publishes
(``provider_captures/README.md`` names the repository, commit and path of every one), so
these tests prove the wire shape against the service itself, not against a test peer.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from core.models._mock import REQUEST, Server, captured, response
from core.models._mock import replay as capture
from core.models._provider_captures import PROVIDER_CAPTURES, converse_stream, load

from beamfilter_core import (
    AnthropicChatModel,
    BedrockChatModel,
    ChatRequest,
    ChatResponse,
    GeminiChatModel,
    Message,
    OpenAIChatModel,
    ToolCall,
    Usage,
)
from beamfilter_core._models import _anthropic_wire, _gemini_wire
from beamfilter_core.errors import BadRequestError, ContentBlockedError, ProviderResponseError

pytestmark = pytest.mark.anyio

SPLITS = [None, 1, 7, 64]


def anthropic(server: Server) -> AnthropicChatModel:
    transport = httpx.MockTransport(server.handle)
    return AnthropicChatModel("claude-test", api_key="sk-ant-test", base_url="http://mock.test", transport=transport)


def responses(server: Server) -> OpenAIChatModel:
    transport = httpx.MockTransport(server.handle)
    return OpenAIChatModel(
        "gpt-test", api="responses", api_key="sk-test", base_url="http://mock.test/v1", transport=transport
    )


def gemini(server: Server) -> GeminiChatModel:
    transport = httpx.MockTransport(server.handle)
    return GeminiChatModel("gemini-test", api_key="gm-test", base_url="http://mock.test", transport=transport)


def bedrock(server: Server) -> BedrockChatModel:
    transport = httpx.MockTransport(server.handle)
    return BedrockChatModel("anthropic.claude-3-5-sonnet-20240620-v1:0", region="us-east-1", transport=transport)


def eventstream(name: str, chunk: int | None = None) -> httpx.Response:
    """A recorded ConverseStream body (hex of the binary AWS event stream, CRCs and all)."""
    body = bytes.fromhex((PROVIDER_CAPTURES / name).read_text())
    return response(200, body, headers={"content-type": "application/vnd.amazon.eventstream"}, chunk=chunk)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")


# -- Anthropic: recordings of the live API in the anthropic SDK's tests -------------------


async def test_anthropic_recorded_tool_use_then_text() -> None:
    server = Server([capture("anthropic_sdk_tool_use.http"), capture("anthropic_sdk_text.http")])
    async with anthropic(server) as m:
        first = await m.complete(REQUEST)
        second = await m.complete(REQUEST)
    call = ToolCall("get_weather", {"location": "San Francisco, CA", "units": "f"}, "toolu_01A9HHF5Ezy3oBrKmSgfASm9")
    assert first == ChatResponse(Message("assistant", None, (call,)), "tool_calls", Usage(656, 74, 730, 0, 0))
    assert second.text.startswith("I apologize, but I'm getting an error when trying to fetch the weather")
    assert (second.finish_reason, second.usage) == ("stop", Usage(760, 63, 823, 0, 0))


@pytest.mark.parametrize("chunk", SPLITS)
async def test_anthropic_recorded_text_stream(chunk: int | None) -> None:
    tokens: list[str] = []
    async with anthropic(Server([capture("anthropic_sdk_text_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Hello", " there", "!"]
    assert result == ChatResponse(Message("assistant", "Hello there!"), "stop", Usage(11, 6, 17, 0, 0))


@pytest.mark.parametrize("chunk", SPLITS)
async def test_anthropic_recorded_tool_use_stream(chunk: int | None) -> None:
    """The live stream names the block's ``caller`` and splits the arguments mid-word."""
    tokens: list[str] = []
    async with anthropic(Server([capture("anthropic_sdk_tool_use_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["I", "'ll check the current weather in Paris for you."]
    call = ToolCall("get_weather", {"location": "Paris"}, "toolu_01NRLabsLyVHZPKxbKvkfSMn")
    text = "I'll check the current weather in Paris for you."
    assert result == ChatResponse(Message("assistant", text, (call,)), "tool_calls", Usage(377, 65, 442, 0, 0))


async def test_anthropic_docs_thinking_with_tool_use_goes_back_verbatim() -> None:
    """The extended-thinking guide's tool-use answer (content only: the guide leaves out the
    rest, so no finish reason or usage is reported): the next request carries its blocks,
    the signature untouched, then the tool result."""
    name = "anthropic_thinking_tool_use_docs.http"
    async with anthropic(Server([capture(name)])) as m:
        result = await m.complete(REQUEST)
    call = ToolCall("get_weather", {"location": "Paris"}, "toolu_01CswdEQBMshySk6Y9DFKrfq")
    assert (result.message.tool_calls, result.finish_reason, result.usage) == ((call,), None, None)
    _, _, body = load(name)
    content = json.loads(body)["content"]
    again = ChatRequest((Message.user("What's the weather in Paris?"), result.message, Message.tool(call.id, "88°F")))
    sent = _anthropic_wire.request_body(again, "m", {}, max_tokens=1, stream=False)["messages"]
    assert sent[1] == {"role": "assistant", "content": content}
    assert sent[2] == {
        "role": "user",
        "content": [{"type": "tool_result", "tool_use_id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "content": "88°F"}],
    }


# -- OpenAI Responses: the live recording in openai-python, the OpenAPI spec's examples ---


async def test_responses_recorded_text_answer() -> None:
    server = Server([capture("openai_responses_text.http")])
    async with responses(server) as m:
        result = await m.complete(REQUEST)
    _, _, body = load("openai_responses_text.http")
    (item,) = json.loads(body)["output"]
    assert result.text == item["content"][0]["text"]
    assert result.text.startswith("I can't provide real-time updates, but you can easily check")
    assert (result.finish_reason, result.usage) == ("stop", Usage(14, 50, 64, 0, 0))


@pytest.mark.parametrize("chunk", SPLITS)
async def test_responses_spec_stream_without_sequence_numbers(chunk: int | None) -> None:
    """The spec's streaming example, verbatim: no ``sequence_number`` on any event and a bare
    ``...`` line where it leaves deltas out (an SSE line without a colon, ignored). The text
    is what the deltas said; the done events do not overwrite it."""
    tokens: list[str] = []
    async with responses(Server([capture("openai_responses_spec_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Hi"]
    assert result == ChatResponse(Message("assistant", "Hi"), "stop", Usage(37, 11, 48, 0, 0))


def _events(name: str) -> list[dict[str, Any]]:
    _, _, body = load(name)
    return [json.loads(block.split("data: ", 1)[1]) for block in body.decode().split("\n\n") if "data: " in block]


@pytest.mark.parametrize("chunk", SPLITS)
async def test_responses_recorded_reasoning_item_and_call_stream(chunk: int | None) -> None:
    """A live gpt-5 stream: deltas carry ``obfuscation``; the reasoning item's
    ``encrypted_content`` differs in ``output_item.added``, ``output_item.done`` and
    ``response.completed``, and the one carried is the ``output_item.done`` one, as the
    reference says (the one in ``added`` may be incomplete)."""
    name = "openai_responses_recorded_reasoning_tool_stream.http"
    tokens: list[str] = []
    async with responses(Server([capture(name, chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    call = ToolCall("get_weather", {"location": "New York City, USA"}, "call_5dp5Uj0Loqn1YcyIpqSq6sLX")
    assert (tokens, result.message.content, result.message.tool_calls) == ([], None, (call,))
    assert (result.finish_reason, result.usage) == ("tool_calls", Usage(75, 155, 230, 0, 0))
    events = _events(name)
    added, done = (
        e["item"] for e in events if e["type"].startswith("response.output_item.") and e["output_index"] == 0
    )
    final = events[-1]["response"]["output"][0]
    assert len({added["encrypted_content"], done["encrypted_content"], final["encrypted_content"]}) == 3
    reasoning, pairing = result.message.reasoning
    assert (reasoning.provider, reasoning.text, reasoning.data) == ("openai.responses", "", done)
    call_item = next(e["item"] for e in events if e["type"] == "response.output_item.done" and e["output_index"] == 1)
    assert pairing.data == {"type": "function_call", "id": call_item["id"], "call_id": call.id}


@pytest.mark.parametrize("chunk", SPLITS)
async def test_responses_recorded_text_stream(chunk: int | None) -> None:
    tokens: list[str] = []
    async with responses(Server([capture("openai_responses_recorded_text_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Current", " weather", " in", " New", " York", " City", ",", " USA", ":", " Sunny", "."]
    text = "Current weather in New York City, USA: Sunny."
    assert result == ChatResponse(Message("assistant", text), "stop", Usage(114, 15, 129, 0, 0))


# -- Gemini: the Firebase AI SDKs' shared recordings of the Developer API -----------------


@pytest.mark.parametrize("chunk", SPLITS)
async def test_gemini_recorded_text_stream_with_crlf_events(chunk: int | None) -> None:
    """Every chunk repeats usageMetadata; the last one counts."""
    tokens: list[str] = []
    async with gemini(Server([capture("gemini_google_text_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["The", " capital of Wyoming", " is **Cheyenne**.\n"]
    assert result == ChatResponse(
        Message("assistant", "The capital of Wyoming is **Cheyenne**.\n"), "stop", Usage(7, 10, 17, 0, 0)
    )


async def test_gemini_recorded_safety_finish_is_a_typed_error() -> None:
    async with gemini(Server([capture("gemini_google_finish_safety.http")])) as m:
        with pytest.raises(ContentBlockedError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.reason, error.text) == ("SAFETY", "Safety error incoming in 5, 4, 3, 2...")
    assert str(error) == (
        "Gemini withheld the answer (finishReason 'SAFETY') after 38 characters of text; rephrase the request."
    )


@pytest.mark.parametrize("chunk", SPLITS)
async def test_gemini_recorded_prompt_block_in_a_stream(chunk: int | None) -> None:
    tokens: list[str] = []
    async with gemini(Server([capture("gemini_google_prompt_blocked_stream.http", chunk)])) as m:
        with pytest.raises(ContentBlockedError) as caught:
            await m.stream(REQUEST, tokens.append)
    assert (caught.value.reason, caught.value.text, tokens) == ("SAFETY", "", [])
    assert caught.value.details["safetyRatings"][1] == {"category": "HARM_CATEGORY_HATE_SPEECH", "probability": "HIGH"}


async def test_gemini_recorded_feedback_without_a_reason_or_candidate() -> None:
    async with gemini(Server([capture("gemini_google_only_prompt_feedback.http")])) as m:
        with pytest.raises(ProviderResponseError, match="no candidate with a finishReason"):
            await m.complete(REQUEST)


@pytest.mark.parametrize("chunk", SPLITS)
async def test_gemini_recorded_thought_summaries_and_a_signed_call(chunk: int | None) -> None:
    """Thought parts are reasoning, not answer text; the call's ``thoughtSignature`` goes back
    on the same ``functionCall`` part of the next request. The service sent no call ``id``, so
    the call carries the one beamfilter made (the schema's optional ``FunctionCall.id``)."""
    tokens: list[str] = []
    async with gemini(Server([capture("gemini_google_thinking_function_call_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == []
    assert (result.finish_reason, result.usage) == ("tool_calls", Usage(38, 174, 212, 0, 0))
    (call,) = result.message.tool_calls
    assert (call.name, call.arguments) == ("now", {})
    thoughts = [r.text.split("\n")[0] for r in result.message.reasoning if r.text]
    assert thoughts == ["**Calculating the Days**", "**Determining the Approach**"]
    _, _, body = load("gemini_google_thinking_function_call_stream.http")
    last = json.loads(body.decode().strip().split("\r\n\r\n")[-1].removeprefix("data: "))
    signature = last["candidates"][0]["content"]["parts"][0]["thoughtSignature"]
    again = ChatRequest((Message.user("hi"), result.message, Message.tool(call.id, "2026-12-07")))
    model_turn = _gemini_wire.request_body(again, {})["contents"][1]
    assert model_turn == {
        "role": "model",
        "parts": [{"functionCall": {"id": call.id, "name": "now", "args": {}}, "thoughtSignature": signature}],
    }


# -- Bedrock: live recordings (binary event streams) in openinference's tests -------------


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("chunk", SPLITS)
async def test_bedrock_recorded_text_stream(chunk: int | None) -> None:
    """The service's own frames: no ``contentBlockStart`` for text, the ``p`` padding on
    every event, ``metadata`` after ``messageStop``."""
    server = Server([eventstream("bedrock_recorded_converse_stream_text.eventstream.hex", chunk)])
    tokens: list[str] = []
    async with bedrock(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert len(tokens) == 12
    assert result.text == "".join(tokens)
    assert result.text.startswith("Hello! As an AI language model, I don't have feelings,")
    assert (result.finish_reason, result.usage) == ("stop", Usage(13, 35, 48, 0, 0))


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("chunk", SPLITS)
async def test_bedrock_recorded_tool_use_stream(chunk: int | None) -> None:
    server = Server([eventstream("bedrock_recorded_converse_stream_tool_use.eventstream.hex", chunk)])
    async with bedrock(server) as m:
        result = await m.stream(REQUEST, lambda _: None)
    assert result.text.startswith("I can certainly help you with the weather in San Francisco,")
    call = ToolCall(
        "get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"}, "tooluse_wnjikhCUTruJciycmmm5Kg"
    )
    assert result.message.tool_calls == (call,)
    assert (result.finish_reason, result.usage) == ("tool_calls", Usage(414, 114, 528, 0, 0))


@pytest.mark.parametrize("kind", ["text", "tool_use"])
def test_bedrock_event_captures_frame_to_the_recorded_bytes(kind: str) -> None:
    """The ``.events.json`` captures are the recorded streams decoded: framed again by the
    captures' encoder (prelude, CRCs, string headers in the service's order), they are the
    recorded bytes exactly."""
    recorded = bytes.fromhex(
        (PROVIDER_CAPTURES / f"bedrock_recorded_converse_stream_{kind}.eventstream.hex").read_text()
    )
    assert converse_stream(f"bedrock_converse_stream_{kind}.events.json") == recorded


@pytest.mark.usefixtures("aws")
async def test_bedrock_recorded_tool_use_answer_and_a_validation_error() -> None:
    server = Server([captured("bedrock_recorded_converse_tool_use.http")])
    async with bedrock(server) as m:
        result = await m.complete(REQUEST)
        server.answers = [lambda _: captured("bedrock_recorded_stream_invalid_model_400.http")]
        with pytest.raises(BadRequestError) as caught:
            await m.stream(REQUEST, lambda _: None)
    call = ToolCall("calculate", {"expression": "15 * 23"}, "tooluse_RVjyNbnRRAqT_YlXqlJDUQ")
    text = 'To calculate 15 * 23, I can use the "calculate" function. Let me do that for you.'
    assert result == ChatResponse(Message("assistant", text, (call,)), "tool_calls", Usage(369, 81, 450, 0, 0))
    error = caught.value
    assert (error.status_code, error.error_type) == (400, "ValidationException")
    assert str(error) == "HTTP 400: The provided model identifier is invalid."


def test_every_published_capture_is_named_in_the_readme() -> None:
    from core.models._provider_captures import PROVIDER_CAPTURES

    readme = (PROVIDER_CAPTURES / "README.md").read_text()
    names = sorted(p.name for p in PROVIDER_CAPTURES.iterdir() if p.name != "README.md")
    assert [n for n in names if f"`{n}`" not in readme] == []
