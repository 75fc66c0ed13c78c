"""Tools the client declares: the model may call them, the gate and the tool chain see each
call like a server tool's, and an approved call goes back to the client instead of running.

The gateway puts :data:`CLIENT_TOOLS_FILTER` innermost. Its tool hook stops a client tool's
call after every other tool filter let it through and records it in the request's
:class:`ClientCalls`; its iteration hook then ends the turn with those calls (the results
of server tools of the same round stay in the transcript). A client call that a filter or
the gate refused never reaches the hook: it is listed in ``ClientCalls.refused`` with the
text the model read.
"""

from __future__ import annotations

import contextvars
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import attrs

from beamfilter_core import (
    Filter,
    GateRequest,
    IterationRequest,
    IterationResult,
    Kernel,
    Tool,
    ToolCall,
    ToolRequest,
    ToolResult,
)
from beamfilter_core.errors import GatewayError

__all__ = [
    "CLIENT_TOOLS_FILTER",
    "ClientCalls",
    "client_tools_filter",
    "current_calls",
    "recording_gates",
    "with_client_tools",
]

CLIENT_TOOLS_FILTER = "server_client_tools"
#: What the transcript holds for a client call until the client sends its result.
HANDED_OVER = "(handed to the client to run)"


@attrs.define(slots=True)
class ClientCalls:
    """One request's client tool calls: those handed to the client and those refused."""

    names: frozenset[str] = frozenset()
    handed: list[ToolCall] = attrs.Factory(list)
    refused: list[dict[str, str]] = attrs.Factory(list)
    #: Which filter paused each call and why (``{call_id: {"filter", "reason"}}``).
    paused: dict[str, dict[str, str]] = attrs.Factory(dict)


#: The request being served; set by the gateway around each turn and each resume.
current_calls: contextvars.ContextVar[ClientCalls | None] = contextvars.ContextVar(
    "beamfilter_client_calls", default=None
)


async def _client_marker(**arguments: Any) -> str:  # never runs: the filter stops the call first
    return HANDED_OVER


async def _tool_hook(
    request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
) -> ToolResult:
    if request.tool.fn is not _client_marker:
        return await call_next(request)
    calls = current_calls.get()
    if calls is not None:
        calls.handed.append(ToolCall(request.tool.name, dict(request.arguments), request.call_id))
    return ToolResult(HANDED_OVER)


async def _iteration_hook(
    request: IterationRequest,
    state: dict[str, Any],
    call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
) -> IterationResult:
    result = await call_next(request)
    calls = current_calls.get()
    if calls is None or result.status != "continue" or not calls.names:
        return result
    handed = {call.id for call in calls.handed}
    for message in result.messages:
        if message.name in calls.names and message.tool_call_id not in handed:
            calls.refused.append({"id": message.tool_call_id or "", "name": message.name or "", "reason": message.text})
    if not handed:
        return result
    # End the turn here: the client runs its calls and sends their results in its next request.
    kept = tuple(m for m in result.messages if m.tool_call_id not in handed)
    return IterationResult("completed", kept)


def _recording(name: str, gate: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    async def around_gate(request: GateRequest, state: dict[str, Any], call_next: Any) -> Any:
        decision = await gate(request, state, call_next)
        calls = current_calls.get()
        if calls is not None and getattr(decision, "kind", decision) == "pause":
            # the innermost pausing layer returns first: it is the one that paused
            reason = getattr(decision, "message", None) or ""
            calls.paused.setdefault(request.call.id, {"filter": name, "reason": reason})
        return decision

    return around_gate


def recording_gates(filters: Iterable[Any]) -> list[Any]:
    """``filters`` with each gate hook wrapped to record which filter paused a call, and why
    (the inbox shows it to the reviewer)."""
    out = []
    for item in filters:
        gate = getattr(item, "around_gate", None)
        if isinstance(item, Filter) and gate is not None:
            item = attrs.evolve(item, around_gate=_recording(item.name, gate))
        out.append(item)
    return out


def client_tools_filter() -> Filter:
    """The gateway's innermost filter (see the module docstring)."""
    return Filter(CLIENT_TOOLS_FILTER, around_tool=_tool_hook, around_iteration=_iteration_hook)


def declared(tools: Iterable[Tool]) -> tuple[Tool, ...]:
    """The client's declarations as tools the filter recognises."""
    return tuple(attrs.evolve(tool, fn=_client_marker, is_async=True) for tool in tools)


def with_client_tools(kernel: Kernel, tools: tuple[Tool, ...], options: dict[str, Any]) -> Kernel:
    """A kernel like ``kernel`` that also offers the client's ``tools`` and sends ``options``.

    A shallow copy (as :meth:`Kernel.with_filters` makes), so the compiled chains, opened
    toolsets and stores are shared; only the tool index and the model options differ.
    """
    known = {tool.name for tool in kernel.tools}
    clash = sorted(known.intersection(tool.name for tool in tools))
    if clash:
        msg = f"tools declares {', '.join(map(repr, clash))}, which the server already provides; rename it."
        raise GatewayError(msg, status=400, param="tools")
    return kernel.derive(tools=declared(tools), options={**kernel.options, **options} if options else None)
