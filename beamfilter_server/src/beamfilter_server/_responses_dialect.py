"""OpenAI's Responses wire (``POST /v1/responses``) on the gateway's side: requests in,
``response`` objects and stream events out.

Sans-IO. A request body becomes the :class:`~._wire.ChatCall` the chat route runs, so the
turn goes through the same filters, keys, inbox and consumer view; the chat completion or
the chat chunks the gateway answers with become a ``response`` object or its events
(``response.created``, ``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.completed``...). The gateway keeps
no responses: each request sends its whole input (or names its conversation with
``Beamfilter-Conversation`` for the memory filter), so ``previous_response_id`` is refused.
"""

from __future__ import annotations

import time
import uuid
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

__all__ = ["ResponsesEvents", "parse_responses_request", "response_object"]

_ROLES = {"user": "user", "system": "system", "developer": "system", "assistant": "assistant"}
#: Request fields that need responses kept on the server; this gateway keeps none.
_STATEFUL = ("previous_response_id", "conversation", "background")
_PARTS = "input_text, output_text, refusal and input_image (by URL)"
_ITEMS = "message, function_call, function_call_output and reasoning (dropped) items"


def _parts(value: Any, where: str, role: str) -> str | tuple[ContentPart, ...]:
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        msg = f"{where} is {json_kind(value)}; send a string or a list of content parts."
        raise bad_request(msg, where)
    parts: list[ContentPart] = []
    for position, part in enumerate(value):
        at = f"{where}[{position}]"
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind in ("input_text", "output_text"):
            parts.append(ContentPart("text", text=string_field(part.get("text"), f"{at}.text")))
        elif kind == "refusal":
            parts.append(ContentPart("text", text=string_field(part.get("refusal"), f"{at}.refusal")))
        elif kind == "input_image" and role == "user":
            parts.append(
                ContentPart("image_url", url=string_field(part.get("image_url"), f"{at}.image_url", empty=False))
            )
        else:
            msg = f"{at} has type {str(kind)[:40]!r}; the gateway takes {_PARTS} parts."
            raise bad_request(msg, f"{at}.type")
    if len(parts) == 1 and parts[0].type == "text":
        return parts[0].text or ""
    return tuple(parts)


def _output_text(value: Any, where: str) -> str:
    parts = _parts(value, where, "tool")
    return parts if isinstance(parts, str) else "".join(p.text or "" for p in parts)


def _items(value: Any, max_messages: int) -> list[Message]:
    if isinstance(value, str):
        return [Message("user", value)]
    if not isinstance(value, list) or not value:
        shown = json_kind(value) if value != [] else "an empty list"
        msg = f"input is {shown}; send a string or a non-empty list of items."
        raise bad_request(msg, "input")
    if len(value) > max_messages:
        msg = f"The request has {len(value)} input items; this gateway takes at most {max_messages} (max_messages)."
        raise GatewayError(msg, status=400, param="input", code="too_many_messages")
    messages: list[Message] = []
    for position, item in enumerate(value):
        at = f"input[{position}]"
        if not isinstance(item, Mapping):
            msg = f"{at} is {json_kind(item)}; each item is an object (a message, a function_call or its output)."
            raise bad_request(msg, at)
        kind = item.get("type", "message")
        if kind == "message":
            role = _ROLES.get(item.get("role"))  # type: ignore[arg-type]
            if role is None:
                msg = f"{at}.role is {item.get('role')!r}; send one of user, system, developer, assistant."
                raise bad_request(msg, f"{at}.role")
            messages.append(Message(role, _parts(item.get("content"), f"{at}.content", role)))  # type: ignore[arg-type]
        elif kind == "function_call":
            call = ToolCall.from_json(
                string_field(item.get("name"), f"{at}.name", empty=False),
                string_field(item.get("arguments"), f"{at}.arguments"),
                string_field(item.get("call_id"), f"{at}.call_id", empty=False),
            )
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":  # one assistant turn: its text and calls
                messages[-1] = Message("assistant", last.content, (*last.tool_calls, call))
            else:
                messages.append(Message("assistant", None, (call,)))
        elif kind == "function_call_output":
            call_id = string_field(item.get("call_id"), f"{at}.call_id", empty=False)
            messages.append(Message("tool", _output_text(item.get("output"), f"{at}.output"), (), call_id))
        elif kind != "reasoning":  # reasoning items: this gateway never sends them
            msg = f"{at} has type {str(kind)[:40]!r}; the gateway takes {_ITEMS}."
            raise bad_request(msg, f"{at}.type")
    return messages


def _declaration(raw: Any, at: str) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping) or raw.get("type") != "function":
        shown = raw.get("type") if isinstance(raw, Mapping) else json_kind(raw)
        msg = f"{at} has type {str(shown)[:40]!r}; the gateway takes function tools (type, name, parameters)."
        raise bad_request(msg, f"{at}.type")
    return {k: raw[k] for k in ("name", "description", "parameters") if k in raw and raw[k] is not None}


