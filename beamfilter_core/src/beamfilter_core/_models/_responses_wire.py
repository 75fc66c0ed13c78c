"""The OpenAI Responses wire format (``/v1/responses``): requests out, answers and stream events in.

Pure functions and one accumulator, no I/O. System messages before the first other
message become ``instructions``; later ones are ``system`` input messages. An assistant
message becomes its ``reasoning`` items (kept on ``Message.reasoning`` from the answer
that carried them, provider :data:`PROVIDER`), its text and one ``function_call`` item per tool call; a ``tool``
message a ``function_call_output``. Stop reasons are mapped onto the chat values
(``stop``, ``tool_calls``, ``length``, ``content_filter``) that filters already know.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._messages import ContentPart, Message, Reasoning, ToolCall, Usage
from .._records import ChatRequest, ChatResponse
from ..errors import IncompleteStreamError, ProviderResponseError
from ._base import TokenSink
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS, _malformed, loads, preview
from ._wire_common import StreamState, count, too_large, with_options

__all__ = [
    "PROVIDER",
    "ResponsesAccumulator",
    "input_items",
    "parse_response",
    "parse_usage",
    "request_body",
    "tool_definition",
]

#: ``Reasoning.provider`` of the reasoning items this API returns; only they are sent back
#: (whole: id, summary and ``encrypted_content``), so a reasoning model keeps its chain of
#: thought across tool rounds. An output item that came after a reasoning item also leaves
#: a ``Reasoning`` with no text naming its item ``id`` (``{"type": "function_call", "id",
#: "call_id"}`` or ``{"type": "message", "id"}``): the service pairs a reasoning item with the
#: item after it by that id and refuses one sent back without it ("provided without its
#: required following item").
PROVIDER = "openai.responses"

# Keys the provider owns; user options cannot replace them.
_RESERVED = frozenset({"input", "tools", "stream"})
# ``incomplete_details.reason`` -> the chat finish reason.
_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


def tool_definition(definition: Mapping[str, Any]) -> dict[str, Any]:
    """A chat ``{"type": "function", "function": {...}}`` tool as a Responses tool (flat)."""
    function = definition.get("function")
    if definition.get("type") != "function" or not isinstance(function, Mapping):
        return dict(definition)  # a built-in tool (web_search...) passes through as given
    out: dict[str, Any] = {"type": "function", "name": function.get("name")}
    for key in ("description", "parameters", "strict"):
        if key in function:
            out[key] = function[key]
    return out


def _tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping):
            return {"type": "function", "name": function.get("name")}
        return dict(choice)
    return choice


def _user_content(content: str | tuple[ContentPart, ...] | None) -> str | list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return content or ""
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.type == "image_url":
            parts.append({"type": "input_image", "image_url": part.url})
        elif part.type == "text":
            parts.append({"type": "input_text", "text": part.text or ""})
    return parts


def _assistant_items(message: Message) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    item_ids: dict[str, str] = {}  # call_id -> the function_call item's id, kept beside its reasoning
    message_id: str | None = None
    for r in message.reasoning:
        if r.provider != PROVIDER or not r.data:
            continue
        kind, item_id = r.data.get("type"), r.data.get("id")
        if kind == "function_call":
            call_id = r.data.get("call_id")
            if isinstance(item_id, str) and isinstance(call_id, str):
                item_ids[call_id] = item_id
        elif kind == "message":
            if isinstance(item_id, str) and message_id is None:
                message_id = item_id
        else:
            items.append(dict(r.data))
    text = message.text
    if text and message_id is not None:
        # an output message paired with its reasoning goes back as one, id and status included
        part = {"type": "output_text", "text": text, "annotations": []}
        items.append(
            {"type": "message", "role": "assistant", "id": message_id, "status": "completed", "content": [part]}
        )
    elif text:
        items.append({"type": "message", "role": "assistant", "content": text})
    for call in message.tool_calls:
        item = {"type": "function_call", "call_id": call.id, "name": call.name, "arguments": call.arguments_json}
        if call.id in item_ids:
            item["id"] = item_ids[call.id]
        items.append(item)
    return items


def input_items(messages: tuple[Message, ...]) -> tuple[str | None, list[dict[str, Any]]]:
    """The ``instructions`` (leading system messages, joined) and the ``input`` items."""
    leading: list[str] = []
    items: list[dict[str, Any]] = []
    for message in messages:
        role = message.role
        if role == "system":
            if not items:
                leading.append(message.text)
            else:
                items.append({"type": "message", "role": "system", "content": message.text})
        elif role == "assistant":
            items.extend(_assistant_items(message))
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": message.text})
        else:
            items.append({"type": "message", "role": "user", "content": _user_content(message.content)})
    return ("\n\n".join(leading) if leading else None), items


def request_body(request: ChatRequest, model: str, options: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The JSON body of one ``/responses`` call (options first, ``request.options`` over them)."""
    body = with_options({"model": model}, options, request.options, _RESERVED)
    instructions, items = input_items(request.messages)
    if instructions is not None:
        body["instructions"] = instructions
    body["input"] = items
    if request.tools:
        body["tools"] = [tool_definition(t.definition) for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if stream:
        body["stream"] = True
    return body


def parse_usage(data: Any) -> Usage | None:
    """A Responses ``usage`` object (``input_tokens_details.cached_tokens`` is the cache read)."""
    if not isinstance(data, Mapping):
        return None
    prompt = count(data.get("input_tokens"))
    completion = count(data.get("output_tokens"))
    details = data.get("input_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, Mapping) else 0
    return Usage(prompt, completion, count(data.get("total_tokens")) or prompt + completion, cached)


def _error_text(error: Any) -> str:
    if isinstance(error, Mapping):
        code, message = error.get("code"), error.get("message")
        shown = message if isinstance(message, str) else preview(error, 300)
        return f"{shown} (code {code})" if isinstance(code, str) and code else shown
    return preview(error, 300)


def _finish(response: Mapping[str, Any], has_calls: bool) -> str:
    status = response.get("status")
    if status == "failed":
        msg = f"The response failed: {_error_text(response.get('error'))}."
        raise ProviderResponseError(msg)
    if status == "incomplete":
        details = response.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return _INCOMPLETE.get(reason, reason) if isinstance(reason, str) else "length"
    return "tool_calls" if has_calls else "stop"


class _Output(StreamState):
    """The output items of one response, folded into text, calls and reasoning parts."""

    __slots__ = ("calls", "reasoning")

    def __init__(self, on_token: TokenSink | None = None, **caps: int) -> None:
        super().__init__(on_token, **caps)
        self.calls: list[ToolCall] = []
        self.reasoning: list[Reasoning] = []

    def call(self, item: Mapping[str, Any], where: str) -> None:
        name, call_id, arguments = item.get("name"), item.get("call_id"), item.get("arguments")
        if not isinstance(name, str) or not isinstance(call_id, str):
            raise _malformed(where, item, "a function_call with a string name and call_id")
        text = arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)
        if len(text) > self.max_arguments:
            raise too_large(self.max_arguments, name)
        self.grow(len(text))
        self.calls.append(ToolCall.from_json(name, text, call_id))
        self.pair(item, {"type": "function_call", "id": item.get("id"), "call_id": call_id})

    def pair(self, item: Mapping[str, Any], marker: dict[str, Any]) -> None:
        """Keep ``item``'s id when a reasoning item came before it: the two go back paired."""
        if isinstance(item.get("id"), str) and any(r.data.get("type") == "reasoning" for r in self.reasoning):
            self.reasoning.append(Reasoning(PROVIDER, "", marker))

    def item(self, item: Any, where: str) -> None:
        if not isinstance(item, Mapping):
            raise _malformed(where, item, "a JSON object")
        kind = item.get("type")
        if kind == "message":
            for part in item.get("content") or ():
                if isinstance(part, Mapping) and part.get("type") in ("output_text", "refusal"):
                    text = part.get("text") if part.get("type") == "output_text" else part.get("refusal")
                    if isinstance(text, str):
                        self.grow(len(text))
                        self._text.append(text)
            self.pair(item, {"type": "message", "id": item.get("id")})
        elif kind == "function_call":
            self.call(item, where)
        elif kind == "reasoning":
            summary = item.get("summary")
            text = "\n\n".join(
                str(part.get("text"))
                for part in (summary if isinstance(summary, list) else ())
                if isinstance(part, Mapping) and isinstance(part.get("text"), str)
            )
            encrypted = item.get("encrypted_content")
            self.grow(len(text) + (len(encrypted) if isinstance(encrypted, str) else 0))  # bounded like text
            self.reasoning.append(Reasoning(PROVIDER, text, dict(item)))

    def message(self) -> Message:
        text = self.text
        content = text if text or not self.calls else None
        return Message("assistant", content, tuple(self.calls), reasoning=tuple(self.reasoning))


def parse_response(
    data: Any, *, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS
) -> ChatResponse:
    """A non-streamed ``response`` object as :class:`ChatResponse`.

    Raises:
        ProviderResponseError: a shape that breaks the protocol, or a ``failed`` response;
            :class:`~beamfilter_core.errors.ResponseTooLargeError` over a bound.
    """
    if not isinstance(data, Mapping):
        msg = f"Expected a JSON object from /responses, got {type(data).__name__}: {preview(data)}."
        raise ProviderResponseError(msg)
    output = data.get("output")
    if not isinstance(output, list):
        if data.get("error"):
            msg = f"The server reported an error inside a 200 response: {_error_text(data['error'])}."
            raise ProviderResponseError(msg)
        msg = f"The response has no output list: {preview(data, 300)}."
        raise ProviderResponseError(msg)
    folded = _Output(max_answer_chars=max_answer_chars, max_argument_chars=max_argument_chars)
    for position, item in enumerate(output):
        folded.item(item, f"output[{position}]")
    finish = _finish(data, bool(folded.calls))
    return ChatResponse(folded.message(), finish, parse_usage(data.get("usage")))


class ResponsesAccumulator:
    """Folds Responses stream events into one :class:`ChatResponse`, incrementally.

    ``response.output_text.delta`` (and ``response.refusal.delta``) go to ``on_token``
    as they come; a function call starts at ``response.output_item.added``, grows by
    ``response.function_call_arguments.delta`` and is settled by its ``done`` events;
    reasoning items are kept whole from ``response.output_item.done``. The stream is
    complete at ``response.completed`` or ``response.incomplete``; ``response.failed``
    and ``error`` events raise :class:`ProviderResponseError`.
    """

    __slots__ = ("_calls", "_folded", "done", "finish_reason", "usage")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        self._folded = _Output(on_token, **caps)
        # output_index -> [name, call_id, argument pieces, size]; settled at output_item.done
        self._calls: dict[int, list[Any]] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False

    @property
    def delivered(self) -> bool:
        """True once text reached ``on_token``."""
        return self._folded.delivered

    @property
    def text(self) -> str:
        """The text received so far."""
        return self._folded.text

    def feed(self, data: str) -> None:
        """Take the ``data`` of one SSE event (a JSON object with its ``type``).

        Raises:
            ProviderResponseError: the event breaks the protocol or reports a failure.
        """
        event = loads(data, "The stream sent an event that is not valid JSON")
        if not isinstance(event, dict):
            msg = f"The stream sent an event that is not a JSON object: {data[:200]!r}."
            raise ProviderResponseError(msg)
        kind = event.get("type")
        if kind == "response.output_text.delta" or kind == "response.refusal.delta":
            self._text(event.get("delta"), kind)
        elif kind == "response.function_call_arguments.delta":
            self._arguments(event)
        elif kind == "response.output_item.added" or kind == "response.output_item.done":
            self._item(event, done=kind == "response.output_item.done")
        elif kind in ("response.completed", "response.incomplete", "response.failed"):
            self._end(event.get("response"), kind)
        elif kind == "error":
            msg = f"The stream reported an error: {_error_text(event.get('error', event))}."
            raise ProviderResponseError(msg)

    def _text(self, delta: Any, kind: str) -> None:
        if not isinstance(delta, str):
            where = f"{kind}.delta"
            raise _malformed(where, delta, "a string")
        if delta:
            self._folded.emit(delta)

    def _index(self, event: Mapping[str, Any]) -> int:
        index = event.get("output_index")
        if isinstance(index, bool) or not isinstance(index, int):
            where = f"{event.get('type')}.output_index"
            raise _malformed(where, index, "an integer")
        return index

    def _arguments(self, event: Mapping[str, Any]) -> None:
        parts = self._calls.get(self._index(event))
        delta = event.get("delta")
        if parts is None or not isinstance(delta, str):
            where = "response.function_call_arguments.delta"
            raise _malformed(where, event, "a delta for an added function_call")
        parts[3] += len(delta)
        folded = self._folded
        if parts[3] > folded.max_arguments:
            raise too_large(folded.max_arguments, parts[0])
        folded.grow(len(delta))
        parts[2].append(delta)

    def _item(self, event: Mapping[str, Any], *, done: bool) -> None:
        item = event.get("item")
        where = f"{event.get('type')}.item"
        if not isinstance(item, Mapping):
            raise _malformed(where, item, "a JSON object")
        kind = item.get("type")
        if kind == "function_call":
            index = self._index(event)
            if not done:
                self._calls[index] = [item.get("name"), item.get("call_id"), [], 0]
                return
            parts = self._calls.pop(index, None)
            if parts is not None:
                self._folded.size -= parts[3]  # counted again, whole, by call()
            self._folded.call(item, where)
        elif kind == "reasoning" and done:
            self._folded.item(item, where)
        elif kind == "message" and done:  # its text came as deltas; only its id is kept here
            self._folded.pair(item, {"type": "message", "id": item.get("id")})

    def _end(self, response: Any, kind: str) -> None:
        if not isinstance(response, Mapping):
            where = f"{kind}.response"
            raise _malformed(where, response, "a JSON object")
        self.usage = parse_usage(response.get("usage"))
        self.finish_reason = _finish(response, bool(self._folded.calls or self._calls))
        self.done = True

    def result(self, *, chunks: int) -> ChatResponse:
        """The complete response; raises :class:`IncompleteStreamError` on a cut stream."""
        if chunks == 0:
            msg = "The server answered 200 but the stream was empty (no events)."
            raise IncompleteStreamError(msg)
        if not self.done or self.finish_reason is None:
            msg = (
                f"The stream ended after {chunks} event(s) without response.completed; the answer is "
                f"incomplete ({len(self.text)} characters of text received)."
            )
            raise IncompleteStreamError(msg)
        if self._calls:  # added but never done: settle them from their deltas
            for index in sorted(self._calls):
                name, call_id, pieces, size = self._calls.pop(index)
                self._folded.size -= size
                self._folded.call({"name": name, "call_id": call_id, "arguments": "".join(pieces)}, "function_call")
        return ChatResponse(self._folded.message(), self.finish_reason, self.usage)
