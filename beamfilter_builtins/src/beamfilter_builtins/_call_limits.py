"""``call_limits``: caps on LLM calls and tool calls per turn, in total and per tool.

Counting is per pass of the tool loop (a "turn"): the counters reset when a round with
index 0 starts, so a validation re-entry gets a fresh budget, like ``max_iterations``.

- LLM calls are checked in the iteration scope *before* the round's call: with
  ``max_model_calls=3`` the fourth call never happens.
- Tool calls are counted in the tool scope when each call starts. Calls of one parallel
  batch start in call order before any of them awaits, so the first ones within the
  budget run and the rest are refused, whatever order they finish in. A refused call
  never runs; it gets a ``permission`` failure result so the transcript stays valid.
  After the batch, the iteration hook raises :class:`LimitExceeded` (``on_limit="raise"``)
  or ends the turn ``completed`` with an explanation (``on_limit="finish"``). Raising
  only after the batch means no parallel tool is left running behind the error.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from beamfilter_core import (
    Filter,
    FilterSpec,
    IterationRequest,
    IterationResult,
    Message,
    ToolRequest,
    ToolResult,
    options_schema,
)
from beamfilter_core.errors import ConfigError, LimitExceeded

__all__ = ["DEFAULT_FINISH_MESSAGE", "SPEC", "call_limits_filter"]

#: Why a limit was hit (for the model and the user) and the error to raise.
_Exceeded = tuple[str, LimitExceeded]

#: The final answer with ``on_limit="finish"``; ``{reason}`` is filled in.
DEFAULT_FINISH_MESSAGE = "I stopped before finishing because {reason}."


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_model_calls": {"type": "integer", "minimum": 1},
        "max_tool_calls": {"type": "integer", "minimum": 0},
        "max_calls_per_tool": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 0, "x-hint": "an integer >= 0"},
            "x-hint": "a mapping like {'search': 3}",
        },
        "on_limit": {"enum": ["raise", "finish"]},
        "finish_message": {"type": "string"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
    # a config table that sets no limit is refused before the factory runs (and the plugin
    # check knows the filter has no defaults to be built with)
    "anyOf": [
        {"required": ["max_model_calls"]},
        {"required": ["max_tool_calls"]},
        {"required": ["max_calls_per_tool"]},
    ],
}


@options_schema(OPTIONS)
def call_limits_filter(
    *,
    max_model_calls: int | None = None,
    max_tool_calls: int | None = None,
    max_calls_per_tool: Mapping[str, int] | None = None,
    on_limit: str = "raise",
    finish_message: str = DEFAULT_FINISH_MESSAGE,
    name: str = "call_limits",
) -> Filter:
    """Limit LLM calls and tool calls per turn.

    Args:
        max_model_calls: Most LLM calls in one turn (None: no limit).
        max_tool_calls: Most tool calls in one turn, all tools together (None: no limit).
        max_calls_per_tool: Most calls of each named tool in one turn.
        on_limit: ``"raise"`` raises :class:`~beamfilter_core.errors.LimitExceeded`;
            ``"finish"`` ends the turn ``completed`` with ``finish_message`` as the answer
            and ``blocked_by`` set to the filter's name.
        finish_message: The answer on ``"finish"``; ``{reason}`` names the limit.
        name: The filter's name.

    Returns:
        An iteration- and tool-scope filter.
    """
    where = "call_limits_filter"
    model_cap, tool_cap, mode = max_model_calls, max_tool_calls, on_limit
    per_tool = {str(tool_name): cap for tool_name, cap in (max_calls_per_tool or {}).items()}
    if model_cap is None and tool_cap is None and not per_tool:
        msg = f"{where}() sets no limit; give max_model_calls, max_tool_calls or max_calls_per_tool."
        raise ConfigError(msg)
    if "{reason}" not in finish_message:
        finish_message += " ({reason})"

    def fresh(state: dict[str, Any]) -> None:
        state["model_calls"] = 0
        state["tool_calls"] = 0
        state["per_tool"] = dict.fromkeys(per_tool, 0)
        state["exceeded"] = None

    def end(exceeded: _Exceeded, before: tuple[Message, ...]) -> IterationResult:
        reason, error = exceeded
        if mode == "raise":
            raise error
        text = finish_message.replace("{reason}", reason)  # not format(): other braces stay literal
        return IterationResult("completed", (*before, Message.assistant(text)), blocked_by=name)

    async def around_iteration(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        if request.index == 0 or "model_calls" not in state:
            fresh(state)
        if model_cap is not None:
            if state["model_calls"] >= model_cap:
                # The loop adds the round's delta (last round's tool results) to the transcript itself.
                exceeded = _exceeded("max_model_calls", state["model_calls"] + 1, model_cap, "LLM calls")
                return end(exceeded, ())
            state["model_calls"] += 1
        result = await call_next(request)
        exceeded = state["exceeded"]
        if exceeded is not None and result.status in ("continue", "completed"):
            state["exceeded"] = None
            # The refused calls' results go into the transcript so no call is left dangling.
            kept = result.messages if result.status == "continue" else result.messages[:-1]
            return end(exceeded, kept)
        return result

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        if "tool_calls" not in state:
            fresh(state)  # a resumed batch runs before any round of this run
        state["tool_calls"] += 1
        exceeded = None
        if tool_cap is not None and state["tool_calls"] > tool_cap:
            exceeded = _exceeded("max_tool_calls", state["tool_calls"], tool_cap, "tool calls")
        tool_name = request.tool.name
        cap = per_tool.get(tool_name)
        if cap is not None:
            counts = state["per_tool"]
            counts[tool_name] += 1
            if exceeded is None and counts[tool_name] > cap:
                exceeded = _exceeded(
                    f"max_calls_per_tool[{tool_name!r}]", counts[tool_name], cap, f"calls of tool {tool_name!r}"
                )
        if exceeded is None:
            return await call_next(request)
        if state["exceeded"] is None:
            state["exceeded"] = exceeded
        return ToolResult.failure("permission", f"Not run: {exceeded[0]}.")

    return Filter(name, around_iteration=around_iteration, around_tool=around_tool)


def _exceeded(limit: str, value: int, maximum: int, what: str) -> _Exceeded:
    reason = f"the limit of {maximum} {what} per turn was reached ({limit})"
    return reason, LimitExceeded(f"Call limit exceeded: {reason}.", limit=limit, value=value, maximum=maximum)


SPEC = FilterSpec(
    "call_limits",
    call_limits_filter,
    OPTIONS,
    "Cap LLM calls and tool calls per turn (total and per tool); raise LimitExceeded or finish.",
    ("iteration", "tool"),
)
