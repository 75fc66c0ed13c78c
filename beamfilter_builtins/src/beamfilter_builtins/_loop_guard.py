"""``loop_guard``: notice when the model repeats itself with tools, and break the loop.

Two patterns are detected within one turn (one pass of the tool loop):

- **repeat**: the same tool call (name + canonical JSON arguments: key order and
  spacing do not matter) requested ``max_repeats`` times, in any rounds or several
  times in one parallel batch;
- **cycle**: the last rounds repeat a cycle of 2 to ``max_cycle_length`` rounds twice,
  e.g. ``A, B, A, B`` (ping-pong between two calls) or ``A, B, C, A, B, C``. A round is
  the set of calls of one LLM answer.

Detection happens in the chat scope, as soon as the model *asks* for the looping call,
so the call never runs again:

- ``action="feedback"``: the looping calls are not run; each gets a ``semantic``
  failure result telling the model what it repeated and what to do instead. Other calls
  of the same batch run normally. After ``max_warnings`` warnings in a turn the next
  detection stops the turn (None: never).
- ``action="stop"``: the model's answer is replaced by ``stop_message`` (no tool calls),
  so the turn ends ``completed`` with ``blocked_by="loop_guard"``.

Counters reset when a round with index 0 starts (a new turn or a validation re-entry).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    IterationRequest,
    IterationResult,
    Message,
    ToolCall,
    ToolRequest,
    ToolResult,
    options_schema,
)

from ._options import TOOL_NAMES

__all__ = ["DEFAULT_STOP_MESSAGE", "SPEC", "call_signature", "find_cycle", "loop_guard_filter"]

_log = logging.getLogger("beamfilter.loop_guard")

#: The final answer when the guard stops a turn; ``{reason}`` says what was repeated.
DEFAULT_STOP_MESSAGE = "I stopped because I was going around in circles with my tools: {reason}."

Signature = tuple[str, str]


def call_signature(call: ToolCall) -> Signature:
    """The identity of a call: its name and its arguments as canonical JSON."""
    if call.raw_arguments is not None and not call.arguments:
        return call.name, call.raw_arguments.strip()
    text = json.dumps(call.arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)
    return call.name, text


def find_cycle(rounds: Sequence[frozenset[Signature]], max_length: int) -> int:
    """The length of a cycle the last rounds repeat twice (2..``max_length``), or 0.

    A block whose rounds are all the same is a plain repeat, not a cycle.
    """
    total = len(rounds)
    for length in range(2, max_length + 1):
        if total < 2 * length:
            break
        block = rounds[total - length :]
        if not all(block) or len(set(block)) == 1:
            continue
        if rounds[total - 2 * length : total - length] == block:
            return length
    return 0


def _shown(signature: Signature) -> str:
    name, arguments = signature
    if len(arguments) > 120:
        arguments = arguments[:117] + "..."
    return f"{name}({arguments})"


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_repeats": {"type": "integer", "minimum": 2},
        "action": {"enum": ["feedback", "stop"]},
        "detect_cycles": {"type": "boolean"},
        "max_cycle_length": {"type": "integer", "minimum": 2},
        "max_warnings": {"type": ["integer", "null"], "minimum": 0},
        "ignore_tools": TOOL_NAMES,
        "stop_message": {"type": "string", "minLength": 1, "pattern": "\\S", "x-hint": "the text of the final answer"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def loop_guard_filter(
    *,
    max_repeats: int = 3,
    action: str = "feedback",
    detect_cycles: bool = True,
    max_cycle_length: int = 3,
    max_warnings: int | None = 2,
    ignore_tools: Sequence[str] = (),
    stop_message: str = DEFAULT_STOP_MESSAGE,
    name: str = "loop_guard",
) -> Filter:
    """Detect repeated tool calls and ping-pong cycles within a turn.

    Args:
        max_repeats: The request of the same call that counts as a loop (3: the third
            identical call is not run).
        action: ``"feedback"`` tells the model and lets it change course; ``"stop"``
            ends the turn with ``stop_message``.
        detect_cycles: Also detect cycles of rounds (``A, B, A, B``).
        max_cycle_length: Longest cycle, in rounds, that is looked for (2 or more).
        max_warnings: With ``"feedback"``, how many warnings a turn gets before the next
            detection stops it (None: never stop).
        ignore_tools: Tools that may repeat freely (polling, waiting).
        stop_message: The final answer when stopping; ``{reason}`` is filled in.
        name: The filter's name.

    Returns:
        An iteration-, chat- and tool-scope filter.
    """
    repeats, mode, cycle_cap, warnings_cap = max_repeats, action, max_cycle_length, max_warnings
    ignored = frozenset(ignore_tools or ())
    cycles = bool(detect_cycles)

    def fresh(state: dict[str, Any]) -> None:
        state["counts"] = {}
        state["rounds"] = []
        state["flagged"] = {}
        state["warnings"] = 0
        state["stopped"] = False

    def inspect_calls(calls: Sequence[ToolCall], state: dict[str, Any]) -> tuple[dict[str, str], str | None]:
        counts: dict[Signature, int] = state["counts"]
        found: dict[str, str] = {}
        reason = None
        signatures: list[Signature] = []
        for call in calls:
            if call.name in ignored:
                continue
            signature = call_signature(call)
            signatures.append(signature)
            seen = counts.get(signature, 0) + 1
            counts[signature] = seen
            if seen >= repeats:
                before = seen - 1
                found[call.id] = (
                    f"loop_guard: this call was not run. You already called {call.name} with exactly these "
                    f"arguments {before} time{'s' if before != 1 else ''} in this turn; the results are above and "
                    "calling it again will not change them. Use those results, try different arguments or "
                    "another tool, or answer the user."
                )
                reason = reason or f"{_shown(signature)} was requested {seen} times"
        rounds: list[frozenset[Signature]] = state["rounds"]
        rounds.append(frozenset(signatures))
        if cycles and not found and signatures:
            length = find_cycle(rounds, cycle_cap)
            if length:
                steps = " -> ".join(" + ".join(sorted(map(_shown, step))) for step in rounds[-length:])
                text = (
                    f"loop_guard: this call was not run. Your last {2 * length} rounds of tool calls repeat the "
                    f"same {length}-step cycle ({steps}) and make no progress. Stop cycling: use the results you "
                    "already have, try something different, or answer the user."
                )
                found = {call.id: text for call in calls if call.name not in ignored}
                reason = f"the cycle {steps} was repeated twice"
        return found, reason

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        response = await call_next(request)
        calls = response.message.tool_calls
        if not calls:
            return response
        if "counts" not in state:
            fresh(state)
        found, reason = inspect_calls(calls, state)
        if not found:
            return response
        if mode == "stop" or (warnings_cap is not None and state["warnings"] >= warnings_cap):
            _log.warning("loop detected, stopping the turn: %s", reason)
            state["stopped"] = True
            text = stop_message.replace("{reason}", reason or "repeated tool calls")
            return ChatResponse(Message.assistant(text), "stop", response.usage)
        state["warnings"] += 1
        _log.info("loop detected, warning %d: %s", state["warnings"], reason)
        state["flagged"].update(found)
        return response

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        flagged = state.get("flagged")
        if flagged:
            text = flagged.pop(request.call_id, None)
            if text is not None:
                return ToolResult.failure("semantic", text)
        return await call_next(request)

    async def around_iteration(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        if request.index == 0 or "counts" not in state:
            fresh(state)
        result = await call_next(request)
        if state["stopped"] and result.status == "completed":
            state["stopped"] = False
            return result.replace(blocked_by=name)
        return result

    return Filter(name, around_iteration=around_iteration, around_chat=around_chat, around_tool=around_tool)


SPEC = FilterSpec(
    "loop_guard",
    loop_guard_filter,
    OPTIONS,
    "Detect repeated tool calls and ping-pong cycles in a turn; give feedback or stop.",
    ("iteration", "chat", "tool"),
)
