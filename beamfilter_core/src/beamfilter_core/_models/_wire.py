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

__all__ = [
    "StreamAccumulator",
    "message_to_json",
    "parse_completion",
    "parse_usage",
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
    body: dict[str, Any] = {"model": model}
    for source in (options, request.options):
        for key, value in source.items():
            if key not in _RESERVED:
                body[key] = value
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


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def parse_usage(data: Any) -> Usage | None:
    """A ``usage`` object as :class:`Usage` (missing or odd counts read as 0)."""
    if not isinstance(data, Mapping):
        return None
    prompt = _int(data.get("prompt_tokens"))
    completion = _int(data.get("completion_tokens"))
    total = _int(data.get("total_tokens")) or prompt + completion
    return Usage(prompt, completion, total)


def _arguments_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    # A few servers send the arguments as an object instead of a JSON string.
    return json.dumps(value, ensure_ascii=False)


def _server_error(data: Mapping[str, Any]) -> ProviderResponseError:
    error = data.get("error")
    message = error.get("message") if isinstance(error, Mapping) else error
    msg = f"The server reported an error inside a 200 response: {message!r}."
    return ProviderResponseError(msg)


def parse_completion(data: Any) -> ChatResponse:
    """A non-streaming ``chat.completion`` object as :class:`ChatResponse`."""
    if not isinstance(data, Mapping):
        msg = f"Expected a JSON object from /chat/completions, got {type(data).__name__}: {str(data)[:200]!r}."
        raise ProviderResponseError(msg)
    if "error" in data and not data.get("choices"):
        raise _server_error(data)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        msg = f"The completion has no choices: {json.dumps(data)[:300]}."
        raise ProviderResponseError(msg)
    choice = next((c for c in choices if isinstance(c, Mapping) and c.get("index", 0) == 0), choices[0])
    message = choice.get("message") if isinstance(choice, Mapping) else None
    if not isinstance(message, Mapping):
        msg = f"The completion's first choice has no message: {json.dumps(choice)[:300]}."
        raise ProviderResponseError(msg)
    content = message.get("content")
    if content is None and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    if content is not None and not isinstance(content, str):
        content = str(content)
    calls: list[ToolCall] = []
    for raw in message.get("tool_calls") or ():
        if not isinstance(raw, Mapping):
            continue
        function = raw.get("function") or {}
        calls.append(
            ToolCall.from_json(
                str(function.get("name") or ""), _arguments_text(function.get("arguments")), raw.get("id")
            )
        )
    return ChatResponse(
        Message("assistant", content, tuple(calls)), choice.get("finish_reason"), parse_usage(data.get("usage"))
    )


class _CallParts:
    """A tool call being streamed: id and name once, argument pieces appended."""

    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name = ""
        self.arguments: list[str] = []


class StreamAccumulator:
    """Folds ``chat.completion.chunk`` objects into one :class:`ChatResponse`.

    Text deltas of choice 0 go to ``on_token`` as they come; ``delivered`` turns true at
    the first one (a stream that reached the consumer is never silently retried). Tool
    calls are keyed by their ``index``; ``id`` and ``name`` are set when first seen and an
    equal repeat is ignored (llama-cpp-python repeats them in every fragment); argument
    pieces are joined and parsed only in :meth:`result`.
    """

    __slots__ = ("_calls", "_last_call", "_on_token", "_text", "delivered", "done", "finish_reason", "usage")

    def __init__(self, on_token: TokenSink | None) -> None:
        self._on_token = on_token
        self._text: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._last_call: int | None = None
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False
        self.delivered = False

    def feed(self, data: str) -> None:
        """Take the ``data`` of one SSE event (a JSON chunk or ``[DONE]``)."""
        if data.startswith("[DONE]"):
            self.done = True
            return
        try:
            chunk = json.loads(data)
        except ValueError:
            msg = f"The stream sent a chunk that is not valid JSON: {data[:200]!r}."
            raise ProviderResponseError(msg) from None
        if not isinstance(chunk, dict):
            msg = f"The stream sent a chunk that is not a JSON object: {data[:200]!r}."
            raise ProviderResponseError(msg)
        if "error" in chunk and not chunk.get("choices"):
            raise _server_error(chunk)
        usage = chunk.get("usage")
        if usage:
            self.usage = parse_usage(usage)
        choices = chunk.get("choices")
        if not choices:
            return
        for choice in choices:
            # With n > 1 choices interleave; beamfilter answers with choice 0.
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta")
            if delta:
                text = delta.get("content")
                if text is None:
                    text = delta.get("refusal")
                if text:
                    self._text.append(text)
                    on_token = self._on_token
                    if on_token is not None:
                        self.delivered = True
                        on_token(text)
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_deltas(calls)
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = finish

    def _tool_deltas(self, deltas: list[Any]) -> None:
        calls = self._calls
        for position, delta in enumerate(deltas):
            if not isinstance(delta, Mapping):
                continue
            index = delta.get("index")
            call_id = delta.get("id")
            if not isinstance(index, int):
                # No index (non-conforming server): a new id starts a call, else continue the last.
                known = {c.id for c in calls.values()}
                if (call_id and call_id not in known) or self._last_call is None:
                    index = len(calls) + position
                else:
                    index = self._last_call
            parts = calls.get(index)
            if parts is None:
                parts = calls[index] = _CallParts()
            self._last_call = index
            if call_id and parts.id is None:
                parts.id = call_id
            function = delta.get("function")
            if function:
                name = function.get("name")
                if name and name != parts.name:
                    # A server that streams the name in pieces gets them joined; an
                    # equal repeat (llama-cpp-python) is ignored above.
                    parts.name += name
                pieces = function.get("arguments")
                if pieces:
                    parts.arguments.append(_arguments_text(pieces))

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)

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
