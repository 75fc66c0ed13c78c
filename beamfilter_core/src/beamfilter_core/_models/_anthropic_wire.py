"""The Anthropic Messages wire format (``/v1/messages``): requests out, messages and events in.

Pure functions and one stream accumulator, no I/O. System messages go to the top-level
``system`` field, tool calls are ``tool_use`` blocks and their results ``tool_result``
blocks of the next user message; ``thinking`` and ``redacted_thinking`` blocks come back
as :class:`Reasoning` and are sent back verbatim (signature included) with the assistant
message they came with. Unknown fields and block types are ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._messages import ContentPart, Message, Reasoning, ToolCall, Usage
from .._records import ChatRequest, ChatResponse
from ..errors import ContentBlockedError, IncompleteStreamError, ProviderResponseError
from ._base import TokenSink
from ._wire import loads, preview
from ._wire_common import (
    MAX_ANSWER_CHARS,
    MAX_ARGUMENT_CHARS,
    STOP_REASONS,
    StreamState,
    count,
    decode_json,
    merge_turns,
    object_call,
    too_large,
    with_options,
)

__all__ = [
    "PROVIDER",
    "StreamAccumulator",
    "cache_mark",
    "data_url",
    "parse_message",
    "parse_usage",
    "request_body",
    "stop_reason",
    "tool_parts",
]

#: The ``Reasoning.provider`` of Anthropic's thinking blocks.
PROVIDER = "anthropic"

# Keys the provider owns; options cannot replace them.
_RESERVED = frozenset({"messages", "tools", "stream", "system", "cache_control"})
_CHOICE = {"auto": {"type": "auto"}, "none": {"type": "none"}, "required": {"type": "any"}}


def data_url(url: str) -> tuple[str, str] | None:
    """``(media_type, base64 data)`` of a ``data:<type>;base64,<data>`` URL, else None."""
    if not url.startswith("data:"):
        return None
    head, comma, data = url[5:].partition(",")
    if not comma or not head.endswith(";base64"):
        return None
    return head[: -len(";base64")] or "application/octet-stream", data


def tool_parts(definition: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
    """``(name, description, parameters)`` of an OpenAI-shaped tool definition."""
    function = definition.get("function", definition)
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return str(function.get("name", "")), str(function.get("description") or ""), parameters


def cache_mark(value: Any) -> dict[str, Any] | None:
    """The ``cache_control`` block that ``cache_control=`` asks for (None: no caching)."""
    if value is None or value is False:
        return None
    if value is True:
        return {"type": "ephemeral"}
    return dict(value)


def _image(part: ContentPart) -> dict[str, Any]:
    url = part.url or ""
    inline = data_url(url)
    if inline is not None:
        return {"type": "image", "source": {"type": "base64", "media_type": inline[0], "data": inline[1]}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _content_blocks(message: Message) -> list[dict[str, Any]]:
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.type == "image_url":
            blocks.append(_image(part))
        elif part.text:
            blocks.append({"type": "text", "text": part.text})
    return blocks


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    # thinking first: the API checks that the blocks it signed come back as they were
    blocks = [dict(r.data) for r in message.reasoning if r.provider == PROVIDER and r.data]
    blocks += _content_blocks(message)
    for call in message.tool_calls:
        # arguments that were not a JSON object go back as an empty input (tool_use needs an object)
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)})
    return blocks


def _system_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "assistant":
        return "assistant", _assistant_blocks(message)
    if message.role == "tool":
        return "user", [{"type": "tool_result", "tool_use_id": message.tool_call_id, "content": message.text}]
    return "user", _content_blocks(message)


def _tool_choice(choice: str | Mapping[str, Any]) -> Mapping[str, Any]:
    if isinstance(choice, str):
        return _CHOICE.get(choice, {"type": "tool", "name": choice})
    function = choice.get("function")
    if choice.get("type") == "function" and isinstance(function, Mapping):
        return {"type": "tool", "name": function.get("name")}
    return choice


def request_body(
    request: ChatRequest,
    model: str,
    options: Mapping[str, Any],
    *,
    max_tokens: int,
    stream: bool,
    cache_control: Any = None,
) -> dict[str, Any]:
    """The JSON body of one ``/v1/messages`` call.

    ``options`` then ``request.options`` are merged over ``model`` and ``max_tokens``;
    ``cache_control`` (True, or a block such as ``{"type": "ephemeral", "ttl": "1h"}``)
    marks the end of the system prompt and of the tools as a cache breakpoint; a
    ``cache_control`` key in ``options`` overrides it, and one in ``request.options`` for one call.
    """
    body = with_options({"model": model, "max_tokens": max_tokens}, options, request.options, _RESERVED)
    mark = cache_mark(request.options.get("cache_control", options.get("cache_control", cache_control)))
    system, messages = merge_turns(request.messages, _system_block, _turn)
    if system:
        if mark is not None:
            system[-1]["cache_control"] = mark
        body["system"] = system
    body["messages"] = messages
    if request.tools:
        tools: list[dict[str, Any]] = []
        for tool in request.tools:
            name, description, parameters = tool_parts(tool.definition)
            entry: dict[str, Any] = {"name": name, "input_schema": parameters}
            if description:
                entry["description"] = description
            tools.append(entry)
        if mark is not None:
            tools[-1]["cache_control"] = mark
        body["tools"] = tools
        if request.tool_choice is not None:
            body["tool_choice"] = _tool_choice(request.tool_choice)
    if stream:
        body["stream"] = True
    return body


def parse_usage(data: Any) -> Usage | None:
    """Anthropic's ``usage`` as :class:`Usage`; ``prompt_tokens`` counts cached input too."""
    if not isinstance(data, Mapping):
        return None
    read = count(data.get("cache_read_input_tokens"))
    written = count(data.get("cache_creation_input_tokens"))
    prompt = count(data.get("input_tokens")) + read + written
    completion = count(data.get("output_tokens"))
    return Usage(prompt, completion, prompt + completion, read, written)


