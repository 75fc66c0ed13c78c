"""The wire rules (request bodies, completions, stream chunks) on plain data, and SSE edge cases."""

from __future__ import annotations

import json
from typing import Any

import pytest
from core.models._mock import STREAM, Server, delta, response, sse

from beamfilter_core import ChatRequest, ContentPart, Message, ToolCall, Usage, tool
from beamfilter_core._models._wire import StreamAccumulator, message_to_json, parse_completion, request_body
from beamfilter_core.errors import IncompleteStreamError, ProviderResponseError

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


# -- request bodies ------------------------------------------------------------------


def test_message_to_json_covers_every_role() -> None:
    call = ToolCall("add", {"a": 1, "b": 2}, "call_1")
    bad = ToolCall.from_json("add", '{"a": 1', "call_2")
    parts = (ContentPart("text", text="look"), ContentPart("image_url", url="https://x.test/cat.png"))
    assert [
        message_to_json(m)
        for m in (
            Message.system("be brief"),
            Message("user", "hi", name="ann"),
            Message("user", parts),
            Message.assistant(None, (call, bad)),
            Message.tool("call_1", "3", "add"),
        )
    ] == [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "hi", "name": "ann"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://x.test/cat.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}},
                {"id": "call_2", "type": "function", "function": {"name": "add", "arguments": '{"a": 1'}},
            ],
        },
        {"role": "tool", "content": "3", "tool_call_id": "call_1"},
    ]


def test_request_body_merges_options_and_keeps_reserved_keys() -> None:
    request = ChatRequest(
        (Message.user("hi"),),
        tools=(add,),
        tool_choice="required",
        options={"temperature": 0.2, "messages": "ignored", "stream": False, "model": "override"},
    )
    body = request_body(request, "base", {"temperature": 1.0, "max_tokens": 5, "tools": "ignored"}, stream=True)
    assert body == {
        "model": "override",
        "temperature": 0.2,
        "max_tokens": 5,
        "messages": [{"role": "user", "content": "hi"}],
        "tools": [add.definition],
        "tool_choice": "required",
        "stream": True,
        "stream_options": {"include_usage": True},
    }


def test_request_body_without_tools_sends_no_tool_choice_and_no_stream_fields() -> None:
    request = ChatRequest((Message.user("hi"),), tool_choice="auto", options={"stream_options": {"x": 1}})
    assert request_body(request, "m", {}, stream=False) == {
        "model": "m",
        "messages": [{"role": "user", "content": "hi"}],
    }


def test_request_body_keeps_the_callers_stream_options() -> None:
    request = ChatRequest((Message.user("hi"),), options={"stream_options": {"include_obfuscation": False}})
    body = request_body(request, "m", {}, stream=True)
    assert body["stream_options"] == {"include_obfuscation": False, "include_usage": True}


# -- non-streamed completions --------------------------------------------------------


def test_parse_completion_with_tool_calls_and_unknown_fields() -> None:
    data = {
        "id": "chatcmpl-1",
        "service_tier": "default",
        "obfuscation": "xx",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "logprobs": None,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "refusal": None,
                    "tool_calls": [
                        {
                            "id": "call_a",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
                        },
                        {
                            "id": "call_b",
                            "type": "function",
                            "function": {"name": "add", "arguments": {"a": 3, "b": 4}},
                        },
                        {"id": "call_c", "type": "function", "function": {"name": "add", "arguments": "not json"}},
                    ],
                },
            }
        ],
        "usage": {
            "prompt_tokens": 9,
            "completion_tokens": 3,
            "total_tokens": 12,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
        "timings": {"predicted_n": 3},
    }
    result = parse_completion(data)
    assert result.finish_reason == "tool_calls"
    assert result.message.content is None
    assert result.message.tool_calls == (
        ToolCall("add", {"a": 1, "b": 2}, "call_a"),
        ToolCall("add", {"a": 3, "b": 4}, "call_b"),
        ToolCall("add", {}, "call_c", raw_arguments="not json"),
    )
    assert result.usage == Usage(9, 3, 12)


