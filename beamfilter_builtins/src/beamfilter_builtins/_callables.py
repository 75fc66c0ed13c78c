"""Options that are callables: given directly, or as a ``"package.module:attribute"`` path.

Config files cannot hold Python functions, so every callable option of a built-in
filter also accepts an import path, resolved when the filter is built.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from beamfilter_core import config_import
from beamfilter_core.errors import ConfigError

__all__ = ["call_maybe_async", "resolve_callable", "resolve_object"]


def resolve_object(value: Any, *, option: str, owner: str) -> Any:
    """``value`` itself, or the object a ``"package.module:attribute"`` string names."""
    if not isinstance(value, str):
        return value
    module_name, sep, attribute = value.partition(":")
    if not sep or not module_name or not attribute:
        msg = f"{owner}({option}={value!r}): a string must be an import path like 'package.module:function'."
        raise ConfigError(msg)
    try:
        target: Any = config_import(module_name)
    except ImportError as exc:
        msg = f"{owner}({option}={value!r}): cannot import module {module_name!r} ({exc}); check the path."
        raise ConfigError(msg) from exc
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            msg = f"{owner}({option}={value!r}): module {module_name!r} has no attribute {attribute!r}."
            raise ConfigError(msg) from None
    return target


def resolve_callable(value: Any, *, option: str, owner: str) -> Callable[..., Any]:
    """Like :func:`resolve_object`, and check that the result is callable."""
    target = resolve_object(value, option=option, owner=owner)
    if not callable(target):
        msg = f"{owner}({option}={value!r}) is not callable; give a function or 'package.module:function'."
        raise ConfigError(msg)
    return target  # type: ignore[no-any-return]


async def call_maybe_async(fn: Callable[..., Any], *args: Any) -> Any:
    """Call ``fn`` and await the result when it is awaitable (sync or async callables)."""
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value
