"""The plugin face of beamfilter-memory: hook implementations, config, and the public façade."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import beamfilter_memory
from beamfilter_core import Kernel, Registry, StaticEntryPoint, StoreSpec, hookimpl
from beamfilter_core.errors import ConfigError
from beamfilter_memory import InMemoryStore, SQLiteStore, _plugin


def _registry(*extra: StaticEntryPoint) -> Registry:
    memory = StaticEntryPoint("memory", "beamfilter_memory._plugin", "beamfilter-memory", "0.1.0")
    return Registry(entry_points=[memory, *extra], environ={})


def test_hooks_register_the_filter_and_four_stores() -> None:
    [spec] = _plugin.beamfilter_register_filters()
    assert (spec.name, spec.factory, tuple(spec.scopes)) == (
        "memory",
        beamfilter_memory.memory_filter,
        ("turn", "chat"),
    )
    stores = {s.name: tuple(s.schemes) for s in _plugin.beamfilter_register_stores()}
    assert stores == {
        "memory": ("memory",),
        "sqlite": ("sqlite",),
        "postgresql": ("postgresql", "postgres"),
        "redis": ("redis", "rediss", "unix"),
    }
    registry = _registry()
    assert registry.get_filter("memory").spec is not None
    assert registry.get_store("sqlite:///x.db").spec.name == "sqlite"
    assert registry.get_store("postgres://h/db").spec.name == "postgresql"
    store = registry.get_store("memory://").spec.factory("memory://")
    assert type(store) is InMemoryStore


def test_a_config_enables_memory_by_name(tmp_path: Path) -> None:
    db = tmp_path / "chats.db"
    config = {
        "model": {"use": "scripted", "script": ["Hello Ada!", "You are Ada."]},
        "filters": [{"use": "memory", "store": f"sqlite:///{db}", "window": 10}],
    }
    kernel = Kernel.from_config(config, registry=_registry())
    [flt] = kernel.filters
    store = flt.extras["store"]
    assert type(store) is SQLiteStore
    assert store.path == str(db)
    assert flt.extras["window"] == 10
    kernel.run_sync("Hi, I'm Ada", context={"conversation_id": "ada"})
    kernel.run_sync("Who am I?", context={"conversation_id": "ada"})
    assert [m.text for m in kernel.model.requests[1].messages] == ["Hi, I'm Ada", "Hello Ada!", "Who am I?"]  # type: ignore[attr-defined]


def test_config_options_are_validated() -> None:
    def problems(options: dict[str, Any]) -> tuple[str, ...]:
        config = {"model": {"use": "scripted", "script": ["x"]}, "filters": [{"use": "memory", **options}]}
        with pytest.raises(ConfigError) as caught:
            Kernel.from_config(config, registry=_registry())
        return caught.value.problems

    assert problems({"windw": 3}) == (
        "filters[0].windw: unknown option for the filter 'memory:memory'. Did you mean 'window'? "
        "Known options: store, window.",
    )
    assert problems({"store": "chats.db"}) == ("filters[0].store: must match pattern ^[A-Za-z][A-Za-z0-9+.-]*://",)
    assert problems({"window": 0}) == ("filters[0].window: must be >= 1, got 0",)


def test_a_store_scheme_from_another_plugin_is_found_through_the_registry() -> None:
    made: list[str] = []

    def factory(url: str) -> InMemoryStore:
        made.append(url)
        return InMemoryStore(url)

    class Other:
        @staticmethod
        @hookimpl
        def beamfilter_register_stores() -> list[StoreSpec]:
            return [StoreSpec("kv", factory, ("kv",))]

    registry = _registry(StaticEntryPoint("other", "other", "beamfilter-other", "1.0", target=Other))
    kernel = Kernel.from_config(
        {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "memory", "store": "kv://bucket"}]},
        registry=registry,
    )
    assert made == ["kv://bucket"]
    kernel.run_sync("hi", context={"conversation_id": "c"})
    store: Any = kernel.filters[0].extras["store"]
    assert store._messages["c"]
    assert len(store._messages["c"]) == 2
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "memory", "store": "zz://x"}]},
            registry=registry,
        )
    assert caught.value.problems == (
        "filters[0]: 'memory:memory' could not be built: UnknownNameError: No installed plugin provides "
        "a store named 'zz'. Run `beamfilter plugins` to list the installed stores.",
    )


def test_all_lists_exactly_the_public_names() -> None:
    names = beamfilter_memory.__all__
    for name in names:
        assert getattr(beamfilter_memory, name) is not None, name
    public = {n for n in vars(beamfilter_memory) if not n.startswith(("_", "@"))} - {
        "annotations",
        "TYPE_CHECKING",
        "Any",
    }
    assert public - set(names) == set()


def test_import_does_not_load_the_server_drivers() -> None:
    code = (
        "import sys, beamfilter_memory; "
        "print(sorted(m for m in ('psycopg', 'psycopg_pool', 'redis', 'sqlite3') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['sqlite3']"


def test_beamfilter_memory_migrate_creates_the_tables(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "chats.db"
    command = [sys.executable, "-m", "beamfilter_core", "memory", "migrate", f"sqlite:///{db}"]
    out = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert (out.returncode, out.stdout.strip()) == (0, f"SQLiteStore('sqlite:///{db}'): schema is up to date.")
    tables = {row[0] for row in sqlite3.connect(db).execute("select name from sqlite_master where type='table'")}
    assert {"beamfilter_messages", "beamfilter_pauses"} <= tables
    out = subprocess.run([*command[:5], "zz://nowhere"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2
    assert out.stderr == (
        "beamfilter memory: No memory store for the URL 'zz://nowhere' (scheme 'zz'); use one of: memory://, "
        "sqlite://, postgresql://, postgres://, redis://, rediss://, unix://.\n"
    )
