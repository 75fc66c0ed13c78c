"""Anthropic's Messages wire (``POST /v1/messages``) on the gateway's side: requests in,
``message`` objects and stream events out.

Sans-IO. A request body becomes the :class:`~._wire.ChatCall` the chat route runs, so the
turn goes through the same filters, keys, inbox and consumer view; the chat completion or
the chat chunks the gateway answers with become Anthropic's ``message`` object or its
events (``message_start``, ``content_block_start/delta/stop``, ``message_delta``,
``message_stop``, ``ping``). Every refusal is a 400 :class:`GatewayError` naming the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from beamfilter_core import ContentPart, Message, ToolCall
from beamfilter_core.errors import GatewayError

from ._wire import (
    ChatCall,
    bad_request,
    content_text,
    json_kind,
    number_field,
    parse_tools,
    request_model,
    string_field,
)

__all__ = ["AnthropicEvents", "error_body", "message_object", "parse_messages_request"]

#: The chat finish reason -> Anthropic's ``stop_reason``. A paused turn is ``pause_turn``
#: (the client continues it later), a blocked answer ``refusal``.
STOP_REASONS = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
    "paused": "pause_turn",
    "length": "max_tokens",
}
#: HTTP status -> Anthropic's error ``type``; other 4xx are ``invalid_request_error``, other 5xx ``api_error``.
ERROR_TYPES = {
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}
_BLOCKS = "text, image, tool_use (assistant), tool_result (user), thinking (assistant, dropped)"


def _object(value: Any, where: str, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        msg = f"{where} is {json_kind(value)}; send {what}."
        raise bad_request(msg, where)
    return value


def _image(block: Mapping[str, Any], where: str) -> ContentPart:
    source = _object(block.get("source"), f"{where}.source", "an object with type 'base64' or 'url'")
    if source.get("type") == "base64":
        media = string_field(source.get("media_type"), f"{where}.source.media_type", empty=False)
        data = string_field(source.get("data"), f"{where}.source.data", empty=False)
        return ContentPart("image_url", url=f"data:{media};base64,{data}")
    if source.get("type") == "url":
        return ContentPart("image_url", url=string_field(source.get("url"), f"{where}.source.url", empty=False))
    msg = f"{where}.source.type is {source.get('type')!r}; send 'base64' or 'url'."
    raise bad_request(msg, f"{where}.source.type")


def _result_text(value: Any, where: str) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    if not isinstance(value, list):
        msg = f"{where} is {json_kind(value)}; send a string or a list of text blocks."
        raise bad_request(msg, where)
    texts = []
    for position, block in enumerate(value):
        at = f"{where}[{position}]"
        block = _object(block, at, "a text block")
        if block.get("type") != "text":
            msg = f"{at} has type {block.get('type')!r}; a tool_result here takes text blocks."
            raise bad_request(msg, f"{at}.type")
        texts.append(string_field(block.get("text"), f"{at}.text"))
    return "\n".join(texts)


def _content(parts: list[ContentPart]) -> str | tuple[ContentPart, ...]:
    if len(parts) == 1 and parts[0].type == "text":
        return parts[0].text or ""
    return tuple(parts)


def _message(raw: Any, where: str) -> list[Message]:
    """One Anthropic message as beamfilter messages: a user message's ``tool_result``
    blocks become ``tool`` messages, before the rest of its content."""
    raw = _object(raw, where, "an object with role and content")
    role = raw.get("role")
    if role not in ("user", "assistant"):
        msg = f"{where}.role is {role!r}; send 'user' or 'assistant' (the system prompt goes in 'system')."
        raise bad_request(msg, f"{where}.role")
    content = raw.get("content")
    if isinstance(content, str):
        return [Message(role, content)]
    if not isinstance(content, list) or not content:
        shown = "an empty list" if content == [] else json_kind(content)
        msg = f"{where}.content is {shown}; send a string or a non-empty list of content blocks."
        raise bad_request(msg, f"{where}.content")
    parts: list[ContentPart] = []
    calls: list[ToolCall] = []
    results: list[Message] = []
    for position, block in enumerate(content):
        at = f"{where}.content[{position}]"
        kind = _object(block, at, "a content block with a type").get("type")
        if kind == "text":
            parts.append(ContentPart("text", text=string_field(block.get("text"), f"{at}.text")))
        elif kind == "image" and role == "user":
            parts.append(_image(block, at))
        elif kind == "tool_use" and role == "assistant":
            call_id = string_field(block.get("id"), f"{at}.id", empty=False)
            name = string_field(block.get("name"), f"{at}.name", empty=False)
            arguments = _object(block.get("input"), f"{at}.input", "the call's arguments as an object")
            calls.append(ToolCall(name, dict(arguments), call_id))
        elif kind == "tool_result" and role == "user":
            call_id = string_field(block.get("tool_use_id"), f"{at}.tool_use_id", empty=False)
            results.append(Message("tool", _result_text(block.get("content"), f"{at}.content"), (), call_id))
        elif kind in ("thinking", "redacted_thinking") and role == "assistant":
            continue  # this gateway never sends thinking blocks; a client's copies are not the upstream's to check
        else:
            msg = f"{at} has type {str(kind)[:40]!r}; a {role} message takes {_BLOCKS} blocks."
            raise bad_request(msg, f"{at}.type")
    if role == "assistant":
        return [Message("assistant", _content(parts) if parts else None, tuple(calls))]
    return [*results, Message("user", _content(parts))] if parts else results


def _system(value: Any) -> list[Message]:
    if value is None:
        return []
    if isinstance(value, str):
        return [Message("system", value)] if value else []
    if not isinstance(value, list):
        msg = f"system is {json_kind(value)}; send a string or a list of text blocks."
        raise bad_request(msg, "system")
    text = _result_text(value, "system")
    return [Message("system", text)] if text else []


def _declaration(raw: Any, at: str) -> Mapping[str, Any]:
    raw = _object(raw, at, "a tool with name and input_schema")
    if raw.get("type") not in (None, "custom"):
        msg = f"{at} has type {str(raw.get('type'))[:40]!r}; the gateway takes client tools (name, input_schema)."
        raise bad_request(msg, f"{at}.type")
    if "input_schema" not in raw:
        msg = f"{at} has no input_schema; send the JSON schema of the tool's input."
        raise bad_request(msg, f"{at}.input_schema")
    return {"name": raw.get("name"), "description": raw.get("description", ""), "parameters": raw["input_schema"]}


def _tools(value: Any) -> tuple[Any, ...]:
    return parse_tools(
        value,
        expect="a list of tools with name and input_schema",
        declaration=_declaration,
        twice="tools names one tool twice; tool names must be unique.",
    )


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    max_tokens = body.get("max_tokens")
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
        shown = json.dumps(max_tokens)[:40]
        msg = f"max_tokens is {shown}; send the most tokens the answer may have (an integer from 1)."
        raise bad_request(msg, "max_tokens")
    options: dict[str, Any] = {"max_tokens": max_tokens}
    for name in ("temperature", "top_p"):
        value = body.get(name)
        if value is not None:
            options[name] = number_field(value, name)
    stops = body.get("stop_sequences")
    if stops is not None:
        if not isinstance(stops, list) or not all(isinstance(s, str) for s in stops):
            msg = "stop_sequences is not a list of strings; send a list of strings."
            raise bad_request(msg, "stop_sequences")
        if stops:
            options["stop"] = list(stops)
    return options


def parse_messages_request(body: Any, *, max_messages: int) -> ChatCall:
    """A ``/v1/messages`` body as the :class:`ChatCall` the gateway runs.

    ``max_tokens``, ``temperature``, ``top_p`` and ``stop_sequences`` (as ``stop``) go to
    the upstream model; ``metadata``, ``tool_choice``, ``thinking`` and ``top_k`` are
    ignored, as are ``cache_control`` marks.

    Raises:
        GatewayError: status 400 naming the field that is missing, of the wrong type or not
            supported.
    """
    body, model = request_model(body, "the model name this gateway serves (its [server] model_name)")
    options = _options(body)
    raw_messages = body.get("messages")
    if not isinstance(raw_messages, list) or not raw_messages:
        msg = "The request has no messages; send a non-empty list of messages."
        raise bad_request(msg, "messages")
    if len(raw_messages) > max_messages:
        msg = f"The request has {len(raw_messages)} messages; this gateway takes at most {max_messages} (max_messages)."
        raise GatewayError(msg, status=400, param="messages", code="too_many_messages")
    messages = _system(body.get("system"))
    for position, raw in enumerate(raw_messages):
        messages.extend(_message(raw, f"messages[{position}]"))
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        msg = f"stream is {json_kind(stream)}; send true or false."
        raise bad_request(msg, "stream")
    return ChatCall(model, tuple(messages), bool(stream), True, _tools(body.get("tools")), options)


def _arguments(text: Any) -> dict[str, Any]:
    # tool_use needs an object: arguments that were not one go as an empty input
    try:
        decoded = json.loads(text) if isinstance(text, str) and text.strip() else {}
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def _usage(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, Mapping) else {}
    return {"input_tokens": usage.get("prompt_tokens") or 0, "output_tokens": usage.get("completion_tokens") or 0}


def _message_id(answer: Mapping[str, Any]) -> str:
    return "msg_" + str(answer.get("id", "")).removeprefix("chatcmpl-")


def message_object(answer: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` as Anthropic's ``message``; its ``beamfilter`` field is kept."""
    choice = answer["choices"][0]
    message = choice["message"]
    content: list[dict[str, Any]] = []
    text = content_text(message.get("content"))
    if text:
        content.append({"type": "text", "text": text})
    for call in message.get("tool_calls") or ():
        function = call["function"]
        content.append(
            {"type": "tool_use", "id": call["id"], "name": function["name"], "input": _arguments(function["arguments"])}
        )
    out: dict[str, Any] = {
        "id": _message_id(answer),
        "type": "message",
        "role": "assistant",
        "model": answer["model"],
        "content": content,
        "stop_reason": STOP_REASONS.get(choice["finish_reason"], "end_turn"),
        "stop_sequence": None,
        "usage": _usage(answer.get("usage")),
    }
    if answer.get("beamfilter"):
        out["beamfilter"] = answer["beamfilter"]
    return out


