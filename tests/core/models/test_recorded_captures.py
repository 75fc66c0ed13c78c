"""The native decoders on recordings of the real APIs that stand in for hand-written captures.

Each capture here is a published recording of the live service or an official docs example
(``provider_captures/README.md`` names the repository, commit and path, or the page, of each):
a redacted thinking round and a mid-stream overload for Anthropic, a parallel call, a quota
429 and a SAFETY finish without content for Gemini, a reasoning-summary stream and an error
body for Responses, a reasoning stream, a throttling 429 and plain answers for Bedrock, and a
plain answer and a stream for Azure.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from core.models._mock import REQUEST, SPLITS, Server, response
from core.models._mock import captured as capture
from core.models._provider_captures import PROVIDER_CAPTURES, load

from beamfilter_core import (
    AnthropicChatModel,
    AzureOpenAIChatModel,
    BedrockChatModel,
    ChatRequest,
    ChatResponse,
    GeminiChatModel,
    Message,
    OpenAIChatModel,
    Reasoning,
    ToolCall,
    Usage,
)
from beamfilter_core._models import _anthropic_wire, _bedrock_wire, _gemini_wire, _responses_wire
from beamfilter_core._models._retry import error_from_response
from beamfilter_core.errors import (
    BadRequestError,
    ContentBlockedError,
    NotFoundError,
    ProviderResponseError,
    RateLimitError,
)

pytestmark = pytest.mark.anyio


def transport(server: Server) -> httpx.MockTransport:
    return httpx.MockTransport(server.handle)


def anthropic(server: Server, **options: Any) -> AnthropicChatModel:
    return AnthropicChatModel(
        "claude-test", api_key="sk-ant-test", base_url="http://mock.test", transport=transport(server), **options
    )


def gemini(server: Server, **options: Any) -> GeminiChatModel:
    return GeminiChatModel(
        "gemini-test", api_key="gm-test", base_url="http://mock.test", transport=transport(server), **options
    )


def responses(server: Server, **options: Any) -> OpenAIChatModel:
    return OpenAIChatModel(
        "gpt-test",
        api="responses",
        api_key="sk-test",
        base_url="http://mock.test/v1",
        transport=transport(server),
        **options,
    )


def bedrock(server: Server, **options: Any) -> BedrockChatModel:
    model = "anthropic.claude-sonnet-4-20250514-v1:0"
    return BedrockChatModel(model, region="us-east-1", transport=transport(server), **options)


def azure(server: Server, **options: Any) -> AzureOpenAIChatModel:
    base = "https://my-resource.openai.azure.com"
    return AzureOpenAIChatModel("gpt-4o-prod", api_key="az-test", base_url=base, transport=transport(server), **options)


def sse_data(name: str) -> Iterator[dict[str, Any]]:
    """The JSON ``data`` of each event of an SSE capture, read apart from any decoder."""
    _, _, body = load(name)
    for line in body.decode().splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            yield json.loads(line[len("data: ") :])


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    for name, value in {"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)


# -- Anthropic ------------------------------------------------------------------------------


async def test_anthropic_recorded_redacted_thinking_goes_back_verbatim() -> None:
    """A live answer to the docs' redacted-thinking trigger: the opaque block is kept, not
    shown, and the next request carries it back as it came (as the recording's next request did)."""
    name = "anthropic_recorded_redacted_thinking.http"
    content = json.loads(load(name)[2])["content"]
    async with anthropic(Server([capture(name)])) as m:
        result = await m.complete(REQUEST)
    assert [block["type"] for block in content] == ["redacted_thinking", "text"]
    assert result == ChatResponse(
        Message("assistant", content[1]["text"], reasoning=(Reasoning("anthropic", "", content[0]),)),
        "stop",
        Usage(92, 196, 288, 0, 0),
    )
    assert result.text.startswith("I notice that your message appears to contain a command or trigger phrase")
    again = ChatRequest((Message.user("hi"), result.message, Message.user("What was that?")))
    sent = _anthropic_wire.request_body(again, "m", {}, max_tokens=1, stream=False)["messages"]
    assert sent[1] == {"role": "assistant", "content": content}
    assert sent[2] == {"role": "user", "content": [{"type": "text", "text": "What was that?"}]}


async def test_anthropic_recorded_answer_with_cache_reads_and_writes() -> None:
    """A live plain answer that both read (1111) and wrote (418) the prompt cache: the prompt
    counts the cached input too (3 + 1111 + 418), as the ``usage`` of ``anthropic_text.http`` does."""
    name = "anthropic_recorded_text_cache.http"
    data = json.loads(load(name)[2])
    async with anthropic(Server([capture(name)])) as m:
        result = await m.complete(REQUEST)
    text = (
        "Python is a beginner-friendly, versatile programming language widely used for web development, "
        "data science, machine learning, automation, and scientific computing."
    )
    assert data["usage"]["cache_creation"] == {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 418}
    assert result == ChatResponse(Message("assistant", text), "stop", Usage(1532, 33, 1565, 1111, 418))


@pytest.mark.parametrize("chunk", SPLITS)
async def test_anthropic_recorded_redacted_thinking_stream(chunk: int | None) -> None:
    """Two redacted blocks open and close with no delta; the events carry the live padding."""
    name = "anthropic_recorded_redacted_thinking_stream.http"
    events = list(sse_data(name))
    blocks = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    deltas = [e["delta"]["text"] for e in events if e["type"] == "content_block_delta"]
    tokens: list[str] = []
    async with anthropic(Server([capture(name, chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert [b["type"] for b in blocks] == ["redacted_thinking", "redacted_thinking", "text"]
    assert tokens == deltas
    assert len(tokens) == 15
    assert result.text == "".join(deltas)
    assert result.text.endswith("How can I assist you today with a legitimate task or question?")
    assert result.message.reasoning == tuple(Reasoning("anthropic", "", block) for block in blocks[:2])
    assert (result.finish_reason, result.usage) == ("stop", Usage(92, 189, 281, 0, 0))


async def test_anthropic_docs_overload_event_mid_stream(waits: list[float]) -> None:
    """The streaming guide's error event: a 200 whose only event is ``overloaded_error``.
    Retried like a 529 while no text went out; a typed error once the retries are spent."""
    server = Server([capture("anthropic_stream_overloaded_docs.http"), capture("anthropic_sdk_text_stream.http")])
    async with anthropic(server) as m:
        result = await m.stream(REQUEST, lambda _: None)
    assert result.text == "Hello there!"
    assert len(server.requests) == 2
    assert len(waits) == 1
    server = Server([lambda _: capture("anthropic_stream_overloaded_docs.http")])
    async with anthropic(server, max_retries=0) as m:
        with pytest.raises(ProviderResponseError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value) == "The server reported an error mid-stream: overloaded_error: 'Overloaded'."
    assert len(server.requests) == 1


async def test_anthropic_docs_error_shape() -> None:
    """The errors page's example body (``not_found_error`` with a ``request_id``): typed, not retried."""
    server = Server([lambda _: capture("anthropic_404_docs.http")])
    async with anthropic(server) as m:
        with pytest.raises(NotFoundError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.error_type, error.message) == (
        404,
        "not_found_error",
        "The requested resource could not be found.",
    )
    assert str(error) == "HTTP 404: The requested resource could not be found."
    assert error.body["request_id"] == "req_011CSHoEeqs5C35K2UUqR7Fy"
    assert len(server.requests) == 1


# -- Gemini ---------------------------------------------------------------------------------


async def test_gemini_recorded_parallel_calls_go_back_with_the_one_signature() -> None:
    """A live gemini-3 answer with three calls: only the first part holds a thoughtSignature
    (and the candidate a ``finishMessage``). The next request binds the signature to that call
    only and answers all three in one user turn, as the recorded next request did."""
    name = "gemini_recorded_parallel_function_calls.http"
    candidate = json.loads(load(name)[2])["candidates"][0]
    signature = candidate["content"]["parts"][0]["thoughtSignature"]
    async with gemini(Server([capture(name)])) as m:
        result = await m.complete(REQUEST)
    calls = result.message.tool_calls
    assert candidate["finishMessage"] == "Model generated function call(s)."
    assert [(c.name, dict(c.arguments)) for c in calls] == [("generate_topic", {})] * 3
    assert len({c.id for c in calls}) == 3
    assert result.message.content is None
    assert result.message.reasoning == (Reasoning("gemini", "", {"thoughtSignature": signature, "call": calls[0].id}),)
    assert (result.finish_reason, result.usage) == ("tool_calls", Usage(83, 30 + 190, 303, 0, 0))
    topics = ["cars", "penguins", "cars"]
    again = ChatRequest(
        (Message.user("hi"), result.message, *(Message.tool(c.id, t) for c, t in zip(calls, topics, strict=True)))
    )
    contents = _gemini_wire.request_body(again, {})["contents"]
    parts = [{"functionCall": {"id": c.id, "name": "generate_topic", "args": {}}} for c in calls]
    parts[0]["thoughtSignature"] = signature
    assert contents[1] == {"role": "model", "parts": parts}
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"id": c.id, "name": "generate_topic", "response": {"result": t}}}
            for c, t in zip(calls, topics, strict=True)
        ],
    }


async def test_gemini_recorded_quota_429(waits: list[float]) -> None:
    """A recorded RESOURCE_EXHAUSTED without RetryInfo: retried on the backoff, then typed."""
    server = Server([lambda _: capture("gemini_vertex_quota_429.http")])
    async with gemini(server, max_retries=1) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.error_type, error.code, error.retry_after) == (
        429,
        "RESOURCE_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
        None,
    )
    assert error.message == (
        "Quota exceeded for quota metric 'Generate Content API requests per minute' and limit 'GenerateContent "
        "request limit per minute for a region' of service 'generativelanguage.googleapis.com' for consumer "
        "'project_number:348715329010'."
    )
    assert len(server.requests) == 2
    assert len(waits) == 1


