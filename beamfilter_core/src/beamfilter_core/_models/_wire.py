"""The OpenAI chat-completions wire format: requests out, responses and stream chunks in.

Pure functions and one accumulator, no I/O, so every rule of ``wire.md`` is testable on
plain dicts. Unknown fields are ignored everywhere; ``content`` may be null or missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .._messages import ContentPart, Message, ToolCall, Usage
from .._records import ChatRequest, ChatResponse
from ..errors import IncompleteStreamError, ProviderResponseError
from ._base import TokenSink
from ._wire_common import (
    MAX_ANSWER_CHARS,
    MAX_ARGUMENT_CHARS,
    StreamState,
    count,
    decode_json,
    too_large,
    with_options,
)

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_ARGUMENT_CHARS",
    "StreamAccumulator",
    "loads",
    "message_to_json",
    "parse_completion",
    "parse_usage",
    "preview",
    "request_body",
]

# Keys the provider owns; user options cannot replace them.
_RESERVED = frozenset({"messages", "tools", "stream"})


def _part_to_json(part: ContentPart) -> dict[str, Any]:
    if part.type == "image_url":
        return {"type": "image_url", "image_url": {"url": part.url}}
    if part.type == "text":
        return {"type": "text", "text": part.text or ""}
    return {"type": part.type, "text": part.text, "url": part.url}


def message_to_json(message: Message) -> dict[str, Any]:
    """One :class:`Message` as an OpenAI ``messages[]`` entry."""
    content = message.content
    out: dict[str, Any] = {
        "role": message.role,
        "content": content if content is None or isinstance(content, str) else [_part_to_json(p) for p in content],
    }
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments_json}}
            for call in message.tool_calls
        ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
    elif message.name is not None:
        out["name"] = message.name
    return out


def request_body(request: ChatRequest, model: str, options: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
    """The JSON body of one ``/chat/completions`` call.

    ``options`` (the model's own) are applied first, then ``request.options`` over them;
    neither can replace ``messages``, ``tools`` or ``stream``.
    """
    body = with_options({"model": model}, options, request.options, _RESERVED)
    body["messages"] = [message_to_json(m) for m in request.messages]
    if request.tools:
        body["tools"] = [t.definition for t in request.tools]
        if request.tool_choice is not None:
            body["tool_choice"] = request.tool_choice
    if stream:
        body["stream"] = True
        extra = body.get("stream_options")
        body["stream_options"] = {**(extra if isinstance(extra, Mapping) else {}), "include_usage": True}
    else:
        body.pop("stream_options", None)
    return body


def parse_usage(data: Any) -> Usage | None:
    """A ``usage`` object as :class:`Usage` (missing or odd counts read as 0)."""
    if not isinstance(data, Mapping):
        return None
    prompt = count(data.get("prompt_tokens"))
    completion = count(data.get("completion_tokens"))
    total = count(data.get("total_tokens")) or prompt + completion
    return Usage(prompt, completion, total)


def preview(data: Any, limit: int = 200) -> str:
    """A short JSON (or repr) view of ``data`` for error messages; never fails."""
    try:
        text = json.dumps(data, ensure_ascii=False)
    except (TypeError, ValueError, RecursionError):
        text = f"<{type(data).__name__}>"
    return text if len(text) <= limit else text[:limit] + "..."


def loads(text: str | bytes, problem: str) -> Any:
    """``json.loads`` whose every failure is a ProviderResponseError: ``problem: 'text'.``

    JSON nested too deeply for Python's recursion limit is reported the same way. Text is
    decoded by the bound decoder, without ``json.loads``'s per-call checks (one call per
    stream event of chat completions and Responses).
    """
    try:
        return decode_json(text) if isinstance(text, str) else json.loads(text)
    except (ValueError, RecursionError) as exc:
        shown = text[:200] if isinstance(text, str) else text[:200].decode("utf-8", "replace")
        deep = " (nested too deeply to decode)" if isinstance(exc, RecursionError) else ""
        msg = f"{problem}{deep}: {shown!r}."
        raise ProviderResponseError(msg) from None


def _malformed(what: str, value: Any, expected: str) -> ProviderResponseError:
    msg = f"The server sent {what} as {type(value).__name__} {preview(value)}; expected {expected}."
    return ProviderResponseError(msg)


def _content(value: Any, where: str) -> str | None:
    """Text content: a string, null, or a list of text parts (joined)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(p, Mapping) and isinstance(p.get("text", ""), str) for p in value):
        return "".join(str(p.get("text", "")) for p in value)
    raise _malformed(where, value, "a string, null or a list of text parts")


