"""Conformance suite: every ChatStore (memory, SQLite, real PostgreSQL, real Redis) behaves the same.

Integration tests through the public store API; the servers come from ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import pytest
from memory._processes import kill, spawn, wait_line

from beamfilter_core import ContentPart, Decision, Message, PauseState, ToolCall, Usage
from beamfilter_core.errors import ConfigError, StoreError
from beamfilter_memory import (
    KEEP_PAUSE,
    ChatStore,
    Fact,
    InMemoryStore,
    PendingPause,
    SQLiteStore,
    StoreBase,
    open_store,
)

pytestmark = [pytest.mark.anyio, pytest.mark.services]


def _pause(tag: str = "p") -> PauseState:
    call = ToolCall("transfer", {"amount": 5, "note": "für Ærø ✓"}, f"call_{tag}")
    return PauseState(
        (Message.user("pay"), Message.assistant(None, (call,))),
        (call,),
        (call.id,),
        {"call_other": Decision.approve({"amount": 1})},
        {"conversation_id": "c1", "user": "ada"},
        remaining=7,
        tool_calls_made=2,
        iterations=3,
        usage=Usage(10, 5, 15),
        reason="needs a human",
    )


def _tool_round(n: int) -> list[Message]:
    calls = (ToolCall("lookup", {"q": f"a{n}"}, f"call_{n}a"), ToolCall("lookup", {"q": f"b{n}"}, f"call_{n}b"))
    return [
        Message.user(f"question {n}"),
        Message.assistant(None, calls),
        Message.tool(f"call_{n}a", f"result a{n}", "lookup"),
        Message.tool(f"call_{n}b", f"result b{n}", "lookup"),
        Message.assistant(f"answer {n}"),
    ]


async def test_append_then_load_keeps_order_and_every_field(store: ChatStore) -> None:
    messages = [
        Message.user("one"),
        Message.assistant("two"),
        Message("user", (ContentPart("text", text="look:"), ContentPart("image_url", url="https://x/y.png"))),
        Message.assistant(None, (ToolCall("f", {"n": [1, {"k": None}]}, "call_1", None),)),
        Message("tool", "r", (), "call_1", "f"),
        Message.assistant(None, (ToolCall("g", {}, "call_2", raw_arguments="{not json"),)),
        Message.tool("call_2", "bad arguments", "g"),
        Message.assistant(""),
    ]
    assert await store.load("c1") == []
    await store.append("c1", messages[:3])
    await store.append("c1", messages[3:])
    await store.append("c1", [])
    assert await store.load("c1") == messages
    assert await store.load("c1", 3) == messages[-3:]
    assert await store.load("c1", 2) == messages[-1:]  # never starts on an orphan tool result


async def test_conversations_are_isolated(store: ChatStore) -> None:
    await store.append("a", [Message.user("a1")])
    await store.append("b", [Message.user("b1")])
    await store.append("a", [Message.assistant("a2")])
    await store.save_pause("a", _pause("a"))
    assert [m.text for m in await store.load("a")] == ["a1", "a2"]
    assert [m.text for m in await store.load("b")] == ["b1"]
    assert await store.load_pause("b") is None
    await store.clear("a")
    assert await store.load("a") == []
    assert await store.load_pause("a") is None
    assert [m.text for m in await store.load("b")] == ["b1"]
    # Ids that look like key or SQL syntax are plain data.
    odd = "x:messages'; DROP TABLE beamfilter_messages; --"
    await store.append(odd, [Message.user("odd")])
    assert [m.text for m in await store.load(odd)] == ["odd"]
    assert [m.text for m in await store.load("b")] == ["b1"]


async def test_window_never_starts_on_a_tool_result(store: ChatStore) -> None:
    messages = _tool_round(1) + _tool_round(2)
    await store.append("c", messages)
    # The last 7 messages start on "result b1": its call was cut off, so it is dropped.
    assert await store.load("c", 7) == messages[4:]
    assert await store.load("c", 8) == messages[4:]  # starts on results a1 and b1: both dropped
    assert await store.load("c", 9) == messages[1:]
    assert await store.load("c", 10) == messages
    assert await store.load("c", 1000) == messages
    assert await store.load("c", 2) == [messages[-1]]  # result b2 is dropped, its call was cut off
    assert await store.load("c", 3) == [messages[-1]]


async def test_pause_save_load_clear_and_atomic_with_append(store: ChatStore) -> None:
    first, second = _pause("1"), _pause("2")
    assert await store.load_pause("c") is None
    await store.save_pause("c", first)
    assert await store.load_pause("c") == first
    await store.save_pause("c", second)
    assert await store.load_pause("c") == second
    await store.clear_pause("c")
    assert await store.load_pause("c") is None
    await store.clear_pause("c")  # no error when there is none
    await store.append("c", [Message.user("u")], pause=first)
    assert await store.load_pause("c") == first
    await store.append("c", [Message.assistant("a")], pause=KEEP_PAUSE)
    assert await store.load_pause("c") == first
    await store.append("c", [], pause=None)
    assert await store.load_pause("c") is None
    assert [m.text for m in await store.load("c")] == ["u", "a"]
    restored = await store.load_pause("c") or second
    assert restored.decided["call_other"] == Decision.approve({"amount": 1})


async def test_take_pause_hands_a_pause_to_exactly_one_caller(store: ChatStore) -> None:
    assert await store.take_pause("c") is None
    await store.save_pause("c", _pause("1"))
    assert await store.take_pause("c") == _pause("1")
    assert await store.take_pause("c") is None
    assert await store.load_pause("c") is None
    await store.save_pause("c", _pause("2"))
    taken = await asyncio.gather(*(store.take_pause("c") for _ in range(10)))
    assert [t for t in taken if t is not None] == [_pause("2")]


DURABLE = ("sqlite", "postgres", "redis")


def _shared(store: ChatStore) -> StoreBase:
    assert isinstance(store, StoreBase)
    assert store.shares_pauses
    return store


async def test_pending_pauses_lists_every_stored_pause_by_conversation(store: ChatStore) -> None:
    shared = _shared(store)
    odd = "x:pause'; DROP TABLE beamfilter_pauses; --"
    paused = {cid: attrs.evolve(_pause(cid), pause_id=f"id-{cid}") for cid in ("b", "a", "c", "d", odd)}
    assert await shared.pending_pauses() == []
    await store.append("b", [Message.user("b")], pause=paused["b"])
    await store.save_pause("a", paused["a"])
    await store.save_pause("c", paused["c"])
    await store.save_pause("d", paused["d"])
    await store.save_pause(odd, paused[odd])
    await store.append("e", [Message.user("never paused")])
    expected = [PendingPause(cid, paused[cid]) for cid in sorted(paused)]
    assert await shared.pending_pauses() == expected
    assert await shared.pending_pauses(limit=2) == expected[:2]
    assert await shared.pending_pauses(limit=100) == expected
    # a taken, cleared or replaced pause is listed as it is now, from any store on the data
    assert await store.take_pause("a", "id-a") == paused["a"]
    assert await store.take_pause("b") == paused["b"]
    await store.clear_pause("c")
    await store.clear(odd)
    newer = attrs.evolve(paused["d"], pause_id="id-d2")
    await store.append("d", [Message.user("d")], pause=newer)
    assert await shared.pending_pauses() == [PendingPause("d", newer)]
    await store.append("d", [], pause=None)
    assert await shared.pending_pauses() == []


async def test_the_first_outcome_of_a_pause_wins_once(store: ChatStore) -> None:
    shared = _shared(store)
    assert await shared.load_outcome("p1") is None
    outcomes = [{"status": "deciding", "decided_by": f"reviewer {n} ✓", "n": n} for n in range(10)]
    won = await asyncio.gather(*(shared.save_outcome("p1", o, first=True) for o in outcomes))
    assert won.count(True) == 1
    assert await shared.load_outcome("p1") == outcomes[won.index(True)]
    assert await shared.load_outcome("p2") is None  # outcomes are per pause
    done = {"status": "completed", "completion": {"choices": [{"message": {"content": "ok"}}]}, "ok": True}
    assert await shared.save_outcome("p1", done) is True  # a later outcome replaces it
    assert await shared.load_outcome("p1") == done
    assert await shared.save_outcome("p1", {"status": "x"}, first=True) is False
    assert await shared.save_outcome("p1", None) is True
    assert await shared.load_outcome("p1") is None
    assert await shared.save_outcome("p1", {"status": "again"}, first=True) is True


async def test_shared_pause_calls_refuse_bad_input(store: ChatStore) -> None:
    shared = _shared(store)
    for limit in (0, -1, 1.5, "2", True):
        with pytest.raises(ConfigError, match=r"pending_pauses\(limit=.*\) is invalid; give a positive number"):
            await shared.pending_pauses(limit=limit)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"pause_id is ''; give the pause_id of a PauseState"):
        await shared.save_outcome("", {"status": "x"})
    with pytest.raises(ConfigError, match=r"needs a dict with str keys \(a JSON object\)"):
        await shared.save_outcome("p", ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"is not JSON: .*give str, numbers, lists and dicts only"):
        await shared.save_outcome("p", {"when": object()})
    with pytest.raises(ConfigError, match=r"first=True needs an outcome to store"):
        await shared.save_outcome("p", None, first=True)
    assert await shared.load_outcome("p") is None  # nothing was written
    await store.aclose()
    with pytest.raises(StoreError, match=r"is closed; open a new store"):
        await shared.pending_pauses()
    with pytest.raises(StoreError, match=r"is closed; open a new store"):
        await shared.load_outcome("p")


async def test_unicode_and_a_one_megabyte_message(store: ChatStore) -> None:
    text = 'héllo wörld ✓ 日本語 العربية עברית 🧪🚀 \u200b zero\x00nul \t tab "quote" \\ back'
    big = ("0123456789abcdéf" * 65536)[: 1024 * 1024]
    call = ToolCall("emoji_🔧", {"ключ": "значение", "nested": {"emoji": "🎉"}}, "call_ü")
    messages = [
        Message.user(text),
        Message.assistant(big),
        Message.assistant(None, (call,)),
        Message.tool("call_ü", big),
    ]
    await store.append("ünï-cødé 🗂", messages)
    loaded = await store.load("ünï-cødé 🗂")
    assert loaded == messages
    assert len(loaded[1].text) == 1024 * 1024


async def test_fifty_concurrent_conversations_twenty_turns_each(store: ChatStore) -> None:
    async def talk(n: int) -> None:
        cid = f"conv-{n}"
        for turn in range(20):
            await store.append(cid, [Message.user(f"{n}:{turn}:q"), Message.assistant(f"{n}:{turn}:a")])
            if turn % 5 == 4:  # read while others write
                assert len(await store.load(cid)) == 2 * (turn + 1)

    await asyncio.gather(*(talk(n) for n in range(50)))
    for n in range(50):
        got = [m.text for m in await store.load(f"conv-{n}")]
        assert got == [f"{n}:{t}:{s}" for t in range(20) for s in ("q", "a")]


async def test_concurrent_appends_to_one_conversation_never_interleave(store: ChatStore) -> None:
    async def writer(w: int) -> None:
        for batch in range(10):
            await store.append("shared", [Message.user(f"{w}:{batch}:{i}") for i in range(5)])

    await asyncio.gather(*(writer(w) for w in range(8)))
    texts = [m.text for m in await store.load("shared")]
    assert len(texts) == 8 * 10 * 5
    assert len(set(texts)) == len(texts)
    for start in range(0, len(texts), 5):
        heads = {t.rsplit(":", 1)[0] for t in texts[start : start + 5]}
        assert len(heads) == 1, texts[start : start + 5]
        assert [t.rsplit(":", 1)[1] for t in texts[start : start + 5]] == ["0", "1", "2", "3", "4"]
    for w in range(8):  # each writer's batches stay in its own order
        mine = [t for t in texts if t.startswith(f"{w}:")]
        assert mine == [f"{w}:{b}:{i}" for b in range(10) for i in range(5)]


async def test_bad_input_is_a_config_error_and_changes_nothing(store: ChatStore) -> None:
    with pytest.raises(ConfigError) as caught:
        await store.load("")
    assert str(caught.value) == (
        "conversation_id is '' (a str); give a non-empty str, e.g. context={'conversation_id': 'user-42'}."
    )
    with pytest.raises(ConfigError, match=r"conversation_id is 42 \(a int\)"):
        await store.append(42, [Message.user("x")])  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as caught:
        await store.load("c", 0)
    assert str(caught.value) == "load(limit=0) is invalid; give a positive number of messages or None for all."
    with pytest.raises(ConfigError) as caught:
        await store.append("c", [Message.user("ok"), {"role": "user", "content": "no"}])  # type: ignore[list-item]
    assert str(caught.value) == (
        "append(messages[1]) is {'role': 'user', 'content': 'no'} (a dict); "
        "stores keep beamfilter_core.Message values only."
    )
    with pytest.raises(ConfigError, match=r"needs a beamfilter_core.PauseState"):
        await store.save_pause("c", "paused")  # type: ignore[arg-type]
    assert await store.load("c") == []
    assert await store.load_pause("c") is None


async def _raw_append(store: ChatStore, cid: str, row: str) -> None:
    """Write a row the way a newer beamfilter version might, behind the store's checks
    and encoding (straight through its backend's primitive)."""
    await store._write(cid, [row], KEEP_PAUSE)  # type: ignore[attr-defined]


async def _raw_rows(store: ChatStore, cid: str) -> list[str]:
    rows = await store._read(cid, None)  # type: ignore[attr-defined]
    return [row.decode() if isinstance(row, bytes) else row for row in rows]


async def test_unknown_future_fields_are_read_and_kept(store: ChatStore) -> None:
    await store.append("c", [Message.user("now")])  # creates the schema
    future = json.dumps({"role": "assistant", "content": "later", "sentiment": {"steps": 3}, "tool_calls": []})
    await _raw_append(store, "c", future)
    await store.append("c", [Message.user("after")])
    assert await store.load("c") == [Message.user("now"), Message.assistant("later"), Message.user("after")]
    rows = await _raw_rows(store, "c")
    assert json.loads(rows[1]) == json.loads(future)  # the stored row was not rewritten


async def test_a_corrupt_row_is_a_store_error_naming_the_conversation(store: ChatStore) -> None:
    await store.append("c", [Message.user("ok")])
    await _raw_append(store, "c", "{not json")
    with pytest.raises(StoreError) as caught:
        await store.load("c")
    assert str(caught.value) == (
        "Cannot read the stored message at position 1 of conversation 'c': "
        "JSONDecodeError: Expecting property name enclosed in double quotes: line 1 column 2 (char 1)"
    )


async def test_a_closed_store_refuses_work(store: ChatStore) -> None:
    await store.append("c", [Message.user("x")])
    await store.aclose()
    await store.aclose()  # idempotent
    with pytest.raises(StoreError, match=r"is closed; open a new store"):
        await store.load("c")


# -- open_store ---------------------------------------------------------------------------


def test_open_store_picks_the_store_by_scheme(tmp_path: Path) -> None:
    from beamfilter_memory import PostgresStore, RedisStore

    assert type(open_store("memory://")) is InMemoryStore
    sqlite = open_store(f"sqlite:///{tmp_path}/a.db")
    assert type(sqlite) is SQLiteStore
    assert sqlite.path == f"{tmp_path}/a.db"
    assert open_store("sqlite:///rel/a.db").path == "rel/a.db"  # type: ignore[attr-defined]
    pg = open_store("postgresql://u:secret@h:5432/d", max_size=3)
    assert type(pg) is PostgresStore
    assert repr(pg) == "PostgresStore('postgresql://u:***@h:5432/d')"
    assert type(open_store("redis://localhost:6379/0", ttl=60)) is RedisStore
    with pytest.raises(ConfigError) as caught:
        open_store("mongodb://x")
    assert str(caught.value).startswith(
        "No memory store for the URL 'mongodb://x' (scheme 'mongodb'); use one of: memory://"
    )
    with pytest.raises(ConfigError, match=r"^SQLite store URL 'sqlite://a.db' is invalid"):
        open_store("sqlite://a.db")
    with pytest.raises(ConfigError, match=r"^open_store\('memory://'\) got options it does not accept \(ttl\)"):
        open_store("memory://", ttl=3)
    with pytest.raises(ConfigError, match=r"^RedisStore\(ttl=0\) is invalid"):
        open_store("redis://h", ttl=0)


@pytest.mark.parametrize("kind", [*DURABLE, "files"])
async def test_two_workers_share_pending_pauses_and_one_wins_the_outcome(
    kind: str, make_store: Callable[..., ChatStore]
) -> None:
    one, two = _shared(make_store(kind)), _shared(make_store(kind))  # two stores on the same data
    try:
        pause = attrs.evolve(_pause("w"), pause_id="id-w")
        await one.append("ticket-1", [Message.user("refund")], pause=pause)
        assert await two.pending_pauses() == [PendingPause("ticket-1", pause)]
        won = await asyncio.gather(
            *(s.save_outcome("id-w", {"by": n}, first=True) for n, s in enumerate([one, two] * 5))
        )
        assert won.count(True) == 1
        assert await one.load_outcome("id-w") == await two.load_outcome("id-w") == {"by": won.index(True)}
        assert await two.take_pause("ticket-1", "id-w") == pause
        assert await one.pending_pauses() == []
    finally:
        await one.aclose()
        await two.aclose()


async def test_redis_ttl_expires_a_conversation(make_store: Callable[..., ChatStore]) -> None:
    store = make_store("redis", ttl=2)
    try:
        await store.append("c", [Message.user("x")], pause=_pause())
        client = store._redis()  # type: ignore[attr-defined]
        prefix = store.prefix  # type: ignore[attr-defined]
        assert 0 < await client.ttl(f"{prefix}c:messages") <= 2
        assert 0 < await client.ttl(f"{prefix}c:pause") <= 2
        await asyncio.sleep(2.3)
        assert await store.load("c") == []
        assert await store.load_pause("c") is None
        assert await store.pending_pauses() == []  # type: ignore[attr-defined]
        assert await client.smembers(f"{prefix}paused_conversations") == set()
    finally:
        await store.aclose()


async def test_postgres_migrate_is_idempotent_and_creates_the_tables(make_store: Callable[..., ChatStore]) -> None:
    store = make_store("postgres", prefix="migrated_")
    other = make_store("postgres", prefix="migrated_")
    try:
        await asyncio.gather(store.migrate(), other.migrate())  # type: ignore[attr-defined]
        await store.migrate()  # type: ignore[attr-defined]
        await store.append("c", [Message.user("x")])
        assert [m.text for m in await other.load("c")] == ["x"]
    finally:
        await store.aclose()
        await other.aclose()


async def test_unreachable_servers_are_store_errors() -> None:
    from _support import free_port

    from beamfilter_memory import PostgresStore, RedisStore

    port = free_port()
    pg = PostgresStore(f"postgresql://nobody@127.0.0.1:{port}/x", timeout=1)
    with pytest.raises(StoreError, match=r"^PostgresStore\('postgresql://nobody@127.0.0.1:\d+/x'\): connecting failed"):
        await pg.load("c")
    await pg.aclose()
    redis = RedisStore(f"redis://127.0.0.1:{port}/0")
    with pytest.raises(StoreError, match=r"^RedisStore\(.*\): load for conversation 'c' failed: ConnectionError"):
        await redis.load("c")
    await redis.aclose()


# -- processes: crash safety and several writers -----------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("kind", DURABLE)
async def test_sigkill_during_appends_leaves_only_whole_batches(kind: str, fresh_store: ChatStore) -> None:
    for attempt in range(3):
        cid = f"crash-{attempt}"
        proc = spawn("append", kind, fresh_store, cid)
        await asyncio.to_thread(wait_line, proc, "ready")
        await asyncio.sleep(0.15 + 0.1 * attempt)
        kill(proc)
        texts = [m.text for m in await fresh_store.load(cid)]
        assert len(texts) >= 10
        assert len(texts) % 10 == 0, f"a partial batch survived: {len(texts)} messages"
        expected = [f"{b}:{i}:" + "x" * 2000 for b in range(len(texts) // 10) for i in range(10)]
        assert texts == expected
        # The store still works for the next writer.
        await fresh_store.append(cid, [Message.user("after the crash")])
        assert (await fresh_store.load(cid, 1))[0].text == "after the crash"


@pytest.mark.slow
@pytest.mark.parametrize("kind", DURABLE)
async def test_several_processes_append_to_one_conversation(kind: str, fresh_store: ChatStore) -> None:
    await fresh_store.append("warm", [Message.user("schema")])  # created once, before the race
    procs = [spawn("writer", kind, fresh_store, "shared") for _ in range(3)]
    for proc in procs:
        _, err = await asyncio.to_thread(proc.communicate, timeout=120)
        assert proc.returncode == 0, err
    texts = [m.text for m in await fresh_store.load("shared")]
    assert len(texts) == 3 * 40 * 5
    assert len(set(texts)) == len(texts)
    for start in range(0, len(texts), 5):
        chunk = texts[start : start + 5]
        assert len({t.rsplit(":", 1)[0] for t in chunk}) == 1, chunk
        assert [t.rsplit(":", 1)[1] for t in chunk] == ["0", "1", "2", "3", "4"]
    for writer in {t.split(":", 1)[0] for t in texts}:
        mine = [t for t in texts if t.startswith(f"{writer}:")]
        assert mine == [f"{writer}:{b}:{i}" for b in range(40) for i in range(5)]


@pytest.mark.parametrize("kind", ["postgres", "redis"])
async def test_network_stores_refuse_a_second_event_loop(kind: str, fresh_store: ChatStore) -> None:
    await fresh_store.append("c", [Message.user("x")])
    with pytest.raises(StoreError) as caught:
        await asyncio.to_thread(asyncio.run, fresh_store.load("c"))
    assert str(caught.value) == (
        f"{fresh_store!r} was first used in another event loop; its connections belong to that loop. "
        "Run every turn in one event loop (one asyncio.run(main()) around the program, not "
        "kernel.run_sync per turn), or open one store per loop."
    )
    assert [m.text for m in await fresh_store.load("c")] == ["x"]


async def test_sqlite_options_and_in_memory_database(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        SQLiteStore("sqlite:///x.db", timeout=-1)
    assert str(caught.value) == "SQLiteStore(timeout=-1) is invalid; give seconds >= 0."
    with pytest.raises(ConfigError) as caught:
        SQLiteStore("sqlite:///x.db", synchronous="SOMETIMES")
    assert str(caught.value) == "SQLiteStore(synchronous='SOMETIMES') is invalid; give OFF, NORMAL, FULL or EXTRA."
    ram = SQLiteStore("sqlite:///:memory:")
    await ram.append("c", [Message.user("kept in RAM")])
    assert [m.text for m in await ram.load("c")] == ["kept in RAM"]
    await ram.aclose()
    nested = SQLiteStore(f"sqlite:///{tmp_path}/a/b/chats.db", synchronous="full")
    await nested.append("c", [Message.user("x")])
    await nested.aclose()
    assert (tmp_path / "a" / "b" / "chats.db").exists()
    with sqlite3.connect(tmp_path / "a" / "b" / "chats.db") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    conn.close()


async def test_migrate_creates_the_schema_ahead_of_use(make_store: Callable[..., ChatStore], tmp_path: Path) -> None:
    from beamfilter_memory import migrate

    db = tmp_path / "fresh.db"
    assert await migrate(f"sqlite:///{db}") == f"SQLiteStore('sqlite:///{db}'): schema is up to date."
    with sqlite3.connect(db) as conn:
        tables = sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    conn.close()
    assert tables == [
        "beamfilter_facts",
        "beamfilter_messages",
        "beamfilter_pause_outcomes",
        "beamfilter_pauses",
        "beamfilter_resumed",
    ]
    assert (
        await migrate("memory://") == "InMemoryStore(0 conversations): nothing to migrate (this store has no schema)."
    )
    pg: Any = make_store("postgres")
    url = pg.url
    await pg.aclose()
    assert await migrate(url, prefix="fresh_") == f"PostgresStore({url!r}): schema is up to date."
    import psycopg

    async with await psycopg.AsyncConnection.connect(url) as aconn:
        cursor = await aconn.execute("SELECT tablename FROM pg_tables WHERE tablename LIKE 'fresh_%' ORDER BY 1")
        assert [r[0] for r in await cursor.fetchall()] == [
            "fresh_facts",
            "fresh_messages",
            "fresh_pause_outcomes",
            "fresh_pauses",
            "fresh_resumed",
        ]


async def test_sqlite_waits_for_another_writer_then_gives_up_with_a_store_error(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path}/locked.db"
    patient, hasty = SQLiteStore(url, timeout=10), SQLiteStore(url, timeout=0.2)
    try:
        await patient.append("c", [Message.user("first")])
        other = sqlite3.connect(tmp_path / "locked.db", isolation_level=None, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
        with pytest.raises(StoreError) as caught:
            await hasty.append("c", [Message.user("too soon")])
        assert str(caught.value) == (
            f"SQLiteStore('{url}'): append for conversation 'c' failed: OperationalError: database is locked"
        )
        waiting = asyncio.ensure_future(patient.append("c", [Message.user("after the lock")]))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        other.execute("COMMIT")
        other.close()
        await asyncio.wait_for(waiting, 10)
        assert [m.text for m in await hasty.load("c")] == ["first", "after the lock"]
    finally:
        await patient.aclose()
        await hasty.aclose()


# -- long-term facts (FactStore) ---------------------------------------------------------------


async def test_facts_save_load_replace_by_subject_and_recency_order(store: ChatStore) -> None:
    assert await store.load_facts("ada") == []
    await store.save_facts(
        "ada", [Fact("name", "The user's name is Ada."), Fact("location", "The user lives in Paris.")]
    )
    await store.save_facts("ada", [Fact("pet", "The user has a cat."), Fact("name", "The user's name is Ada L.")])
    await store.save_facts("ada", [])
    # A new fact on a subject replaces the old one and becomes the most recent.
    assert await store.load_facts("ada") == [
        Fact("location", "The user lives in Paris."),
        Fact("pet", "The user has a cat."),
        Fact("name", "The user's name is Ada L."),
    ]
    # Within one save the last fact on a subject wins, in its own position.
    await store.save_facts("ada", [Fact("x", "one"), Fact("y", "why"), Fact("x", "two ünï ✓")])
    assert [(f.subject, f.text) for f in await store.load_facts("ada")][-2:] == [("y", "why"), ("x", "two ünï ✓")]


async def test_facts_are_isolated_per_user_and_from_conversations(store: ChatStore) -> None:
    await store.save_facts("ada", [Fact("name", "The user's name is Ada.")])
    await store.save_facts("bob", [Fact("name", "The user's name is Bob.")])
    # A conversation with the same id as a user is separate data.
    await store.append("ada", [Message.user("hi")])
    await store.save_pause("ada", _pause("ada"))
    odd = "x:facts'; DROP TABLE beamfilter_facts; --"
    await store.save_facts(odd, [Fact("k", "odd")])
    assert await store.load_facts("ada") == [Fact("name", "The user's name is Ada.")]
    assert await store.load_facts("bob") == [Fact("name", "The user's name is Bob.")]
    assert await store.load_facts(odd) == [Fact("k", "odd")]
    await store.clear("ada")  # forgetting the conversation keeps the user's facts
    assert await store.load_facts("ada") == [Fact("name", "The user's name is Ada.")]
    await store.append("ada", [Message.user("again")])
    await store.clear_facts("ada")
    await store.clear_facts("nobody")  # no error when there is none
    assert await store.load_facts("ada") == []
    assert [m.text for m in await store.load("ada")] == ["again"]
    assert await store.load_facts("bob") == [Fact("name", "The user's name is Bob.")]


async def test_fact_writes_reject_bad_input_and_change_nothing(store: ChatStore) -> None:
    await store.save_facts("ada", [Fact("name", "The user's name is Ada.")])
    with pytest.raises(ConfigError, match=r"save_facts\(facts\[1\]\) is 'loves tea'; give beamfilter_memory.Fact"):
        await store.save_facts("ada", [Fact("tea", "The user loves tea."), "loves tea"])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"save_facts\(facts\[0\]\) is Fact\(subject='', text='x'\)"):
        await store.save_facts("ada", [Fact("", "x")])
    with pytest.raises(ConfigError, match=r"user_id is '' \(a str\); give a non-empty str"):
        await store.load_facts("")
    with pytest.raises(ConfigError, match=r"user_id is 7 \(a int\)"):
        await store.clear_facts(7)  # type: ignore[arg-type]
    assert await store.load_facts("ada") == [Fact("name", "The user's name is Ada.")]


async def test_concurrent_fact_saves_keep_one_fact_per_subject(store: ChatStore) -> None:
    async def save(n: int) -> None:
        await store.save_facts("ada", [Fact("name", f"name {n}"), Fact(f"own{n}", f"fact {n}")])

    await asyncio.gather(*(save(n) for n in range(20)))
    facts = await store.load_facts("ada")
    assert len(facts) == 21
    assert sorted(f.subject for f in facts) == sorted(["name", *(f"own{n}" for n in range(20))])
    name = next(f for f in facts if f.subject == "name")
    assert name.text in {f"name {n}" for n in range(20)}


async def test_facts_survive_reopening_the_store(make_store: Callable[..., ChatStore]) -> None:
    for kind in ("sqlite", "postgres", "redis"):
        prefix = {"postgres": "ltm_reopen_", "redis": "ltm-reopen:"}.get(kind)
        options = {"prefix": prefix} if prefix else {}
        first = make_store(kind, **options)
        try:
            await first.clear_facts("ada")
            await first.save_facts("ada", [Fact("name", "The user's name is Ada.")])
        finally:
            await first.aclose()
        second = make_store(kind, **options)
        try:
            if kind != "redis":
                await second.migrate()  # type: ignore[attr-defined]  # idempotent on an existing schema
            assert await second.load_facts("ada") == [Fact("name", "The user's name is Ada.")]
            await second.clear_facts("ada")
        finally:
            await second.aclose()


async def test_a_database_from_before_facts_gets_the_facts_table_on_first_use(tmp_path: Path) -> None:
    db = tmp_path / "old.db"
    with sqlite3.connect(db) as conn:  # the schema as it was before long-term facts
        conn.executescript(
            "CREATE TABLE beamfilter_messages (seq INTEGER PRIMARY KEY, conversation_id TEXT NOT NULL, "
            "data TEXT NOT NULL);"
            "CREATE TABLE beamfilter_pauses (conversation_id TEXT PRIMARY KEY, data TEXT NOT NULL);"
        )
    conn.close()
    store = SQLiteStore(f"sqlite:///{db}")
    try:
        await store.append("c", [Message.user("kept")])
        await store.save_facts("ada", [Fact("name", "The user's name is Ada.")])
        assert [m.text for m in await store.load("c")] == ["kept"]
        assert await store.load_facts("ada") == [Fact("name", "The user's name is Ada.")]
    finally:
        await store.aclose()