@pytest.mark.parametrize("streaming", [False, True])
async def test_gemini_recorded_safety_finish_without_content(streaming: bool) -> None:
    """A SAFETY finish with no ``content`` at all and a ``blocked`` rating: a typed error, not
    an empty answer, in a whole response and as the one chunk of a stream."""
    status, headers, body = load("gemini_vertex_finish_safety_no_content.http")
    if streaming:
        body = b"data: " + json.dumps(json.loads(body)).encode() + b"\r\n\r\n"
        headers = {"content-type": "text/event-stream"}
    server = Server([lambda _: response(status, body, headers=headers)])
    async with gemini(server) as m:
        with pytest.raises(ContentBlockedError) as caught:
            await (m.stream(REQUEST, lambda _: None) if streaming else m.complete(REQUEST))
    error = caught.value
    assert str(error) == "Gemini withheld the answer (finishReason 'SAFETY'); rephrase the request."
    assert (error.reason, error.text) == ("SAFETY", "")
    assert [r["category"] for r in error.details if r.get("blocked")] == ["HARM_CATEGORY_HARASSMENT"]
    assert len(server.requests) == 1


# -- OpenAI Responses -----------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [None, 7, 4096])
async def test_responses_recorded_reasoning_summary_stream(chunk: int | None) -> None:
    """A live o3-mini stream: four summary parts in 383 ``reasoning_summary_text`` deltas, then
    271 text deltas. The summaries become the reasoning's text; the item goes back whole."""
    name = "openai_responses_recorded_reasoning_summary_stream.http"
    events = list(sse_data(name))
    kinds = [e["type"] for e in events]
    done = next(
        e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "reasoning"
    )
    text = next(e["text"] for e in events if e["type"] == "response.output_text.done")
    tokens: list[str] = []
    async with responses(Server([capture(name, chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert (kinds.count("response.reasoning_summary_text.delta"), len(tokens)) == (383, 271)
    assert result.text == "".join(tokens) == text
    assert text.startswith("I'm not a road safety professional")
    summaries = [part["text"] for part in done["summary"]]
    assert len(summaries) == 4
    message = next(
        e["item"] for e in events if e["type"] == "response.output_item.done" and e["item"]["type"] == "message"
    )
    assert result.message.reasoning == (
        Reasoning("openai.responses", "\n\n".join(summaries), done),
        Reasoning("openai.responses", "", {"type": "message", "id": message["id"]}),
    )
    assert (result.finish_reason, result.usage) == ("stop", Usage(13, 1680, 1693, 0, 0))
    again = ChatRequest((Message.user("hi"), result.message, Message.user("and?")))
    sent = _responses_wire.request_body(again, "gpt-test", {}, stream=False)["input"]
    assert sent[1:] == [
        done,
        {
            "type": "message",
            "role": "assistant",
            "id": message["id"],
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        },
        {"type": "message", "role": "user", "content": "and?"},
    ]


async def test_responses_recorded_reasoning_and_call_round() -> None:
    """A live gpt-5 round: a reasoning item with five summary parts and a function_call, then
    the answer. The next request matches the one recorded: the reasoning item whole, the
    function_call with its item ``id`` (which pairs it with the reasoning), the output."""
    recorded = json.loads((PROVIDER_CAPTURES / "openai_responses_recorded_reasoning_call_next_input.json").read_text())
    first = json.loads(load("openai_responses_recorded_reasoning_call.http")[2])["output"]
    server = Server(
        [
            capture("openai_responses_recorded_reasoning_call.http"),
            capture("openai_responses_recorded_reasoning_call_answer.http"),
        ]
    )
    async with responses(server) as m:
        result = await m.complete(REQUEST)
        (call,) = result.message.tool_calls
        answer = await m.complete(
            ChatRequest((Message.user("hi"), result.message, Message.tool(call.id, "plan updated")))
        )
    assert (call.name, call.id, sorted(call.arguments)) == ("update_plan", "call_gL7JE6GDeGGsFubqO2XGytyO", ["plan"])
    assert call.arguments["plan"].startswith("Plan:\n1) Determine required first-letter acrostics")
    summaries = [part["text"] for part in first[0]["summary"]]
    assert len(summaries) == 5
    assert result.message.reasoning == (
        Reasoning("openai.responses", "\n\n".join(summaries), first[0]),
        Reasoning("openai.responses", "", {"type": "function_call", "id": first[1]["id"], "call_id": call.id}),
    )
    assert (result.message.content, result.finish_reason, result.usage) == (None, "tool_calls", Usage(124, 1926, 2050))
    sent = server.bodies[1]["input"]
    assert [item.get("type", item.get("role")) for item in sent] == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
    ]
    assert sent[1] == recorded[1]
    assert {k: v for k, v in sent[2].items() if k != "arguments"} == {
        k: v for k, v in recorded[2].items() if k != "arguments"
    }
    assert json.loads(sent[2]["arguments"]) == json.loads(recorded[2]["arguments"])
    assert sent[3] == recorded[3]
    assert answer.text.startswith("Softly old fountains illumine alleys\nDunes over harbor aglow")
    assert (answer.finish_reason, answer.usage) == ("stop", Usage(2087, 124, 2211, 2048, 0))


async def test_responses_reasoning_text_goes_back_paired_as_the_service_accepted_it() -> None:
    """A live gpt-5 answer (reasoning, then a message) and the next request the service took:
    the reasoning item, then the message with its ``id`` and ``status``. Recorded too: a history
    whose message after the reasoning item is bare text, refused with a 400 naming that item."""
    accepted = json.loads((PROVIDER_CAPTURES / "openai_responses_recorded_reasoning_text_next_input.json").read_text())
    refused = json.loads((PROVIDER_CAPTURES / "openai_responses_recorded_reasoning_unpaired_input.json").read_text())
    output = json.loads(load("openai_responses_recorded_reasoning_text.http")[2])["output"]
    server = Server(
        [
            capture("openai_responses_recorded_reasoning_text.http"),
            capture("openai_responses_recorded_reasoning_unpaired_400.http"),
        ]
    )
    async with responses(server) as m:
        result = await m.complete(REQUEST)
        follow_up = Message.user("Considering the way to cross the street, analogously, how do I cross the river?")
        again = ChatRequest((Message.user("hi"), result.message, follow_up))
        with pytest.raises(BadRequestError) as caught:  # the recorded refusal, answered to any request
            await m.complete(again)
    assert [item["type"] for item in output] == ["reasoning", "message"]
    assert result.text == output[1]["content"][0]["text"]
    assert result.message.reasoning[1] == Reasoning("openai.responses", "", {"type": "message", "id": output[1]["id"]})
    sent = server.bodies[1]["input"]
    assert sent[1:] == [
        accepted[1],
        accepted[2],
        {"type": "message", "role": "user", "content": accepted[3]["content"]},
    ]
    assert (refused[1]["type"], refused[2]["role"], sorted(refused[2])) == (
        "reasoning",
        "assistant",
        ["content", "role"],
    )
    assert caught.value.message == (
        f"Item '{refused[1]['id']}' of type 'reasoning' was provided without its required following item."
    )
    assert (caught.value.status_code, caught.value.error_type, caught.value.body["error"]["param"]) == (
        400,
        "invalid_request_error",
        "input",
    )


def test_responses_item_ids_go_only_to_their_calls() -> None:
    """A pairing entry gives its id to the call it names and nothing else: a call without one,
    an entry that is not whole, or one from another API leaves the call without an ``id``."""
    calls = (ToolCall("f", {}, "c1"), ToolCall("g", {}, "c2"))
    reasoning = (
        Reasoning("openai.responses", "", {"type": "reasoning", "id": "rs_1", "summary": []}),
        Reasoning("openai.responses", "", {"type": "function_call", "id": "fc_1", "call_id": "c1"}),
        Reasoning("openai.responses", "", {"type": "function_call", "id": 7, "call_id": "c2"}),
        Reasoning("openai.responses", "", {"type": "function_call", "id": "fc_9", "call_id": "c9"}),
        Reasoning("other", "", {"type": "function_call", "id": "fc_2", "call_id": "c2"}),
    )
    _, items = _responses_wire.input_items((Message("assistant", None, calls, reasoning=reasoning),))
    assert items == [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}", "id": "fc_1"},
        {"type": "function_call", "call_id": "c2", "name": "g", "arguments": "{}"},
    ]


def test_responses_message_ids_go_only_to_text() -> None:
    """The first whole message entry pairs the text; a second or a broken one is ignored, and
    with no text there is no message to pair."""
    rs = Reasoning("openai.responses", "", {"type": "reasoning", "id": "rs_1", "summary": []})
    marks = tuple(
        Reasoning("openai.responses", "", {"type": "message", "id": value}) for value in (7, "msg_1", "msg_2")
    )
    _, items = _responses_wire.input_items((Message("assistant", "hi", reasoning=(rs, *marks)),))
    part = {"type": "output_text", "text": "hi", "annotations": []}
    assert items[1] == {"type": "message", "role": "assistant", "id": "msg_1", "status": "completed", "content": [part]}
    _, items = _responses_wire.input_items((Message("assistant", None, reasoning=(rs, *marks)),))
    assert items == [{"type": "reasoning", "id": "rs_1", "summary": []}]


async def test_responses_calls_without_reasoning_keep_no_item_id() -> None:
    """With no reasoning item before it, a call leaves no pairing entry (nothing to pair)."""
    async with responses(Server([capture("openai_responses_function_call.http")])) as m:
        result = await m.complete(REQUEST)
    assert result.message.reasoning == ()
    assert len(result.message.tool_calls) == 1


async def test_responses_recorded_error_body() -> None:
    """A live 400 with ``code`` and ``param``: typed, not retried."""
    server = Server([lambda _: capture("openai_responses_recorded_400.http")])
    async with responses(server) as m:
        with pytest.raises(BadRequestError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.error_type, error.code) == (
        400,
        "invalid_request_error",
        "decimal_below_min_value",
    )
    assert (
        error.message
        == "Invalid 'temperature': decimal below minimum value. Expected a value >= 0, but got -1 instead."
    )
    assert error.body["error"]["param"] == "temperature"
    assert len(server.requests) == 1


# -- Bedrock --------------------------------------------------------------------------------


def eventstream(name: str, chunk: int | None = None) -> httpx.Response:
    body = bytes.fromhex((PROVIDER_CAPTURES / name).read_text())
    return response(200, body, headers={"content-type": "application/vnd.amazon.eventstream"}, chunk=chunk)


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("chunk", SPLITS)
async def test_bedrock_recorded_reasoning_stream(chunk: int | None) -> None:
    """A live ConverseStream with ``reasoningContent`` text deltas, an empty one, then the
    signature: folded into one reasoning block that the next request carries back."""
    thought = (
        'The user has greeted me with a simple "Hello". I should respond in a friendly and welcoming manner. '
        "This is a straightforward greeting, so I'll respond warmly and ask how I can help them today."
    )
    tokens: list[str] = []
    name = "bedrock_recorded_converse_stream_reasoning.eventstream.hex"
    async with bedrock(Server([eventstream(name, chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Hello! It", "'s nice", " to meet you.", " How can I help", " you today?"]
    assert result.text == "".join(tokens) == "Hello! It's nice to meet you. How can I help you today?"
    (reasoning,) = result.message.reasoning
    signature = reasoning.data["reasoningContent"]["reasoningText"]["signature"]
    assert (reasoning.provider, reasoning.text) == ("bedrock.converse", thought)
    assert signature.startswith("Eu0CCkgIBxABGAIqQJDccbDQkr81")
    assert signature.endswith("LMIm1o471iEYAQ==")
    assert (result.finish_reason, result.usage) == ("stop", Usage(36, 73, 109, 0, 0))
    again = ChatRequest((Message.user("hi"), result.message, Message.user("and?")))
    sent = _bedrock_wire.request_body(again, {})["messages"][1]
    assert sent == {
        "role": "assistant",
        "content": [
            {"reasoningContent": {"reasoningText": {"text": thought, "signature": signature}}},
            {"text": result.text},
        ],
    }


@pytest.mark.usefixtures("aws")
@pytest.mark.parametrize("chunk", [None, 7])
async def test_bedrock_recorded_redacted_reasoning_stream(chunk: int | None) -> None:
    """A live ConverseStream answering the redacted-thinking trigger: two blocks that are one
    ``redactedContent`` delta each, then text. Both are kept, opaque, in order."""
    name = "bedrock_recorded_converse_stream_redacted_reasoning.eventstream.hex"
    tokens: list[str] = []
    async with bedrock(Server([eventstream(name, chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert len(tokens) == 10
    assert result.text == "".join(tokens)
    assert result.text.startswith("I notice you've sent what appears to be some kind of command or trigger string")
    assert result.text.endswith("What would you like to talk about today?")
    redacted = [r.data["reasoningContent"]["redactedContent"] for r in result.message.reasoning]
    assert [(r.provider, r.text) for r in result.message.reasoning] == [("bedrock.converse", "")] * 2
    assert [value[:12] for value in redacted] == ["RXRrRUNrZ0lC", "RXFBRENrZ0lC"]
    assert (result.finish_reason, result.usage) == ("stop", Usage(92, 253, 345, 0, 0))


@pytest.mark.usefixtures("aws")
async def test_bedrock_recorded_redacted_reasoning_goes_back_verbatim() -> None:
    """The same case answered whole: the ``redactedContent`` block goes back as it came, as the
    recording's next request sent it."""
    name = "bedrock_recorded_converse_redacted_reasoning.http"
    content = json.loads(load(name)[2])["output"]["message"]["content"]
    async with bedrock(Server([capture(name)])) as m:
        result = await m.complete(REQUEST)
    assert [next(iter(block)) for block in content] == ["reasoningContent", "text"]
    assert result.message.reasoning == (Reasoning("bedrock.converse", "", content[0]),)
    assert result.text == content[1]["text"]
    again = ChatRequest((Message.user("hi"), result.message, Message.user("What was that?")))
    assert _bedrock_wire.request_body(again, {})["messages"][1] == {"role": "assistant", "content": content}


@pytest.mark.usefixtures("aws")
async def test_bedrock_recorded_throttling_names_the_fault_in_the_body(waits: list[float]) -> None:
    """A recorded 429 whose body says ``__type`` and whose headers name no error type (the
    recording kept none): still a ThrottlingException, retried until the retries run out."""
    server = Server([lambda _: capture("bedrock_recorded_throttling_429.http")])
    async with bedrock(server, max_retries=4) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.error_type, error.message) == (429, "ThrottlingException", "Rate exceeded")
    assert len(server.requests) == 5
    assert len(waits) == 4


def test_aws_error_type_from_the_body_in_both_spellings() -> None:
    body = b'{"__type": "com.amazon.coral.availability#ThrottlingException", "message": "Rate exceeded"}'
    assert error_from_response(429, {}, body).error_type == "ThrottlingException"
    assert error_from_response(400, {}, b'{"__type": "ValidationException:http://x", "message": "m"}').error_type == (
        "ValidationException"
    )
    assert error_from_response(400, {}, b'{"__type": "", "message": "m"}').error_type is None
    assert error_from_response(400, {}, b'{"__type": 7, "message": "m"}').error_type is None
    assert error_from_response(400, {}, b'{"type": "t", "__type": "U", "message": "m"}').error_type == "t"


@pytest.mark.usefixtures("aws")
async def test_bedrock_recorded_plain_answer_and_validation_error() -> None:
    server = Server([capture("bedrock_recorded_converse_text.http")])
    async with bedrock(server) as m:
        result = await m.complete(REQUEST)
        server.answers = [lambda _: capture("bedrock_recorded_converse_validation_400.http")]
        with pytest.raises(BadRequestError) as caught:
            await m.complete(REQUEST)
    text = (
        "Hello! As an AI language model, I don't have feelings, but I'm functioning well and ready to assist you. "
        "How can I help you today?"
    )
    assert result == ChatResponse(Message("assistant", text), "stop", Usage(13, 35, 48, 0, 0))
    error = caught.value
    assert (error.status_code, error.error_type) == (400, "ValidationException")
    assert str(error) == "HTTP 400: The provided model identifier is invalid."
    assert len(server.requests) == 2


@pytest.mark.usefixtures("aws")
async def test_bedrock_recorded_cache_write_then_read() -> None:
    """A live pair: the first call writes 1322 prompt tokens to the cache, the second reads
    them. Converse's ``inputTokens`` leaves the cached prefix out (``totalTokens`` = 2 + 5 + 1322);
    ``prompt_tokens`` counts it, as it does for Anthropic: all of the input, cached or not."""
    server = Server([capture("bedrock_recorded_cache_write.http"), capture("bedrock_recorded_cache_read.http")])
    async with bedrock(server) as m:
        written = await m.complete(REQUEST)
        read = await m.complete(REQUEST)
    assert written == ChatResponse(Message("assistant", "21"), "stop", Usage(1324, 5, 1329, 0, 1322))
    assert read == ChatResponse(Message("assistant", "21"), "stop", Usage(1324, 5, 1329, 1322, 0))


# -- Azure OpenAI ---------------------------------------------------------------------------


async def test_azure_docs_chat_completion() -> None:
    """The REST reference's chat-completions example (api-version 2024-10-21), response whole."""
    name = "azure_chat_docs.http"
    expected = json.loads(load(name)[2])["choices"][0]["message"]["content"]
    server = Server([capture(name)])
    async with azure(server) as m:
        result = await m.complete(REQUEST)
    assert result == ChatResponse(Message("assistant", expected), "stop", Usage(33, 557, 590))
    assert result.text.startswith("Ahoy matey! So ye be wantin' to care for a fine squawkin' parrot")
    assert str(server.requests[0].url) == (
        "https://my-resource.openai.azure.com/openai/deployments/gpt-4o-prod/chat/completions?api-version=2024-10-21"
    )


@pytest.mark.parametrize("chunk", [None, 1, 64])
async def test_azure_recorded_stream(chunk: int | None) -> None:
    """A live Azure stream: the prompt-filter chunk with no choices first, an empty role
    chunk, three deltas, the finish, no usage chunk (none was asked for)."""
    tokens: list[str] = []
    async with azure(Server([capture("azure_recorded_chat_stream.http", chunk)])) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Hallo", " Welt", "!"]
    assert (result.text, result.finish_reason, result.usage) == ("Hallo Welt!", "stop", None)
