"""Attacks on what ``StoreBase`` does for every store: the closed state, pauses taken by
several processes at once, corrupt pause rows, what a backend raises, and how a URL finds
its store (only through ``StoreSpec.schemes``).

Runs on every store of the conformance suite (conftest.py): memory://, SQLite, real
PostgreSQL and Redis servers, and the third-party ``files://`` store of docs/stores.md.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from memory._processes import spawn, wait_line

from beamfilter_core import Message, PauseState, Registry, StaticEntryPoint, StoreSpec, ToolCall, hookimpl
from beamfilter_core.errors import ConfigError, StoreError, UnknownNameError
from beamfilter_memory import KEEP_PAUSE, STORE_SPECS, ChatStore, Fact, InMemoryStore, StoreBase, open_store

pytestmark = [pytest.mark.anyio, pytest.mark.services]


def _pause(pause_id: str) -> PauseState:
    call = ToolCall("transfer", {"amount": 5}, "call_t")
    return PauseState((Message.assistant(None, (call,)),), (call,), ("call_t",), pause_id=pause_id)


async def test_every_method_of_a_closed_store_is_a_store_error(store: ChatStore) -> None:
    await store.append("c", [Message.user("x")], pause=_pause("p1"))
    await store.aclose()
    await store.aclose()  # idempotent
    closed = f"{store!r} is closed; open a new store (stores cannot be reopened)."
    calls: list[Any] = [
        store.load("c"),
        store.load("c", 1),
        store.append("c", [Message.user("y")]),
        store.append("c", [], pause=None),
        store.clear("c"),
        store.save_pause("c", _pause("p2")),
        store.load_pause("c"),
        store.clear_pause("c"),
        store.take_pause("c"),
        store.take_pause("c", "p1"),
        store.claim_pause("p1"),  # type: ignore[attr-defined]
        store.save_facts("u", [Fact("s", "t")]),
        store.load_facts("u"),
        store.clear_facts("u"),
        store.load(""),  # bad arguments too: the closed state is checked first
    ]
    if isinstance(store, StoreBase):
        calls.append(store.migrate())
    for call in calls:
        with pytest.raises(StoreError) as caught:
            await call
        assert str(caught.value) == closed


@pytest.mark.parametrize("kind", ["sqlite", "postgres", "redis"])
async def test_four_processes_taking_the_same_pause_at_once_one_gets_it(kind: str, fresh_store: ChatStore) -> None:
    for attempt in range(2):
        cid = f"race-{attempt}"
        await fresh_store.append(cid, [Message.user("pay")], pause=_pause("p-race"))
        procs = [spawn("take", kind, fresh_store, cid) for _ in range(4)]
        for proc in procs:
            await asyncio.to_thread(wait_line, proc, "ready")
        for proc in procs:  # all four connected: start the race
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outcomes = []
        for proc in procs:
            out, err = await asyncio.to_thread(proc.communicate, None, 120)
            assert proc.returncode == 0, err
            outcomes.append(out.strip())
        assert sorted(outcomes) == ["none", "none", "none", "took"]
        assert await fresh_store.load_pause(cid) is None
        assert [m.text for m in await fresh_store.load(cid)] == ["pay"]


async def test_a_corrupt_pause_row_is_a_store_error_and_a_take_by_id_leaves_it(store: ChatStore) -> None:
    await store._write("c", (), "{not json", clear=False)  # type: ignore[attr-defined]  # a row written behind the store
    expected = "Cannot read the stored pause state of conversation 'c': "
    with pytest.raises(StoreError) as caught:
        await store.load_pause("c")
    assert str(caught.value).startswith(expected)
    assert await store.take_pause("c", "p1") is None  # not the pause asked for: left in place
    with pytest.raises(StoreError) as caught:
        await store.take_pause("c")  # taken (it is gone now), but it cannot be read
    assert str(caught.value).startswith(expected)
    assert await store.load_pause("c") is None
    await store._write("c", (), json.dumps({"pause_id": "p1", "messages": 5}))  # type: ignore[attr-defined]
    with pytest.raises(StoreError, match=r"^Cannot read the stored pause state of conversation 'c': "):
        await store.take_pause("c", "p1")


class _Failing(InMemoryStore):
    """A backend whose primitives fail the way drivers do."""

    def __init__(self, error: BaseException) -> None:
        super().__init__("memory://u:hunter2@host/db")
        self.error = error

    async def _read(self, cid: str, limit: int | None) -> list[str]:
        raise self.error

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        raise self.error


async def test_what_a_primitive_raises_becomes_a_store_error_naming_store_action_and_id() -> None:
    failing = _Failing(OSError("disk full at postgresql://app:hunter2@db/chats"))
    with pytest.raises(StoreError) as caught:
        await failing.load("c1")
    assert str(caught.value) == (
        "InMemoryStore(0 conversations): load for conversation 'c1' failed: "
        "OSError: disk full at postgresql://app:***@db/chats"
    )
    assert type(caught.value.__cause__) is OSError
    with pytest.raises(StoreError) as caught:
        await failing.save_facts("ada", [Fact("s", "t")])
    assert str(caught.value).startswith("InMemoryStore(0 conversations): save_facts for user 'ada' failed: OSError")
    own = StoreError("the backend's own words")
    with pytest.raises(StoreError) as caught:
        await _Failing(own).load("c1")
    assert caught.value is own  # a typed error of the backend is passed on as it is
    assert own.__cause__ is None
    with pytest.raises(asyncio.CancelledError):
        await _Failing(asyncio.CancelledError()).load("c1")  # cancellation is never wrapped


def test_a_store_class_missing_primitives_is_refused_when_made() -> None:
    class Half(StoreBase):
        async def _read(self, cid: str, limit: int | None) -> list[str]:
            return []

    with pytest.raises(ConfigError) as caught:
        Half("half://")
    assert str(caught.value) == (
        "Half does not implement _write, _read_pause, _take_pause, _claim, _save_facts, _load_facts, "
        "_clear_facts: a StoreBase subclass implements every primitive (_read, _write, _read_pause, "
        "_take_pause, _claim, _save_facts, _load_facts, _clear_facts); see docs/stores.md."
    )


class _Private(InMemoryStore):
    """A store written before shared pauses: it has none of their three primitives."""

    _list_pauses = StoreBase._list_pauses
    _put_outcome = StoreBase._put_outcome
    _get_outcome = StoreBase._get_outcome


async def test_shared_pause_primitives_are_optional_but_all_or_none() -> None:
    class Lister(InMemoryStore):
        _put_outcome = StoreBase._put_outcome

    with pytest.raises(ConfigError) as caught:
        Lister()
    assert str(caught.value) == (
        "Lister does not implement _put_outcome: the shared-pause primitives (_list_pauses, "
        "_put_outcome, _get_outcome) come all together or not at all; see docs/stores.md."
    )
    private = _Private()
    assert not private.shares_pauses
    assert InMemoryStore().shares_pauses
    await private.save_pause("c", _pause("p1"))  # everything else works as before
    assert await private.take_pause("c", "p1") is not None
    expected = (
        "InMemoryStore(0 conversations) cannot list pending pauses: _Private does not implement the "
        "shared-pause primitives (_list_pauses, _put_outcome, _get_outcome); use a store that does "
        "(sqlite, postgresql, redis, memory) or add them (docs/stores.md)."
    )
    with pytest.raises(ConfigError) as caught:
        await private.pending_pauses()
    assert str(caught.value) == expected
    with pytest.raises(ConfigError, match=r"cannot save a pause outcome: _Private does not implement"):
        await private.save_outcome("p1", {"status": "deciding"}, first=True)
    with pytest.raises(ConfigError, match=r"cannot load a pause outcome: _Private does not implement"):
        await private.load_outcome("p1")


async def test_a_corrupt_outcome_or_listed_pause_is_a_store_error() -> None:
    store = InMemoryStore()
    await store._put_outcome("p1", "[1, 2]", False)
    with pytest.raises(StoreError, match=r"^Cannot read the stored outcome of pause 'p1': it is a JSON list, not"):
        await store.load_outcome("p1")
    await store._put_outcome("p1", "{not json", False)
    with pytest.raises(StoreError, match=r"^Cannot read the stored outcome of pause 'p1': JSONDecodeError"):
        await store.load_outcome("p1")
    await store._write("c", (), "{broken")
    with pytest.raises(StoreError, match=r"^Cannot read the stored pause state of conversation 'c': "):
        await store.pending_pauses()


def test_store_specs_are_the_only_way_to_a_store(tmp_path: Path) -> None:
    assert [spec.name for spec in STORE_SPECS] == ["memory", "sqlite", "postgresql", "redis"]
    made: list[tuple[str, dict[str, Any]]] = []

    def factory(url: str, **options: Any) -> InMemoryStore:
        made.append((url, options))
        return InMemoryStore(url)

    class Kv:
        @staticmethod
        @hookimpl
        def beamfilter_register_stores() -> list[StoreSpec]:
            return [StoreSpec("kv", factory, ["kv", "kv+tls"])]

    registry = Registry(entry_points=[StaticEntryPoint("kv", "kv", "beamfilter-kv", "1.0", target=Kv)], environ={})
    assert type(open_store("kv+tls://bucket/x", registry=registry)) is InMemoryStore
    assert made == [("kv+tls://bucket/x", {})]
    with pytest.raises(UnknownNameError, match=r"No installed plugin provides a store named 'sqlite'"):
        open_store(f"sqlite:///{tmp_path}/a.db", registry=registry)  # a config's registry decides alone
    with pytest.raises(ConfigError) as caught:
        open_store("kv://bucket")  # not installed: this package's stores and the installed ones only
    assert str(caught.value).startswith(
        "No memory store for the URL 'kv://bucket' (scheme 'kv'); use one of: memory://"
    )
    for schemes in ("sqlite", ["SQLite"], ["sqlite://"], [""], [3]):
        with pytest.raises(ConfigError) as caught:
            StoreSpec("bad", factory, schemes)
        shown = tuple(schemes) if isinstance(schemes, list) else schemes
        assert str(caught.value) == (
            f"StoreSpec.schemes is {shown!r}; give a list of URL schemes such as ['sqlite'] "
            "(lower case, matching ^[a-z][a-z0-9+.-]*$, without '://')."
        )
    assert StoreSpec("ok", factory, ["a", "b"]).schemes == ("a", "b")


async def test_a_window_and_keep_pause_go_through_every_backend_alike(store: ChatStore) -> None:
    # the primitives get checked, encoded data: a write of no rows that keeps the pause is skipped
    await store.append("c", [Message.user("1"), Message.assistant("2")], pause=_pause("p1"))
    await store.append("c", [], pause=KEEP_PAUSE)
    await store.append("c", [Message.tool("gone", "orphan"), Message.user("3")])
    assert [m.text for m in await store.load("c", 2)] == ["3"]  # never starts on a tool result
    kept = await store.load_pause("c")
    assert kept is not None
    assert kept.pause_id == "p1"


def test_the_docs_show_the_example_store_as_it_is_tested() -> None:
    root = Path(__file__).resolve().parents[2]
    module = (root / "examples" / "beamfilter-files" / "src" / "beamfilter_files" / "__init__.py").read_text()
    assert f"```python\n{module}```\n" in (root / "docs" / "stores.md").read_text()
