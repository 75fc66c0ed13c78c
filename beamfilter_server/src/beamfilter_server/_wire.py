"""The server side of OpenAI's chat-completions wire: requests in, completions and chunks out.

Pure functions on plain dicts (no I/O). Replies reuse core's ``message_to_json`` so the
gateway and the OpenAI client model speak one dialect. Every refusal is a
:class:`GatewayError` naming the field (``param``) and what to send instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from beamfilter_core import ContentPart, Message, Tool, ToolCall, Usage
from beamfilter_core.errors import GatewayError
from beamfilter_core.wire import message_to_json

__all__ = [
    "PASSED_OPTIONS",
    "ChatCall",
    "bad_request",
    "chunk",
    "completion",
    "completion_chunks",
    "error_body",
    "json_kind",
    "parse_chat_request",
    "number_field",
    "parse_tool",
    "parse_tools",
    "string_field",
    "tool_call_deltas",
]

#: Request fields handed to the upstream model as they are (the rest are refused or ignored).
PASSED_OPTIONS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "seed",
        "presence_penalty",
        "frequency_penalty",
        "response_format",
        "logit_bias",
    }
)
_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}
_TOOL_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def bad_request(message: str, param: str | None, code: str | None = None) -> GatewayError:
    """A 400 naming the field (``param``) of a request body that is wrong, in every dialect."""
    return GatewayError(message, status=400, param=param, code=code)


def json_kind(value: Any) -> str:
    """The JSON kind of ``value`` as a refusal names it (``null``, ``int``, ``list``...)."""
    return "null" if value is None else type(value).__name__


def string_field(value: Any, where: str, *, empty: bool = True) -> str:
    """``value`` when it is a string (non-empty unless ``empty``), else a 400 naming ``where``."""
    if not isinstance(value, str) or (not empty and not value):
        shown = "an empty string" if value == "" else json_kind(value)
        msg = f"{where} is {shown}; send a {'' if empty else 'non-empty '}string."
        raise bad_request(msg, where)
    return value


@attrs.frozen(slots=True)
class ChatCall:
    """One parsed ``/v1/chat/completions`` request."""

    model: str
    messages: tuple[Message, ...]
    stream: bool = False
    include_usage: bool = False
    tools: tuple[Tool, ...] = ()
    options: Mapping[str, Any] = attrs.field(factory=dict)
    user: str | None = None


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str):
        msg = f"{where} is {type(value).__name__}; send a string."
        raise bad_request(msg, where)
    return value


def _content(value: Any, where: str) -> str | tuple[ContentPart, ...] | None:
    if value is None or isinstance(value, str):
        return value
    if not isinstance(value, list):
        msg = f"{where} is {type(value).__name__}; send a string, null or a list of content parts."
        raise bad_request(msg, where)
    parts: list[ContentPart] = []
    for position, part in enumerate(value):
        at = f"{where}[{position}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text":
            parts.append(ContentPart("text", text=_text(part.get("text"), f"{at}.text")))
        elif kind == "image_url":
            image = part.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            parts.append(ContentPart("image_url", url=_text(url, f"{at}.image_url.url")))
        else:
            msg = f"{at} has type {kind!r}; the gateway takes 'text' and 'image_url' parts."
            raise bad_request(msg, at)
    return tuple(parts)


def _tool_calls(value: Any, where: str) -> tuple[ToolCall, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        msg = f"{where} is {type(value).__name__}; send a list of tool calls."
        raise bad_request(msg, where)
    calls = []
    for position, raw in enumerate(value):
        at = f"{where}[{position}]"
        function = raw.get("function") if isinstance(raw, Mapping) else None
        if not isinstance(function, Mapping):
            msg = (
                f"{at} has no function object; send {{'id', 'type': 'function', 'function': {{'name', 'arguments'}}}}."
            )
            raise bad_request(msg, at)
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments)
        call_id = raw.get("id")
        calls.append(
            ToolCall.from_json(
                _text(function.get("name"), f"{at}.function.name"),
                arguments,
                call_id if isinstance(call_id, str) and call_id else None,
            )
        )
    return tuple(calls)


def _message(raw: Any, where: str) -> Message:
    if not isinstance(raw, Mapping):
        msg = f"{where} is {type(raw).__name__}; each message is an object with a role."
        raise bad_request(msg, where)
    role = _ROLES.get(raw.get("role"))  # type: ignore[arg-type]
    if role is None:
        msg = f"{where}.role is {raw.get('role')!r}; send one of system, developer, user, assistant, tool."
        raise bad_request(msg, f"{where}.role")
    content = _content(raw.get("content"), f"{where}.content")
    name = raw.get("name") if isinstance(raw.get("name"), str) else None
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            msg = f"{where} is a tool message without tool_call_id; send the id of the call it answers."
            raise bad_request(msg, f"{where}.tool_call_id")
        text = content if isinstance(content, str) or content is None else "".join(p.text or "" for p in content)
        return Message("tool", text or "", (), call_id, name)
    calls = _tool_calls(raw.get("tool_calls"), f"{where}.tool_calls") if role == "assistant" else ()
    return Message(role, content, calls, None, name)  # type: ignore[arg-type]


def parse_tool(raw: Any, where: str) -> Tool:
    function = raw.get("function") if isinstance(raw, Mapping) and raw.get("type") == "function" else None
    if not isinstance(function, Mapping):
        msg = f"{where} is not a function tool; send {{'type': 'function', 'function': {{'name', 'parameters'}}}}."
        raise bad_request(msg, where)
    name = _text(function.get("name"), f"{where}.function.name")
    if not name or len(name) > 64 or not set(name) <= _TOOL_NAME_CHARS:
        msg = f"{where}.function.name is {name[:80]!r}; tool names are 1 to 64 letters, digits, '_' or '-'."
        raise bad_request(msg, f"{where}.function.name")
    parameters = function.get("parameters", {"type": "object", "properties": {}})
    if not isinstance(parameters, Mapping):
        msg = f"{where}.function.parameters is {type(parameters).__name__}; send a JSON schema object."
        raise bad_request(msg, f"{where}.function.parameters")
    description = function.get("description", "")
    return Tool(name, description if isinstance(description, str) else "", dict(parameters))


def parse_tools(
    value: Any, *, expect: str, declaration: Callable[[Any, str], Mapping[str, Any]], twice: str
) -> tuple[Tool, ...]:
    """A dialect's ``tools`` list as tools: None is none; ``declaration(raw, where)`` turns
    each entry into a chat function declaration (``name``, ``description``, ``parameters``),
    checked by :func:`parse_tool`; two tools of one name are refused with ``twice``.

    Raises:
        GatewayError: 400 naming the field (``expect`` says what a list should hold).
    """
    if value is None:
        return ()
    if not isinstance(value, list):
        msg = f"tools is {json_kind(value)}; send {expect}."
        raise bad_request(msg, "tools")
    tools = []
    for position, raw in enumerate(value):
        at = f"tools[{position}]"
        tools.append(parse_tool({"type": "function", "function": declaration(raw, at)}, at))
    if len({t.name for t in tools}) != len(tools):
        raise bad_request(twice, "tools")
    return tuple(tools)


def number_field(value: Any, name: str) -> int | float:
    """``value`` when it is a number (not a bool), else a 400 naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        msg = f"{name} is {json_kind(value)}; send a number."
        raise bad_request(msg, name)
    return value


