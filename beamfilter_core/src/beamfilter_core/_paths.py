"""One rule for relative paths in a config: they are taken from the config file's folder.

An option holds a path when its schema says so with ``"x-path": true`` (on a string, or on
an array of strings, at any depth: ``rules[].roots``; ``"x-path-literals"`` lists words it
also takes as they are, such as ``"default"``); every ``sqlite:///relative.db`` URL
is a path too, whatever option holds it (a store, a database). Such values are made
absolute before the options are checked, so no factory ever sees the current folder's
meaning; :func:`resolve_paths` also records each place for ``beamfilter chain``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["Place", "resolve_path", "resolve_paths"]

#: ``sqlite:///x.db``, ``sqlite+aiosqlite:///x.db``: the part after the third slash is a path.
_SQLITE = re.compile(r"^(sqlite(?:\+[A-Za-z0-9_]+)?:///)(.*)$")


@attrs.frozen(slots=True)
class Place:
    """A path option of a config: where it is, as written, and what it means."""

    where: str
    given: str
    resolved: str


def resolve_path(path: str, folder: str) -> str:
    """``path`` (``~`` expanded) taken from ``folder`` when relative, normalised."""
    expanded = os.path.expanduser(path)
    return os.path.normpath(expanded if os.path.isabs(expanded) else os.path.join(folder, expanded))


def _sqlite(value: str, folder: str) -> str | None:
    match = _SQLITE.match(value)
    if match is None:
        return None
    prefix, path = match.groups()
    if not path or path.startswith((":memory:", "/")):
        return value  # in memory, or already absolute (sqlite:////abs/path.db)
    return prefix + resolve_path(path, folder)


def resolve_paths(schema: Mapping[str, Any], value: Any, where: str, folder: str, places: list[Place]) -> Any:
    """``value`` with every path it holds (per ``schema``) taken from ``folder``."""
    if isinstance(value, str):
        if schema.get("x-path"):
            if value in schema.get("x-path-literals", ()):
                return value  # a word the option also takes ("default")
            resolved = resolve_path(value, folder)
        else:
            found = _sqlite(value, folder)
            if found is None:
                return value
            resolved = found
        places.append(Place(where, value, resolved))
        return resolved
    if isinstance(value, Mapping):
        properties = schema.get("properties", {})
        rest = schema.get("additionalProperties")
        out = {}
        for key, item in value.items():
            inner = properties.get(key, rest)
            out[key] = resolve_paths(
                inner if isinstance(inner, Mapping) else {}, item, f"{where}.{key}", folder, places
            )
        return out
    if isinstance(value, list):
        items = schema.get("items")
        inner = dict(items) if isinstance(items, Mapping) else {}
        if schema.get("x-path"):
            inner["x-path"] = True
        return [resolve_paths(inner, item, f"{where}[{i}]", folder, places) for i, item in enumerate(value)]
    return value
