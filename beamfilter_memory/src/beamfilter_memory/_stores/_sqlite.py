"""``sqlite:///path.db``: the embedded default store (stdlib sqlite3, WAL, one writer thread)."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from beamfilter_core import StoreSpec
from beamfilter_core.errors import ConfigError, StoreError

from ._base import KEEP_PAUSE, Fact, _Keep
from ._store import StoreBase

T = TypeVar("T")

# ``seq`` is the rowid: a new row always gets max(rowid) + 1, so the order of a
# conversation is its insertion order (AUTOINCREMENT would only add bookkeeping).
_SCHEMA = """
CREATE TABLE IF NOT EXISTS beamfilter_messages (
    seq INTEGER PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS beamfilter_messages_conversation
    ON beamfilter_messages (conversation_id, seq);
CREATE TABLE IF NOT EXISTS beamfilter_pauses (
    conversation_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS beamfilter_facts (
    seq INTEGER PRIMARY KEY,
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (user_id, subject)
);
CREATE INDEX IF NOT EXISTS beamfilter_facts_user ON beamfilter_facts (user_id, seq);
CREATE TABLE IF NOT EXISTS beamfilter_resumed (
    pause_id TEXT PRIMARY KEY
);
CREATE TABLE IF NOT EXISTS beamfilter_pause_outcomes (
    pause_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
"""
_LOAD_ALL = "SELECT data FROM beamfilter_messages WHERE conversation_id = ? ORDER BY seq"
_LOAD_LAST = (
    "SELECT data FROM (SELECT seq, data FROM beamfilter_messages WHERE conversation_id = ? "
    "ORDER BY seq DESC LIMIT ?) ORDER BY seq"
)
_INSERT = "INSERT INTO beamfilter_messages (conversation_id, data) VALUES (?, ?)"
_SAVE_PAUSE = (
    "INSERT INTO beamfilter_pauses (conversation_id, data) VALUES (?, ?) "
    "ON CONFLICT (conversation_id) DO UPDATE SET data = excluded.data"
)
_CLEAR_PAUSE = "DELETE FROM beamfilter_pauses WHERE conversation_id = ?"
_LOAD_PAUSE = "SELECT data FROM beamfilter_pauses WHERE conversation_id = ?"
_CLEAR = "DELETE FROM beamfilter_messages WHERE conversation_id = ?"
_CLAIM = "INSERT INTO beamfilter_resumed (pause_id) VALUES (?) ON CONFLICT (pause_id) DO NOTHING"
_LIST_PAUSES = "SELECT conversation_id, data FROM beamfilter_pauses ORDER BY conversation_id"
_PUT_OUTCOME = (
    "INSERT INTO beamfilter_pause_outcomes (pause_id, data) VALUES (?, ?) "
    "ON CONFLICT (pause_id) DO UPDATE SET data = excluded.data"
)
_FIRST_OUTCOME = (
    "INSERT INTO beamfilter_pause_outcomes (pause_id, data) VALUES (?, ?) ON CONFLICT (pause_id) DO NOTHING"
)
_DELETE_OUTCOME = "DELETE FROM beamfilter_pause_outcomes WHERE pause_id = ?"
_GET_OUTCOME = "SELECT data FROM beamfilter_pause_outcomes WHERE pause_id = ?"
# A replaced fact is deleted and inserted again: its new rowid makes it the most recent.
_DELETE_FACT = "DELETE FROM beamfilter_facts WHERE user_id = ? AND subject = ?"
_INSERT_FACT = "INSERT INTO beamfilter_facts (user_id, subject, text) VALUES (?, ?, ?)"
_LOAD_FACTS = "SELECT subject, text FROM beamfilter_facts WHERE user_id = ? ORDER BY seq"
_CLEAR_FACTS = "DELETE FROM beamfilter_facts WHERE user_id = ?"


def sqlite_path(url: str) -> str:
    """The file path of a ``sqlite:///path`` URL (``sqlite:////abs/path`` is absolute)."""
    prefix = "sqlite:///"
    if not url.startswith(prefix) or len(url) == len(prefix):
        msg = (
            f"SQLite store URL {url!r} is invalid; write sqlite:///relative/path.db, "
            "sqlite:////absolute/path.db or sqlite:///:memory:."
        )
        raise ConfigError(msg)
    path = url[len(prefix) :]
    return path.split("?", 1)[0]


class SQLiteStore(StoreBase):
    """Conversations in one SQLite file, safe for many runs and several processes.

    The file is opened in WAL mode on first use; each :meth:`append` is one
    ``BEGIN IMMEDIATE`` transaction, so a crash (even SIGKILL) never leaves half of it.
    All calls of one store go through one worker thread with one connection: the event
    loop never blocks on disk, and calls from many concurrent runs queue up in order.
    Other processes on the same file wait up to ``timeout`` seconds for the write lock.

    Args:
        url: ``sqlite:///path.db`` (relative), ``sqlite:////abs/path.db`` or ``sqlite:///:memory:``.
        timeout: seconds to wait for another process's write lock (SQLite's busy timeout).
        synchronous: SQLite's ``synchronous`` pragma; ``"NORMAL"`` (default) survives
            process crashes, ``"FULL"`` also power loss, at a cost per append.

    Example::

        store = SQLiteStore("sqlite:///chats.db")
    """

    has_schema = True

    def __init__(
        self, url: str = "sqlite:///beamfilter.db", *, timeout: float = 10.0, synchronous: str = "NORMAL"
    ) -> None:
        self.path = sqlite_path(url)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            msg = f"SQLiteStore(timeout={timeout!r}) is invalid; give seconds >= 0."
            raise ConfigError(msg)
        if not isinstance(synchronous, str) or synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            msg = f"SQLiteStore(synchronous={synchronous!r}) is invalid; give OFF, NORMAL, FULL or EXTRA."
            raise ConfigError(msg)
        super().__init__(url)
        self.timeout = float(timeout)
        self.synchronous = synchronous.upper()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()

    # -- the worker thread ----------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute(f"PRAGMA synchronous={self.synchronous}")
            # Several processes may create the schema at once: take the write lock first.
            conn.executescript("BEGIN IMMEDIATE;" + _SCHEMA + "COMMIT;")
        except BaseException:
            conn.close()
            raise
        return conn

    def _in_thread(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        try:
            if conn is None:
                conn = self._conn = self._connect()
            return fn(conn)
        except BaseException:
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    async def _run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._closed:
                    raise self._closed_error()
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="beamfilter-sqlite")
                executor = self._executor
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, self._in_thread, fn)
        except RuntimeError as exc:  # executor shut down by a concurrent aclose()
            if self._closed:
                msg = f"{self!r} was closed while a call was waiting."
                raise StoreError(msg) from exc
            raise

    # -- primitives -----------------------------------------------------------------------

    async def _migrate(self) -> None:
        await self._run(lambda conn: None)  # connecting creates the schema

    async def _read(self, cid: str, limit: int | None) -> list[str]:
        def read(conn: sqlite3.Connection) -> list[str]:
            if limit is None:
                return [row[0] for row in conn.execute(_LOAD_ALL, (cid,))]
            return [row[0] for row in conn.execute(_LOAD_LAST, (cid, limit))]

        return await self._run(read)

    async def _write(self, cid: str, rows: Sequence[str], pause: str | _Keep | None, *, clear: bool = False) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            if clear:
                conn.execute(_CLEAR, (cid,))
            if rows:
                conn.executemany(_INSERT, [(cid, text) for text in rows])
            if pause is None:
                conn.execute(_CLEAR_PAUSE, (cid,))
            elif pause is not KEEP_PAUSE:
                conn.execute(_SAVE_PAUSE, (cid, pause))
            conn.execute("COMMIT")

        await self._run(write)

    async def _read_pause(self, cid: str) -> str | None:
        row = await self._run(lambda conn: conn.execute(_LOAD_PAUSE, (cid,)).fetchone())
        return None if row is None else row[0]

    async def _take_pause(self, cid: str, pause_id: str | None) -> str | None:
        # The compare and the delete hold the file's write lock.
        def take(conn: sqlite3.Connection) -> str | None:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(_LOAD_PAUSE, (cid,)).fetchone()
            if row is not None and pause_id is not None and self.pause_id_of(row[0]) != pause_id:
                row = None  # a newer pause: leave it
            if row is not None:
                conn.execute(_CLEAR_PAUSE, (cid,))
            conn.execute("COMMIT")
            return None if row is None else row[0]

        return await self._run(take)

    async def _claim(self, pause_id: str) -> bool:
        inserted: int = await self._run(lambda conn: conn.execute(_CLAIM, (pause_id,)).rowcount)
        return inserted == 1  # the primary key decides

    async def _list_pauses(self, limit: int | None) -> list[tuple[str, str]]:
        def read(conn: sqlite3.Connection) -> list[tuple[str, str]]:
            if limit is None:
                return conn.execute(_LIST_PAUSES).fetchall()
            return conn.execute(_LIST_PAUSES + " LIMIT ?", (limit,)).fetchall()

        return await self._run(read)

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        def write(conn: sqlite3.Connection) -> bool:
            if text is None:
                conn.execute(_DELETE_OUTCOME, (pause_id,))
                return True
            return conn.execute(_FIRST_OUTCOME if first else _PUT_OUTCOME, (pause_id, text)).rowcount == 1

        return await self._run(write)

    async def _get_outcome(self, pause_id: str) -> str | None:
        row = await self._run(lambda conn: conn.execute(_GET_OUTCOME, (pause_id,)).fetchone())
        return None if row is None else row[0]

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_DELETE_FACT, [(uid, fact.subject) for fact in facts])
            conn.executemany(_INSERT_FACT, [(uid, fact.subject, fact.text) for fact in facts])
            conn.execute("COMMIT")

        await self._run(write)

    async def _load_facts(self, uid: str) -> list[tuple[str, str]]:
        return await self._run(lambda conn: conn.execute(_LOAD_FACTS, (uid,)).fetchall())

    async def _clear_facts(self, uid: str) -> None:
        await self._run(lambda conn: conn.execute(_CLEAR_FACTS, (uid,)))

    async def _close(self) -> None:
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is None:
            return

        def close() -> None:
            conn = self._conn
            self._conn = None
            if conn is not None:
                conn.close()

        await asyncio.get_running_loop().run_in_executor(executor, close)
        executor.shutdown(wait=False)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "timeout": {"type": "number", "minimum": 0},
        "synchronous": {"enum": ["OFF", "NORMAL", "FULL", "EXTRA"]},
    },
    "additionalProperties": False,
}

SPEC = StoreSpec("sqlite", SQLiteStore, ("sqlite",), OPTIONS, "One SQLite file, WAL (the embedded default).")
