"""The Gemini ``generateContent`` wire format: requests out, responses and stream chunks in.

Pure functions and one stream accumulator, no I/O. System messages go to
``systemInstruction``, tool calls are ``functionCall`` parts of a ``model`` turn and their
results ``functionResponse`` parts of the next ``user`` turn; a ``thoughtSignature`` that
comes with a part is kept as :class:`Reasoning` and put back on the same part. A blocked
prompt or answer (``SAFETY`` and its kin) raises :class:`ContentBlockedError`, never an
empty answer. Options that are not top-level request fields go to ``generationConfig``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._messages import ContentPart, Message, Reasoning, ToolCall, Usage
from .._records import ChatRequest, ChatResponse
from ..errors import ContentBlockedError, IncompleteStreamError, ProviderResponseError
from ._anthropic_wire import data_url, tool_parts
from ._base import TokenSink
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS, loads, preview
from ._wire_common import StreamState, count, decode_json, merge_turns, object_call, text_block

__all__ = ["BLOCKED", "PROVIDER", "StreamAccumulator", "finish_reason", "parse_response", "parse_usage", "request_body"]

#: The ``Reasoning.provider`` of Gemini's thought signatures and thought summaries.
PROVIDER = "gemini"
#: Finish reasons that mean the answer was withheld.
BLOCKED = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "LANGUAGE",
        "IMAGE_PROHIBITED_CONTENT",
    }
)
# Top-level request fields; every other option belongs in generationConfig.
_TOP_LEVEL = frozenset({"generationConfig", "safetySettings", "cachedContent", "toolConfig", "labels"})
_RESERVED = frozenset({"contents", "tools", "systemInstruction"})
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}
_MODES = {"auto": "AUTO", "none": "NONE", "required": "ANY"}


def _parts(message: Message) -> list[dict[str, Any]]:
    content = message.content
    if content is None:
        return []
    if isinstance(content, str):
        return [{"text": content}] if content else []
    parts: list[dict[str, Any]] = []
    for part in content:
        if part.type == "image_url":
            parts.append(_image(part))
        elif part.text:
            parts.append({"text": part.text})
    return parts


def _image(part: ContentPart) -> dict[str, Any]:
    url = part.url or ""
    inline = data_url(url)
    if inline is not None:
        return {"inlineData": {"mimeType": inline[0], "data": inline[1]}}
    return {"fileData": {"fileUri": url}}


def _model_parts(message: Message) -> list[dict[str, Any]]:
    signatures: dict[str, str] = {}
    text_signature: str | None = None
    for item in message.reasoning:
        signature = item.data.get("thoughtSignature") if item.provider == PROVIDER else None
        if isinstance(signature, str):
            call = item.data.get("call")
            if isinstance(call, str):
                signatures[call] = signature
            else:
                text_signature = signature
    parts = _parts(message)
    if parts and text_signature is not None:
        parts[-1]["thoughtSignature"] = text_signature
    for call in message.tool_calls:
        part: dict[str, Any] = {"functionCall": {"id": call.id, "name": call.name, "args": dict(call.arguments)}}
        if call.id in signatures:
            part["thoughtSignature"] = signatures[call.id]
        parts.append(part)
    return parts


def _contents(messages: tuple[Message, ...]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system parts, contents)``; consecutive turns of one role are merged into one."""
    names = {call.id: call.name for m in messages for call in m.tool_calls}

    def turn(message: Message) -> tuple[str, list[dict[str, Any]]]:
        if message.role == "assistant":
            return "model", _model_parts(message)
        if message.role == "tool":
            call_id = message.tool_call_id or ""
            answer = {
                "id": call_id,
                "name": message.name or names.get(call_id, ""),
                "response": {"result": message.text},
            }
            return "user", [{"functionResponse": answer}]
        return "user", _parts(message)

    return merge_turns(messages, text_block, turn, "parts")


def _tool_config(choice: str | Mapping[str, Any]) -> Mapping[str, Any]:
    names: list[Any] | None
    if isinstance(choice, str):
        mode = _MODES.get(choice)
        names = None if mode else [choice]
    else:
        function = choice.get("function")
        if not (choice.get("type") == "function" and isinstance(function, Mapping)):
            return choice  # already Gemini's toolConfig
        mode, names = None, [function.get("name")]
    config: dict[str, Any] = {"mode": mode or "ANY"}
    if names:
        config["allowedFunctionNames"] = names
    return {"functionCallingConfig": config}


