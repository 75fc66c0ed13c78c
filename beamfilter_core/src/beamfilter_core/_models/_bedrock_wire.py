"""The Bedrock Converse wire: requests out, answers and ConverseStream events in.

Pure functions, one accumulator and one frame decoder, no I/O. System messages go to the
top-level ``system`` field; ``tool`` messages become ``toolResult`` blocks of a user
message; consecutive messages of one role are merged (Converse wants the roles to
alternate). The binary AWS event-stream framing of ConverseStream is decoded by
:mod:`._eventstream` (beamfilter's own frame decoder: why, in its docstring).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from typing import Any

from .._messages import ContentPart, Message, Reasoning, ToolCall, Usage
from .._records import ChatRequest, ChatResponse
from ..errors import (
    BadRequestError,
    ConfigError,
    IncompleteStreamError,
    InternalServerError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
    RateLimitError,
)
from ._base import TokenSink
from ._eventstream import EventStreamDecoder
from ._wire import _malformed, loads, preview
from ._wire_common import (
    MAX_ANSWER_CHARS,
    MAX_ARGUMENT_CHARS,
    STOP_REASONS,
    StreamState,
    count,
    decode_json,
    merge_turns,
    text_block,
    too_large,
)

__all__ = [
    "PROVIDER",
    "ConverseStreamAccumulator",
    "EventStreamDecoder",
    "exception_error",
    "parse_converse",
    "parse_usage",
    "request_body",
]

#: ``Reasoning.provider`` of the ``reasoningContent`` blocks this API returns.
PROVIDER = "bedrock.converse"
#: Body keys the provider owns; user options cannot replace them.
_RESERVED = frozenset({"messages", "system", "toolConfig"})
# Chat-style option names folded into ``inferenceConfig`` for convenience.
_INFERENCE = {"max_tokens": "maxTokens", "temperature": "temperature", "top_p": "topP", "stop": "stopSequences"}
# Converse's stop reasons are Claude's, plus its own content filters.
_STOP = {**STOP_REASONS, "content_filtered": "content_filter", "guardrail_intervened": "content_filter"}
_IMAGE_FORMATS = {"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}
# ConverseStream exception events -> (error class, HTTP status the same fault has as a response).
_EXCEPTIONS: dict[str, tuple[type[ProviderHTTPError], int]] = {
    "throttlingException": (RateLimitError, 429),
    "serviceUnavailableException": (InternalServerError, 503),
    "internalServerException": (InternalServerError, 500),
    "modelStreamErrorException": (InternalServerError, 424),
    "validationException": (BadRequestError, 400),
}


def _image(part: ContentPart) -> dict[str, Any]:
    url = part.url or ""
    head, _, data = url.partition(",")
    kind = head[5:].split(";")[0] if head.startswith("data:") and head.endswith(";base64") else ""
    if kind not in _IMAGE_FORMATS:
        msg = (
            f"Bedrock Converse takes images as bytes: ContentPart(image_url={url[:60]!r}) must be a "
            "base64 data: URL of a png, jpeg, gif or webp image."
        )
        raise ConfigError(msg)
    try:
        base64.b64decode(data, validate=True)
    except binascii.Error:
        msg = f"ContentPart(image_url={url[:60]!r}) is not valid base64 after 'base64,'."
        raise ConfigError(msg) from None
    return {"image": {"format": _IMAGE_FORMATS[kind], "source": {"bytes": data}}}


def _user_blocks(content: str | tuple[ContentPart, ...] | None) -> list[dict[str, Any]]:
    if content is None or isinstance(content, str):
        return [{"text": content}] if content else []
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.type == "image_url":
            blocks.append(_image(part))
        elif part.type == "text" and part.text:
            blocks.append({"text": part.text})
    return blocks


def _assistant_blocks(message: Message) -> list[dict[str, Any]]:
    blocks = [dict(r.data) for r in message.reasoning if r.provider == PROVIDER and r.data]
    if message.text:
        blocks.append({"text": message.text})
    for call in message.tool_calls:
        blocks.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": dict(call.arguments)}})
    return blocks


def _turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
    if message.role == "assistant":
        return "assistant", _assistant_blocks(message)
    if message.role == "tool":
        result = {"toolUseId": message.tool_call_id, "content": [{"text": message.text}]}
        return "user", [{"toolResult": result}]
    return "user", _user_blocks(message.content)


def _tool_choice(choice: str | Mapping[str, Any]) -> dict[str, Any] | None:
    if choice == "required":
        return {"any": {}}
    if choice == "auto":
        return {"auto": {}}
    if isinstance(choice, Mapping):
        function = choice.get("function")
        if isinstance(function, Mapping):
            return {"tool": {"name": function.get("name")}}
        return dict(choice)  # a native Converse choice, as given
    return None  # "none": Converse has no such choice; the model may still answer in text


#: The prompt-cache checkpoint Converse places after the content it ends.
CACHE_POINT: dict[str, Any] = {"cachePoint": {"type": "default"}}


def request_body(request: ChatRequest, options: Mapping[str, Any], *, cache_points: bool = False) -> dict[str, Any]:
    """The JSON body of one Converse or ConverseStream call.

    ``options`` (the model's own), then ``request.options`` over them, are native body
    fields (``inferenceConfig``, ``additionalModelRequestFields``, ``guardrailConfig``...);
    ``max_tokens``, ``temperature``, ``top_p`` and ``stop`` go into ``inferenceConfig``.
    ``cache_points`` ends the system prompt and the tool list with a ``cachePoint``, so
    that models with prompt caching read that prefix from the cache on the next calls.
    """
    body: dict[str, Any] = {}
    inference: dict[str, Any] = {}
    for source in (options, request.options):
        for key, value in source.items():
            if key in _INFERENCE:
                inference[_INFERENCE[key]] = [value] if key == "stop" and isinstance(value, str) else value
            elif key == "inferenceConfig" and isinstance(value, Mapping):
                inference.update(value)
            elif key not in _RESERVED:
                body[key] = value
    if inference:
        body["inferenceConfig"] = inference
    system, turns = merge_turns(request.messages, text_block, _turn)
    body["messages"] = turns
    if system:
        body["system"] = [*system, CACHE_POINT] if cache_points else system
    if request.tools:
        tools = []
        for t in request.tools:
            function = t.definition["function"]
            spec = {"name": function["name"], "inputSchema": {"json": function.get("parameters", {})}}
            if function.get("description"):
                spec["description"] = function["description"]
            tools.append({"toolSpec": spec})
        config: dict[str, Any] = {"tools": [*tools, CACHE_POINT] if cache_points else tools}
        choice = _tool_choice(request.tool_choice) if request.tool_choice is not None else None
        if choice is not None:
            config["toolChoice"] = choice
        body["toolConfig"] = config
    return body


def parse_usage(data: Any) -> Usage | None:
    """A Converse ``usage`` object, with its prompt-cache reads and writes.

    ``inputTokens`` leaves out the cached prefix, which ``totalTokens`` counts: as for
    Anthropic, ``prompt_tokens`` is all of the input, cached or not.
    """
    if not isinstance(data, Mapping):
        return None
    read, written = count(data.get("cacheReadInputTokens")), count(data.get("cacheWriteInputTokens"))
    prompt, completion = count(data.get("inputTokens")) + read + written, count(data.get("outputTokens"))
    return Usage(prompt, completion, count(data.get("totalTokens")) or prompt + completion, read, written)


def _stop(reason: Any, where: str) -> str:
    if not isinstance(reason, str):
        raise _malformed(where, reason, "a string")
    return _STOP.get(reason, reason)


def _reasoning(block: Mapping[str, Any]) -> Reasoning:
    content = block.get("reasoningContent")
    text = content.get("reasoningText") if isinstance(content, Mapping) else None
    said = text.get("text") if isinstance(text, Mapping) else None
    return Reasoning(PROVIDER, said if isinstance(said, str) else "", dict(block))


def parse_converse(
    data: Any, *, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS
) -> ChatResponse:
    """A Converse answer as :class:`ChatResponse`; a broken shape is a ProviderResponseError."""
    output = data.get("output") if isinstance(data, Mapping) else None
    message = output.get("message") if isinstance(output, Mapping) else None
    content = message.get("content") if isinstance(message, Mapping) else None
    if not isinstance(content, list):
        msg = f"Expected a Converse answer with output.message.content, got {preview(data, 300)}."
        raise ProviderResponseError(msg)
    texts: list[str] = []
    calls: list[ToolCall] = []
    reasoning: list[Reasoning] = []
    size = 0
    for position, block in enumerate(content):
        where = f"output.message.content[{position}]"
        if not isinstance(block, Mapping):
            raise _malformed(where, block, "a JSON object")
        if "text" in block:
            text = block["text"]
            if not isinstance(text, str):
                field = f"{where}.text"
                raise _malformed(field, text, "a string")
            texts.append(text)
            size += len(text)
        elif "toolUse" in block:
            use = block["toolUse"]
            if not (
                isinstance(use, Mapping) and isinstance(use.get("name"), str) and isinstance(use.get("toolUseId"), str)
            ):
                field = f"{where}.toolUse"
                raise _malformed(field, use, "an object with a name and a toolUseId")
            arguments = json.dumps(use.get("input", {}), ensure_ascii=False)
            if len(arguments) > max_argument_chars:
                raise too_large(max_argument_chars, use["name"])
            size += len(arguments)
            calls.append(ToolCall.from_json(use["name"], arguments, use["toolUseId"]))
        elif "reasoningContent" in block:
            reasoning.append(_reasoning(block))
    if size > max_answer_chars:
        raise too_large(max_answer_chars)
    text = "".join(texts)
    finish = _stop(data.get("stopReason"), "stopReason")
    answer = Message("assistant", text if text or not calls else None, tuple(calls), reasoning=tuple(reasoning))
    return ChatResponse(answer, finish, parse_usage(data.get("usage")))


def exception_error(kind: str, payload: bytes) -> tuple[ProviderError, bool]:
    """The typed error for a ConverseStream exception event, and whether it may be retried."""
    try:
        decoded = json.loads(payload)
    except ValueError:
        decoded = None
    message = decoded.get("message") if isinstance(decoded, Mapping) else None
    if not isinstance(message, str) or not message:
        message = payload.decode("utf-8", "replace")[:500] or f"the stream reported {kind}"
    cls, status = _EXCEPTIONS.get(kind, (InternalServerError, 500))
    error = cls(message, status_code=status, error_type=kind, body=decoded)
    return error, status in (429, 500, 503)


def missing_botocore() -> ConfigError:
    """The error for a Bedrock model without botocore."""
    msg = (
        "BedrockChatModel needs botocore (SigV4 signing and the AWS credential chain): "
        "pip install 'beamfilter-core[bedrock]'."
    )
    return ConfigError(msg)


class _Block:
    __slots__ = ("id", "kind", "name", "pieces", "redacted", "signature", "size")

    def __init__(self, kind: str, id: str | None = None, name: str | None = None) -> None:
        self.kind = kind
        self.id = id
        self.name = name
        self.pieces: list[str] = []
        self.signature: str | None = None
        self.redacted: str | None = None
        self.size = 0


class ConverseStreamAccumulator(StreamState):
    """Folds ConverseStream events into one :class:`ChatResponse`, incrementally.

    Text deltas go to ``on_token`` as they come; a ``toolUse`` block is opened by its
    ``contentBlockStart`` and its ``input`` pieces are joined and parsed at the end;
    ``reasoningContent`` deltas (text and signature, or redacted content) are kept as a
    block to send back.
    ``messageStop`` gives the stop reason; ``metadata`` (usage) ends the stream.
    """

    __slots__ = ("_blocks", "finish_reason", "usage")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        super().__init__(on_token, **caps)
        self._blocks: dict[int, _Block] = {}
        self.finish_reason: str | None = None
        self.usage: Usage | None = None

    def feed(self, kind: str, payload: bytes) -> None:
        """Take one event: its ``:event-type`` and JSON payload."""
        try:
            event = decode_json(payload.decode())
        except (ValueError, RecursionError):  # the message (and the problem's text) only on failure
            event = loads(payload, f"The stream sent a {kind} event that is not valid JSON")
        if type(event) is not dict:
            raise _malformed(kind, event, "a JSON object")
        if kind == "contentBlockDelta":
            delta = event.get("delta")
            text = delta.get("text") if type(delta) is dict else None
            if type(text) is str:  # the hot path: one text delta in most events
                if text:
                    self.emit(text)
                return
            self._delta(event)
        elif kind == "contentBlockStart":
            start = event.get("start")
            use = start.get("toolUse") if isinstance(start, Mapping) else None
            if isinstance(use, Mapping):
                index = self._index(event, kind)
                self._blocks[index] = _Block("toolUse", use.get("toolUseId"), use.get("name"))
        elif kind == "messageStop":
            self.finish_reason = _stop(event.get("stopReason"), "messageStop.stopReason")
        elif kind == "metadata":
            self.usage = parse_usage(event.get("usage"))
            self.done = True

    def _index(self, event: Mapping[str, Any], kind: str) -> int:
        index = event.get("contentBlockIndex")
        if isinstance(index, bool) or not isinstance(index, int):
            field = f"{kind}.contentBlockIndex"
            raise _malformed(field, index, "an integer")
        return index

    def _delta(self, event: Mapping[str, Any]) -> None:
        delta = event.get("delta")
        if not isinstance(delta, Mapping):
            field = "contentBlockDelta.delta"
            raise _malformed(field, delta, "a JSON object")
        if "text" in delta:  # text that is a string took the hot path in feed
            field = "contentBlockDelta.delta.text"
            raise _malformed(field, delta["text"], "a string")
        index = self._index(event, "contentBlockDelta")
        if "toolUse" in delta:
            block = self._blocks.get(index)
            use = delta["toolUse"]
            piece = use.get("input") if isinstance(use, Mapping) else None
            if block is None or block.kind != "toolUse" or not isinstance(piece, str):
                field = "contentBlockDelta.delta.toolUse"
                raise _malformed(field, use, "input text for a started toolUse block")
            block.size += len(piece)
            if block.size > self.max_arguments:
                raise too_large(self.max_arguments, block.name or str(index))
            self.grow(len(piece))
            block.pieces.append(piece)
        elif "reasoningContent" in delta:
            part = delta["reasoningContent"]
            block = self._blocks.setdefault(index, _Block("reasoningContent"))
            if isinstance(part, Mapping):
                for key in ("text", "signature", "redactedContent"):
                    value = part.get(key)
                    if isinstance(value, str):
                        self.grow(len(value))  # reasoning counts toward the answer's bound too
                        if key == "text":
                            block.pieces.append(value)
                        elif key == "signature":
                            block.signature = value
                        else:
                            block.redacted = value

    def result(self, *, chunks: int) -> ChatResponse:
        """The complete response; raises :class:`IncompleteStreamError` on a cut stream."""
        if chunks == 0:
            msg = "The server answered 200 but the event stream was empty."
            raise IncompleteStreamError(msg)
        if self.finish_reason is None:
            msg = (
                f"The event stream ended after {chunks} event(s) without messageStop; the answer is "
                f"incomplete ({len(self.text)} characters of text received)."
            )
            raise IncompleteStreamError(msg)
        calls: list[ToolCall] = []
        reasoning: list[Reasoning] = []
        for _, block in sorted(self._blocks.items()):
            joined = "".join(block.pieces)
            if block.kind == "toolUse":
                calls.append(ToolCall.from_json(block.name or "", joined, block.id))
            elif block.redacted is not None:  # encrypted reasoning: sent back as it came
                reasoning.append(Reasoning(PROVIDER, "", {"reasoningContent": {"redactedContent": block.redacted}}))
            else:
                said: dict[str, Any] = {"text": joined}
                if block.signature is not None:
                    said["signature"] = block.signature
                reasoning.append(Reasoning(PROVIDER, joined, {"reasoningContent": {"reasoningText": said}}))
        text = self.text
        answer = Message("assistant", text if text or not calls else None, tuple(calls), reasoning=tuple(reasoning))
        return ChatResponse(answer, self.finish_reason, self.usage)
