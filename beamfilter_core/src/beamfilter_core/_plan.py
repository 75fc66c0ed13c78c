"""The plan: everything a run needs, compiled once by the kernel and frozen.

A run (:mod:`._run`) takes a :class:`Plan` as its only input from the kernel; the kernel
compiles a new plan when its filters change (``with_filters``) or when its toolsets open
and bring their tools.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._chain import CompiledChain
from ._filter import SCOPES, CompiledFilter, Scope, TokenTransform
from ._pause import PauseKeys
from ._tools import Tool
from .errors import ToolDefinitionError

if TYPE_CHECKING:
    from ._messages import ToolCall
    from ._records import Decision

#: ``gate(call, tool, context) -> Decision | "approve" | "reject" | "pause"`` (sync or async)
Gate = Callable[["ToolCall", Tool, Mapping[str, Any]], "Decision | str | Awaitable[Decision | str]"]


@attrs.frozen(slots=True)
class Settings:
    """What ``Kernel(...)`` was given besides filters and tools (checked there)."""

    model: Any
    max_iterations: int
    tool_timeout: float | None
    gate: Gate | None
    system_prompt: str | None
    options: Mapping[str, Any]
    check_returns: bool
    pause_keys: PauseKeys
    transient_context: tuple[str, ...]


@attrs.frozen(slots=True)
class Plan:
    """A kernel compiled: its settings, filters, one chain per scope, tools and transforms."""

    settings: Settings
    filters: tuple[CompiledFilter, ...]
    #: each filter's state factory, None where its state starts as an empty dict (a
    #: literal ``{}`` per run costs a third less than calling ``dict``)
    state_factories: tuple[Callable[[], dict[str, Any]] | None, ...]
    chains: Mapping[Scope, CompiledChain]
    #: the tools by name, and in registration order (what the model is offered)
    tools: Mapping[str, Tool]
    tool_list: tuple[Tool, ...]
    #: True when a tool call must go through the gate scope (a gate layer or ``gate=``)
    gated: bool
    answer_transforms: tuple[TokenTransform, ...]
    stream_transforms: tuple[TokenTransform, ...]
    #: (transforms, their filters' names) in the order a run builds its pipelines, for
    #: naming the filter whose transform raised
    pipelines: tuple[tuple[tuple[TokenTransform, ...], tuple[str, ...]], ...]


def index_tools(given: Iterable[tuple[Tool, str]], filters: Sequence[CompiledFilter]) -> dict[str, Tool]:
    """The tools by name: the kernel's, the opened toolsets', then the tools filters
    contribute (e.g. tool_search's search tool); a name used twice is an error."""
    by_name: dict[str, Tool] = {}
    owners: dict[str, str] = {}
    provided = [(tool, f"filter {item.filter.name!r}") for item in filters for tool in item.filter.tools]
    for tool, owner in [*given, *provided]:
        if not isinstance(tool, Tool):
            msg = f"{owner} provides {tool!r}, which is not a Tool; build tools with @tool."
            raise ToolDefinitionError(msg)
        known = by_name.get(tool.name)
        if known is tool:
            continue
        if known is not None:
            msg = (
                f"Two tools are named {tool.name!r} ({owners[tool.name]} and {owner}); "
                "tool names must be unique within a kernel."
            )
            raise ToolDefinitionError(msg)
        by_name[tool.name] = tool
        owners[tool.name] = owner
    return by_name


def compile_plan(settings: Settings, filters: tuple[CompiledFilter, ...], tools: Sequence[tuple[Tool, str]]) -> Plan:
    """Compile ``filters`` (normalised) and ``tools`` (with their owners) under ``settings``."""
    by_name = index_tools(tools, filters)
    chains = {scope: CompiledChain.compile(scope, filters) for scope in SCOPES}
    transforms = [(item.filter.token, item.filter.name) for item in filters if item.filter.token is not None]
    streamed = [(t, name) for t, name in transforms if t is not None and t.applies_to != "answer"]
    answered = [(t, name) for t, name in transforms if t is not None and t.applies_to == "answer"]
    return Plan(
        settings=settings,
        filters=filters,
        state_factories=tuple(None if item.new_state is dict else item.new_state for item in filters),
        chains=chains,
        tools=by_name,
        tool_list=tuple(by_name.values()),
        # the gate scope: filters' around_gate layers, then Kernel(gate=...) as the innermost
        gated=bool(chains["gate"].layers) or settings.gate is not None,
        answer_transforms=tuple(t for t, _ in answered),
        stream_transforms=tuple(t for t, _ in streamed),
        pipelines=tuple(
            (tuple(t for t, _ in chosen), tuple(name for _, name in chosen)) for chosen in (streamed, answered)
        ),
    )
