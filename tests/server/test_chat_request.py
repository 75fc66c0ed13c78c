"""Each malformed chat request body gets its own 400: the exact message and the field it
names; and what the parser makes of the content parts, tool calls and tools it accepts."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

from beamfilter_core import ContentPart, Message, Tool, ToolCall
from beamfilter_core.errors import GatewayError
from beamfilter_server._wire import parse_chat_request

USER = {"role": "user", "content": "hi"}


def _body(*messages: Any, **fields: Any) -> dict[str, Any]:
    return {"model": "assistant", "messages": list(messages or [USER]), **fields}


FN = {"type": "function", "function": {"name": "lookup"}}
REFUSED = [
    ("[1]", [1], None, "The request body is a JSON list; send a JSON object."),
    (
        "no model",
        {"messages": [USER]},
        "model",
        "The request has no model; send the model id that GET /v1/models lists.",
    ),
    (
        "no messages",
        _body() | {"messages": []},
        "messages",
        "The request has no messages; send a non-empty list of messages.",
    ),
    ("message not an object", _body("hi"), "messages[0]", "messages[0] is str; each message is an object with a role."),
    (
        "unknown role",
        _body({"role": "wizard"}),
        "messages[0].role",
        "messages[0].role is 'wizard'; send one of system, developer, user, assistant, tool.",
    ),
    (
        "content a number",
        _body({"role": "user", "content": 7}),
        "messages[0].content",
        "messages[0].content is int; send a string, null or a list of content parts.",
    ),
    (
        "unknown part",
        _body({"role": "user", "content": [{"type": "audio"}]}),
        "messages[0].content[0]",
        "messages[0].content[0] has type 'audio'; the gateway takes 'text' and 'image_url' parts.",
    ),
    (
        "text part without text",
        _body({"role": "user", "content": [{"type": "text", "text": 1}]}),
        "messages[0].content[0].text",
        "messages[0].content[0].text is int; send a string.",
    ),
    (
        "tool message without id",
        _body({"role": "tool", "content": "42"}),
        "messages[0].tool_call_id",
        "messages[0] is a tool message without tool_call_id; send the id of the call it answers.",
    ),
    (
        "tool_calls an object",
        _body({"role": "assistant", "tool_calls": {"id": "c1"}}),
        "messages[0].tool_calls",
        "messages[0].tool_calls is dict; send a list of tool calls.",
    ),
    (
        "tool call without function",
        _body({"role": "assistant", "tool_calls": [{"id": "c1"}]}),
        "messages[0].tool_calls[0]",
        "messages[0].tool_calls[0] has no function object; send {'id', 'type': 'function', 'function': "
        "{'name', 'arguments'}}.",
    ),
    ("n of 2", _body(n=2), "n", "n is 2; the gateway answers with one choice (n = 1)."),
    ("stream a string", _body(stream="yes"), "stream", "stream is 'yes'; send true or false."),
    ("tools an object", _body(tools={"a": 1}), "tools", "tools is dict; send a list of function tools."),
    (
        "tool not a function",
        _body(tools=[{"type": "retrieval"}]),
        "tools[0]",
        "tools[0] is not a function tool; send {'type': 'function', 'function': {'name', 'parameters'}}.",
    ),
    (
        "tool name with a space",
        _body(tools=[{"type": "function", "function": {"name": "look up"}}]),
        "tools[0].function.name",
        "tools[0].function.name is 'look up'; tool names are 1 to 64 letters, digits, '_' or '-'.",
    ),
    (
        "tool parameters a list",
        _body(tools=[{"type": "function", "function": {"name": "lookup", "parameters": []}}]),
        "tools[0].function.parameters",
        "tools[0].function.parameters is list; send a JSON schema object.",
    ),
    ("one tool twice", _body(tools=[FN, FN]), "tools", "tools names one function twice; tool names must be unique."),
]


@pytest.mark.parametrize(("body", "param", "message"), [case[1:] for case in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_malformed_body_is_400_naming_the_field(body: Any, param: str | None, message: str) -> None:
    with pytest.raises(GatewayError) as refused:
        parse_chat_request(body, max_messages=8)
    assert (str(refused.value), refused.value.status, refused.value.param) == (message, 400, param)


def test_more_messages_than_max_messages_is_400_too_many_messages() -> None:
    with pytest.raises(GatewayError) as refused:
        parse_chat_request(_body(USER, USER, USER), max_messages=2)
    assert str(refused.value) == "The request has 3 messages; this gateway takes at most 2 (max_messages)."
    assert (refused.value.param, refused.value.code) == ("messages", "too_many_messages")


def test_content_parts_tool_calls_and_tool_messages_are_parsed() -> None:
    call = parse_chat_request(
        _body(
            {"role": "developer", "content": "be brief"},
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "what is this?"},
                    {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
                    {"type": "image_url", "image_url": "https://example.com/b.png"},
                ],
            },
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "lookup", "arguments": {"order": 7}}},
                    {"id": "", "type": "function", "function": {"name": "lookup", "arguments": '{"order": 8}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "shipped"}], "name": "lookup"},
            stream=None,
            user="",
            stream_options={"include_usage": True},
            temperature=0.2,
            seed=None,
            tools=[{"type": "function", "function": {"name": "lookup", "description": 3}}],
        ),
        max_messages=8,
    )
    system, user, assistant, tool_message = call.messages
    assert system == Message("system", "be brief")
    assert user.content == (
        ContentPart("text", text="what is this?"),
        ContentPart("image_url", url="https://example.com/a.png"),
        ContentPart("image_url", url="https://example.com/b.png"),
    )
    assert next((c.name, dict(c.arguments), c.id) for c in assistant.tool_calls) == ("lookup", {"order": 7}, "c1")
    second = assistant.tool_calls[1]
    assert (dict(second.arguments), second.id != "") == ({"order": 8}, True)
    assert tool_message == Message("tool", "shipped", (), "c1", "lookup")
    assert (call.stream, call.include_usage, call.user) == (False, True, None)
    assert dict(call.options) == {"temperature": 0.2}
    assert [(t.name, t.description, t.parameters) for t in call.tools] == [
        ("lookup", "", {"type": "object", "properties": {}})
    ]
    assert isinstance(second, ToolCall)
    assert isinstance(call.tools[0], Tool)
