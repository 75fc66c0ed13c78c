"""``concurrency_limit``: at most N concurrent executions per tool (or group) across all runs.

The limiters live in the filter's closure, not in a run's private state, so every run of
every kernel that uses this filter object shares them. A call over the limit waits its
turn; with ``timeout`` set, a call that waited that long gets a ``transient`` tool error
instead (the model may try again later). Tools can share one limit through ``groups``
(e.g. every sub-agent tool under ``"subagents"``).

Limiters are :class:`asyncio.Semaphore` objects, one set per event loop: runs on one
loop (the usual case, a server or ``asyncio.gather``) share them; runs on different
loops (``run_sync`` in several threads) are limited per loop.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from beamfilter_core import Filter, FilterSpec, ToolRequest, ToolResult, options_schema
from beamfilter_core.errors import ConfigError

__all__ = ["DEFAULT_BUSY", "SPEC", "concurrency_limit_filter"]

_WHERE = "concurrency_limit_filter"

#: The text of a timed-out call: ``{tool}``, ``{key}`` (tool or group), ``{limit}``, ``{timeout}``.
DEFAULT_BUSY = (
    "Tool {tool!r} is busy: {limit} call(s) of {key!r} are already running and this call waited "
    "{timeout:g} s. Try again later or continue without it."
)


class _Limits:
    """The semaphores of one event loop, by key, plus counters for observability."""

    __slots__ = ("running", "semaphores", "waiting")

    def __init__(self) -> None:
        self.semaphores: dict[str, asyncio.Semaphore] = {}
        self.running: dict[str, int] = {}
        self.waiting: dict[str, int] = {}


def _group_of(groups: Mapping[str, Sequence[str]] | None) -> dict[str, str]:
    """Tool name -> its group (a tool may be in one group only)."""
    owner: dict[str, str] = {}
    for group, members in (groups or {}).items():
        for member in members:
            if member in owner:
                msg = f"{_WHERE}: tool {member!r} is in groups {owner[member]!r} and {group!r}; put it in one group."
                raise ConfigError(msg)
            owner[member] = str(group)
    return owner


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_concurrent": {"type": ["integer", "null"], "minimum": 1},
        "limits": {
            "type": "object",
            "additionalProperties": {"type": "integer", "minimum": 1, "x-hint": "an integer >= 1"},
            "x-hint": "a mapping of tool or group name to an integer >= 1",
        },
        "groups": {
            "type": "object",
            "additionalProperties": {
                "type": "array",
                "items": {"type": "string"},
                "minItems": 1,
                "x-hint": "a non-empty list of tool names",
            },
            "x-hint": "a mapping of group name to tool names",
        },
        "timeout": {"type": ["number", "null"], "minimum": 0},
        "busy_message": {"type": "string"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def concurrency_limit_filter(
    max_concurrent: int | None = 4,
    *,
    limits: Mapping[str, int] | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    timeout: float | None = None,
    busy_message: str = DEFAULT_BUSY,
    name: str = "concurrency_limit",
) -> Filter:
    """Allow at most N concurrent executions per tool name or group, across all runs.

    Args:
        max_concurrent: The limit of every tool or group without an entry in ``limits``;
            ``None`` leaves those unlimited.
        limits: Limits by tool name or group name (take precedence).
        groups: Group name to tool names; a group's tools share one limit (the group's).
        timeout: Seconds a call may wait for a slot; then it gets a ``transient`` failure
            (``busy_message``). ``None`` waits as long as needed.
        busy_message: The text of a timed-out call (``{tool}``, ``{key}``, ``{limit}``, ``{timeout}``).
        name: The filter's name.

    Returns:
        A tool-scope filter. ``extras["running"](key)`` and ``extras["waiting"](key)`` give
        the current counts on the running event loop.
    """
    default = max_concurrent
    per_key = {str(key): value for key, value in (limits or {}).items()}
    group_of = _group_of(groups)
    wait = None if timeout is None else float(timeout)

    by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Limits] = weakref.WeakKeyDictionary()

    def limits_here() -> _Limits:
        loop = asyncio.get_running_loop()
        found = by_loop.get(loop)
        if found is None:
            found = by_loop[loop] = _Limits()
        return found

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        tool_name = request.tool.name
        key = group_of.get(tool_name, tool_name)
        limit = per_key.get(key, default)
        if limit is None:
            return await call_next(request)
        here = limits_here()
        semaphore = here.semaphores.get(key)
        if semaphore is None:
            semaphore = here.semaphores[key] = asyncio.Semaphore(limit)
        waiting = here.waiting
        waiting[key] = waiting.get(key, 0) + 1
        try:
            if wait is None:
                await semaphore.acquire()
            else:
                try:
                    async with asyncio.timeout(wait):
                        await semaphore.acquire()
                except TimeoutError:
                    text = busy_message.format(tool=tool_name, key=key, limit=limit, timeout=wait)
                    return ToolResult.failure("transient", text)
        finally:
            waiting[key] -= 1
        running = here.running
        running[key] = running.get(key, 0) + 1
        try:
            return await call_next(request)
        finally:
            running[key] -= 1
            semaphore.release()

    def running_count(key: str) -> int:
        return limits_here().running.get(key, 0)

    def waiting_count(key: str) -> int:
        return limits_here().waiting.get(key, 0)

    return Filter(name, around_tool=around_tool, extras={"running": running_count, "waiting": waiting_count})


SPEC = FilterSpec(
    "concurrency_limit",
    concurrency_limit_filter,
    OPTIONS,
    "At most N concurrent executions per tool or group across all runs; waiters may time out (transient error).",
    ("tool",),
)