def request_body(request: ChatRequest, options: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON body of one ``generateContent`` (or ``streamGenerateContent``) call.

    ``options`` then ``request.options`` are merged: top-level fields (``safetySettings``,
    ``generationConfig``, ``cachedContent``, ``toolConfig``, ``labels``) as they are, any
    other key (``temperature``, ``maxOutputTokens``, ``thinkingConfig``...) into
    ``generationConfig``.
    """
    body: dict[str, Any] = {}
    generation: dict[str, Any] = {}
    for source in (options, request.options):
        for key, value in source.items():
            if key == "generationConfig" and isinstance(value, Mapping):
                generation.update(value)
            elif key in _TOP_LEVEL:
                body[key] = value
            elif key not in _RESERVED:
                generation[key] = value
    system, contents = _contents(request.messages)
    if system:
        body["systemInstruction"] = {"parts": system}
    body["contents"] = contents
    if request.tools:
        declarations = []
        for tool in request.tools:
            name, description, parameters = tool_parts(tool.definition)
            # parametersJsonSchema takes the JSON schema as it is (parameters, an OpenAPI subset, does not)
            declarations.append({"name": name, "description": description, "parametersJsonSchema": parameters})
        body["tools"] = [{"functionDeclarations": declarations}]
        if request.tool_choice is not None and "toolConfig" not in body:
            body["toolConfig"] = _tool_config(request.tool_choice)
    if generation:
        body["generationConfig"] = generation
    return body


def parse_usage(data: Any) -> Usage | None:
    """``usageMetadata`` as :class:`Usage`: thoughts count as completion, cached content as cache reads."""
    if not isinstance(data, Mapping):
        return None
    prompt = count(data.get("promptTokenCount")) + count(data.get("toolUsePromptTokenCount"))
    completion = count(data.get("candidatesTokenCount")) + count(data.get("thoughtsTokenCount"))
    total = count(data.get("totalTokenCount")) or prompt + completion
    return Usage(prompt, completion, total, count(data.get("cachedContentTokenCount")), 0)


def _blocked(reason: str, text: str, details: Any, *, prompt: bool) -> ContentBlockedError:
    if prompt:
        msg = f"Gemini blocked the prompt (promptFeedback.blockReason {reason!r}); rephrase the request."
    else:
        shown = f" after {len(text)} characters of text" if text else ""
        msg = f"Gemini withheld the answer (finishReason {reason!r}){shown}; rephrase the request."
    return ContentBlockedError(msg, reason=reason, text=text, details=details)


def finish_reason(value: Any, text: str, calls: bool, details: Any = None) -> str | None:
    """The finish reason for ``finishReason``; a blocked answer raises ContentBlockedError."""
    if value is None:
        return None
    if not isinstance(value, str):
        msg = f"The server sent finishReason as {type(value).__name__} {preview(value)}; expected a string."
        raise ProviderResponseError(msg)
    if value in BLOCKED:
        raise _blocked(value, text, details, prompt=False)
    if value in ("MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL"):
        msg = f"Gemini ended the answer with finishReason {value!r}: the model produced a tool call it could not use."
        raise ProviderResponseError(msg)
    if calls and value in ("STOP", "FUNCTION_CALL"):  # the service says STOP; aimock FUNCTION_CALL
        return "tool_calls"
    return _FINISH.get(value, value.lower())


class _Candidate(StreamState):
    """What the chunks of one answer said so far (a whole response is one chunk)."""

    __slots__ = ("calls", "finish", "ratings", "reasoning", "usage")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        super().__init__(on_token, **caps)
        self.calls: list[ToolCall] = []
        self.reasoning: list[Reasoning] = []
        self.finish: Any = None
        self.ratings: Any = None
        self.usage: Any = None  # the last usageMetadata, read once at the end

    def feed(self, data: Any) -> None:
        if not isinstance(data, dict):
            msg = f"Expected a JSON object from Gemini, got {type(data).__name__}: {preview(data)}."
            raise ProviderResponseError(msg)
        if "error" in data and not data.get("candidates"):
            error = data["error"]
            message = error.get("message") if isinstance(error, Mapping) else error
            msg = f"The server reported an error inside a 200 response: {preview(message, 300)}."
            raise ProviderResponseError(msg)
        if "usageMetadata" in data:
            self.usage = data["usageMetadata"]
        feedback = data.get("promptFeedback")
        if isinstance(feedback, dict) and isinstance(feedback.get("blockReason"), str):
            raise _blocked(feedback["blockReason"], "", dict(feedback), prompt=True)
        candidates = data.get("candidates")
        if candidates is None:
            return
        if not isinstance(candidates, list):
            msg = f"The server sent candidates as {type(candidates).__name__} {preview(candidates)}; expected a list."
            raise ProviderResponseError(msg)
        for candidate in candidates:
            if isinstance(candidate, dict) and candidate.get("index", 0) == 0:
                self._candidate(candidate)

    def _candidate(self, candidate: Mapping[str, Any]) -> None:
        content = candidate.get("content")
        parts = content.get("parts") if isinstance(content, dict) else None
        for part in parts if isinstance(parts, list) else ():
            if isinstance(part, dict):
                self._part(part)
        if candidate.get("finishReason") is not None:
            self.finish = candidate["finishReason"]
            self.ratings = candidate.get("safetyRatings")

    def _part(self, part: Mapping[str, Any]) -> None:
        signature = part.get("thoughtSignature")
        call = part.get("functionCall")
        text = part.get("text")
        if isinstance(call, dict):
            called = object_call(call.get("name"), call.get("args") or {}, call.get("id"), self.max_arguments)
            if called is None:
                msg = f"The server sent a functionCall without a name or object args: {preview(call)}."
                raise ProviderResponseError(msg)
            made, size = called
            self.grow(size)
            self.calls.append(made)
            if isinstance(signature, str):
                self.reasoning.append(Reasoning(PROVIDER, "", {"thoughtSignature": signature, "call": made.id}))
        elif isinstance(text, str):
            if part.get("thought") is True:
                self.reasoning.append(Reasoning(PROVIDER, text, {}))
            elif text:
                self.emit(text)
            if isinstance(signature, str) and part.get("thought") is not True:
                self.reasoning.append(Reasoning(PROVIDER, "", {"thoughtSignature": signature}))

    def response(self) -> ChatResponse:
        text = self.text
        finish = finish_reason(self.finish, text, bool(self.calls), self.ratings)
        content = text if text or not self.calls else None
        message = Message("assistant", content, tuple(self.calls), reasoning=tuple(self.reasoning))
        return ChatResponse(message, finish, parse_usage(self.usage))


def parse_response(
    data: Any, *, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS
) -> ChatResponse:
    """A non-streaming ``GenerateContentResponse`` as :class:`ChatResponse`.

    Raises:
        ProviderResponseError: a shape that breaks the protocol, no candidate, no finishReason.
        ContentBlockedError: the prompt or the answer was blocked.
    """
    candidate = _Candidate(None, max_answer_chars=max_answer_chars, max_argument_chars=max_argument_chars)
    candidate.feed(data)
    if candidate.finish is None:
        msg = f"The response has no candidate with a finishReason: {preview(data, 300)}."
        raise ProviderResponseError(msg)
    return candidate.response()


class StreamAccumulator:
    """Folds ``streamGenerateContent?alt=sse`` chunks into one :class:`ChatResponse`.

    Each chunk is a partial ``GenerateContentResponse``: text parts go to ``on_token`` as
    they come, function calls arrive whole, the last chunk carries ``finishReason`` and
    ``usageMetadata``. A stream without a ``finishReason`` is incomplete (Gemini sends no
    end marker).
    """

    __slots__ = ("_candidate", "done")

    def __init__(self, on_token: TokenSink | None, **caps: int) -> None:
        self._candidate = _Candidate(on_token, **caps)
        self.done = False

    @property
    def delivered(self) -> bool:
        """True once text reached ``on_token``."""
        return self._candidate.delivered

    @property
    def text(self) -> str:
        """The text received so far."""
        return self._candidate.text

    def feed(self, data: str) -> None:
        """Take the ``data`` of one SSE event (one JSON chunk)."""
        try:
            chunk = decode_json(data)
        except (ValueError, RecursionError):
            chunk = loads(data, "The stream sent a chunk that is not valid JSON")  # raises with the reason
        self._candidate.feed(chunk)
        # the chunk with finishReason also carries the final usage: nothing else follows
        self.done = self._candidate.finish is not None

    def result(self, *, chunks: int) -> ChatResponse:
        """The complete response; raises :class:`IncompleteStreamError` on a cut stream."""
        if self._candidate.finish is None:
            msg = (
                f"The stream ended after {chunks} chunk(s) without finishReason; the answer is incomplete "
                f"({len(self.text)} characters of text received)."
            )
            raise IncompleteStreamError(msg)
        return self._candidate.response()
