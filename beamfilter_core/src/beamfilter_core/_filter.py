"""Filters: one around hook per scope, a token transform, and the filter's initial state."""

from __future__ import annotations

import copy
import inspect
import re
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from ._records import ChatResponse, Decision, IterationResult, ToolResult, TurnResult
from ._tools import Tool
from .errors import ConfigError

#: ``async def hook(request, state, call_next) -> response``
Hook = Callable[[Any, dict[str, Any], Callable[[Any], Awaitable[Any]]], Awaitable[Any]]
Scope = Literal["turn", "iteration", "chat", "tool", "gate"]


@attrs.frozen(slots=True)
class ScopeSpec:
    """One around scope: its hook's name, what the hook returns, and what sits at the
    centre of its onion (shown by ``beamfilter chain``)."""

    name: Scope
    returns: type
    centre: str

    @property
    def hook(self) -> str:
        """The Filter field holding this scope's hook, e.g. ``around_turn``."""
        return f"around_{self.name}"


#: The scopes, outermost first: the one place they are declared. ``gate`` decides each
#: tool call before its batch runs (``GateRequest`` -> ``Decision``).
SCOPE_SPECS: dict[Scope, ScopeSpec] = {
    spec.name: spec
    for spec in (
        ScopeSpec("turn", TurnResult, "[the tool loop]"),
        ScopeSpec("iteration", IterationResult, "[one model call and its tool calls]"),
        ScopeSpec("chat", ChatResponse, "[the model]"),
        ScopeSpec("tool", ToolResult, "[the tool]"),
        ScopeSpec("gate", Decision, "[the kernel's gate, then approve]"),
    )
}
SCOPES: tuple[Scope, ...] = tuple(SCOPE_SPECS)
HOOK_NAMES: dict[Scope, str] = {name: spec.hook for name, spec in SCOPE_SPECS.items()}

#: What a filter name may look like (it keys the filter's private state).
FILTER_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:-]*$")


@attrs.frozen(slots=True)
class TokenTransform:
    """A stateful transform of the streamed text.

    ``step(token, state) -> (tokens, state)`` may emit 0, 1 or N tokens;
    ``flush(state) -> tokens`` runs at a normal end of the stream only. ``init`` seeds the
    state for each LLM stream (a callable is called, any other value is copied).
    ``applies_to="answer"`` also rewrites the answer itself (returned text, memory).

    Example: upper-case everything::

        TokenTransform(lambda token, state: ((token.upper(),), state))
    """

    step: Callable[[str, Any], tuple[Sequence[str], Any]]
    init: Any = None
    flush: Callable[[Any], Sequence[str]] | None = None
    applies_to: Literal["stream", "answer"] = "stream"

    def new_state(self) -> Any:
        """A fresh state for one stream."""
        init = self.init
        if callable(init):
            return init()
        return copy.copy(init)


@attrs.frozen(slots=True)
class PersistHook:
    """How a filter carries its per-run state across a pause (e.g. pii's vault).

    When the run pauses, ``save(state)`` returns JSON data (or None: nothing to keep);
    the kernel seals it into the :class:`PauseState` (encrypted and authenticated with a
    key derived from the pause key, never in clear). On resume, ``restore(state, data)``
    puts it back into the resumed run's fresh state of the same filter.
    """

    save: Callable[[dict[str, Any]], Any]
    restore: Callable[[dict[str, Any], Any], None]


#: ``async def load_pause(conversation_id) -> PauseState | None``
PauseLoader = Callable[[str], Awaitable[Any]]


def _checked_tools(name: str, tools: Any) -> tuple[Tool, ...]:
    if isinstance(tools, str | bytes | Mapping) or not isinstance(tools, Iterable):
        msg = f"Filter {name!r} has tools={tools!r}; give a list of Tools (built with @tool)."
        raise ConfigError(msg)
    checked = tuple(tools)
    for item in checked:
        if not isinstance(item, Tool):
            msg = f"Filter {name!r} has tools=[..., {item!r}, ...], which is not a Tool; build tools with @tool."
            raise ConfigError(msg)
    return checked


