"""Requests and responses of the five scopes, and the pause state of a run.

All are frozen attrs classes: rewrite them with ``request.replace(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, Self

import attrs

from ._messages import ContentPart, Message, ToolCall, Usage
from ._tools import Tool

TurnStatus = Literal["completed", "paused", "cancelled"]
IterationStatus = Literal["continue", "completed", "paused", "cancelled"]
ToolErrorKind = Literal["transient", "semantic", "permission"]
DecisionKind = Literal["approve", "reject", "reply", "pause"]

_EMPTY: Mapping[str, Any] = {}


class _Replaceable:
    __slots__ = ()

    def replace(self, **changes: Any) -> Self:
        """Return a copy of the same type with ``changes`` applied (``attrs.evolve``)."""
        return attrs.evolve(self, **changes)  # type: ignore[misc]  # attrs instances only


@attrs.frozen(slots=True)
class ChatRequest(_Replaceable):
    """One LLM call: what is sent, and the run's read-only context.

    ``messages`` is the full prompt. ``delta`` holds the messages that are new since the
    previous LLM call of this run (a memory filter stores exactly these).
    """

    messages: tuple[Message, ...]
    tools: tuple[Tool, ...] = ()
    tool_choice: str | Mapping[str, Any] | None = None
    options: Mapping[str, Any] = _EMPTY
    context: Mapping[str, Any] = _EMPTY
    delta: tuple[Message, ...] = ()
    system: str | None = None
    #: The chat model to call; ``None`` means the kernel's. A fallback filter sets it.
    model: Any = attrs.field(default=None, eq=False, repr=False)


@attrs.frozen(slots=True)
class ChatResponse(_Replaceable):
    """The model's answer to one call."""

    message: Message
    finish_reason: str | None = "stop"
    usage: Usage | None = None

    @classmethod
    def from_text(cls, text: str, *, usage: Usage | None = None) -> ChatResponse:
        """A plain text answer."""
        return cls(Message("assistant", text), "stop", usage)

    @classmethod
    def tool_calls(cls, *calls: ToolCall, text: str | None = None) -> ChatResponse:
        """An answer that asks for ``calls`` to be run."""
        return cls(Message("assistant", text, tuple(calls)), "tool_calls")

    @property
    def text(self) -> str:
        """The answer's text (``""`` when it only calls tools)."""
        return self.message.text


@attrs.frozen(slots=True)
class ToolFailure:
    """Why a tool call failed; fed back to the model as the tool result."""

    kind: ToolErrorKind
    message: str


@attrs.frozen(slots=True)
class ToolRequest(_Replaceable):
    """One tool execution. ``context`` is a read-only snapshot taken at batch start."""

    tool: Tool
    arguments: Mapping[str, Any]
    call_id: str
    context: Mapping[str, Any] = _EMPTY
    raw_arguments: str | None = None
    #: True when a human approved this exact call (its arguments as they were paused) at
    #: resume; a tool filter that paused the call for a human may then let it through.
    approved: bool = False


@attrs.frozen(slots=True)
class GateRequest(_Replaceable):
    """One tool call at the gate, before its batch runs.

    Gate hooks (``Filter(around_gate=...)``) see every call of a known tool and return a
    :class:`Decision`; the terminal approves. Replace ``call`` to approve other arguments.
    """

    call: ToolCall
    tool: Tool
    context: Mapping[str, Any] = _EMPTY


@attrs.frozen(slots=True)
class ToolResult(_Replaceable):
    """What a tool produced: text for the model, an optional failure, context writes.

    A tool may return a ``ToolResult`` itself to write into the run context::

        return ToolResult("saved", writes={"last_saved": path})
    """

    content: str
    error: ToolFailure | None = None
    writes: Mapping[str, Any] = _EMPTY
    #: The result as content parts, when it holds more than text (an MCP tool's images
    #: become ``image_url`` parts with ``data:`` URLs). The model reads ``content``.
    parts: tuple[ContentPart, ...] = ()

    @classmethod
    def failure(cls, kind: ToolErrorKind, message: str) -> ToolResult:
        """A failed call whose ``message`` the model will read."""
        return cls(message, ToolFailure(kind, message))

    @property
    def ok(self) -> bool:
        """True when the call did not fail."""
        return self.error is None


@attrs.frozen(slots=True)
class IterationRequest(_Replaceable):
    """One round: the round's new messages, its index (from 0) and the LLM-call budget."""

    messages: tuple[Message, ...]
    context: Mapping[str, Any]
    index: int
    remaining: int


