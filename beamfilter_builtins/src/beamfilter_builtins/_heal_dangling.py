"""``heal_dangling``: answer tool calls that never got a result, before the model sees them.

A turn that paused, was cancelled or crashed can leave an assistant message whose tool
calls have no ``tool`` result. Providers reject such a transcript (OpenAI: "An assistant
message with 'tool_calls' must be followed by tool messages..."). Before a new turn
(never on resume, where the calls are still pending) this filter inserts a synthetic
result ``text`` after each such message, and drops ``tool`` messages that answer no
call. With ``on_chat=True`` (default) it also heals the prompt of every LLM call, which
covers history a memory filter loads inside the chat scope; put it after the memory
filter then.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    Message,
    TurnRequest,
    TurnResult,
    heal_tool_calls,
    options_schema,
)

__all__ = ["DEFAULT_TEXT", "SPEC", "heal_dangling_filter", "heal_messages"]

#: The synthetic result of a dangling call.
DEFAULT_TEXT = "cancelled: this tool call did not run to completion (the previous turn ended before its result)"


def heal_messages(
    messages: Sequence[Message], text: str = DEFAULT_TEXT, *, drop_orphans: bool = True
) -> tuple[Message, ...] | None:
    """Return healed messages, or None when nothing needed healing (the common case).

    :func:`beamfilter_core.heal_tool_calls` with this filter's defaults: each assistant
    message's unanswered calls get a ``tool`` message with ``text``, placed after the
    results that follow that message; with ``drop_orphans``, ``tool`` messages that answer
    no earlier call are removed.
    """
    return heal_tool_calls(messages, text, drop_orphans=drop_orphans)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "text": {
            "type": "string",
            "minLength": 1,
            "pattern": "\\S",
            "x-hint": "the text of the synthetic tool result",
        },
        "drop_orphans": {"type": "boolean"},
        "on_chat": {"type": "boolean"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def heal_dangling_filter(
    *, text: str = DEFAULT_TEXT, drop_orphans: bool = True, on_chat: bool = True, name: str = "heal_dangling"
) -> Filter:
    """Answer dangling tool calls with a synthetic "cancelled" result.

    Args:
        text: The synthetic tool result.
        drop_orphans: Also remove ``tool`` messages that answer no call.
        on_chat: Also heal the prompt of every LLM call (history loaded by memory).
        name: The filter's name.

    Returns:
        A turn-scope filter (plus chat scope with ``on_chat``).
    """
    drop = bool(drop_orphans)

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        if request.resume:
            return await call_next(request)
        # History and entry are healed separately: entry messages are what memory stores.
        history = heal_messages(request.history, text, drop_orphans=drop)
        entry = heal_messages(request.messages, text, drop_orphans=drop)
        if history is not None or entry is not None:
            request = request.replace(
                history=request.history if history is None else history,
                messages=request.messages if entry is None else entry,
            )
        return await call_next(request)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        healed = heal_messages(request.messages, text, drop_orphans=drop)
        if healed is not None:
            request = request.replace(messages=healed)
        return await call_next(request)

    return Filter(name, around_turn=around_turn, around_chat=around_chat if on_chat else None)


SPEC = FilterSpec(
    "heal_dangling",
    heal_dangling_filter,
    OPTIONS,
    "Answer dangling tool calls in the history with a synthetic 'cancelled' result before a turn.",
    ("turn", "chat"),
)