def _checked_resources(name: str, resources: Any) -> tuple[Any, ...]:
    if isinstance(resources, str | bytes | Mapping) or not isinstance(resources, Iterable):
        msg = f"Filter {name!r} has resources={resources!r}; give a list of objects with async aclose()."
        raise ConfigError(msg)
    checked = tuple(resources)
    for item in checked:
        if not callable(getattr(item, "aclose", None)):
            msg = (
                f"Filter {name!r} has resources=[..., {item!r}, ...], which has no aclose(); "
                "the kernel closes each resource with 'await resource.aclose()'."
            )
            raise ConfigError(msg)
    return checked


def _new_state_factory(init: Any) -> Callable[[], dict[str, Any]]:
    if init is None:
        return dict
    if callable(init):
        return init  # type: ignore[no-any-return]
    if isinstance(init, Mapping):
        frozen_init = dict(init)
        return lambda: copy.deepcopy(frozen_init)
    msg = f"Filter init must be a mapping, a callable returning a dict, or None; got {init!r}."
    raise ConfigError(msg)


@attrs.frozen(slots=True)
class MemoryRole:
    """What a filter that keeps conversations shows the plugins that work with it: durable
    turns rebuild it over a store whose writes are steps, and the gateway shares pauses
    through its store. The kernel never reads it.

    Example::

        MemoryRole(store, rebuild=lambda other: memory_filter(other, window=window, name=name))
    """

    #: The store the filter keeps each conversation in (a ``beamfilter_memory.ChatStore``).
    store: Any
    #: The same filter (name, options) over another store.
    rebuild: Callable[[Any], Filter]


@attrs.frozen(slots=True)
class Filter:
    """A named bundle of around hooks, one per scope, plus an optional token transform.

    Each hook is ``async def hook(request, state, call_next) -> response``. ``state`` is a
    dict private to this filter for one run, seeded from ``init`` and shared by this
    filter's hooks. A filter without the hook of a scope is skipped in that scope.

    Example::

        async def timer(request, state, call_next):
            started = time.perf_counter()
            try:
                return await call_next(request)
            finally:
                state["seconds"] = time.perf_counter() - started

        Filter("timer", around_chat=timer)
    """

    name: str
    around_turn: Hook | None = attrs.field(default=None, kw_only=True)
    around_iteration: Hook | None = attrs.field(default=None, kw_only=True)
    around_chat: Hook | None = attrs.field(default=None, kw_only=True)
    around_tool: Hook | None = attrs.field(default=None, kw_only=True)
    #: ``async def gate(request: GateRequest, state, call_next) -> Decision``: decides each
    #: call of a known tool before its batch runs (approve, reject, reply or pause).
    around_gate: Hook | None = attrs.field(default=None, kw_only=True)
    token: TokenTransform | None = attrs.field(default=None, kw_only=True)
    init: Mapping[str, Any] | Callable[[], dict[str, Any]] | None = attrs.field(default=None, kw_only=True)
    #: Tools this filter contributes (e.g. tool_search's search tool); the kernel
    #: registers them next to its own tools.
    tools: Sequence[Tool] = attrs.field(default=(), kw_only=True)
    #: Objects the kernel closes with ``await resource.aclose()`` in ``Kernel.aclose()``
    #: (e.g. the memory filter's store).
    resources: Sequence[Any] = attrs.field(default=(), kw_only=True)
    #: Lets ``Kernel.resume(conversation_id=...)`` find a paused run (the memory filter's).
    load_pause: PauseLoader | None = attrs.field(default=None, kw_only=True)
    #: Carries this filter's per-run state across a pause (see :class:`PersistHook`).
    persist: PersistHook | None = attrs.field(default=None, kw_only=True)
    #: Set by a filter that keeps conversations (the memory filter): see :class:`MemoryRole`.
    memory: MemoryRole | None = attrs.field(default=None, kw_only=True)
    #: What a filter shows its users, e.g. ``{"store": store}``; the kernel never reads it.
    extras: Mapping[str, Any] = attrs.field(factory=dict, kw_only=True)

    def __attrs_post_init__(self) -> None:
        # the fields the kernel acts on are checked here, so a wrong one fails where it is written
        object.__setattr__(self, "tools", _checked_tools(self.name, self.tools))
        object.__setattr__(self, "resources", _checked_resources(self.name, self.resources))
        if self.token is not None and not isinstance(self.token, TokenTransform):
            msg = f"Filter {self.name!r} has token={self.token!r}; it must be a TokenTransform."
            raise ConfigError(msg)
        if self.load_pause is not None and not callable(self.load_pause):
            msg = f"Filter {self.name!r} has load_pause={self.load_pause!r}; give an async callable."
            raise ConfigError(msg)
        if self.persist is not None and not isinstance(self.persist, PersistHook):
            msg = f"Filter {self.name!r} has persist={self.persist!r}; give a PersistHook(save, restore)."
            raise ConfigError(msg)
        if self.memory is not None and not isinstance(self.memory, MemoryRole):
            msg = f"Filter {self.name!r} has memory={self.memory!r}; give a MemoryRole(store, rebuild)."
            raise ConfigError(msg)

    def hook(self, scope: Scope) -> Hook | None:
        """The hook of ``scope``, or None."""
        return getattr(self, HOOK_NAMES[scope])  # type: ignore[no-any-return]

    @property
    def scopes(self) -> tuple[str, ...]:
        """The scopes this filter takes part in (``token`` included)."""
        found: list[str] = [scope for scope in SCOPES if self.hook(scope) is not None]
        if self.token is not None:
            found.append("token")
        return tuple(found)