def content_text(content: Any) -> str:
    """The text of a chat message's ``content``: the string, or its parts' texts joined."""
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, Mapping))
    return content if isinstance(content, str) else ""


def request_model(body: Any, send: str) -> tuple[Mapping[str, Any], str]:
    """``body`` as the JSON object every dialect's request is, and its ``model``; a 400 when
    it is no object or names no model (``send`` says which name to send)."""
    if not isinstance(body, Mapping):
        msg = f"The request body is a JSON {json_kind(body)}; send a JSON object."
        raise bad_request(msg, None)
    model = body.get("model")
    if not isinstance(model, str) or not model:
        msg = f"The request has no model; send {send}."
        raise bad_request(msg, "model")
    return body, model


def parse_chat_request(body: Any, *, max_messages: int) -> ChatCall:
    """A request body as a :class:`ChatCall`.

    Raises:
        GatewayError: status 400 for any field that is missing, of the wrong type or not
            supported (``n`` other than 1), naming it in ``param``.
    """
    body, model = request_model(body, "the model id that GET /v1/models lists")
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        msg = "The request has no messages; send a non-empty list of messages."
        raise bad_request(msg, "messages")
    if len(raw_messages) > max_messages:
        msg = f"The request has {len(raw_messages)} messages; this gateway takes at most {max_messages} (max_messages)."
        raise bad_request(msg, "messages", "too_many_messages")
    messages = tuple(_message(raw, f"messages[{i}]") for i, raw in enumerate(raw_messages))
    n = body.get("n", 1)
    if n not in (1, None):
        msg = f"n is {n!r}; the gateway answers with one choice (n = 1)."
        raise bad_request(msg, "n")
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        msg = f"stream is {stream!r}; send true or false."
        raise bad_request(msg, "stream")
    stream_options = body.get("stream_options")
    include_usage = isinstance(stream_options, Mapping) and stream_options.get("include_usage") is True
    raw_tools = body.get("tools") or []
    if not isinstance(raw_tools, list):
        msg = f"tools is {type(raw_tools).__name__}; send a list of function tools."
        raise bad_request(msg, "tools")
    tools = tuple(parse_tool(raw, f"tools[{i}]") for i, raw in enumerate(raw_tools))
    if len({t.name for t in tools}) != len(tools):
        msg = "tools names one function twice; tool names must be unique."
        raise bad_request(msg, "tools")
    user = body.get("user")
    options = {key: value for key, value in body.items() if key in PASSED_OPTIONS and value is not None}
    return ChatCall(
        model, messages, bool(stream), include_usage, tools, options, user if isinstance(user, str) and user else None
    )


