"""Precise types of the hooks a filter provides, one per scope, for fully annotated plugins.

``Filter`` accepts any ``async def hook(request, state, call_next)``; these aliases say
which request, response and ``call_next`` each scope has, so ``mypy --strict`` checks a
plugin's hooks without ``Any`` leaking out of them::

    async def sign(request: TurnRequest, state: FilterState, call_next: TurnNext) -> TurnResult:
        result = await call_next(request)
        return result.replace(blocked_by=None)  # replace() returns a TurnResult

    hook: TurnHook = sign
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeAlias, TypeVar

from ._records import (
    ChatRequest,
    ChatResponse,
    Decision,
    GateRequest,
    IterationRequest,
    IterationResult,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
)

__all__ = [
    "ChatHook",
    "ChatNext",
    "FilterState",
    "GateHook",
    "GateNext",
    "IterationHook",
    "IterationNext",
    "TokenFlush",
    "TokenStep",
    "ToolHook",
    "ToolNext",
    "TurnHook",
    "TurnNext",
]

StateT = TypeVar("StateT")

#: A filter's private state for one run, shared by its hooks (seeded from ``init``).
FilterState: TypeAlias = dict[str, Any]

#: ``call_next`` of the turn scope: runs the tool loop (and the inner turn filters).
TurnNext: TypeAlias = Callable[[TurnRequest], Awaitable[TurnResult]]
#: ``async def hook(request: TurnRequest, state: FilterState, call_next: TurnNext) -> TurnResult``
TurnHook: TypeAlias = Callable[[TurnRequest, FilterState, TurnNext], Awaitable[TurnResult]]

#: ``call_next`` of the iteration scope: one model call and its tool calls.
IterationNext: TypeAlias = Callable[[IterationRequest], Awaitable[IterationResult]]
#: ``async def hook(request: IterationRequest, state: FilterState, call_next: IterationNext) -> IterationResult``
IterationHook: TypeAlias = Callable[[IterationRequest, FilterState, IterationNext], Awaitable[IterationResult]]

#: ``call_next`` of the chat scope: the model call.
ChatNext: TypeAlias = Callable[[ChatRequest], Awaitable[ChatResponse]]
#: ``async def hook(request: ChatRequest, state: FilterState, call_next: ChatNext) -> ChatResponse``
ChatHook: TypeAlias = Callable[[ChatRequest, FilterState, ChatNext], Awaitable[ChatResponse]]

#: ``call_next`` of the tool scope: the tool itself.
ToolNext: TypeAlias = Callable[[ToolRequest], Awaitable[ToolResult]]
#: ``async def hook(request: ToolRequest, state: FilterState, call_next: ToolNext) -> ToolResult``
ToolHook: TypeAlias = Callable[[ToolRequest, FilterState, ToolNext], Awaitable[ToolResult]]

#: ``call_next`` of the gate scope: the inner gates, then the kernel's gate.
GateNext: TypeAlias = Callable[[GateRequest], Awaitable[Decision]]
#: ``async def hook(request: GateRequest, state: FilterState, call_next: GateNext) -> Decision``
GateHook: TypeAlias = Callable[[GateRequest, FilterState, GateNext], Awaitable[Decision]]

#: A token transform's step: ``step(token, state) -> (tokens, state)``; ``TokenStep[int]``
#: for a transform whose state is an ``int``.
TokenStep: TypeAlias = Callable[[str, StateT], tuple[Sequence[str], StateT]]
#: A token transform's flush at the normal end of a stream: ``flush(state) -> tokens``.
TokenFlush: TypeAlias = Callable[[StateT], Sequence[str]]
