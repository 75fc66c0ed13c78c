"""``tool_retry``: run a tool again when it failed with a transient error.

Tool failures are data (``ToolResult.error``), so this filter looks at the result's
``error.kind``: ``transient`` (timeouts, connection errors) is retried with exponential
backoff; ``semantic`` and ``permission`` failures go straight back to the model, which
has to change something before a new try could succeed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from beamfilter_core import Filter, FilterSpec, ToolRequest, ToolResult, options_schema

from ._backoff import BACKOFF_OPTIONS, Backoff
from ._options import TOOL_NAMES

__all__ = ["SPEC", "tool_retry_filter"]

_log = logging.getLogger("beamfilter.tool_retry")
_KINDS = ("transient", "semantic", "permission")

OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        **BACKOFF_OPTIONS,
        "retry_on": {
            "type": "array",
            "items": {"enum": list(_KINDS)},
            "minItems": 1,
            "x-hint": f"a list of kinds among {', '.join(_KINDS)}",
        },
        "tools": TOOL_NAMES,
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def tool_retry_filter(
    *,
    max_retries: int = 3,
    initial_delay: float = 1.0,
    max_delay: float = 30.0,
    multiplier: float = 2.0,
    jitter: bool = True,
    retry_on: Sequence[str] = ("transient",),
    tools: Sequence[str] | None = None,
    name: str = "tool_retry",
) -> Filter:
    """Retry tool calls whose result failed with a retryable kind.

    Args:
        max_retries: Retries after the first attempt.
        initial_delay: Seconds before the first retry (1 s); multiplied by
            ``multiplier`` (2) each retry, capped at ``max_delay`` (30 s).
        max_delay: Cap on one delay, in seconds.
        multiplier: Growth factor of the delay.
        jitter: Draw each delay from ``[delay / 2, delay]``.
        retry_on: Failure kinds to retry (default only ``transient``).
        tools: Only retry these tools (default: every tool). Leave out tools with side
            effects that must not run twice.
        name: The filter's name.

    Returns:
        A tool-scope filter. ``state["retries"]`` counts the retries of the run.
    """
    retries = max_retries
    backoff = Backoff.from_options(initial_delay, max_delay, multiplier, jitter)
    kinds = frozenset(retry_on)
    only = None if tools is None else frozenset(tools)

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        result = await call_next(request)
        error = result.error
        if error is None or error.kind not in kinds or (only is not None and request.tool.name not in only):
            return result
        for attempt in range(retries):
            delay = backoff.delay(attempt)
            _log.info(
                "tool %r failed (%s: %s); retry %d/%d in %.2f s",
                request.tool.name, error.kind, error.message, attempt + 1, retries, delay,
            )  # fmt: skip
            state["retries"] = state.get("retries", 0) + 1
            await asyncio.sleep(delay)
            result = await call_next(request)
            error = result.error
            if error is None or error.kind not in kinds:
                return result
        return result

    return Filter(name, around_tool=around_tool)


SPEC = FilterSpec(
    "tool_retry",
    tool_retry_filter,
    OPTIONS,
    "Retry transient tool failures with exponential backoff (1 s to 30 s, x2, jitter).",
    ("tool",),
)