def _usage(usage: Usage | None) -> dict[str, int] | None:
    if usage is None:
        return None
    return {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.total_tokens,
    }


def completion(
    completion_id: str,
    model: str,
    message: Message,
    finish_reason: str,
    usage: Usage | None,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A ``chat.completion`` object; ``extra`` becomes its ``beamfilter`` field."""
    out: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message_to_json(message), "finish_reason": finish_reason}],
        "usage": _usage(usage) or {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }
    if extra:
        out["beamfilter"] = dict(extra)
    return out


def chunk(
    completion_id: str,
    model: str,
    created: int,
    delta: Mapping[str, Any],
    finish_reason: str | None = None,
    *,
    usage: Usage | None = None,
    extra: Mapping[str, Any] | None = None,
    empty: bool = False,
) -> dict[str, Any]:
    """A ``chat.completion.chunk`` (``empty`` for the usage chunk, which has no choices)."""
    out: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [] if empty else [{"index": 0, "delta": dict(delta), "finish_reason": finish_reason}],
    }
    if usage is not None:
        out["usage"] = _usage(usage)
    if extra:
        out["beamfilter"] = dict(extra)
    return out


def tool_call_deltas(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """The ``delta.tool_calls`` of a chunk carrying whole calls."""
    return [
        {
            "index": index,
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": call.arguments_json},
        }
        for index, call in enumerate(calls)
    ]


def error_body(error: GatewayError) -> dict[str, Any]:
    """OpenAI's error JSON: ``{"error": {"message", "type", "param", "code"}}``."""
    return {"error": {"message": str(error), "type": error.type, "param": error.param, "code": error.code}}


def completion_chunks(answer: dict[str, Any], completion_id: str, created: int, usage: bool) -> list[dict[str, Any]]:
    """A completion (decided on another worker) as the chunks that end a stream."""
    choice = answer["choices"][0]
    message, finish, model = choice["message"], choice["finish_reason"], answer["model"]
    out: list[dict[str, Any]] = []
    delta: dict[str, Any] = {}
    text = message.get("content")
    if text and finish == "paused":
        delta["content"] = text
    elif text and not message.get("tool_calls"):
        out.append(chunk(completion_id, model, created, {"content": text}))
    if message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(message["tool_calls"])]
    out.append(chunk(completion_id, model, created, delta, finish, extra=answer.get("beamfilter")))
    if usage:
        last = chunk(completion_id, model, created, {}, empty=True)
        last["usage"] = answer.get("usage")
        out.append(last)
    return out