@attrs.frozen(slots=True)
class IterationResult(_Replaceable):
    """How a round ended.

    ``continue``: ``messages`` is the next round's delta (the tool results).
    ``completed``: ``messages`` ends with the final assistant message.
    ``paused``/``cancelled``: pass these through unchanged.
    """

    status: IterationStatus
    messages: tuple[Message, ...] = ()
    pause: PauseState | None = None
    blocked_by: str | None = None
    return_direct: bool = False


@attrs.frozen(slots=True)
class TurnRequest(_Replaceable):
    """One run of the tool loop.

    ``messages`` are the new entry messages; ``history`` messages already known to the
    conversation that the loop sends along but that are not new (a re-entering filter puts
    the previous transcript here, see :meth:`followup`). ``resume`` is true on the first
    entry of :meth:`Kernel.resume`, and ``pause`` the (verified) state it resumes.
    """

    messages: tuple[Message, ...]
    context: Mapping[str, Any] = _EMPTY
    resume: bool = False
    history: tuple[Message, ...] = ()
    pause: PauseState | None = None

    def followup(self, result: TurnResult, *messages: Message) -> TurnRequest:
        """The request that re-enters after ``result`` with new ``messages`` (feedback).

        The previous transcript becomes ``history``, so the original question stays in
        the prompt with or without a memory filter, and ``resume`` is cleared.
        """
        return attrs.evolve(self, messages=messages, history=result.messages, resume=False, pause=None)


@attrs.frozen(slots=True)
class Decision:
    """A gate's or a human's decision on one sensitive tool call.

    Build with :meth:`approve`, :meth:`reject`, :meth:`reply` or :meth:`pause`
    (gates only). Strings ``"approve"``, ``"reject"`` and ``"pause"`` are accepted too.
    """

    kind: DecisionKind
    arguments: Mapping[str, Any] | None = None
    message: str | None = None
    #: For a rejection: the exact text the model reads (default: "The call to 'tool' was
    #: rejected: reason").
    result: str | None = None

    @classmethod
    def approve(cls, arguments: Mapping[str, Any] | None = None) -> Decision:
        """Run the call, optionally with replacement ``arguments``."""
        return cls("approve", arguments)

    @classmethod
    def reject(cls, reason: str | None = None, *, result: str | None = None) -> Decision:
        """Do not run the call; the model is told it was rejected (``result``: in these words)."""
        return cls("reject", None, reason, result)

    @classmethod
    def reply(cls, content: str) -> Decision:
        """Do not run the call; ``content`` becomes its result."""
        return cls("reply", None, content)

    @classmethod
    def pause(cls, reason: str | None = None, *, arguments: Mapping[str, Any] | None = None) -> Decision:
        """Stop the run here until a human decides (gates only). ``arguments``: the call as
        this gate layer saw it, which the reviewer is shown and an approval runs (pass
        ``request.call.arguments``: an outer layer may have rewritten the model's)."""
        return cls("pause", None if arguments is None else dict(arguments), reason)


@attrs.frozen(slots=True)
class PauseState:
    """Everything needed to resume a paused run, in any process.

    Serialise with :meth:`to_json`, restore with :meth:`from_json`. ``awaiting`` lists
    the call ids that need a decision. ``pause_id`` is unique per pause (a resume consumes
    it); ``signature`` is the kernel's HMAC over everything else, and ``filter_state`` the
    sealed per-run state of filters that keep one (see docs/approvals.md).
    """

    messages: tuple[Message, ...]
    calls: tuple[ToolCall, ...]
    awaiting: tuple[str, ...]
    decided: Mapping[str, Decision] = attrs.field(factory=dict)
    context: Mapping[str, Any] = attrs.field(factory=dict)
    remaining: int = 0
    tool_calls_made: int = 0
    iterations: int = 0
    usage: Usage = attrs.field(factory=Usage)
    reason: str | None = None
    version: int = 2
    pause_id: str = ""
    filter_state: str | None = None
    signature: str | None = None

    def to_json(self) -> str:
        """The state as JSON text."""
        from ._serde import dumps

        return dumps(self)

    @classmethod
    def from_json(cls, text: str | bytes) -> PauseState:
        """Restore a state written by :meth:`to_json`."""
        from ._serde import loads

        return loads(text, cls)


@attrs.frozen(slots=True)
class TurnResult(_Replaceable):
    """The outcome of a run.

    ``messages`` is the full transcript (history, entry and every round) so a turn
    filter can append feedback and re-enter even without memory.
    """

    status: TurnStatus
    message: Message | None = None
    messages: tuple[Message, ...] = ()
    tool_calls_made: int = 0
    iterations: int = 0
    usage: Usage = attrs.field(factory=Usage)
    pause: PauseState | None = None
    blocked_by: str | None = None
    return_direct: bool = False

    @property
    def text(self) -> str:
        """The final answer's text (``""`` when paused or cancelled)."""
        message = self.message
        return message.text if message is not None else ""
