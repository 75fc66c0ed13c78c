"""Anthropic's Messages dialect of the gateway, sans-IO: what a ``/v1/messages`` body parses
to, each malformed body's 400 naming the field, the ``message`` object and the stream
events made of the gateway's chat answers. The HTTP side is in test_dialect_clients.py."""

# ruff: noqa: E501  # tables of exact messages read best one case a line

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core import ContentPart, Message, ToolCall
from beamfilter_core.errors import GatewayError

pytest.importorskip("beamfilter_server")

from server._bodies import JSON, completion, fine_gateway, parsed_or_refused
from starlette.testclient import TestClient

from beamfilter_server._anthropic_dialect import AnthropicEvents, error_body, message_object, parse_messages_request
from beamfilter_server._wire import ChatCall

BLOCK = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image", "tool_use", "tool_result", "thinking", "document", None])},
    optional={
        "text": JSON,
        "source": JSON,
        "id": JSON,
        "name": JSON,
        "input": JSON,
        "tool_use_id": JSON,
        "content": JSON,
    },
)
MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "system", None])},
    optional={"content": st.text(max_size=10) | st.lists(BLOCK, max_size=3) | JSON},
)
BODY = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["assistant", "", None]),
        "max_tokens": st.sampled_from([1, 1024, 0, True, "9", None]),
        "messages": st.lists(MESSAGE, max_size=4) | JSON,
    },
    optional={"system": JSON, "tools": JSON, "stream": JSON, "temperature": JSON, "stop_sequences": JSON},
)


def parse(body: Any) -> ChatCall:
    return parse_messages_request(body, max_messages=3)


def refusal(body: Any) -> tuple[str | None, str]:
    with pytest.raises(GatewayError) as refused:
        parse(body)
    assert refused.value.status == 400
    return refused.value.param, str(refused.value)


def _ask(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "assistant", "max_tokens": 64, "messages": list(messages), **fields}


USER = {"role": "user", "content": "hi"}


@settings(max_examples=150, deadline=None)
@given(st.one_of(BODY, JSON))
def test_any_body_parses_or_is_a_400_naming_the_field(body: Any) -> None:
    call = parsed_or_refused(parse, body)
    if call is not None:
        assert call.model == body["model"]
        assert call.options["max_tokens"] == body["max_tokens"]
        assert call.include_usage is True


def test_a_conversation_with_tool_use_and_tool_results_parses_to_chat_messages() -> None:
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBOR"}}
    linked = {"type": "image", "source": {"type": "url", "url": "https://example.com/a.png"}}
    body = _ask(
        {"role": "user", "content": [{"type": "text", "text": "look"}, image, linked]},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "Checking."},
                {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "sunny"},
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_2",
                    "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
                },
                {"type": "text", "text": "and?", "cache_control": {"type": "ephemeral"}},
            ],
        },
        system=[{"type": "text", "text": "Be brief."}, {"type": "text", "text": "Be kind."}],
        stream=True,
        temperature=0.5,
        top_p=0.9,
        stop_sequences=[],
        metadata={"user_id": "u1"},
        tools=[{"name": "get_weather", "description": "The weather.", "input_schema": {"type": "object"}}],
    )
    call = parse(body)
    assert call.messages == (
        Message("system", "Be brief.\nBe kind."),
        Message(
            "user",
            (
                ContentPart("text", text="look"),
                ContentPart("image_url", url="data:image/png;base64,iVBOR"),
                ContentPart("image_url", url="https://example.com/a.png"),
            ),
        ),
        Message("assistant", "Checking.", (ToolCall("get_weather", {"city": "Oslo"}, "toolu_1"),)),
        Message("tool", "sunny", (), "toolu_1"),
        Message("tool", "a\nb", (), "toolu_2"),
        Message("user", "and?"),
    )
    assert call.stream is True
    assert call.options == {"max_tokens": 64, "temperature": 0.5, "top_p": 0.9}
    assert [(t.name, t.description, t.parameters) for t in call.tools] == [
        ("get_weather", "The weather.", {"type": "object"})
    ]
    assert call.user is None  # metadata.user_id names no conversation


