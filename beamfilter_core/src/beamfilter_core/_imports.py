"""Modules a config names (``validate = "package.module:function"``): a config file is code.

Every plugin that accepts an import path in an option resolves it with
:func:`config_import`, which applies the policy of the config being built:

- a module inside a plugin blocked by ``plugins.disable`` / ``BEAMFILTER_PLUGINS`` is
  refused (blocking would mean nothing if a dotted path could import it anyway);
- while an inspection command (``beamfilter chain``) builds the config, nothing is
  imported: a placeholder stands for the object and the name is recorded, so the command
  can say what it did not run.
"""

from __future__ import annotations

import contextlib
import contextvars
import importlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import attrs

from .errors import ConfigError

if TYPE_CHECKING:
    from ._registry import Registry

__all__ = ["ImportPolicy", "NotImported", "config_import", "import_policy"]


@attrs.define(slots=True)
class ImportPolicy:
    """How the config being built may import: ``registry`` knows the blocked plugins."""

    registry: Registry | None = None
    inspect_only: bool = False
    #: Modules an inspect-only build did not import, in the order they were named.
    skipped: list[str] = attrs.field(factory=list)


_POLICY: contextvars.ContextVar[ImportPolicy | None] = contextvars.ContextVar("beamfilter_import_policy", default=None)


@contextlib.contextmanager
def import_policy(registry: Registry | None = None, *, inspect_only: bool | None = None) -> Iterator[ImportPolicy]:
    """Apply a policy to :func:`config_import` calls made inside the block (this task only).

    ``inspect_only=None`` keeps the enclosing policy's choice (a config built inside
    ``beamfilter chain`` stays inspect-only) and its list of skipped modules.
    """
    outer = _POLICY.get()
    if inspect_only is None:
        inspect_only = outer is not None and outer.inspect_only
    skipped = outer.skipped if outer is not None else []
    policy = ImportPolicy(registry, inspect_only, skipped)
    token = _POLICY.set(policy)
    try:
        yield policy
    finally:
        _POLICY.reset(token)


class NotImported:
    """Stands for an object an inspect-only build did not import; calling it fails."""

    __slots__ = ("_path",)

    def __init__(self, path: str) -> None:
        self._path = path

    def __repr__(self) -> str:
        return f"<not imported: {self._path}>"

    def __getattr__(self, name: str) -> NotImported:
        if name.startswith("__"):
            raise AttributeError(name)
        return NotImported(f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        msg = f"{self._path} was not imported: this kernel was built for inspection only (beamfilter chain)."
        raise ConfigError(msg)


def config_import(module_name: str) -> Any:
    """Import ``module_name`` as named by a config option, under the current policy.

    Raises:
        ConfigError: the module belongs to a blocked plugin.
        ImportError: as :func:`importlib.import_module` (callers report it with the option).
    """
    policy = _POLICY.get()
    if policy is not None and policy.registry is not None:
        policy.registry.check_import(module_name)
    if policy is not None and policy.inspect_only:
        policy.skipped.append(module_name)
        return NotImported(module_name)
    return importlib.import_module(module_name)
