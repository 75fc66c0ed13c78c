"""Deferred imports: heavy stdlib modules, to keep ``import beamfilter_core`` fast, and a
package's exports, to keep a plugin's entry point light.

``asyncio = lazy_module("asyncio", globals())`` binds a stand-in that imports the real
module on first attribute access and then replaces itself in the caller's globals, so
later accesses cost nothing extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


class _LazyModule:
    __slots__ = ("_binding", "_name", "_namespace")

    def __init__(self, name: str, namespace: dict[str, Any], binding: str) -> None:
        self._name = name
        self._namespace = namespace
        self._binding = binding

    def __getattr__(self, attribute: str) -> Any:
        module = importlib.import_module(self._name)
        self._namespace[self._binding] = module
        return getattr(module, attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str, namespace: dict[str, Any], binding: str | None = None) -> Any:
    """A stand-in for module ``name`` that imports it on first use."""
    return _LazyModule(name, namespace, binding or name)


def lazy_exports(package: str, namespace: dict[str, Any], table: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module ``__getattr__`` that imports each name of ``table`` (name ->
    module, relative to ``package``) on first use and keeps it in ``namespace``.

    A plugin package whose entry point lives inside it keeps its façade light this way:
    ``beamfilter --help`` and ``beamfilter plugins`` load the entry point, which imports
    the package, and should not pay for every filter, engine or server it exports::

        __getattr__ = lazy_exports(__name__, globals(), {"my_filter": "._filter"})
    """

    def __getattr__(name: str) -> Any:
        module = table.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value
        return value

    return __getattr__