@runtime_checkable
class FilterLike(Protocol):
    """Any object with a ``name`` and some of the hooks (``around_turn`` ... ``around_gate``),
    ``token``, ``init``, ``tools``, ``resources``, ``load_pause`` and ``persist``;
    normalised at assembly."""

    name: str


@attrs.frozen(slots=True)
class CompiledFilter:
    """A filter checked at assembly: its hooks and its state factory."""

    filter: Filter
    new_state: Callable[[], dict[str, Any]]


def _check_hook(owner: str, scope: str, hook: Any, where: str) -> None:
    if not callable(hook):
        msg = f"{where}: filter {owner!r} has around_{scope}={hook!r}, which is not callable."
        raise ConfigError(msg)
    target = hook
    if not inspect.iscoroutinefunction(target):
        call = getattr(target, "__call__", None)  # noqa: B004  # async __call__ on objects
        if call is None or not inspect.iscoroutinefunction(call):
            msg = (
                f"{where}: filter {owner!r} has a synchronous around_{scope} hook {hook!r}; "
                "hooks must be 'async def hook(request, state, call_next)'."
            )
            raise ConfigError(msg)


def _from_filter_like(item: Any, name: str) -> Filter:
    hooks = {hook: getattr(item, hook, None) for hook in HOOK_NAMES.values()}
    return Filter(
        name,
        **hooks,
        token=getattr(item, "token", None),
        init=getattr(item, "init", None),
        tools=getattr(item, "tools", None) or (),
        resources=getattr(item, "resources", None) or (),
        load_pause=getattr(item, "load_pause", None),
        persist=getattr(item, "persist", None),
        memory=getattr(item, "memory", None),
        extras=getattr(item, "extras", None) or {},
    )


def normalise(item: Any, index: int) -> CompiledFilter:
    """Check one filter (or filter-like object) at assembly and return it compiled."""
    where = f"filters[{index}]"
    if isinstance(item, Filter):
        flt = item
    else:
        name = getattr(item, "name", None)
        if not isinstance(name, str):
            msg = (
                f"{where} is {item!r} (a {type(item).__name__}); a filter needs a 'name' "
                f"and at least one of {', '.join(HOOK_NAMES.values())}, token."
            )
            raise ConfigError(msg)
        try:
            flt = _from_filter_like(item, name)
        except ConfigError as exc:
            msg = f"{where}: {exc}"
            raise ConfigError(msg) from None
    if not FILTER_NAME.match(flt.name):
        msg = f"{where} has the name {flt.name!r}; use letters, digits, '_', '-', '.' or ':'."
        raise ConfigError(msg)
    for scope in SCOPES:
        hook = flt.hook(scope)
        if hook is not None:
            _check_hook(flt.name, scope, hook, where)
    return CompiledFilter(flt, _new_state_factory(flt.init))


def normalise_all(items: Iterable[Any]) -> tuple[CompiledFilter, ...]:
    """Normalise a filter list, keeping its order; names must be unique."""
    compiled = tuple(normalise(item, index) for index, item in enumerate(items))
    seen: dict[str, int] = {}
    for index, item in enumerate(compiled):
        name = item.filter.name
        if name in seen:
            msg = (
                f"filters[{index}] is named {name!r} like filters[{seen[name]}]; filter names "
                "key their private state, so give each filter its own name."
            )
            raise ConfigError(msg)
        seen[name] = index
    return compiled
