"""Compiled onion chains: built once per kernel, bound to a terminal once per run.

A bound layer is a plain function that returns the hook's coroutine without awaiting
it, so each filter costs one coroutine and one call per pass, and the outer ``await``
drives the whole onion.
"""

from __future__ import annotations

import types
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from ._filter import CompiledFilter, Hook, Scope
from .errors import BeamfilterError, ConfigError, FilterError

Call = Callable[[Any], Awaitable[Any]]


def _layer(hook: Hook, state: dict[str, Any], call_next: Call) -> Call:
    def call(request: Any) -> Awaitable[Any]:
        return hook(request, state, call_next)

    return call


def _checked_layer(hook: Hook, state: dict[str, Any], call_next: Call, name: str, scope: str, expected: type) -> Call:
    async def call(request: Any) -> Any:
        result = await hook(request, state, call_next)
        if type(result) is not expected:
            msg = (
                f"Filter {name!r} returned {result!r} (a {type(result).__name__}) from around_{scope}; "
                f"around_{scope} hooks must return a {expected.__name__}."
            )
            error = ConfigError(msg)
            error.filter_name = name
            raise error
        return result

    return call


@attrs.frozen(slots=True)
class CompiledChain:
    """The hooks of one scope, outermost first, with the index of their filter."""

    scope: Scope
    layers: tuple[tuple[int, Hook], ...]
    names: tuple[str, ...]

    @classmethod
    def compile(cls, scope: Scope, filters: Sequence[CompiledFilter]) -> CompiledChain:
        """Keep the filters that have a hook for ``scope``, in list order."""
        layers = []
        names = []
        for index, item in enumerate(filters):
            hook = item.filter.hook(scope)
            if hook is not None:
                layers.append((index, hook))
                names.append(item.filter.name)
        return cls(scope, tuple(layers), tuple(names))

    def bind(self, states: Sequence[dict[str, Any]], terminal: Call, expected: type | None = None) -> Call:
        """Wrap ``terminal`` in the layers; with no layers, return ``terminal`` itself.

        With ``expected`` (the kernel's ``check_returns``), every layer checks that its
        hook returned that type, so a wrong value names the filter that produced it.
        """
        call = terminal
        if expected is None:
            for index, hook in reversed(self.layers):
                call = _layer(hook, states[index], call)
            return call
        for (index, hook), name in zip(reversed(self.layers), reversed(self.names), strict=True):
            call = _checked_layer(hook, states[index], call, name, self.scope, expected)
        return call


def _code_of(fn: Any) -> tuple[types.CodeType | None, int]:
    """The code object behind ``fn`` and the position of the hook's ``state`` argument."""
    target = getattr(fn, "__func__", None)
    if target is not None:  # a bound method: (self, request, state, call_next)
        code = getattr(target, "__code__", None)
        position = 2
    else:
        code = getattr(fn, "__code__", None)
        position = 1
        if code is None:  # an object with an async __call__
            call = getattr(type(fn), "__call__", None)  # noqa: B004  # __call__'s code, not callable()
            code = getattr(call, "__code__", None)
            position = 2
    return (code, position) if isinstance(code, types.CodeType) else (None, position)


#: hook code -> (filter name, name of the hook's state parameter or None)
CodeMap = dict[types.CodeType, tuple[str, str | None]]


def hook_codes(filters: Sequence[CompiledFilter]) -> CodeMap:
    """Map each hook's code object to its filter name (for error attribution)."""
    codes: CodeMap = {}
    for item in filters:
        flt = item.filter
        for hook in (flt.around_turn, flt.around_iteration, flt.around_chat, flt.around_tool, flt.around_gate):
            code, position = _code_of(hook) if hook is not None else (None, 0)
            if code is not None:
                varnames = code.co_varnames
                codes[code] = (flt.name, varnames[position] if len(varnames) > position else None)
        token = flt.token
        if token is not None:
            for fn in (token.step, token.flush):
                code, _ = _code_of(fn) if fn is not None else (None, 0)
                if code is not None:
                    codes[code] = (flt.name, None)
    return codes


def attribute(
    exc: Exception,
    codes: CodeMap,
    boundaries: frozenset[types.CodeType],
    states: Sequence[dict[str, Any]] = (),
    names: Sequence[str] = (),
) -> Exception:
    """Name the filter whose own code raised ``exc``; return the exception to raise.

    The deepest traceback frame that is a filter hook or a chain terminal (a
    ``boundary``) decides: a hook means the filter raised; a terminal means the error
    came from the model or a tool and only passed through the filters. When several
    filters share one hook function, the frame's ``state`` argument (one dict per
    filter and run) tells them apart.
    """
    owner: str | None = None
    by_state: dict[int, str] | None = None
    tb = exc.__traceback__
    while tb is not None:
        code = tb.tb_frame.f_code
        if code in boundaries:
            owner = None
        else:
            found = codes.get(code)
            if found is not None:
                owner, state_param = found
                if state_param is not None and states:
                    if by_state is None:
                        by_state = {id(state): name for state, name in zip(states, names, strict=True)}
                    state = tb.tb_frame.f_locals.get(state_param)
                    owner = by_state.get(id(state), owner)
        tb = tb.tb_next
    if owner is None:
        return exc
    if isinstance(exc, BeamfilterError):
        if exc.filter_name is None:
            exc.filter_name = owner
        return exc
    msg = f"Filter {owner!r} raised {type(exc).__name__}: {exc}"
    wrapped = FilterError(msg, owner)
    wrapped.__cause__ = exc
    return wrapped