def test_simple_shapes() -> None:
    only_calls = {"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}
    only_results = {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t"}]}
    call = parse(_ask(USER, only_calls, only_results, system="", stop_sequences=["\n\nHuman:"]))
    assert call.messages == (
        Message("user", "hi"),
        Message("assistant", None, (ToolCall("f", {}, "t"),)),
        Message("tool", "", (), "t"),
    )
    assert call.options == {"max_tokens": 64, "stop": ["\n\nHuman:"]}
    assert parse(_ask(USER, system="Be brief.")).messages[0] == Message("system", "Be brief.")
    assert parse(_ask(USER, system=[{"type": "text", "text": ""}])).messages == (Message("user", "hi"),)
    assert parse(_ask(USER, tools=[{"type": "custom", "name": "f", "input_schema": {"type": "object"}}])).tools


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ([], None, "The request body is a JSON list; send a JSON object."),
        ({"max_tokens": 5, "messages": [USER]}, "model", "The request has no model; send the model name this gateway serves (its [server] model_name)."),
        ({"model": "m", "messages": [USER]}, "max_tokens", "max_tokens is null; send the most tokens the answer may have (an integer from 1)."),
        ({"model": "m", "max_tokens": True, "messages": [USER]}, "max_tokens", "max_tokens is true; send the most tokens the answer may have (an integer from 1)."),
        ({"model": "m", "max_tokens": 0, "messages": [USER]}, "max_tokens", "max_tokens is 0; send the most tokens the answer may have (an integer from 1)."),
        (_ask(USER, temperature="hot"), "temperature", "temperature is str; send a number."),
        (_ask(USER, stop_sequences="END"), "stop_sequences", "stop_sequences is not a list of strings; send a list of strings."),
        (_ask(), "messages", "The request has no messages; send a non-empty list of messages."),
        (_ask(USER, USER, USER, USER), "messages", "The request has 4 messages; this gateway takes at most 3 (max_messages)."),
        (_ask(USER, stream="yes"), "stream", "stream is str; send true or false."),
        (_ask(USER, system=7), "system", "system is int; send a string or a list of text blocks."),
        (_ask(USER, system=[{"type": "image"}]), "system[0].type", "system[0] has type 'image'; a tool_result here takes text blocks."),
        (_ask("hi"), "messages[0]", "messages[0] is str; send an object with role and content."),
        (_ask({"role": "system", "content": "x"}), "messages[0].role", "messages[0].role is 'system'; send 'user' or 'assistant' (the system prompt goes in 'system')."),
        (_ask({"role": "user"}), "messages[0].content", "messages[0].content is null; send a string or a non-empty list of content blocks."),
        (_ask({"role": "user", "content": []}), "messages[0].content", "messages[0].content is an empty list; send a string or a non-empty list of content blocks."),
        (_ask({"role": "user", "content": ["hi"]}), "messages[0].content[0]", "messages[0].content[0] is str; send a content block with a type."),
        (_ask({"role": "user", "content": [{"type": "text"}]}), "messages[0].content[0].text", "messages[0].content[0].text is null; send a string."),
        (_ask({"role": "user", "content": [{"type": "document", "source": {}}]}), "messages[0].content[0].type", "messages[0].content[0] has type 'document'; a user message takes text, image, tool_use (assistant), tool_result (user), thinking (assistant, dropped) blocks."),
        (_ask({"role": "user", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {}}]}), "messages[0].content[0].type", "messages[0].content[0] has type 'tool_use'; a user message takes text, image, tool_use (assistant), tool_result (user), thinking (assistant, dropped) blocks."),
        (_ask({"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "t"}]}), "messages[0].content[0].type", "messages[0].content[0] has type 'tool_result'; a assistant message takes text, image, tool_use (assistant), tool_result (user), thinking (assistant, dropped) blocks."),
        (_ask({"role": "user", "content": [{"type": "image"}]}), "messages[0].content[0].source", "messages[0].content[0].source is null; send an object with type 'base64' or 'url'."),
        (_ask({"role": "user", "content": [{"type": "image", "source": {"type": "file", "file_id": "f"}}]}), "messages[0].content[0].source.type", "messages[0].content[0].source.type is 'file'; send 'base64' or 'url'."),
        (_ask({"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "", "data": "x"}}]}), "messages[0].content[0].source.media_type", "messages[0].content[0].source.media_type is an empty string; send a non-empty string."),
        (_ask({"role": "user", "content": [{"type": "image", "source": {"type": "url"}}]}), "messages[0].content[0].source.url", "messages[0].content[0].source.url is null; send a non-empty string."),
        (_ask({"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}), "messages[0].content[0].id", "messages[0].content[0].id is null; send a non-empty string."),
        (_ask({"role": "assistant", "content": [{"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}), "messages[0].content[0].input", "messages[0].content[0].input is str; send the call's arguments as an object."),
        (_ask({"role": "user", "content": [{"type": "tool_result", "tool_use_id": ""}]}), "messages[0].content[0].tool_use_id", "messages[0].content[0].tool_use_id is an empty string; send a non-empty string."),
        (_ask({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": 5}]}), "messages[0].content[0].content", "messages[0].content[0].content is int; send a string or a list of text blocks."),
        (_ask({"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t", "content": [{"type": "image"}]}]}), "messages[0].content[0].content[0].type", "messages[0].content[0].content[0] has type 'image'; a tool_result here takes text blocks."),
        (_ask(USER, tools={"name": "f"}), "tools", "tools is dict; send a list of tools with name and input_schema."),
        (_ask(USER, tools=["f"]), "tools[0]", "tools[0] is str; send a tool with name and input_schema."),
        (_ask(USER, tools=[{"type": "web_search_20250305", "name": "web_search"}]), "tools[0].type", "tools[0] has type 'web_search_20250305'; the gateway takes client tools (name, input_schema)."),
        (_ask(USER, tools=[{"name": "f"}]), "tools[0].input_schema", "tools[0] has no input_schema; send the JSON schema of the tool's input."),
        (_ask(USER, tools=[{"name": "a b", "input_schema": {}}]), "tools[0].function.name", "tools[0].function.name is 'a b'; tool names are 1 to 64 letters, digits, '_' or '-'."),
        (_ask(USER, tools=[{"name": "f", "input_schema": {}}, {"name": "f", "input_schema": {}}]), "tools", "tools names one tool twice; tool names must be unique."),
    ],
)  # fmt: skip
def test_each_malformed_body_is_a_400_naming_the_field(body: Any, param: str | None, message: str) -> None:
    assert refusal(body) == (param, message)


def test_a_completion_becomes_a_message_object() -> None:
    calls = [
        {"id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}},
        {"id": "toolu_2", "type": "function", "function": {"name": "g", "arguments": "[1]"}},
        {"id": "toolu_3", "type": "function", "function": {"name": "h", "arguments": "{bad"}},
        {"id": "toolu_4", "type": "function", "function": {"name": "k", "arguments": ""}},
    ]
    answer = completion(
        {"role": "assistant", "content": "Calling.", "tool_calls": calls},
        "tool_calls",
        beamfilter={"refused": [{"id": "x"}]},
    )
    assert message_object(answer) == {
        "id": "msg_abc",
        "type": "message",
        "role": "assistant",
        "model": "assistant",
        "content": [
            {"type": "text", "text": "Calling."},
            {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {"a": 1}},
            {"type": "tool_use", "id": "toolu_2", "name": "g", "input": {}},
            {"type": "tool_use", "id": "toolu_3", "name": "h", "input": {}},
            {"type": "tool_use", "id": "toolu_4", "name": "k", "input": {}},
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 12, "output_tokens": 5},
        "beamfilter": {"refused": [{"id": "x"}]},
    }
    blocked = completion(
        {"role": "assistant", "content": [{"type": "text", "text": "no"}]},
        "content_filter",
        beamfilter={"blocked_by": "safeguard"},
    )
    blocked["usage"] = None
    shaped = message_object(blocked)
    assert (shaped["content"], shaped["stop_reason"], shaped["usage"]) == (
        [{"type": "text", "text": "no"}],
        "refusal",
        {"input_tokens": 0, "output_tokens": 0},
    )
    assert shaped["beamfilter"] == {"blocked_by": "safeguard"}
    assert message_object(completion({"role": "assistant", "content": None}, "paused"))["stop_reason"] == "pause_turn"


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, "invalid_request_error"), (401, "authentication_error"), (404, "not_found_error"), (409, "invalid_request_error"),
     (413, "request_too_large"), (415, "invalid_request_error"), (429, "rate_limit_error"), (500, "api_error"),
     (502, "api_error"), (503, "api_error"), (504, "timeout_error")],
)  # fmt: skip
def test_errors_take_anthropics_shape_and_type(status: int, kind: str) -> None:
    error = GatewayError("It failed.", status=status, param="x", code="c")
    assert error_body(error) == {"type": "error", "error": {"type": kind, "message": "It failed."}}


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {"id": "chatcmpl-abc", "object": "chat.completion.chunk", "model": "assistant", "choices": [choice], **extra}


def test_chat_chunks_become_anthropics_stream_events() -> None:
    events = AnthropicEvents()
    call = {"index": 0, "id": "toolu_1", "type": "function", "function": {"name": "f", "arguments": '{"a":1}'}}
    out = [
        *events.feed(_chunk({"role": "assistant", "content": ""})),
        *events.feed("waiting up to 5 s for the decision on pause p"),
        *events.feed(_chunk({"content": "Hel"})),
        *events.feed(_chunk({"content": "lo"})),
        *events.feed(_chunk({"tool_calls": [call]}, "tool_calls", beamfilter={"refused": [{"id": "x"}]})),
        *events.feed({"id": "chatcmpl-abc", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        *events.close(),
    ]
    assert out == [
        {
            "type": "message_start",
            "message": {
                "id": "msg_abc",
                "type": "message",
                "role": "assistant",
                "model": "assistant",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
        },
        {"type": "ping"},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "lo"}},
        {"type": "content_block_stop", "index": 0},
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}},
        },
        {"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'}},
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "tool_use", "stop_sequence": None},
            "usage": {"input_tokens": 3, "output_tokens": 2},
            "beamfilter": {"refused": [{"id": "x"}]},
        },
        {"type": "message_stop"},
    ]
    assert repr(events) == "AnthropicEvents(blocks=2, stop='tool_use')"


def test_a_paused_stream_ends_with_its_text_and_pause_turn_and_an_unfinished_one_with_nothing() -> None:
    events = AnthropicEvents()
    events.feed(_chunk({"role": "assistant", "content": ""}))
    out = events.feed(_chunk({"content": "Paused: refund waits."}, "paused", beamfilter={"status": "paused"}))
    assert [e["type"] for e in out] == ["content_block_start", "content_block_delta", "content_block_stop"]  # type: ignore[index]
    closing = events.close()
    assert closing[0] == {
        "type": "message_delta",
        "delta": {"stop_reason": "pause_turn", "stop_sequence": None},
        "usage": {"input_tokens": 0, "output_tokens": 0},
        "beamfilter": {"status": "paused"},
    }
    unfinished = AnthropicEvents()
    unfinished.feed(_chunk({"role": "assistant", "content": ""}))
    unfinished.feed(_chunk({"content": "Hel"}))
    assert unfinished.close() == []
    assert unfinished.fail(GatewayError("The answer is too long.", status=502)) == [
        {"type": "error", "error": {"type": "api_error", "message": "The answer is too long."}}
    ]


# -- over HTTP: the same refusals, in Anthropic's shape, with their statuses ----------------


@pytest.fixture
def http() -> Iterator[TestClient]:
    with fine_gateway("sk-anthropic-http-key-012345") as client:
        yield client


def _post(http: TestClient, content: bytes | str, **headers: str) -> tuple[int, Any]:
    sent = {"x-api-key": "sk-anthropic-http-key-012345", "content-type": "application/json", **headers}
    answer = http.post("/v1/messages", content=content, headers=sent)
    return answer.status_code, answer.json()


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


@pytest.mark.packages
def test_malformed_huge_nested_and_surrogate_bodies_over_http(http: TestClient) -> None:
    assert _post(http, "{") == (400, _error("invalid_request_error", "The request body is not valid JSON."))
    assert _post(http, "[" * 2000 + "]" * 2000) == (
        400,
        _error("invalid_request_error", "The request body is not valid JSON."),
    )
    assert _post(http, json.dumps(_ask(USER, padding="x" * 6000))) == (
        413,
        _error("request_too_large", "The request body is larger than max_body_bytes=5000."),
    )
    assert _post(http, json.dumps(_ask(USER)), **{"content-type": "text/plain"}) == (
        415,
        _error("invalid_request_error", "Send the body as Content-Type: application/json (got 'text/plain')."),
    )
    lone = '{"model": "assistant", "max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "text", "text": "a\\ud800"}]}]}'
    assert _post(http, lone) == (
        400,
        _error(
            "invalid_request_error",
            "messages[0].content[0].text holds a lone surrogate (an unpaired \\ud800-\\udfff escape); send valid Unicode text.",
        ),
    )
    key = '{"model": "assistant", "max_tokens": 5, "messages": [{"role": "user", "content": "hi", "\\udfff": 1}]}'
    assert _post(http, key)[1]["error"]["message"].startswith("messages[0] holds a lone surrogate")
    paired = '{"model": "assistant", "max_tokens": 5, "messages": [{"role": "user", "content": "\\ud83d\\ude00"}]}'
    assert _post(http, paired)[0] == 200
    missing = json.dumps({"model": "assistant", "messages": [USER]})
    assert _post(http, missing) == (
        400,
        _error(
            "invalid_request_error", "max_tokens is null; send the most tokens the answer may have (an integer from 1)."
        ),
    )
    assert _post(http, json.dumps(_ask({"role": "user", "content": [{"type": "video"}]})))[0] == 400