def stop_reason(value: Any, text: str, details: Any = None) -> str | None:
    """The finish reason for ``stop_reason``; a ``refusal`` raises ContentBlockedError."""
    if value == "refusal":
        shown = f" after {len(text)} characters of text" if text else ""
        msg = f"Anthropic's safety system stopped the answer (stop_reason 'refusal'){shown}; rephrase the request."
        raise ContentBlockedError(msg, reason="refusal", text=text, details=details)
    if value is None or isinstance(value, str):
        return STOP_REASONS.get(value, value) if value is not None else None
    msg = f"The server sent stop_reason as {type(value).__name__} {preview(value)}; expected a string."
    raise ProviderResponseError(msg)


def _server_error(data: Mapping[str, Any], where: str) -> ProviderResponseError:
    error = data.get("error")
    kind = error.get("type") if isinstance(error, Mapping) else None
    message = error.get("message") if isinstance(error, Mapping) else error
    shown = repr(message[:300]) if isinstance(message, str) else preview(message, 300)
    msg = f"The server reported an error {where}: {kind or 'error'}: {shown}."
    return ProviderResponseError(msg)


def _reasoning(block: Mapping[str, Any]) -> Reasoning:
    text = block.get("thinking")
    return Reasoning(PROVIDER, text if isinstance(text, str) else "", dict(block))


def parse_message(
    data: Any, *, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS
) -> ChatResponse:
    """A non-streaming ``message`` object as :class:`ChatResponse`.

    Raises:
        ProviderResponseError: for every shape that breaks the protocol;
            :class:`ResponseTooLargeError` when the answer or one call's arguments is over its bound.
        ContentBlockedError: ``stop_reason`` is ``refusal``.
    """
    if not isinstance(data, Mapping):
        msg = f"Expected a JSON object from /v1/messages, got {type(data).__name__}: {preview(data)}."
        raise ProviderResponseError(msg)
    if data.get("type") == "error":
        raise _server_error(data, "inside a 200 response")
    content = data.get("content")
    if not isinstance(content, list):
        msg = f"The message has no content list: {preview(data, 300)}."
        raise ProviderResponseError(msg)
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    size = 0
    for position, block in enumerate(content):
        if not isinstance(block, Mapping):
            msg = f"The server sent content[{position}] as {type(block).__name__} {preview(block)}; expected an object."
            raise ProviderResponseError(msg)
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            texts.append(block["text"])
            size += len(block["text"])
        elif kind == "tool_use":
            made = object_call(block.get("name"), block.get("input", {}), block.get("id"), max_argument_chars)
            if made is None:
                msg = f"The server sent a tool_use block without a name or an object input: {preview(block)}."
                raise ProviderResponseError(msg)
            calls.append(made[0])
            size += made[1]
        elif kind in ("thinking", "redacted_thinking"):
            reasoning.append(_reasoning(block))
    if size > max_answer_chars:
        raise too_large(max_answer_chars)
    text = "".join(texts)
    finish = stop_reason(data.get("stop_reason"), text, data.get("stop_details"))
    message = Message("assistant", text if text or not calls else None, tuple(calls), reasoning=tuple(reasoning))
    return ChatResponse(message, finish, parse_usage(data.get("usage")))


class _Block:
    """One content block being streamed."""

    __slots__ = ("data", "kind", "parts", "size")

    def __init__(self, kind: str, data: dict[str, Any]) -> None:
        self.kind = kind
        self.data = data
        self.parts: list[str] = []
        self.size = 0


