"""Toolsets: groups of tools a kernel opens before its first run and closes in ``aclose``.

A :class:`Toolset` holds tools known up front (a list of functions) or tools that come
from elsewhere when it is opened (an MCP server lists its tools). The kernel opens every
toolset once per event loop, before the first model call, and closes them in
:meth:`Kernel.aclose`. ``[[tools]]`` config entries and ``--tool`` become toolsets here.
"""

from __future__ import annotations

import fnmatch
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from ._imports import NotImported, config_import
from ._tools import Tool, make_tool
from .errors import ConfigError, ToolDefinitionError, ToolsetError

__all__ = ["Toolset", "as_tools", "import_reference", "select_tools"]

#: The options every ``[[tools]]`` entry takes, handled here (not by the toolset's factory).
CORE_OPTIONS = ("include", "exclude", "prefix", "sensitive")


class Toolset:
    """A named group of tools; subclass it for tools that need something opened first.

    ``open()`` returns the tools (called by the kernel before its first run, once per
    event loop); ``aclose()`` releases what ``open()`` started. The base class serves
    the tools it was given.

    Example::

        kernel = Kernel(model, tools=[Toolset([add, multiply], name="maths")])
    """

    def __init__(self, tools: Iterable[Tool | Callable[..., Any]] = (), *, name: str = "toolset") -> None:
        self.name = name
        self._tools = as_tools(tools, f"toolset {name!r}")

    @property
    def static(self) -> bool:
        """True when the tools are known without opening (the kernel lists them at once)."""
        return type(self).open is Toolset.open

    async def open(self) -> Sequence[Tool]:
        """The tools, once whatever serves them is running."""
        return self._tools

    async def aclose(self) -> None:
        """Release what :meth:`open` started (nothing for a plain list of tools)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def as_tools(items: Iterable[Any], owner: str) -> tuple[Tool, ...]:
    """Tools from tools and functions (a function becomes a tool through :func:`make_tool`).

    Raises:
        ToolDefinitionError: an item is neither a Tool nor a callable.
    """
    out: list[Tool] = []
    for index, item in enumerate(items):
        if isinstance(item, Tool):
            out.append(item)
        elif callable(item) and not isinstance(item, type):
            out.append(make_tool(item))
        else:
            msg = f"{owner}[{index}] is {item!r}; give a function, a Tool (from @tool) or a Toolset."
            raise ToolDefinitionError(msg)
    return tuple(out)


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(fnmatch.fnmatchcase(name, p) for p in patterns)


@attrs.frozen(slots=True)
class _Selection:
    include: tuple[str, ...] | None
    exclude: tuple[str, ...]
    prefix: str
    sensitive: tuple[str, ...]

    def unmatched(self, tools: Sequence[Tool], owner: str, where: str | None) -> str | None:
        """Why ``include`` is wrong for these tools (a pattern matches none of them), or None."""
        names = [t.name for t in tools]
        missed = [p for p in self.include or () if not any(fnmatch.fnmatchcase(n, p) for n in names)]
        if not missed:
            return None
        listed = ", ".join(repr(p) for p in missed)
        return (
            f"{where + '.include' if where else 'include'}: {listed} matches none of the tools of {owner}; "
            f"its tools: {', '.join(names) or '(none)'}."
        )

    def apply(self, tools: Sequence[Tool]) -> tuple[Tool, ...]:
        kept = [
            t
            for t in tools
            if (self.include is None or _matches(t.name, self.include)) and not _matches(t.name, self.exclude)
        ]
        return tuple(
            attrs.evolve(t, name=self.prefix + t.name, sensitive=t.sensitive or _matches(t.name, self.sensitive))
            if self.prefix or self.sensitive
            else t
            for t in kept
        )


class _SelectedToolset(Toolset):
    """A toolset seen through ``include``/``exclude`` name patterns and a name ``prefix``."""

    def __init__(self, inner: Toolset, selection: _Selection, where: str | None = None) -> None:
        super().__init__(name=inner.name)
        self.inner = inner
        self.selection = selection
        self.where = where

    async def open(self) -> Sequence[Tool]:
        tools = await self.inner.open()
        problem = self.selection.unmatched(tools, repr(self.name), self.where)
        if problem is not None:
            await self.inner.aclose()  # a server started for nothing is stopped now
            raise ToolsetError(problem, toolset=self.name)
        return self.selection.apply(tools)

    async def aclose(self) -> None:
        await self.inner.aclose()


def select_tools(
    toolset: Toolset,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    prefix: str = "",
    sensitive: Sequence[str] = (),
    where: str | None = None,
) -> Toolset:
    """``toolset`` keeping the tools whose names match ``include`` (shell patterns such as
    ``read_*``) and not ``exclude``, each renamed ``prefix + name``; tools matching
    ``sensitive`` are marked sensitive (the kernel's gate and ``approval`` see them).
    Patterns match the server's own names, before the prefix. The tool still calls what
    it called; only the name the model sees changes. An ``include`` pattern that matches
    none of the tools is an error listing them (:class:`ConfigError` for a static toolset,
    :class:`ToolsetError` when a server lists its tools); ``where`` is its place in a config."""
    if include is None and not exclude and not prefix and not sensitive:
        return toolset
    selection = _Selection(None if include is None else tuple(include), tuple(exclude), prefix, tuple(sensitive))
    if toolset.static:
        problem = selection.unmatched(toolset._tools, repr(toolset.name), where)
        if problem is not None:
            raise ConfigError(problem)
        return Toolset(selection.apply(toolset._tools), name=toolset.name)
    return _SelectedToolset(toolset, selection, where)


def check_core_options(options: dict[str, Any], where: str, problems: list[str]) -> dict[str, Any]:
    """Take ``include``, ``exclude``, ``prefix`` and ``sensitive`` out of ``options``, checked."""
    picked: dict[str, Any] = {}
    for key in ("include", "exclude", "sensitive"):
        if key in options:
            value = options.pop(key)
            if not (isinstance(value, list) and all(isinstance(v, str) and v for v in value)):
                problems.append(f'{where}.{key}: must be a list of tool name patterns, e.g. ["read_*"], got {value!r}.')
            else:
                picked[key] = value
    if "prefix" in options:
        value = options.pop("prefix")
        if not isinstance(value, str) or not all(c.isalnum() or c in "_-" for c in value):
            problems.append(
                f"{where}.prefix: must be letters, digits, '_' or '-' (it starts tool names), got {value!r}."
            )
        else:
            picked["prefix"] = value
    return picked


def import_reference(reference: str, base_dir: str | None) -> Any:
    """Import ``"package.module:attribute"``, with ``base_dir`` first on the import path
    while importing (a config's own folder, so ``tools.py`` beside it is found).

    Raises:
        ConfigError: the text is not ``module:attribute``, the module cannot be imported or
            has no such attribute.
    """
    module_name, colon, attribute = reference.partition(":")
    if not colon or not module_name or not attribute or not all(p.isidentifier() for p in module_name.split(".")):
        msg = f'{reference!r} is not a Python reference; write "package.module:function".'
        raise ConfigError(msg)
    added = base_dir is not None and base_dir not in sys.path
    if added:
        sys.path.insert(0, str(base_dir))
    try:
        # under the config's import policy: never from a blocked plugin, and nothing at all
        # while an inspection command (beamfilter chain) builds the config
        module = config_import(module_name)
    except ConfigError:
        raise
    except ModuleNotFoundError as exc:
        where = f" (looked in {base_dir} and on sys.path)" if base_dir else ""
        msg = f"cannot import {module_name!r} for {reference!r}: {exc}{where}."
        raise ConfigError(msg) from exc
    except Exception as exc:  # the user's module may raise anything on import
        msg = f"importing {module_name!r} for {reference!r} failed: {type(exc).__name__}: {exc}."
        raise ConfigError(msg) from exc
    finally:
        if added:
            sys.path.remove(str(base_dir))
    if isinstance(module, NotImported):
        return module
    obj: Any = module
    for part in attribute.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            msg = f"{module_name!r} has no attribute {attribute!r} (from {reference!r})."
            raise ConfigError(msg) from None
    return obj


def as_toolset(value: Any, name: str) -> Toolset:
    """A toolset from what a reference or a toolset factory gave: a Toolset, a Tool, a
    function, or a list of them (a nested Toolset in a list is not allowed).

    Raises:
        ToolDefinitionError: something else was given.
    """
    if isinstance(value, Toolset):
        return value
    if isinstance(value, Tool) or (callable(value) and not isinstance(value, type)):
        return Toolset([value], name=name)
    if isinstance(value, list | tuple):
        return Toolset(value, name=name)
    msg = f"{name} gave {value!r} (a {type(value).__name__}); give a function, a Tool, a list of them or a Toolset."
    raise ToolDefinitionError(msg)