def _finish(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _malformed(where, value, "a string or null")


def _mapping(value: Any, where: str, *, optional: bool = True) -> Mapping[str, Any]:
    if value is None and optional:
        return {}
    if not isinstance(value, Mapping):
        raise _malformed(where, value, "a JSON object" + (" or null" if optional else ""))
    return value


def _list(value: Any, where: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise _malformed(where, value, "a JSON array or null")
    return value


def _text_or_none(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _malformed(where, value, "a string or null")


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    # A few servers send the arguments as an object instead of a JSON string; anything
    # else is kept as text too, so the loop reports it to the model as bad arguments.
    return json.dumps(value, ensure_ascii=False)


def _server_error(data: Mapping[str, Any]) -> ProviderResponseError:
    error = data.get("error")
    message = error.get("message") if isinstance(error, Mapping) else error
    shown = repr(message[:300]) if isinstance(message, str) else preview(message, 300)
    msg = f"The server reported an error inside a 200 response: {shown}."
    return ProviderResponseError(msg)


def parse_completion(
    data: Any, *, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS
) -> ChatResponse:
    """A non-streaming ``chat.completion`` object as :class:`ChatResponse`.

    Raises:
        ProviderResponseError: for every shape that breaks the protocol (the only error);
            :class:`ResponseTooLargeError` when the answer or one call's arguments is over its bound.
    """
    if not isinstance(data, Mapping):
        msg = f"Expected a JSON object from /chat/completions, got {type(data).__name__}: {preview(data)}."
        raise ProviderResponseError(msg)
    if "error" in data and not data.get("choices"):
        raise _server_error(data)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        msg = f"The completion has no choices: {preview(data, 300)}."
        raise ProviderResponseError(msg)
    choice = next((c for c in choices if isinstance(c, Mapping) and c.get("index", 0) == 0), choices[0])
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        msg = f"The completion's first choice has no message: {preview(choice, 300)}."
        raise ProviderResponseError(msg)
    content = _content(message.get("content"), "message.content")
    if content is None and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    size = len(content or "")
    calls: list[ToolCall] = []
    for position, raw in enumerate(_list(message.get("tool_calls"), "message.tool_calls")):
        if not isinstance(raw, Mapping):
            continue
        where = f"message.tool_calls[{position}]"
        function = _mapping(raw.get("function"), f"{where}.function")
        name = _text_or_none(function.get("name"), f"{where}.function.name") or ""
        call_id = _text_or_none(raw.get("id"), f"{where}.id")
        arguments = _arguments_text(function.get("arguments"))
        if len(arguments) > max_argument_chars:
            raise too_large(max_argument_chars, name)
        size += len(arguments)
        calls.append(ToolCall.from_json(name, arguments, call_id))
    if size > max_answer_chars:
        raise too_large(max_answer_chars)
    finish = _finish(choice.get("finish_reason"), "finish_reason")
    return ChatResponse(Message("assistant", content, tuple(calls)), finish, parse_usage(data.get("usage")))


class _CallParts:
    """A tool call being streamed: id and name once, argument pieces appended."""

    __slots__ = ("arguments", "id", "name", "size")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] = []
        self.size = 0


class StreamAccumulator(StreamState):
    """Folds ``chat.completion.chunk`` objects into one :class:`ChatResponse`.

    Text deltas of choice 0 go to ``on_token`` as they come; ``delivered`` turns true at
    the first one (a stream that reached the consumer is never silently retried). Tool
    calls are keyed by their ``index``; ``id`` and ``name`` are set when first seen and an
    equal repeat is ignored (llama-cpp-python repeats them in every fragment); argument
    pieces are joined and parsed only in :meth:`result`.

    ``max_answer_chars`` bounds the text plus all tool arguments, ``max_argument_chars``
    the arguments of one tool call; going over raises :class:`ResponseTooLargeError`.
    """

    __slots__ = ("_calls", "_last_call", "finish_reason", "usage")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        super().__init__(on_token, **caps)
        self._calls: dict[int, _CallParts] = {}
        self._last_call: int | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, data: str) -> None:
        """Take the ``data`` of one SSE event (a JSON chunk or ``[DONE]``).

        Raises:
            ProviderResponseError: the chunk breaks the protocol (the only error raised).
        """
        if data.startswith("[DONE]"):
            self.done = True
            return
        chunk = loads(data, "The stream sent a chunk that is not valid JSON")
        if not isinstance(chunk, dict):
            msg = f"The stream sent a chunk that is not a JSON object: {data[:200]!r}."
            raise ProviderResponseError(msg)
        if "error" in chunk and not chunk.get("choices"):
            raise _server_error(chunk)
        usage = chunk.get("usage")
        if usage:
            self.usage = parse_usage(usage)
        for position, choice in enumerate(_list(chunk.get("choices"), "choices")):
            if not isinstance(choice, Mapping):
                where = f"choices[{position}]"
                raise _malformed(where, choice, "a JSON object")
            # With n > 1 choices interleave; beamfilter answers with choice 0.
            if choice.get("index", 0) != 0:
                continue
            delta = _mapping(choice.get("delta"), "choices[0].delta")
            if delta:
                text = _content(delta.get("content"), "choices[0].delta.content")
                if text is None:
                    text = _text_or_none(delta.get("refusal"), "choices[0].delta.refusal")
                if text:
                    self.emit(text)
                calls = _list(delta.get("tool_calls"), "choices[0].delta.tool_calls")
                if calls:
                    self._tool_deltas(calls)
            finish = _finish(choice.get("finish_reason"), "choices[0].finish_reason")
            if finish:
                self.finish_reason = finish

    def _tool_deltas(self, deltas: list[Any]) -> None:
        calls = self._calls
        for position, delta in enumerate(deltas):
            if not isinstance(delta, Mapping):
                continue
            where = f"choices[0].delta.tool_calls[{position}]"
            index = delta.get("index")
            call_id = _text_or_none(delta.get("id"), f"{where}.id")
            if not isinstance(index, int):
                # No index (non-conforming server): a new id starts a call, else continue the last.
                known = {c.id for c in calls.values()}
                if (call_id and call_id not in known) or self._last_call is None:
                    index = max(calls, default=-1) + 1  # the next free index
                else:
                    index = self._last_call
            parts = calls.get(index)
            if parts is None:
                parts = calls[index] = _CallParts()
            self._last_call = index
            if call_id and parts.id is None:
                parts.id = call_id
            function = _mapping(delta.get("function"), f"{where}.function")
            if function:
                name = _text_or_none(function.get("name"), f"{where}.function.name")
                if name and name != parts.name:
                    # A server that streams the name in pieces gets them joined; an
                    # equal repeat (llama-cpp-python) is ignored above.
                    parts.name += name
                pieces = function.get("arguments")
                if pieces:
                    piece = _arguments_text(pieces)
                    parts.size += len(piece)
                    if parts.size > self.max_arguments:
                        raise too_large(self.max_arguments, parts.name or str(index))
                    self.grow(len(piece))
                    parts.arguments.append(piece)

    def result(self, *, chunks: int) -> ChatResponse:
        """The complete response; raises :class:`IncompleteStreamError` on a cut stream."""
        if chunks == 0:
            msg = "The server answered 200 but the stream was empty (no chunks, no [DONE])."
            raise IncompleteStreamError(msg)
        if self.finish_reason is None or not self.done:
            missing = " and ".join(
                name
                for name, seen in (("finish_reason", self.finish_reason is not None), ("[DONE]", self.done))
                if not seen
            )
            msg = (
                f"The stream ended after {chunks} chunk(s) without {missing}; the answer is incomplete "
                f"({len(self.text)} characters of text received)."
            )
            raise IncompleteStreamError(msg)
        calls = tuple(
            ToolCall.from_json(parts.name, "".join(parts.arguments), parts.id)
            for _, parts in sorted(self._calls.items())
        )
        text = self.text
        content = text if text or not calls else None
        return ChatResponse(Message("assistant", content, calls), self.finish_reason, self.usage)
