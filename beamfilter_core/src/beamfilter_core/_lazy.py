"""Deferred imports of heavy stdlib modules, to keep ``import beamfilter_core`` fast.

``asyncio = lazy_module("asyncio", globals())`` binds a stand-in that imports the real
module on first attribute access and then replaces itself in the caller's globals, so
later accesses cost nothing extra.
"""

from __future__ import annotations

import importlib
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