def _tools(value: Any) -> tuple[Any, ...]:
    return parse_tools(
        value,
        expect="a list of function tools",
        declaration=_declaration,
        twice="tools names one function twice; tool names must be unique.",
    )


def _options(body: Mapping[str, Any]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for name, sent_as in (("max_output_tokens", "max_tokens"), ("temperature", "temperature"), ("top_p", "top_p")):
        value = body.get(name)
        if value is None:
            continue
        options[sent_as] = number_field(value, name)
    return options


def parse_responses_request(body: Any, *, max_messages: int) -> ChatCall:
    """A ``/v1/responses`` body as the :class:`ChatCall` the gateway runs.

    ``instructions`` is the system message; ``max_output_tokens`` (as ``max_tokens``),
    ``temperature`` and ``top_p`` go to the upstream model; ``user`` names the
    conversation as on the chat route; ``tool_choice``, ``parallel_tool_calls``,
    ``reasoning``, ``text``, ``store``, ``include`` and ``metadata`` are ignored.

    Raises:
        GatewayError: status 400 naming the field that is missing, of the wrong type or not
            supported (``previous_response_id``, ``conversation``, ``background``).
    """
    body, model = request_model(body, "the model id that GET /v1/models lists")
    for name in _STATEFUL:
        if body.get(name):
            msg = (
                f"{name} is not supported: this gateway keeps no responses. Send the whole input, "
                "or name the conversation with the Beamfilter-Conversation header (the memory filter keeps it)."
            )
            raise bad_request(msg, name)
    instructions = body.get("instructions")
    if instructions is not None:
        string_field(instructions, "instructions")
    if "input" not in body:
        msg = "The request has no input; send a string or a list of items."
        raise bad_request(msg, "input")
    messages = _items(body["input"], max_messages)
    if instructions:
        messages.insert(0, Message("system", instructions))
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        msg = f"stream is {json_kind(stream)}; send true or false."
        raise bad_request(msg, "stream")
    user = body.get("user")
    if user is not None:
        string_field(user, "user")
    tools = _tools(body.get("tools"))
    return ChatCall(model, tuple(messages), bool(stream), True, tools, _options(body), user or None)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def _usage(usage: Any) -> dict[str, Any]:
    usage = usage if isinstance(usage, Mapping) else {}
    prompt, completion = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": usage.get("total_tokens") or prompt + completion,
    }


def _status(finish: str) -> tuple[str, dict[str, str] | None]:
    """The response's status and incomplete_details for a chat finish reason: a blocked
    answer is incomplete for ``content_filter``, a paused turn for ``paused``."""
    if finish in ("content_filter", "paused", "length"):
        return "incomplete", {"reason": "max_output_tokens" if finish == "length" else finish}
    return "completed", None


def _text_item(item_id: str, text: str, status: str = "completed") -> dict[str, Any]:
    content = (
        [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if status == "completed" else []
    )
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _call_item(item_id: str, call: Mapping[str, Any], status: str = "completed") -> dict[str, Any]:
    function = call["function"]
    arguments = function["arguments"] if status == "completed" else ""
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call["id"],
        "name": function["name"],
        "arguments": arguments,
        "status": status,
    }


