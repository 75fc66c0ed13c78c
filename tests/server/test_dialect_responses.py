"""OpenAI's Responses dialect of the gateway, sans-IO: what a ``/v1/responses`` body parses
to, each malformed body's 400 naming the field, the ``response`` object and the stream
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

from beamfilter_server._responses_dialect import ResponsesEvents, parse_responses_request, response_object
from beamfilter_server._wire import ChatCall

ITEM = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["message", "function_call", "function_call_output", "reasoning", "item_reference"]),
        "role": st.sampled_from(["user", "assistant", "developer", "system", "tool"]),
        "content": st.text(max_size=10) | JSON,
        "name": JSON,
        "arguments": JSON,
        "call_id": JSON,
        "output": JSON,
    },
)
BODY = st.fixed_dictionaries(
    {
        "model": st.sampled_from(["assistant", "", None]),
        "input": st.text(max_size=10) | st.lists(ITEM, max_size=4) | JSON,
    },
    optional={"instructions": JSON, "tools": JSON, "stream": JSON, "max_output_tokens": JSON, "user": JSON},
)


def parse(body: Any) -> ChatCall:
    return parse_responses_request(body, max_messages=3)


@settings(max_examples=150, deadline=None)
@given(st.one_of(BODY, JSON))
def test_any_body_parses_or_is_a_400_naming_the_field(body: Any) -> None:
    call = parsed_or_refused(parse, body)
    if call is not None:
        assert call.model == body["model"]
        assert call.include_usage is True


def test_input_items_parse_to_chat_messages() -> None:
    body = {
        "model": "assistant",
        "instructions": "Be brief.",
        "input": [
            {"role": "developer", "content": "Use metric units."},
            {
                "type": "message",
                "role": "user",
                "content": [
                    {"type": "input_text", "text": "weather here?"},
                    {"type": "input_image", "image_url": "data:image/png;base64,iVBOR"},
                ],
            },
            {"type": "reasoning", "id": "rs_1", "summary": []},
            {"role": "assistant", "content": [{"type": "output_text", "text": "Checking."}]},
            {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
            {"type": "function_call", "call_id": "c2", "name": "get_time", "arguments": ""},
            {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
            {"type": "function_call_output", "call_id": "c2", "output": [{"type": "input_text", "text": "noon"}]},
            {"type": "function_call", "call_id": "c3", "name": "get_weather", "arguments": "{}"},
            {"role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
        ],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": "The weather.",
                "parameters": {"type": "object"},
                "strict": True,
            }
        ],
        "stream": True,
        "max_output_tokens": 100,
        "top_p": 0.5,
        "user": "ticket-7",
        "store": True,
        "tool_choice": "auto",
    }
    call = parse_responses_request(body, max_messages=16)
    assert call.messages == (
        Message("system", "Be brief."),
        Message("system", "Use metric units."),
        Message(
            "user",
            (ContentPart("text", text="weather here?"), ContentPart("image_url", url="data:image/png;base64,iVBOR")),
        ),
        Message(
            "assistant",
            "Checking.",
            (ToolCall("get_weather", {"city": "Oslo"}, "c1"), ToolCall("get_time", {}, "c2")),
        ),
        Message("tool", "sunny", (), "c1"),
        Message("tool", "noon", (), "c2"),
        Message("assistant", None, (ToolCall("get_weather", {}, "c3"),)),
        Message("assistant", "No."),
    )
    assert (call.stream, call.user) == (True, "ticket-7")
    assert call.options == {"max_tokens": 100, "top_p": 0.5}
    assert [(t.name, t.description, t.parameters) for t in call.tools] == [
        ("get_weather", "The weather.", {"type": "object"})
    ]
    assert parse({"model": "m", "input": "hi"}).messages == (Message("user", "hi"),)


@pytest.mark.parametrize(
    ("body", "param", "message"),
    [
        ("hi", None, "The request body is a JSON str; send a JSON object."),
        ({"input": "hi"}, "model", "The request has no model; send the model id that GET /v1/models lists."),
        ({"model": "m"}, "input", "The request has no input; send a string or a list of items."),
        ({"model": "m", "input": []}, "input", "input is an empty list; send a string or a non-empty list of items."),
        ({"model": "m", "input": 3}, "input", "input is int; send a string or a non-empty list of items."),
        ({"model": "m", "input": ["a", "b", "c", "d"]}, "input", "The request has 4 input items; this gateway takes at most 3 (max_messages)."),
        ({"model": "m", "input": "hi", "previous_response_id": "resp_1"}, "previous_response_id", "previous_response_id is not supported: this gateway keeps no responses. Send the whole input, or name the conversation with the Beamfilter-Conversation header (the memory filter keeps it)."),
        ({"model": "m", "input": "hi", "background": True}, "background", "background is not supported: this gateway keeps no responses. Send the whole input, or name the conversation with the Beamfilter-Conversation header (the memory filter keeps it)."),
        ({"model": "m", "input": "hi", "instructions": ["x"]}, "instructions", "instructions is list; send a string."),
        ({"model": "m", "input": "hi", "stream": 1}, "stream", "stream is int; send true or false."),
        ({"model": "m", "input": "hi", "user": 7}, "user", "user is int; send a string."),
        ({"model": "m", "input": "hi", "max_output_tokens": "9"}, "max_output_tokens", "max_output_tokens is str; send a number."),
        ({"model": "m", "input": "hi", "temperature": True}, "temperature", "temperature is bool; send a number."),
        ({"model": "m", "input": ["hi"]}, "input[0]", "input[0] is str; each item is an object (a message, a function_call or its output)."),
        ({"model": "m", "input": [{"role": "tool", "content": "x"}]}, "input[0].role", "input[0].role is 'tool'; send one of user, system, developer, assistant."),
        ({"model": "m", "input": [{"role": "user"}]}, "input[0].content", "input[0].content is null; send a string or a list of content parts."),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_file", "file_id": "f"}]}]}, "input[0].content[0].type", "input[0].content[0] has type 'input_file'; the gateway takes input_text, output_text, refusal and input_image (by URL) parts."),
        ({"model": "m", "input": [{"role": "assistant", "content": [{"type": "input_image", "image_url": "u"}]}]}, "input[0].content[0].type", "input[0].content[0] has type 'input_image'; the gateway takes input_text, output_text, refusal and input_image (by URL) parts."),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_image", "file_id": "f"}]}]}, "input[0].content[0].image_url", "input[0].content[0].image_url is null; send a non-empty string."),
        ({"model": "m", "input": [{"role": "user", "content": [{"type": "input_text", "text": 1}]}]}, "input[0].content[0].text", "input[0].content[0].text is int; send a string."),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "c", "name": "f", "arguments": {}}]}, "input[0].arguments", "input[0].arguments is dict; send a string."),
        ({"model": "m", "input": [{"type": "function_call", "call_id": "", "name": "f", "arguments": ""}]}, "input[0].call_id", "input[0].call_id is an empty string; send a non-empty string."),
        ({"model": "m", "input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[0].output", "input[0].output is int; send a string or a list of content parts."),
        ({"model": "m", "input": [{"type": "item_reference", "id": "msg_1"}]}, "input[0].type", "input[0] has type 'item_reference'; the gateway takes message, function_call, function_call_output and reasoning (dropped) items."),
        ({"model": "m", "input": "hi", "tools": {}}, "tools", "tools is dict; send a list of function tools."),
        ({"model": "m", "input": "hi", "tools": [{"type": "web_search"}]}, "tools[0].type", "tools[0] has type 'web_search'; the gateway takes function tools (type, name, parameters)."),
        ({"model": "m", "input": "hi", "tools": ["f"]}, "tools[0].type", "tools[0] has type 'str'; the gateway takes function tools (type, name, parameters)."),
        ({"model": "m", "input": "hi", "tools": [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}]}, "tools", "tools names one function twice; tool names must be unique."),
        ({"model": "m", "input": "hi", "tools": [{"type": "function"}]}, "tools[0].function.name", "tools[0].function.name is NoneType; send a string."),
    ],
)  # fmt: skip
def test_each_malformed_body_is_a_400_naming_the_field(body: Any, param: str | None, message: str) -> None:
    with pytest.raises(GatewayError) as refused:
        parse(body)
    assert (refused.value.status, refused.value.param, str(refused.value)) == (400, param, message)


BODY_ECHO = {
    "model": "assistant",
    "input": "hi",
    "instructions": "Be brief.",
    "temperature": 0.2,
    "tools": [{"type": "function", "name": "f"}],
}


def test_a_completion_becomes_a_response_object() -> None:
    calls = [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]
    answer = completion({"role": "assistant", "content": "Calling.", "tool_calls": calls}, "tool_calls")
    shaped = response_object(answer, BODY_ECHO)
    message_id, call_id = shaped["output"][0]["id"], shaped["output"][1]["id"]
    assert (message_id[:4], call_id[:3]) == ("msg_", "fc_")
    assert isinstance(shaped.pop("created_at"), int)
    assert shaped == {
        "id": "resp_abc",
        "object": "response",
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "instructions": "Be brief.",
        "max_output_tokens": None,
        "model": "assistant",
        "output": [
            {
                "type": "message",
                "id": message_id,
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Calling.", "annotations": [], "logprobs": []}],
            },
            {
                "type": "function_call",
                "id": call_id,
                "call_id": "c1",
                "name": "f",
                "arguments": '{"a": 1}',
                "status": "completed",
            },
        ],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "temperature": 0.2,
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": [{"type": "function", "name": "f"}],
        "top_p": None,
        "truncation": "disabled",
        "usage": {
            "input_tokens": 12,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 17,
        },
        "user": None,
        "metadata": {},
    }
    blocked = response_object(
        completion(
            {"role": "assistant", "content": [{"type": "text", "text": "no"}]},
            "content_filter",
            beamfilter={"blocked_by": "safeguard"},
        ),
        BODY_ECHO,
    )
    assert (blocked["status"], blocked["incomplete_details"], blocked["beamfilter"]) == (
        "incomplete",
        {"reason": "content_filter"},
        {"blocked_by": "safeguard"},
    )
    assert blocked["output"][0]["content"][0]["text"] == "no"
    cut = response_object(completion({"role": "assistant", "content": None}, "length"), BODY_ECHO)
    assert (cut["status"], cut["incomplete_details"], cut["output"]) == (
        "incomplete",
        {"reason": "max_output_tokens"},
        [],
    )
    empty = completion({"role": "assistant", "content": "x"}, "stop")
    empty["usage"] = None
    assert response_object(empty, BODY_ECHO)["usage"]["total_tokens"] == 0


def _chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return {
        "id": "chatcmpl-abc",
        "object": "chat.completion.chunk",
        "created": 7,
        "model": "assistant",
        "choices": [choice],
        **extra,
    }


def test_chat_chunks_become_responses_stream_events() -> None:
    events = ResponsesEvents(BODY_ECHO)
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    out = [
        *events.feed(_chunk({"role": "assistant", "content": ""})),
        *events.feed("waiting up to 5 s for the decision on pause p"),
        *events.feed(_chunk({"content": "Hel"})),
        *events.feed(_chunk({"content": "lo"})),
        *events.feed(_chunk({"tool_calls": [call]}, "tool_calls", beamfilter={"refused": [{"id": "x"}]})),
        *events.feed({"id": "chatcmpl-abc", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}),
        *events.close(),
    ]
    assert out[2] == "waiting up to 5 s for the decision on pause p"
    dicts = [e for e in out if isinstance(e, dict)]
    assert [(e["type"], e["sequence_number"]) for e in dicts] == [
        (kind, n)
        for n, kind in enumerate(
            [
                "response.created",
                "response.in_progress",
                "response.output_item.added",
                "response.content_part.added",
                "response.output_text.delta",
                "response.output_text.delta",
                "response.output_text.done",
                "response.content_part.done",
                "response.output_item.done",
                "response.output_item.added",
                "response.function_call_arguments.delta",
                "response.function_call_arguments.done",
                "response.output_item.done",
                "response.completed",
            ]
        )
    ]
    created = dicts[0]["response"]
    assert (created["id"], created["status"], created["created_at"], created["output"]) == (
        "resp_abc",
        "in_progress",
        7,
        [],
    )
    message_id = dicts[2]["item"]["id"]
    assert dicts[2]["item"] == {
        "type": "message",
        "id": message_id,
        "status": "in_progress",
        "role": "assistant",
        "content": [],
    }
    assert dicts[4] == {
        "type": "response.output_text.delta",
        "sequence_number": 4,
        "item_id": message_id,
        "output_index": 0,
        "content_index": 0,
        "delta": "Hel",
        "logprobs": [],
    }
    assert dicts[6]["text"] == "Hello"
    call_id = dicts[9]["item"]["id"]
    assert dicts[9]["item"] == {
        "type": "function_call",
        "id": call_id,
        "call_id": "c1",
        "name": "f",
        "arguments": "",
        "status": "in_progress",
    }
    assert dicts[10] == {
        "type": "response.function_call_arguments.delta",
        "sequence_number": 10,
        "item_id": call_id,
        "output_index": 1,
        "delta": '{"a": 1}',
    }
    assert (dicts[11]["arguments"], dicts[11]["name"]) == ('{"a": 1}', "f")
    final = dicts[-1]["response"]
    assert [i["type"] for i in final["output"]] == ["message", "function_call"]
    assert (final["status"], final["usage"]["total_tokens"], final["beamfilter"]) == (
        "completed",
        5,
        {"refused": [{"id": "x"}]},
    )
    assert repr(events) == "ResponsesEvents(items=2, finish='tool_calls')"


def test_a_paused_stream_is_incomplete_and_an_unfinished_or_failed_one_ends_without_it() -> None:
    events = ResponsesEvents(BODY_ECHO)
    events.feed(_chunk({"role": "assistant", "content": ""}))
    events.feed(_chunk({"content": "Paused: refund waits."}, "paused", beamfilter={"status": "paused"}))
    (last,) = events.close()
    assert isinstance(last, dict)
    assert last["type"] == "response.incomplete"
    assert (last["response"]["incomplete_details"], last["response"]["beamfilter"]) == (
        {"reason": "paused"},
        {"status": "paused"},
    )
    assert last["response"]["output"][0]["content"][0]["text"] == "Paused: refund waits."

    unfinished = ResponsesEvents(BODY_ECHO)
    assert repr(unfinished) == "ResponsesEvents(items=0, finish=None)"
    assert unfinished.close() == []
    unfinished.feed(_chunk({"role": "assistant", "content": ""}))
    unfinished.feed(_chunk({"content": "Hel"}))
    assert unfinished.close() == []
    error = GatewayError("The answer is too long.", status=502, type="server_error", code="answer_too_large")
    assert unfinished.fail(error) == [
        {
            "type": "error",
            "sequence_number": 5,
            "code": "answer_too_large",
            "message": "The answer is too long.",
            "param": None,
            "error": {
                "type": "server_error",
                "code": "answer_too_large",
                "message": "The answer is too long.",
                "param": None,
            },
        }
    ]


# -- over HTTP: the same refusals, in OpenAI's shape, with their statuses -------------------


@pytest.fixture
def http() -> Iterator[TestClient]:
    with fine_gateway("sk-responses-http-key-012345") as client:
        yield client


def _post(http: TestClient, content: str, **headers: str) -> tuple[int, Any]:
    sent = {"Authorization": "Bearer sk-responses-http-key-012345", "content-type": "application/json", **headers}
    answer = http.post("/v1/responses", content=content, headers=sent)
    return answer.status_code, answer.json()


def _error(message: str, param: str | None = None, code: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": code}}


@pytest.mark.packages
def test_malformed_huge_nested_and_surrogate_bodies_over_http(http: TestClient) -> None:
    assert _post(http, "{") == (400, _error("The request body is not valid JSON.", code="invalid_json"))
    assert _post(http, "[" * 2000 + "]" * 2000) == (
        400,
        _error("The request body is not valid JSON.", code="invalid_json"),
    )
    assert _post(http, json.dumps({"model": "assistant", "input": "x" * 6000}))[0] == 413
    lone = '{"model": "assistant", "input": [{"role": "user", "content": [{"type": "input_text", "text": "\\udc00"}]}]}'
    assert _post(http, lone) == (
        400,
        _error(
            "input[0].content[0].text holds a lone surrogate (an unpaired \\ud800-\\udfff escape); send valid Unicode text.",
            "input[0].content[0].text",
        ),
    )
    assert (
        _post(http, json.dumps({"model": "assistant", "input": "hi", "previous_response_id": "r"}))[1]["error"]["param"]
        == "previous_response_id"
    )
    assert _post(http, json.dumps({"model": "other", "input": "hi"})) == (
        404,
        {
            "error": {
                "message": "The model 'other' does not exist; this gateway serves 'assistant'.",
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }
        },
    )