class StreamAccumulator(StreamState):
    """Folds Anthropic stream events (``message_start`` ... ``message_stop``) into one answer.

    Text deltas go to ``on_token`` as they come (``delivered`` turns true at the first);
    ``input_json_delta`` pieces are joined per block and parsed at ``content_block_stop``
    time, in :meth:`result`; thinking and signature deltas build the block sent back.
    """

    __slots__ = ("_blocks", "_usage", "stop")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        super().__init__(on_token, **caps)
        self._blocks: dict[int, _Block] = {}
        self._usage: dict[str, Any] = {}
        self.stop: Any = None

    def feed(self, data: str) -> None:
        """Take the ``data`` of one event (its ``type`` names it, as the ``event:`` line does)."""
        try:
            event = decode_json(data)
        except (ValueError, RecursionError):
            event = loads(data, "The stream sent an event that is not valid JSON")  # raises with the reason
        if not isinstance(event, dict):
            msg = f"The stream sent an event that is not a JSON object: {data[:200]!r}."
            raise ProviderResponseError(msg)
        kind = event.get("type")
        if kind == "content_block_delta":
            self._delta(event)
        elif kind == "content_block_start":
            self._start(event)
        elif kind == "message_start":
            message = event.get("message")
            if isinstance(message, Mapping) and isinstance(message.get("usage"), Mapping):
                self._usage.update(message["usage"])
        elif kind == "message_delta":
            delta = event.get("delta")
            if isinstance(delta, Mapping) and "stop_reason" in delta:
                self.stop = delta["stop_reason"]
            if isinstance(event.get("usage"), Mapping):
                # counts here are cumulative: they replace those of message_start
                self._usage.update({k: v for k, v in event["usage"].items() if v is not None})
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise _server_error(event, "mid-stream")

    def _index(self, event: Mapping[str, Any]) -> int:
        index = event.get("index")
        if isinstance(index, int) and not isinstance(index, bool):
            return index
        msg = f"The stream sent {event.get('type')} without an integer index: {preview(event)}."
        raise ProviderResponseError(msg)

    def _start(self, event: Mapping[str, Any]) -> None:
        block = event.get("content_block")
        if not isinstance(block, Mapping):
            msg = f"The stream sent content_block_start without a content_block: {preview(event)}."
            raise ProviderResponseError(msg)
        kind = str(block.get("type"))
        started = self._blocks[self._index(event)] = _Block(kind, dict(block))
        if kind == "text" and block.get("text"):
            self.emit(block["text"])
        elif kind == "thinking":
            started.parts.append(str(block.get("thinking") or ""))

    def _delta(self, event: Mapping[str, Any]) -> None:
        index = self._index(event)
        block = self._blocks.get(index)
        delta = event.get("delta")
        if block is None or not isinstance(delta, dict):
            msg = f"The stream sent a content_block_delta for no started block: {preview(event)}."
            raise ProviderResponseError(msg)
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if not isinstance(text, str):
                msg = f"The stream sent a text_delta without text: {preview(event)}."
                raise ProviderResponseError(msg)
            if text:
                self.emit(text)
        elif kind == "input_json_delta":
            piece = delta.get("partial_json")
            if not isinstance(piece, str):
                msg = f"The stream sent an input_json_delta without partial_json: {preview(event)}."
                raise ProviderResponseError(msg)
            block.size += len(piece)
            if block.size > self.max_arguments:
                raise too_large(self.max_arguments, str(block.data.get("name") or index))
            self.grow(len(piece))
            block.parts.append(piece)
        elif kind == "thinking_delta":
            block.parts.append(str(delta.get("thinking") or ""))
        elif kind == "signature_delta":
            block.data["signature"] = str(block.data.get("signature") or "") + str(delta.get("signature") or "")

    def result(self, *, chunks: int) -> ChatResponse:
        """The complete response; raises :class:`IncompleteStreamError` on a cut stream."""
        if not self.done or self.stop is None:
            missing = " and ".join(
                name for name, seen in (("stop_reason", self.stop is not None), ("message_stop", self.done)) if not seen
            )
            msg = (
                f"The stream ended after {chunks} event(s) without {missing}; the answer is incomplete "
                f"({len(self.text)} characters of text received)."
            )
            raise IncompleteStreamError(msg)
        text = self.text
        finish = stop_reason(self.stop, text)
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for _, block in sorted(self._blocks.items()):
            if block.kind == "tool_use":
                name = str(block.data.get("name") or "")
                call_id = block.data.get("id")
                arguments = "".join(block.parts)
                calls.append(ToolCall.from_json(name, arguments, call_id if isinstance(call_id, str) else None))
            elif block.kind == "thinking":
                block.data["thinking"] = "".join(block.parts)
                reasoning.append(_reasoning(block.data))
            elif block.kind == "redacted_thinking":
                reasoning.append(_reasoning(block.data))
        message = Message("assistant", text if text or not calls else None, tuple(calls), reasoning=tuple(reasoning))
        return ChatResponse(message, finish, parse_usage(self._usage) if self._usage else None)
