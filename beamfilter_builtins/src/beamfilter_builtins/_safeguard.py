"""``safeguard``: block a turn (or an LLM call) whose text contains a listed word.

A coarse keyword filter, not content safety: it matches substrings, knows no
context, and is easy to get around by rephrasing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    IterationRequest,
    IterationResult,
    Message,
    TurnRequest,
    TurnResult,
    options_schema,
)

from ._text import joined_text

__all__ = ["DEFAULT_FAILURE_RESPONSE", "SPEC", "safeguard_filter"]

DEFAULT_FAILURE_RESPONSE = "Sorry, I cannot respond to that content."
_BLOCKED_BY = "safeguard"


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "words": {
            "type": "array",
            "items": {"type": "string", "x-hint": "a string (every word is one)"},
            "x-hint": "a list of words, not one string",
        },
        "failure_response": {"type": "string"},
        "case_sensitive": {"type": "boolean"},
        "scope": {"enum": ["turn", "chat"], "x-hint": "'turn' or 'chat'"},
        "name": {"type": "string", "minLength": 1},
    },
    "required": ["words"],
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def safeguard_filter(
    words: Iterable[str],
    *,
    failure_response: str = DEFAULT_FAILURE_RESPONSE,
    case_sensitive: bool = False,
    scope: Literal["turn", "chat"] = "turn",
    name: str = "safeguard",
) -> Filter:
    """Block when any of ``words`` occurs in the text as a substring.

    Text parts of multimodal content count; blank words are ignored; an empty list
    never blocks.

    - ``scope="turn"`` (default) checks this turn's entry messages. On a hit the tool
      loop is never entered: the result is ``completed`` with ``failure_response`` as
      its text and ``blocked_by="safeguard"``; no LLM call is made, nothing streams.
      A resume is not checked.
    - ``scope="chat"`` checks the whole prompt of every LLM call, tool results fed back
      included. On a hit the call is not made; the answer is ``failure_response``
      (``finish_reason="content_filter"``) and the turn ends ``completed`` with
      ``blocked_by="safeguard"``.

    Args:
        words: the words or phrases to look for.
        failure_response: the answer given instead.
        case_sensitive: match case exactly (default: ignore case).
        scope: ``"turn"`` or ``"chat"``.
        name: the filter's name.
    """
    cleaned: list[str] = []
    for word in words:
        if word.strip():
            cleaned.append(word if case_sensitive else word.casefold())
    needles = tuple(dict.fromkeys(cleaned))

    def hit(messages: Iterable[Message]) -> bool:
        if not needles:
            return False
        text = joined_text(messages)
        if not case_sensitive:
            text = text.casefold()
        return any(needle in text for needle in needles)

    if scope == "turn":

        async def around_turn(
            request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
        ) -> TurnResult:
            if request.resume or not hit(request.messages):
                return await call_next(request)
            answer = Message.assistant(failure_response)
            transcript = (*request.history, *request.messages, answer)
            return TurnResult("completed", answer, transcript, blocked_by=_BLOCKED_BY)

        return Filter(name, around_turn=around_turn)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        if not hit(request.messages):
            return await call_next(request)
        state["blocked"] = True
        return ChatResponse(Message.assistant(failure_response), "content_filter")

    async def around_iteration(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        result = await call_next(request)
        if state.pop("blocked", False) and result.status == "completed":
            blocked: IterationResult = result.replace(blocked_by=_BLOCKED_BY)
            return blocked
        return result

    return Filter(name, around_iteration=around_iteration, around_chat=around_chat)


SPEC = FilterSpec(
    "safeguard",
    safeguard_filter,
    OPTIONS,
    "Coarse keyword block: answers a fixed refusal when the input contains a listed word.",
    ("turn", "iteration", "chat"),
)
