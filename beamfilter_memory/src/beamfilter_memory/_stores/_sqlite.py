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

from beamfilter_core import Message, PauseState
from beamfilter_core.errors import ConfigError, StoreError

from ._base import (
    KEEP_PAUSE,
    Fact,
    PauseChange,
    check_append,
    check_conversation_id,
    check_facts,
    check_limit,
    check_pause_id,
    check_user_id,
    decode_all,
    decode_pause,
    encode_pause,
    store_failure,
    stored_pause_id,
)

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


class SQLiteStore:
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

    def __init__(
        self, url: str = "sqlite:///beamfilter.db", *, timeout: float = 10.0, synchronous: str = "NORMAL"
    ) -> None:
        self.url = url
        self.path = sqlite_path(url)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout < 0:
            msg = f"SQLiteStore(timeout={timeout!r}) is invalid; give seconds >= 0."
            raise ConfigError(msg)
        if not isinstance(synchronous, str) or synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            msg = f"SQLiteStore(synchronous={synchronous!r}) is invalid; give OFF, NORMAL, FULL or EXTRA."
            raise ConfigError(msg)
        self.timeout = float(timeout)
        self.synchronous = synchronous.upper()
        self._executor: ThreadPoolExecutor | None = None
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._closed = False

    def __repr__(self) -> str:
        return f"SQLiteStore({self.url!r})"

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

    def _in_thread(self, action: str, conversation_id: str | None, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        try:
            if conn is None:
                conn = self._conn = self._connect()
            return fn(conn)
        except BaseException as exc:
            if conn is not None and conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.Error):
                raise store_failure(repr(self), action, conversation_id, exc) from exc
            raise

    async def _run(self, action: str, conversation_id: str | None, fn: Callable[[sqlite3.Connection], T]) -> T:
        executor = self._executor
        if executor is None:
            with self._lock:
                if self._closed:
                    msg = f"{self!r} is closed; open a new store (stores cannot be reopened)."
                    raise StoreError(msg)
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(1, thread_name_prefix="beamfilter-sqlite")
                executor = self._executor
        elif self._closed:
            msg = f"{self!r} is closed; open a new store (stores cannot be reopened)."
            raise StoreError(msg)
        loop = asyncio.get_running_loop()
        try:
            return await loop.run_in_executor(executor, self._in_thread, action, conversation_id, fn)
        except RuntimeError as exc:  # executor shut down by a concurrent aclose()
            if self._closed:
                msg = f"{self!r} was closed while {action} was waiting."
                raise StoreError(msg) from exc
            raise

    # -- ChatStore ------------------------------------------------------------------------

    async def migrate(self) -> None:
        """Create the file and its tables now instead of on first use (idempotent)."""
        await self._run("creating the schema", None, lambda conn: None)

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order (the last ``limit``, never starting on a tool result)."""
        cid = check_conversation_id(conversation_id)
        limit = check_limit(limit)

        def read(conn: sqlite3.Connection) -> list[str]:
            if limit is None:
                return [row[0] for row in conn.execute(_LOAD_ALL, (cid,))]
            return [row[0] for row in conn.execute(_LOAD_LAST, (cid, limit))]

        rows = await self._run("load", cid, read)
        return decode_all(rows, cid, limit is not None)

    async def append(
        self, conversation_id: str, messages: Sequence[Message], *, pause: PauseChange = KEEP_PAUSE
    ) -> None:
        """Store ``messages`` and the pause change in one transaction."""
        checked = check_append(conversation_id, messages, pause)
        if checked is None:
            return
        cid, encoded, change = checked
        rows = [(cid, text) for text in encoded]

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            if rows:
                conn.executemany(_INSERT, rows)
            if change is None:
                conn.execute(_CLEAR_PAUSE, (cid,))
            elif change is not KEEP_PAUSE:
                conn.execute(_SAVE_PAUSE, (cid, change))
            conn.execute("COMMIT")

        await self._run("append", cid, write)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation and its pause state (one transaction)."""
        cid = check_conversation_id(conversation_id)

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.execute(_CLEAR, (cid,))
            conn.execute(_CLEAR_PAUSE, (cid,))
            conn.execute("COMMIT")

        await self._run("clear", cid, write)

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store the conversation's paused run."""
        cid = check_conversation_id(conversation_id)
        text = encode_pause(pause)
        await self._run("save_pause", cid, lambda conn: conn.execute(_SAVE_PAUSE, (cid, text)))

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        cid = check_conversation_id(conversation_id)
        row = await self._run("load_pause", cid, lambda conn: conn.execute(_LOAD_PAUSE, (cid,)).fetchone())
        return None if row is None else decode_pause(row[0], f"of conversation {cid!r}")

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run."""
        cid = check_conversation_id(conversation_id)
        await self._run("clear_pause", cid, lambda conn: conn.execute(_CLEAR_PAUSE, (cid,)))

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Load and forget the conversation's paused run (only the one with ``pause_id``), in
        one write transaction: the compare and the delete hold the file's write lock."""
        cid = check_conversation_id(conversation_id)
        wanted = None if pause_id is None else check_pause_id(pause_id)

        def take(conn: sqlite3.Connection) -> Any:
            conn.execute("BEGIN IMMEDIATE")
            row = conn.execute(_LOAD_PAUSE, (cid,)).fetchone()
            if row is not None and wanted is not None and stored_pause_id(row[0]) != wanted:
                row = None  # a newer pause: leave it
            if row is not None:
                conn.execute(_CLEAR_PAUSE, (cid,))
            conn.execute("COMMIT")
            return row

        row = await self._run("take_pause", cid, take)
        return None if row is None else decode_pause(row[0], f"of conversation {cid!r}")

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed; True the first time only (a primary key decides)."""
        pid = check_pause_id(pause_id)
        inserted: int = await self._run("claim_pause", None, lambda conn: conn.execute(_CLAIM, (pid,)).rowcount)
        return inserted == 1

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts`` in one transaction, each replacing the user's fact on its subject."""
        uid = check_user_id(user_id)
        checked = check_facts(facts)
        if not checked:
            return

        def write(conn: sqlite3.Connection) -> None:
            conn.execute("BEGIN IMMEDIATE")
            conn.executemany(_DELETE_FACT, [(uid, fact.subject) for fact in checked])
            conn.executemany(_INSERT_FACT, [(uid, fact.subject, fact.text) for fact in checked])
            conn.execute("COMMIT")

        await self._run(f"save_facts for user {uid!r}", None, write)

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        uid = check_user_id(user_id)
        rows = await self._run(
            f"load_facts for user {uid!r}", None, lambda conn: conn.execute(_LOAD_FACTS, (uid,)).fetchall()
        )
        return [Fact(subject, text) for subject, text in rows]

    async def clear_facts(self, user_id: str) -> None:
        """Forget the user's facts."""
        uid = check_user_id(user_id)
        await self._run(f"clear_facts for user {uid!r}", None, lambda conn: conn.execute(_CLEAR_FACTS, (uid,)))

    async def aclose(self) -> None:
        """Close the connection and stop the worker thread (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            executor = self._executor
        if executor is None:
            return

        def close() -> None:
            conn = self._conn
            self._conn = None
            if conn is not None:
                conn.close()

        await asyncio.get_running_loop().run_in_executor(executor, close)
        executor.shutdown(wait=False)
