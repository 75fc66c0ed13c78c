"""Option checks shared by the reliability and operations filters.

Config options are validated against each spec's JSON schema before a factory runs;
these checks give Python callers the same clear :class:`ConfigError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from beamfilter_core import config_import
from beamfilter_core.errors import ConfigError


def check_int(where: str, name: str, value: Any, minimum: int) -> int:
    """Return ``value`` if it is an int >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{where}({name}={value!r}) is invalid; give an integer >= {minimum}."
        raise ConfigError(msg)
    return value


def check_optional_int(where: str, name: str, value: Any, minimum: int) -> int | None:
    """Return ``value`` if it is None or an int >= ``minimum``."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        msg = f"{where}({name}={value!r}) is invalid; give an integer >= {minimum} or None."
        raise ConfigError(msg)
    return value


def check_number(where: str, name: str, value: Any, minimum: float) -> float:
    """Return ``value`` as a float if it is a number >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value < minimum:
        msg = f"{where}({name}={value!r}) is invalid; give a number >= {minimum:g}."
        raise ConfigError(msg)
    return float(value)


def check_choice(where: str, name: str, value: Any, choices: tuple[str, ...]) -> str:
    """Return ``value`` if it is one of ``choices``."""
    if value not in choices:
        allowed = ", ".join(repr(c) for c in choices)
        msg = f"{where}({name}={value!r}) is invalid; give one of {allowed}."
        raise ConfigError(msg)
    return str(value)


def check_names(where: str, name: str, value: Any) -> frozenset[str] | None:
    """Return a set of names from a list of strings (None stays None)."""
    if value is None:
        return None
    if isinstance(value, str) or not all(isinstance(item, str) for item in value):
        msg = f"{where}({name}={value!r}) is invalid; give a list of tool names, e.g. ['search']."
        raise ConfigError(msg)
    return frozenset(value)


def resolve_callable(where: str, name: str, value: Any) -> Callable[..., Any]:
    """Return ``value`` if callable, or import it from a ``"package.module:function"`` path.

    Config files cannot hold Python functions, so every callable option also accepts
    this dotted import path.
    """
    if callable(value):
        return value  # type: ignore[no-any-return]
    if not isinstance(value, str) or value.count(":") != 1:
        msg = (
            f"{where}({name}={value!r}) is invalid; give a callable or an import path "
            "such as 'mypackage.module:function'."
        )
        raise ConfigError(msg)
    module_name, _, attribute = value.partition(":")
    try:
        module = config_import(module_name)
    except ImportError as exc:
        msg = f"{where}({name}={value!r}): cannot import module {module_name!r} ({exc}); check the path."
        raise ConfigError(msg) from exc
    found: Any = module
    for part in attribute.split("."):
        found = getattr(found, part, None)
        if found is None:
            msg = f"{where}({name}={value!r}): module {module_name!r} has no attribute {attribute!r}."
            raise ConfigError(msg)
    if not callable(found):
        msg = f"{where}({name}={value!r}) names {found!r}, which is not callable."
        raise ConfigError(msg)
    return found  # type: ignore[no-any-return]
