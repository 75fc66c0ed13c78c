"""What the wire modules share where the rule is truly the same: the answer's size bounds,
token counts read from a usage object, Claude's stop reasons, and the state every stream
accumulator keeps (its token sink, its text, the size budget, ``delivered`` and ``done``).

Pure, no I/O; a wire module keeps what its protocol says differently.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from .._messages import Message, ToolCall
from ..errors import ResponseTooLargeError
from ._base import TokenSink

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_ARGUMENT_CHARS",
    "STOP_REASONS",
    "AnswerBudget",
    "StreamState",
    "count",
    "decode_json",
    "merge_turns",
    "object_call",
    "text_block",
    "with_options",
    "too_large",
]

#: Default bound on an answer's text plus its tool arguments, in characters (about 1M tokens).
MAX_ANSWER_CHARS = 4_000_000
#: Default bound on the arguments of one tool call, in characters.
MAX_ARGUMENT_CHARS = 1_000_000

#: ``json.loads`` without its per-call checks, for a stream's events (one small object per
#: token); a failure is decoded again by ``_wire.loads``, for the message.
decode_json = json.JSONDecoder().decode

#: Claude's ``stop_reason`` values as finish reasons: Anthropic's Messages API and Bedrock's
#: Converse (whose ``stopReason`` took the same names) map them alike.
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool_calls",
}


def count(value: Any) -> int:
    """A token count of a usage object: an integer, else 0 (missing, null, a bool, a string)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def too_large(limit: int, call: str | None = None) -> ResponseTooLargeError:
    """The answer (or, with ``call``, that tool call's arguments) went over ``limit`` characters."""
    if call is None:
        what, name = "The answer (text and tool arguments) is", "max_answer_chars"
    else:
        what, name = f"The arguments of tool call {call!r} are", "max_argument_chars"
    msg = f"{what} longer than {name}={limit}; raise the limit if such answers are expected."
    return ResponseTooLargeError(msg)


def with_options(
    body: dict[str, Any], options: Mapping[str, Any], request_options: Mapping[str, Any], reserved: frozenset[str]
) -> dict[str, Any]:
    """``body`` with the model's ``options`` and then the call's over them, but for the
    ``reserved`` keys the wire writes itself (messages, tools, stream...)."""
    for source in (options, request_options):
        for key, value in source.items():
            if key not in reserved:
                body[key] = value
    return body


def text_block(text: str) -> dict[str, Any]:
    """A ``{"text": ...}`` block: a system block of Bedrock Converse and a part of Gemini."""
    return {"text": text}


def merge_turns(
    messages: tuple[Message, ...],
    system: Callable[[str], dict[str, Any]],
    turn: Callable[[Message], tuple[str, list[dict[str, Any]]]],
    key: str = "content",
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(system blocks, turns)`` for the APIs that take the system prompt apart and want the
    roles to alternate (Anthropic, Gemini, Bedrock Converse).

    A system message with text becomes ``system(text)``; any other becomes ``turn(message)``,
    a ``(role, blocks)`` pair, and is merged into the turn before when the role is the same
    (tool results answer as the user); a message without blocks is left out.
    """
    blocks_of_system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            if message.text:
                blocks_of_system.append(system(message.text))
            continue
        role, blocks = turn(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1][key].extend(blocks)
        else:
            turns.append({"role": role, key: blocks})
    return blocks_of_system, turns


def object_call(name: Any, arguments: Any, call_id: Any, max_argument_chars: int) -> tuple[ToolCall, int] | None:
    """A tool call whose arguments came as a JSON object (Anthropic's ``input``, Gemini's
    ``args``), with the size of those arguments as JSON text; None when the name is not a
    string or the arguments are not an object. An id that is not a non-empty string is
    replaced by a fresh one; arguments longer than ``max_argument_chars`` raise."""
    if not isinstance(name, str) or not isinstance(arguments, Mapping):
        return None
    size = len(json.dumps(arguments, ensure_ascii=False))
    if size > max_argument_chars:
        raise too_large(max_argument_chars, name)
    call = ToolCall(name, dict(arguments), *([call_id] if isinstance(call_id, str) and call_id else []))
    return call, size


class AnswerBudget:
    """The size bound of one answer, in characters: its text, reasoning and tool arguments
    together (``max_answer``), and the arguments of each call (``max_arguments``)."""

    __slots__ = ("max_answer", "max_arguments", "size")

    def __init__(self, max_answer_chars: int = MAX_ANSWER_CHARS, max_argument_chars: int = MAX_ARGUMENT_CHARS) -> None:
        self.max_answer = max_answer_chars
        self.max_arguments = max_argument_chars
        self.size = 0

    def grow(self, size: int) -> None:
        """Counts ``size`` more characters of the answer against ``max_answer``."""
        self.size += size
        if self.size > self.max_answer:
            raise too_large(self.max_answer)


class StreamState(AnswerBudget):
    """The state of a stream accumulator: the sink, the text so far, and the answer's budget.

    ``delivered`` turns true when text first reaches ``on_token`` (such a stream is never
    retried); ``done`` at the event that ends the stream. A subclass adds its protocol's
    own state and its ``feed`` and ``result``.
    """

    __slots__ = ("_on_token", "_text", "delivered", "done")

    def __init__(
        self,
        on_token: TokenSink | None,
        *,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        max_argument_chars: int = MAX_ARGUMENT_CHARS,
    ) -> None:
        super().__init__(max_answer_chars, max_argument_chars)
        self._on_token = on_token
        self._text: list[str] = []
        self.done = False
        self.delivered = False

    def emit(self, text: str) -> None:
        """Counts a text delta against the budget, keeps it and hands it to ``on_token``."""
        # the hot path (one call per token): the budget check is written out, not grow()
        self.size += len(text)
        if self.size > self.max_answer:
            raise too_large(self.max_answer)
        self._text.append(text)
        on_token = self._on_token
        if on_token is not None:
            self.delivered = True
            on_token(text)

    @property
    def text(self) -> str:
        """The text received so far."""
        return "".join(self._text)