def _shell(response_id: str, body: Mapping[str, Any], created: int) -> dict[str, Any]:
    """A ``response`` object without its outcome: what the request asked for, echoed."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": created,
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "instructions": body.get("instructions"),
        "max_output_tokens": body.get("max_output_tokens"),
        "model": body.get("model"),
        "output": [],
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "store": False,
        "temperature": body.get("temperature"),
        "text": {"format": {"type": "text"}},
        "tool_choice": "auto",
        "tools": list(body.get("tools") or ()),
        "top_p": body.get("top_p"),
        "truncation": "disabled",
        "usage": None,
        "user": body.get("user"),
        "metadata": {},
    }


def _finish(out: dict[str, Any], finish: str, usage: Any, extra: Any) -> dict[str, Any]:
    out["status"], out["incomplete_details"] = _status(finish)
    out["usage"] = _usage(usage)
    if extra:
        out["beamfilter"] = extra
    return out


def response_object(answer: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, Any]:
    """A ``chat.completion`` as a ``response`` to ``body``; its ``beamfilter`` field is kept."""
    choice = answer["choices"][0]
    message = choice["message"]
    out = _shell("resp_" + str(answer.get("id", "")).removeprefix("chatcmpl-"), body, int(time.time()))
    text = content_text(message.get("content"))
    if text:
        out["output"].append(_text_item(_new_id("msg"), text))
    out["output"] += [_call_item(_new_id("fc"), call) for call in message.get("tool_calls") or ()]
    return _finish(out, choice["finish_reason"], answer.get("usage"), answer.get("beamfilter"))


class ResponsesEvents:
    """Turns the gateway's chat chunks (and its waiting comments) into Responses stream
    events for ``body``'s request, one chunk at a time: :meth:`feed` each item, then
    :meth:`close`. Every event carries its ``sequence_number``."""

    __slots__ = ("_body", "_extra", "_finish", "_response", "_sequence", "_text", "_text_id", "_usage")

    def __init__(self, body: Mapping[str, Any]) -> None:
        self._body = body
        self._response: dict[str, Any] | None = None
        self._sequence = 0
        self._text_id: str | None = None  # the open message item
        self._text: list[str] = []
        self._finish: str | None = None
        self._extra: Any = None
        self._usage: Any = None

    def __repr__(self) -> str:
        items = len(self._response["output"]) if self._response else 0
        return f"ResponsesEvents(items={items}, finish={self._finish!r})"

    def _event(self, kind: str, **fields: Any) -> dict[str, Any]:
        self._sequence += 1
        return {"type": kind, "sequence_number": self._sequence - 1, **fields}

    def _snapshot(self) -> dict[str, Any]:
        assert self._response is not None  # the first chunk made it
        return {**self._response, "output": list(self._response["output"])}

    def _close_text(self, output: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._text_id is None:
            return []
        item_id, text, index = self._text_id, "".join(self._text), len(output)
        self._text_id, self._text = None, []
        part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
        item = _text_item(item_id, text)
        output.append(item)
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        return [
            self._event("response.output_text.done", **where, text=text, logprobs=[]),
            self._event("response.content_part.done", **where, part=part),
            self._event("response.output_item.done", output_index=index, item=item),
        ]

    def feed(self, item: Mapping[str, Any] | str) -> list[dict[str, Any] | str]:
        """The events of one gateway item: a chat chunk, or a comment (kept a comment)."""
        if isinstance(item, str):
            return [item]
        out: list[dict[str, Any] | str] = []
        if self._response is None:
            response_id = "resp_" + str(item.get("id", "")).removeprefix("chatcmpl-")
            self._response = _shell(response_id, self._body, int(item.get("created") or time.time()))
            out.append(self._event("response.created", response=self._snapshot()))
            out.append(self._event("response.in_progress", response=self._snapshot()))
        output = self._response["output"]
        if not item.get("choices"):  # the usage chunk
            self._usage = item.get("usage")
            return out
        choice = item["choices"][0]
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if text:
            if self._text_id is None:
                self._text_id = _new_id("msg")
                index = len(output)
                out.append(
                    self._event(
                        "response.output_item.added",
                        output_index=index,
                        item=_text_item(self._text_id, "", "in_progress"),
                    )
                )
                part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
                out.append(
                    self._event(
                        "response.content_part.added",
                        item_id=self._text_id,
                        output_index=index,
                        content_index=0,
                        part=part,
                    )
                )
            self._text.append(text)
            where = {"item_id": self._text_id, "output_index": len(output), "content_index": 0}
            out.append(self._event("response.output_text.delta", **where, delta=text, logprobs=[]))
        calls = delta.get("tool_calls") or ()
        if calls or choice.get("finish_reason"):
            out += self._close_text(output)
        for call in calls:
            item_id, index = _new_id("fc"), len(output)
            done = _call_item(item_id, call)
            arguments = done["arguments"]
            out += [
                self._event(
                    "response.output_item.added", output_index=index, item=_call_item(item_id, call, "in_progress")
                ),
                self._event(
                    "response.function_call_arguments.delta", item_id=item_id, output_index=index, delta=arguments
                ),
                self._event(
                    "response.function_call_arguments.done",
                    item_id=item_id,
                    output_index=index,
                    name=done["name"],
                    arguments=arguments,
                ),
                self._event("response.output_item.done", output_index=index, item=done),
            ]
            output.append(done)
        if choice.get("finish_reason"):
            self._finish = choice["finish_reason"]
            self._extra = item.get("beamfilter")
        return out

    def close(self) -> list[dict[str, Any] | str]:
        """The event that ends the response: ``response.completed``, or
        ``response.incomplete`` for a paused or blocked turn; none if it never finished."""
        if self._finish is None or self._response is None:
            return []
        final = _finish(self._snapshot(), self._finish, self._usage, self._extra)
        kind = "response.completed" if final["status"] == "completed" else "response.incomplete"
        return [self._event(kind, response=final)]

    def fail(self, error: GatewayError) -> list[dict[str, Any] | str]:
        """The ``error`` event that ends a stream which failed after it began: its fields flat,
        as Responses documents them, and under ``error``, which the openai client raises as
        ``APIError``."""
        fields = {"code": error.code or error.type, "message": str(error), "param": error.param}
        return [self._event("error", **fields, error={"type": error.type, **fields})]
