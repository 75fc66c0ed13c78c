"""OpenAIChatModel(api="responses"): the Responses wire on data, on recorded captures and
over a scripted httpx.MockTransport (retries, errors, cut streams, reasoning carried)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from core.models._mock import SPLITS, Server, response
from core.models._mock import captured as capture

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    Kernel,
    Message,
    OpenAIChatModel,
    ToolCall,
    Usage,
    tool,
)
from beamfilter_core._messages import Reasoning
from beamfilter_core._models import _responses_wire as wire
from beamfilter_core.errors import (
    ConfigError,
    IncompleteStreamError,
    ProviderResponseError,
    RateLimitError,
    ResponseTooLargeError,
)
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio

ENC = "gAAAAABor0AzW1DJ3p4vXkhm7kFjM0x9nS2rLwQ5uP8tVb3eYc6dHa1fGi7jKl0mN4oPqR2sT5uV8wX9yZ"
SUMMARY = "**Checking the weather**\n\nThe user wants Paris; I will call get_weather."
RS_ITEM = {
    "id": "rs_68af4031e7e08193b2ae6f4cbd1e54ec05438e46b5f69a3b",
    "type": "reasoning",
    "encrypted_content": ENC,
    "summary": [{"type": "summary_text", "text": SUMMARY}],
}


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return "18 C"


def model(server: Server, **options: Any) -> OpenAIChatModel:
    options.setdefault("api_key", "sk-test")
    return OpenAIChatModel(
        "gpt-4.1",
        base_url="http://mock.test/v1",
        api="responses",
        transport=httpx.MockTransport(server.handle),
        **options,
    )


def events(*items: dict[str, Any]) -> bytes:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in items).encode()


SSE = {"content-type": "text/event-stream"}
COMPLETED = {"type": "response.completed", "response": {"status": "completed", "usage": None}}


def delta(text: str) -> dict[str, Any]:
    return {"type": "response.output_text.delta", "output_index": 0, "delta": text}


# -- requests ---------------------------------------------------------------------------


def test_request_body_native_shapes() -> None:
    call = ToolCall("get_weather", {"city": "Paris"}, "call_1")
    messages = (
        Message.system("Be brief."),
        Message.system("Use metric units."),
        Message.user("weather?"),
        Message("assistant", "Let me look.", (call,), reasoning=(Reasoning("openai.responses", SUMMARY, RS_ITEM),)),
        Message.tool("call_1", "18 C", "get_weather"),
        Message.system("Answer in French."),
        Message("user", (ContentPart("text", "and this?"), ContentPart("image_url", url="https://x.test/a.png"))),
        Message("assistant", "ok", reasoning=(Reasoning("anthropic", "other", {"type": "thinking"}),)),
    )
    request = ChatRequest(messages, tools=(get_weather,), tool_choice={"type": "function", "function": {"name": "x"}})
    body = wire.request_body(request, "gpt-4.1", {"input": "ignored", "store": False}, stream=True)
    assert body == {
        "model": "gpt-4.1",
        "store": False,
        "instructions": "Be brief.\n\nUse metric units.",
        "input": [
            {"type": "message", "role": "user", "content": "weather?"},
            RS_ITEM,
            {"type": "message", "role": "assistant", "content": "Let me look."},
            {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": '{"city": "Paris"}'},
            {"type": "function_call_output", "call_id": "call_1", "output": "18 C"},
            {"type": "message", "role": "system", "content": "Answer in French."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "and this?"},
                    {"type": "input_image", "image_url": "https://x.test/a.png"},
                ],
            },
            {"type": "message", "role": "assistant", "content": "ok"},  # another API's reasoning is not sent
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "Current weather for a city.",
                "parameters": get_weather.definition["function"]["parameters"],
            }
        ],
        "tool_choice": {"type": "function", "name": "x"},
        "stream": True,
    }


def test_tool_definitions_and_choices_pass_through() -> None:
    assert wire.tool_definition({"type": "web_search"}) == {"type": "web_search"}
    strict = {"type": "function", "function": {"name": "f", "strict": True}}
    assert wire.tool_definition(strict) == {"type": "function", "name": "f", "strict": True}
    assert wire._tool_choice("required") == "required"
    assert wire._tool_choice({"type": "file_search"}) == {"type": "file_search"}
    body = wire.request_body(ChatRequest((Message.user("hi"), Message("user", None))), "m", {}, stream=False)
    user = {"type": "message", "role": "user"}
    assert body == {"model": "m", "input": [{**user, "content": "hi"}, {**user, "content": ""}]}


# -- plain answers ------------------------------------------------------------------------


async def test_text_answer_capture() -> None:
    server = Server([capture("openai_responses_text.http")])
    async with model(server) as m:
        result = await m.complete(ChatRequest((Message.system("Be kind."), Message.user("a unicorn story"))))
    assert result.text.startswith("I can't provide real-time updates, but you can easily check the current weather")
    assert result.text.endswith("so it's good to be prepared for variable weather!")
    assert (result.finish_reason, result.usage) == ("stop", Usage(14, 50, 64, 0))
    (sent,) = server.requests
    assert str(sent.url) == "http://mock.test/v1/responses"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert server.bodies == [
        {
            "model": "gpt-4.1",
            "instructions": "Be kind.",
            "input": [{"type": "message", "role": "user", "content": "a unicorn story"}],
        }
    ]


async def test_function_call_capture() -> None:
    server = Server([capture("openai_responses_function_call.http")])
    async with model(server) as m:
        result = await m.complete(ChatRequest((Message.user("weather in Boston?"),), tools=(get_weather,)))
    assert result == ChatResponse(
        Message(
            "assistant",
            None,
            (
                ToolCall(
                    "get_current_weather",
                    {"location": "Boston, MA", "unit": "celsius"},
                    "call_unLAR8MvFNptuiZK6K6HCy5k",
                ),
            ),
        ),
        "tool_calls",
        Usage(291, 23, 314),
    )


def answer(*output: Any, status: str = "completed", **extra: Any) -> dict[str, Any]:
    return {"object": "response", "status": status, "output": list(output), **extra}


def text_item(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"type": "message", "role": "assistant", "content": list(parts)}


def test_parse_stop_reasons_refusals_and_reasoning() -> None:
    out = {"type": "output_text", "text": "cut"}
    limit = answer(text_item(out), status="incomplete", incomplete_details={"reason": "max_output_tokens"})
    assert wire.parse_response(limit).finish_reason == "length"
    blocked = answer(text_item(out), status="incomplete", incomplete_details={"reason": "content_filter"})
    assert wire.parse_response(blocked).finish_reason == "content_filter"
    assert wire.parse_response(answer(status="incomplete", incomplete_details=None)).finish_reason == "length"
    assert wire.parse_response(answer(status="incomplete", incomplete_details={"reason": "x"})).finish_reason == "x"
    refusal = wire.parse_response(answer(text_item({"type": "refusal", "refusal": "I can't help with that."})))
    assert refusal.text == "I can't help with that."
    thought = wire.parse_response(answer(RS_ITEM, text_item(out), {"type": "web_search_call", "id": "ws_1"}))
    assert thought.message == Message("assistant", "cut", reasoning=(Reasoning("openai.responses", SUMMARY, RS_ITEM),))
    assert thought.text == "cut"
    hidden = wire.parse_response(answer({"type": "reasoning", "id": "rs_2", "summary": []}))
    assert hidden.message.reasoning == (
        Reasoning("openai.responses", "", {"type": "reasoning", "id": "rs_2", "summary": []}),
    )
    assert hidden.message.content == ""
    objects = answer({"type": "function_call", "name": "f", "call_id": "c", "arguments": {"a": 1}})
    assert wire.parse_response(objects).message.tool_calls == (ToolCall("f", {"a": 1}, "c"),)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "Expected a JSON object from /responses, got list: []."),
        ({"id": "r"}, 'The response has no output list: {"id": "r"}.'),
        (
            {"error": {"message": "boom", "code": "server_error"}},
            "The server reported an error inside a 200 response: boom (code server_error).",
        ),
        (answer(status="failed", error={"message": "The model failed."}), "The response failed: The model failed.."),
        (answer(status="failed", error=None), "The response failed: null."),
        (answer("text"), 'The server sent output[0] as str "text"; expected a JSON object.'),
        (
            answer({"type": "function_call", "name": 3}),
            'The server sent output[0] as dict {"type": "function_call", "name": 3}; '
            "expected a function_call with a string name and call_id.",
        ),
    ],
)
def test_malformed_answers_are_typed_errors(data: Any, message: str) -> None:
    with pytest.raises(ProviderResponseError) as caught:
        wire.parse_response(data)
    assert str(caught.value) == message


def test_answer_bounds() -> None:
    long_text = answer(text_item({"type": "output_text", "text": "x" * 11}))
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=10"):
        wire.parse_response(long_text, max_answer_chars=10)
    long_args = answer({"type": "function_call", "name": "f", "call_id": "c", "arguments": "x" * 6})
    with pytest.raises(ResponseTooLargeError, match="tool call 'f' are longer than max_argument_chars=5"):
        wire.parse_response(long_args, max_argument_chars=5)


# -- streams -------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", SPLITS)
async def test_text_stream_capture(chunk: int | None) -> None:
    server = Server([capture("openai_responses_text_stream.http", chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(ChatRequest((Message.user("hi"),)), tokens.append)
    assert tokens == ["Hi", " there", "!", " How", " can", " I", " assist", " you", " today", "?"]
    assert result.text == "".join(tokens) == "Hi there! How can I assist you today?"
    assert (result.finish_reason, result.usage) == ("stop", Usage(37, 11, 48))
    assert server.bodies[0]["stream"] is True
    assert server.requests[0].headers["accept"] == "text/event-stream"


FC_ID = "fc_68af4033b49c8193a3b4b5ce1dc8e64f05438e46b5f69a3b"  # the call's item id in that capture


@pytest.mark.parametrize("chunk", SPLITS)
async def test_reasoning_is_carried_into_the_next_tool_round(chunk: int | None) -> None:
    final = events(delta("It is 18 C in Paris."), COMPLETED)
    server = Server([capture("openai_responses_reasoning_tool_stream.http", chunk), response(200, final, headers=SSE)])
    async with model(server, options={"store": False, "include": ["reasoning.encrypted_content"]}) as m:
        result, streamed = await run_turn(Kernel(m, tools=[get_weather]), "weather in Paris?", stream=True)
    assert result.text == "It is 18 C in Paris." == streamed
    first, second = server.bodies
    assert first["input"] == [{"type": "message", "role": "user", "content": "weather in Paris?"}]
    assert second["input"] == [
        {"type": "message", "role": "user", "content": "weather in Paris?"},
        RS_ITEM,
        {
            "type": "function_call",
            "call_id": "call_Q5g7l7bVd4Jf0qvXZ1sW2eR3",
            "name": "get_weather",
            "arguments": '{"city": "Paris"}',
            "id": FC_ID,  # pairs the call with the reasoning item before it
        },
        {"type": "function_call_output", "call_id": "call_Q5g7l7bVd4Jf0qvXZ1sW2eR3", "output": "18 C"},
    ]
    assert second["include"] == ["reasoning.encrypted_content"]


async def test_reasoning_stream_result_and_cache_usage() -> None:
    server = Server([capture("openai_responses_reasoning_tool_stream.http", 7)])
    async with model(server) as m:
        result = await m.stream(ChatRequest((Message.user("weather in Paris?"),)), lambda _: None)
    assert result == ChatResponse(
        Message(
            "assistant",
            None,
            (ToolCall("get_weather", {"city": "Paris"}, "call_Q5g7l7bVd4Jf0qvXZ1sW2eR3"),),
            reasoning=(
                Reasoning("openai.responses", SUMMARY, RS_ITEM),
                Reasoning(
                    "openai.responses",
                    "",
                    {"type": "function_call", "id": FC_ID, "call_id": "call_Q5g7l7bVd4Jf0qvXZ1sW2eR3"},
                ),
            ),
        ),
        "tool_calls",
        Usage(1210, 84, 1294, 1152),
    )


def feed_all(*items: Any, on_token: Any = None, **limits: int) -> wire.ResponsesAccumulator:
    accumulator = wire.ResponsesAccumulator(on_token, **limits)
    for item in items:
        accumulator.feed(item if isinstance(item, str) else json.dumps(item))
    return accumulator


def added(index: int, name: str = "f", call_id: str = "c1") -> dict[str, Any]:
    item = {"type": "function_call", "name": name, "call_id": call_id, "arguments": ""}
    return {"type": "response.output_item.added", "output_index": index, "item": item}


def args(index: int, piece: str) -> dict[str, Any]:
    return {"type": "response.function_call_arguments.delta", "output_index": index, "delta": piece}


def test_parallel_calls_from_deltas_alone_and_incomplete_streams() -> None:
    incomplete = {
        "type": "response.incomplete",
        "response": {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
    }
    accumulator = feed_all(
        added(0), added(1, "g", "c2"), args(1, '{"b"'), args(0, '{"a": 1}'), args(1, ": 2}"), incomplete
    )
    result = accumulator.result(chunks=6)
    assert result.message.tool_calls == (ToolCall("f", {"a": 1}, "c1"), ToolCall("g", {"b": 2}, "c2"))
    assert result.finish_reason == "length"
    assert accumulator.delivered is False


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["not json"], "The stream sent an event that is not valid JSON: 'not json'."),
        (["[1]"], "The stream sent an event that is not a JSON object: '[1]'."),
        (
            [{"type": "error", "code": "server_error", "message": "The server had an error."}],
            "The stream reported an error: The server had an error. (code server_error).",
        ),
        (
            [{"type": "response.failed", "response": {"status": "failed", "error": {"message": "Model crashed"}}}],
            "The response failed: Model crashed.",
        ),
        (
            [{"type": "response.output_text.delta", "delta": 3}],
            "The server sent response.output_text.delta.delta as int 3; expected a string.",
        ),
        (
            [{"type": "response.output_item.added", "item": None}],
            "The server sent response.output_item.added.item as NoneType null; expected a JSON object.",
        ),
        (
            [{"type": "response.output_item.added", "output_index": "0", "item": {"type": "function_call"}}],
            'The server sent response.output_item.added.output_index as str "0"; expected an integer.',
        ),
        (
            [args(0, "{")],
            'The server sent response.function_call_arguments.delta as dict {"type": '
            '"response.function_call_arguments.delta", "output_index": 0, "delta": "{"}; '
            "expected a delta for an added function_call.",
        ),
        (
            [{"type": "response.completed", "response": []}],
            "The server sent response.completed.response as list []; expected a JSON object.",
        ),
    ],
)
def test_malformed_stream_events(items: list[Any], message: str) -> None:
    with pytest.raises(ProviderResponseError) as caught:
        feed_all(*items)
    assert str(caught.value) == message


def test_stream_bounds_and_cut_streams() -> None:
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=3"):
        feed_all(delta("abcd"), max_answer_chars=3)
    with pytest.raises(ResponseTooLargeError, match="tool call 'f' are longer than max_argument_chars=2"):
        feed_all(added(0), args(0, "abc"), max_argument_chars=2)
    with pytest.raises(IncompleteStreamError, match="empty"):
        feed_all().result(chunks=0)
    with pytest.raises(IncompleteStreamError) as caught:
        feed_all(delta("Hel")).result(chunks=1)
    assert str(caught.value) == (
        "The stream ended after 1 event(s) without response.completed; the answer is incomplete "
        "(3 characters of text received)."
    )


async def test_cut_stream_is_retried_then_answers(waits: list[float]) -> None:
    cut = events({"type": "response.created", "response": {}})
    whole = events(delta("Hello"), COMPLETED)
    server = Server([response(200, cut, headers=SSE), response(200, whole, headers=SSE)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(ChatRequest((Message.user("hi"),)), tokens.append)
    assert (result.text, tokens, len(waits)) == ("Hello", ["Hello"], 1)


async def test_a_stream_that_delivered_text_is_not_retried(waits: list[float]) -> None:
    server = Server([response(200, events(delta("Hel")), headers=SSE)])
    async with model(server) as m:
        with pytest.raises(IncompleteStreamError):
            await m.stream(ChatRequest((Message.user("hi"),)), lambda _: None)
    assert (len(server.requests), waits) == (1, [])


async def test_rate_limit_capture_is_retried_after_its_delay(waits: list[float]) -> None:
    server = Server([capture("openai_responses_429.http"), capture("openai_responses_text.http")])
    async with model(server, api_key="sk-proj-secretvalue123456") as m:
        assert (await m.complete(ChatRequest((Message.user("hi"),)))).usage == Usage(14, 50, 64)
        assert waits == [0.02]
        server.answers = [lambda _: capture("openai_responses_429.http")]
        server.requests.clear()
        with pytest.raises(RateLimitError) as caught:
            await m.complete(ChatRequest((Message.user("hi"),)))
        assert "sk-proj-secretvalue123456" not in repr(m)
    error = caught.value
    assert error.message.startswith("Rate limit reached for gpt-4.1 in organization org-abc123 on tokens per min")
    assert (error.code, error.error_type, error.retry_after, len(server.requests)) == (
        "rate_limit_exceeded",
        "tokens",
        0.02,
        3,
    )
    assert "sk-proj" not in str(error) + repr(error)


async def test_a_json_answer_to_a_stream_request() -> None:
    server = Server([capture("openai_responses_text.http")])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(ChatRequest((Message.user("hi"),)), tokens.append)
    assert tokens == [result.text]
    assert result.usage == Usage(14, 50, 64)


def test_api_must_be_chat_or_responses() -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIChatModel("m", api="completions")
    assert str(caught.value) == (
        "OpenAIChatModel(api='completions') must be 'chat' (/chat/completions) or 'responses' (/responses)."
    )
    assert OpenAIChatModel("m", api_key="k").api == "chat"


def test_a_call_done_without_added_and_unknown_events() -> None:
    item = {"type": "function_call", "name": "f", "call_id": "c9", "arguments": '{"x": 1}'}
    accumulator = feed_all(
        {"type": "response.output_item.done", "output_index": 4, "item": item},
        {"type": "response.web_search_call.searching", "output_index": 0},
        {"type": "response.reasoning_summary_text.delta", "delta": "hm"},
        {"type": "response.completed", "response": {"status": "completed"}},
    )
    result = accumulator.result(chunks=4)
    assert result.message.tool_calls == (ToolCall("f", {"x": 1}, "c9"),)
    assert (result.finish_reason, result.usage, result.text) == ("tool_calls", None, "")


def test_reasoning_counts_toward_the_answer_bound() -> None:
    item = {
        "type": "reasoning",
        "id": "rs_1",
        "summary": [{"type": "summary_text", "text": "abc"}],
        "encrypted_content": "x" * 8,
    }
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=10"):
        wire.parse_response(answer(item), max_answer_chars=10)
    assert wire.parse_response(answer(item), max_answer_chars=11).message.reasoning[0].text == "abc"
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=10"):
        feed_all({"type": "response.output_item.done", "output_index": 0, "item": item}, max_answer_chars=10)