def test_parse_completion_refusal_becomes_the_text() -> None:
    data = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "stop",
                "message": {"role": "assistant", "content": None, "refusal": "I can't help with that."},
            }
        ]
    }
    assert parse_completion(data).text == "I can't help with that."


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([1, 2], "Expected a JSON object from /chat/completions, got list"),
        ({"choices": []}, "The completion has no choices"),
        ({"choices": [{"index": 0}]}, "The completion's first choice has no message"),
        ({"error": {"message": "overloaded"}}, "The server reported an error inside a 200 response: 'overloaded'."),
    ],
)
def test_parse_completion_rejects_broken_bodies(data: Any, message: str) -> None:
    with pytest.raises(ProviderResponseError, match=message.replace("(", r"\(").replace(".", r"\.")):
        parse_completion(data)


# -- stream chunks -------------------------------------------------------------------


def feed_all(*chunks: Any, on_token: Any = None) -> StreamAccumulator:
    acc = StreamAccumulator(on_token)
    for chunk in chunks:
        acc.feed(chunk if isinstance(chunk, str) else json.dumps(chunk))
    return acc


def test_null_and_missing_content_and_empty_deltas_are_fine() -> None:
    tokens: list[str] = []
    acc = feed_all(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None}}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": None}], "usage": None},
        delta("Hi"),
        {"choices": [{"index": 0, "delta": {"content": None}}]},
        delta(finish="stop"),
        {"choices": [], "usage": {"prompt_tokens": 2, "completion_tokens": 1}},
        "[DONE]",
        on_token=tokens.append,
    )
    assert tokens == ["Hi"]
    assert acc.delivered
    assert acc.result(chunks=7).usage == Usage(2, 1, 3)


def test_interleaved_choices_answer_with_choice_zero() -> None:
    acc = feed_all(
        delta("A", index=0),
        delta("X", index=1),
        delta("B", index=0),
        delta(finish="stop", index=1),
        delta(finish="length", index=0),
        "[DONE]",
    )
    result = acc.result(chunks=6)
    assert (result.text, result.finish_reason) == ("AB", "length")


def test_interleaved_tool_calls_by_index_and_names_in_pieces() -> None:
    def tc(index: int, **fields: Any) -> dict[str, Any]:
        return delta(None, tool_calls=[{"index": index, **fields}])

    acc = feed_all(
        tc(0, id="call_x", type="function", function={"name": "ad", "arguments": ""}),
        tc(1, id="call_y", type="function", function={"name": "add", "arguments": '{"a"'}),
        tc(0, function={"name": "d", "arguments": '{"a": 1,'}),
        tc(1, function={"arguments": ': 5, "b": 6}'}),
        tc(0, function={"arguments": ' "b": 2}'}),
        delta(finish="tool_calls"),
        "[DONE]",
    )
    assert acc.result(chunks=7).message.tool_calls == (
        ToolCall("add", {"a": 1, "b": 2}, "call_x"),
        ToolCall("add", {"a": 5, "b": 6}, "call_y"),
    )


def test_tool_calls_without_index_follow_their_ids() -> None:
    acc = feed_all(
        delta(None, tool_calls=[{"id": "c1", "function": {"name": "add", "arguments": '{"a": 1, '}}]),
        delta(None, tool_calls=[{"function": {"arguments": '"b": 2}'}}]),
        delta(None, tool_calls=[{"id": "c2", "function": {"name": "add", "arguments": "{}"}}]),
        delta(finish="tool_calls"),
        "[DONE]",
    )
    calls = acc.result(chunks=5).message.tool_calls
    assert [(c.id, dict(c.arguments)) for c in calls] == [("c1", {"a": 1, "b": 2}), ("c2", {})]


def test_text_before_tool_calls_is_kept() -> None:
    acc = feed_all(
        delta("Let me check. "),
        delta(None, tool_calls=[{"index": 0, "id": "c1", "function": {"name": "add", "arguments": "{}"}}]),
        delta(finish="tool_calls"),
        "[DONE]",
    )
    result = acc.result(chunks=4)
    assert result.text == "Let me check. "
    assert result.message.tool_calls[0].name == "add"


