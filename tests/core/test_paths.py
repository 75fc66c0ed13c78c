"""The one rule for relative paths in a config (``_paths``): every case of a value."""

from __future__ import annotations

import os

from beamfilter_core._paths import Place, resolve_path, resolve_paths

SCHEMA = {
    "type": "object",
    "properties": {
        "folder": {"type": "string", "x-path": True},
        "cache_dir": {"type": "string", "x-path": True, "x-path-literals": ["default"]},
        "roots": {"type": "array", "items": {"type": "string"}, "x-path": True},
        "name": {"type": "string"},
        "count": {"type": "integer"},
    },
    "additionalProperties": {"type": "object", "properties": {"file": {"type": "string", "x-path": True}}},
}


def test_each_kind_of_value() -> None:
    places: list[Place] = []
    given = {
        "folder": "skills",
        "cache_dir": "default",
        "roots": ["./data", "/abs", "~/x"],
        "name": "sqlite:///not-a-path-option-but-a-url.db",
        "count": 3,
        "extra": {"file": "../up.txt", "other": "as is"},
    }
    out = resolve_paths(SCHEMA, given, "filters[0]", "/cfg", places)
    home = os.path.expanduser("~")
    assert out == {
        "folder": "/cfg/skills",
        "cache_dir": "default",  # a word the option takes as it is
        "roots": ["/cfg/data", "/abs", f"{home}/x"],
        "name": "sqlite:////cfg/not-a-path-option-but-a-url.db",  # any sqlite URL is a path
        "count": 3,
        "extra": {"file": "/up.txt", "other": "as is"},
    }
    assert [p.where for p in places] == [
        "filters[0].folder",
        "filters[0].roots[0]",
        "filters[0].roots[1]",
        "filters[0].roots[2]",
        "filters[0].name",
        "filters[0].extra.file",
    ]
    assert given["folder"] == "skills"  # the caller's table is not changed


def test_sqlite_urls() -> None:
    places: list[Place] = []
    urls = [
        "sqlite:///chats.db",
        "sqlite+aiosqlite:///db/x.db",
        "sqlite:////abs/x.db",
        "sqlite:///:memory:",
        "sqlite:///",
        "postgresql://u@h/db",
        "sqlite:///~/h.db",
    ]
    out = resolve_paths({}, urls, "store", "/cfg", places)
    assert out == [
        "sqlite:////cfg/chats.db",
        "sqlite+aiosqlite:////cfg/db/x.db",
        "sqlite:////abs/x.db",
        "sqlite:///:memory:",
        "sqlite:///",
        "postgresql://u@h/db",
        f"sqlite:///{os.path.expanduser('~')}/h.db",
    ]
    # unchanged sqlite URLs are places too (chain shows them); a non-sqlite URL is not
    assert [p.given for p in places] == [u for u in urls if u.startswith("sqlite")]


def test_resolve_path_normalises() -> None:
    assert resolve_path("a/../b/./c", "/cfg") == "/cfg/b/c"
    assert resolve_path("/x/../y", "/cfg") == "/y"
