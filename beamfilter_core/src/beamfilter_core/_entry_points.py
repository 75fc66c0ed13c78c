"""How the registry sees an entry point: the protocol it reads, one given in code for
tests of discovery, and the distribution an entry point came from."""

from __future__ import annotations

from typing import Any, Protocol

import attrs

__all__ = ["EntryPointLike", "StaticEntryPoint", "dist_of"]


class EntryPointLike(Protocol):
    """What the registry needs from an entry point (``importlib.metadata.EntryPoint``)."""

    @property
    def name(self) -> str: ...

    @property
    def value(self) -> str: ...

    def load(self) -> Any: ...


@attrs.frozen(slots=True)
class StaticEntryPoint:
    """An entry point given in code, for tests of discovery: ``load()`` imports ``value``
    (``"module"`` or ``"module:attr"``), or returns ``target`` when one is given."""

    name: str
    value: str
    distribution: str | None = None
    version: str | None = None
    target: Any = None

    def load(self) -> Any:
        """Import the module (or return ``target``)."""
        if self.target is not None:
            return self.target
        from importlib import import_module

        module_name, _, attr = self.value.partition(":")
        obj: Any = import_module(module_name.strip())
        for part in filter(None, attr.strip().split(".")):
            obj = getattr(obj, part)
        return obj


def dist_of(ep: Any) -> tuple[str | None, str | None]:
    dist = getattr(ep, "dist", None)
    if dist is not None:
        return dist.name, dist.version
    return getattr(ep, "distribution", None), getattr(ep, "version", None)