@pytest.mark.parametrize(
    ("chunks", "message"),
    [
        ([delta("Hi")], r"without finish_reason and \[DONE\]"),
        ([delta("Hi"), "[DONE]"], r"without finish_reason; the answer is incomplete \(2 characters"),
        ([delta("Hi", finish="stop")], r"without \[DONE\]"),
    ],
)
def test_a_stream_without_finish_reason_or_done_is_incomplete(chunks: list[Any], message: str) -> None:
    with pytest.raises(IncompleteStreamError, match=message):
        feed_all(*chunks).result(chunks=len(chunks))


def test_bad_chunks_are_response_errors() -> None:
    with pytest.raises(ProviderResponseError, match=r"not valid JSON: '\{oops'"):
        feed_all("{oops")
    with pytest.raises(ProviderResponseError, match="not a JSON object"):
        feed_all("[1]")
    with pytest.raises(ProviderResponseError, match="error inside a 200 response: 'boom'"):
        feed_all({"error": {"message": "boom", "type": "server_error"}})


# -- SSE decoding through the model --------------------------------------------------


async def stream_body(
    body: bytes, chunk: int | None = None, headers: dict[str, str] | None = None
) -> tuple[Any, list[str]]:
    server = Server([response(200, body, headers=headers or STREAM, chunk=chunk)])
    tokens: list[str] = []
    async with server.model(max_retries=0) as model:
        result = await model.stream(ChatRequest((Message.user("x"),)), tokens.append)
    return result, tokens


@pytest.mark.parametrize("chunk", [1, 2, 5])
async def test_utf8_split_across_reads_and_comments_and_unknown_fields(chunk: int) -> None:
    body = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        + b"event: message\nid: 7\nretry: 100\n"
        + 'data: {"choices":[{"index":0,"delta":{"content":"Caf\u00e9 \u2615 \U0001f600"},'.encode()
        + b'"obfuscation":"q"}]}\n\n'
        + b": keep-alive\n\n"
        + sse(delta(finish="stop"))
    )
    result, tokens = await stream_body(body, chunk)
    assert tokens == ["Caf\u00e9 \u2615 \U0001f600"]
    assert result.text == "Caf\u00e9 \u2615 \U0001f600"


async def test_multi_line_data_is_joined_with_newlines() -> None:
    body = b'data: {"choices":[{"index":0,\ndata: "delta":{"content":"two lines"}}]}\n\n' + sse(delta(finish="stop"))
    result, _ = await stream_body(body)
    assert result.text == "two lines"


async def test_a_server_that_ignores_stream_true_still_answers() -> None:
    data = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "whole"}}]}
    result, tokens = await stream_body(json.dumps(data).encode(), headers={"content-type": "application/json"})
    assert (result.text, tokens) == ("whole", ["whole"])


async def test_a_server_that_ignores_stream_true_with_only_tool_calls_streams_no_token() -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    data = {"choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}]}
    result, tokens = await stream_body(json.dumps(data).encode(), headers={"content-type": "application/json"})
    assert (result.text, tokens, result.finish_reason) == ("", [], "tool_calls")
    assert [(c.id, c.name, dict(c.arguments)) for c in result.message.tool_calls] == [("call_1", "f", {"a": 1})]


async def test_an_empty_200_stream_is_incomplete() -> None:
    with pytest.raises(IncompleteStreamError, match=r"answered 200 but the stream was empty"):
        await stream_body(b"")


async def test_an_empty_200_with_no_content_type_is_incomplete() -> None:
    with pytest.raises(IncompleteStreamError, match="answered 200 to a stream request with an empty body"):
        await stream_body(b"", headers={"content-type": "text/plain"})


async def test_anything_after_done_is_ignored() -> None:
    body = sse(delta("ok"), delta(finish="stop")) + b"data: {not json}\n\n"
    result, _ = await stream_body(body)
    assert result.text == "ok"
