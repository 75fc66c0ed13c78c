"""Compiled onion chains: built once per kernel, bound to a terminal once per run.

Errors are attributed by position, never by inspecting frames: each bound layer awaits
its hook inside a ``try`` (free until something raises), and the run's terminals mark
whatever leaves them as raised by no filter (:func:`passed_through`). An exception reaching a layer unmarked was
raised by that layer's own hook, whatever the hook is (a function, a bound method, an
object with ``__call__``, a ``functools.partial``): it is marked with the name of the
filter at that place and re-raised unchanged, so outer hooks still catch the type they
expect. The kernel turns the mark into ``filter_name`` or a :class:`FilterError`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import attrs

from ._filter import SCOPE_SPECS, CompiledFilter, Hook, Scope, ScopeSpec, TokenTransform
from ._streaming import TRANSFORM_MARK
from .errors import BeamfilterError, ConfigError, FilterError

Call = Callable[[Any], Awaitable[Any]]

#: on an exception: the name of the filter whose code raised it, "" if it left a terminal
_OWNER = "_beamfilter_owner"


def _own(exc: BaseException, name: str) -> None:
    """Mark ``exc`` as raised by filter ``name`` (or, with ``""``, by no filter)."""
    if getattr(exc, _OWNER, None) is None:
        # object.__setattr__: also through a frozen attrs exception; every exception has a __dict__
        object.__setattr__(exc, _OWNER, name)
        if name and isinstance(exc, BeamfilterError) and exc.filter_name is None:
            exc.filter_name = name


def passed_through(exc: BaseException) -> None:
    """Mark ``exc`` as raised by no filter: a run's terminals call this on what leaves
    them (the model's, a tool's or the tool loop's own errors), in their own ``except``
    (no wrapper coroutine per pass)."""
    _own(exc, "")


def _wrong_return(name: str, spec: ScopeSpec, result: Any) -> ConfigError:
    msg = (
        f"Filter {name!r} returned {result!r} (a {type(result).__name__}) from {spec.hook}; "
        f"{spec.hook} hooks must return a {spec.returns.__name__}."
    )
    error = ConfigError(msg)
    _own(error, name)
    return error


def raised_by(exc: BaseException, pipelines: Sequence[tuple[Sequence[TokenTransform], Sequence[str]]]) -> str | None:
    """The filter whose code raised ``exc``: a hook's, or a token transform's, found by its
    place in one of ``pipelines`` (transforms, their filters' names); None: no filter's."""
    name: str | None = getattr(exc, _OWNER, None)
    if name:
        return name
    found = getattr(exc, TRANSFORM_MARK, None)
    if found is None:
        return None
    transform, position = found
    for transforms, names in pipelines:
        if position < len(transforms) and transforms[position] is transform:
            return str(names[position])
    return None


def blame(exc: Exception, name: str) -> Exception:
    """The exception to raise for ``exc``, raised by the code of filter ``name``.

    A beamfilter error keeps its type and gets ``filter_name`` (unless it has one); any
    other exception becomes a :class:`FilterError` naming the filter, to be raised
    ``from`` the original.
    """
    if isinstance(exc, BeamfilterError):
        if exc.filter_name is None:
            exc.filter_name = name
        return exc
    return FilterError(f"Filter {name!r} raised {type(exc).__name__}: {exc}", name)


@attrs.frozen(slots=True)
class CompiledChain:
    """The hooks of one scope, outermost first, with the index of their filter.

    Compiled once per kernel; a run binds the chain to its terminal and its filters'
    states with :meth:`bind`.
    """

    scope: Scope
    layers: tuple[tuple[int, Hook], ...]
    names: tuple[str, ...]
    #: (filter index, hook, filter name), innermost first: the order :meth:`bind` wraps in
    _inner_first: tuple[tuple[int, Hook, str], ...] = attrs.field(repr=False, eq=False)

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
        inner_first = tuple(
            (index, hook, name) for (index, hook), name in zip(reversed(layers), reversed(names), strict=True)
        )
        return cls(scope, tuple(layers), tuple(names), inner_first)

    def bind(self, states: Sequence[dict[str, Any]], terminal: Call, check_returns: bool = False) -> Call:
        """Wrap ``terminal`` in the layers; with no layers, return ``terminal`` itself.

        Each layer is one ``async def`` made here per run, its hook, state, inner call,
        filter name and (with ``check_returns``) scope spec bound as default values: the hook's ``call_next`` is that
        function itself (no ``partial`` in between), and making it costs less than a
        ``partial`` (bench/RESULTS.md). Hooks call ``call_next(request)`` only, so the
        defaults are never overridden. ``terminal`` marks what it raises with
        :func:`passed_through`. With ``check_returns``, every layer checks that its hook
        returned the scope's type, so a wrong value names the filter that produced it.
        """
        call = terminal
        checked = SCOPE_SPECS[self.scope] if check_returns else None
        for index, hook, name in self._inner_first:

            async def layer(
                request: Any,
                hook: Hook = hook,
                state: dict[str, Any] = states[index],
                call_next: Call = call,
                name: str = name,
                checked: ScopeSpec | None = checked,
            ) -> Any:
                try:
                    result = await hook(request, state, call_next)
                except Exception as exc:
                    _own(exc, name)
                    raise
                if checked is not None and type(result) is not checked.returns:
                    raise _wrong_return(name, checked, result)
                return result

            call = layer
        return call