def error_body(error: GatewayError) -> dict[str, Any]:
    """Anthropic's error JSON: ``{"type": "error", "error": {"type", "message"}}``."""
    status = error.status
    kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": str(error)}}


class AnthropicEvents:
    """Turns the gateway's chat chunks (and its waiting comments) into Anthropic's stream
    events, one chunk at a time: :meth:`feed` each item, then :meth:`close`."""

    __slots__ = ("_extra", "_index", "_open", "_started", "_stop", "_usage")

    def __init__(self) -> None:
        self._started = False
        self._open = False  # a text block is open at self._index
        self._index = 0
        self._stop: str | None = None
        self._extra: Any = None
        self._usage: Any = None

    def __repr__(self) -> str:
        return f"AnthropicEvents(blocks={self._index}, stop={self._stop!r})"

    def _close_text(self) -> list[dict[str, Any]]:
        if not self._open:
            return []
        self._open = False
        self._index += 1
        return [{"type": "content_block_stop", "index": self._index - 1}]

    def feed(self, item: Mapping[str, Any] | str) -> list[dict[str, Any] | str]:
        """The events of one gateway item: a chat chunk, or a comment (a ``ping``)."""
        if isinstance(item, str):
            return [{"type": "ping"}]
        out: list[dict[str, Any] | str] = []
        if not self._started:
            self._started = True
            message: dict[str, Any] = {
                "id": _message_id(item),
                "type": "message",
                "role": "assistant",
                "model": item.get("model"),
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            out.append({"type": "message_start", "message": message})
        if not item.get("choices"):  # the usage chunk
            self._usage = item.get("usage")
            return out
        choice = item["choices"][0]
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if text:
            if not self._open:
                self._open = True
                start = {"type": "text", "text": ""}
                out.append({"type": "content_block_start", "index": self._index, "content_block": start})
            out.append(
                {"type": "content_block_delta", "index": self._index, "delta": {"type": "text_delta", "text": text}}
            )
        for call in delta.get("tool_calls") or ():
            out += self._close_text()
            function = call["function"]
            block: dict[str, Any] = {"type": "tool_use", "id": call["id"], "name": function["name"], "input": {}}
            arguments = json.dumps(_arguments(function.get("arguments")), ensure_ascii=False)
            out += [
                {"type": "content_block_start", "index": self._index, "content_block": block},
                {
                    "type": "content_block_delta",
                    "index": self._index,
                    "delta": {"type": "input_json_delta", "partial_json": arguments},
                },
                {"type": "content_block_stop", "index": self._index},
            ]
            self._index += 1
        if choice.get("finish_reason"):
            out += self._close_text()
            self._stop = STOP_REASONS.get(choice["finish_reason"], "end_turn")
            self._extra = item.get("beamfilter")
        return out

    def close(self) -> list[dict[str, Any] | str]:
        """The events that end the message: ``message_delta`` (the stop reason, the usage and
        the ``beamfilter`` field) and ``message_stop``; none if the turn never finished."""
        if self._stop is None:
            return []
        delta: dict[str, Any] = {
            "type": "message_delta",
            "delta": {"stop_reason": self._stop, "stop_sequence": None},
            "usage": _usage(self._usage),
        }
        if self._extra:
            delta["beamfilter"] = self._extra
        return [delta, {"type": "message_stop"}]

    def fail(self, error: GatewayError) -> list[dict[str, Any] | str]:
        """The event that ends a stream which failed after it began."""
        return [error_body(error)]
