"""``postgresql://...``: a shared store for many workers (psycopg 3 async + a pool)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from beamfilter_core import Message, PauseState, mask_credentials
from beamfilter_core.errors import ConfigError, StoreError

from ._base import (
    KEEP_PAUSE,
    Fact,
    PauseChange,
    check_append,
    check_conversation_id,
    check_facts,
    check_limit,
    check_loop,
    check_pause_id,
    check_user_id,
    decode_all,
    decode_pause,
    encode_pause,
    store_failure,
)

if TYPE_CHECKING:
    from psycopg import AsyncConnection
    from psycopg_pool import AsyncConnectionPool

T = TypeVar("T")

_PREFIX = re.compile(r"^[a-z_][a-z0-9_]*$")
# Any constant: serialises schema creation by several workers starting at once.
_MIGRATE_LOCK = 7_262_021_901


def _schema(prefix: str) -> str:
    return f"""
CREATE TABLE IF NOT EXISTS {prefix}messages (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conversation_id TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS {prefix}messages_conversation ON {prefix}messages (conversation_id, seq);
CREATE TABLE IF NOT EXISTS {prefix}pauses (
    conversation_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS {prefix}facts (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id TEXT NOT NULL,
    subject TEXT NOT NULL,
    text TEXT NOT NULL,
    UNIQUE (user_id, subject)
);
CREATE INDEX IF NOT EXISTS {prefix}facts_user ON {prefix}facts (user_id, seq);
CREATE TABLE IF NOT EXISTS {prefix}resumed (
    pause_id TEXT PRIMARY KEY
);
"""


class PostgresStore:
    """Conversations in PostgreSQL, shared by every worker that uses the same database.

    Tables (``<prefix>messages``, ``<prefix>pauses``) are created on first use, or ahead
    of time by :meth:`migrate`. Messages are ordered by an identity sequence, never by
    timestamps. Each :meth:`append` is one transaction that first takes a per-conversation
    advisory lock, so two workers appending to one conversation never interleave.

    Args:
        url: a libpq URL, ``postgresql://user:pass@host:5432/db`` (``postgres://`` too).
        min_size, max_size: connection pool bounds.
        prefix: table name prefix (``[a-z_][a-z0-9_]*``), default ``beamfilter_``.
        timeout: seconds to wait for a pooled connection.

    Example::

        store = PostgresStore("postgresql://app@db/chats", max_size=20)
        await store.migrate()
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        prefix: str = "beamfilter_",
        timeout: float = 30.0,
    ) -> None:
        if not url.startswith(("postgresql://", "postgres://")):
            msg = f"PostgreSQL store URL {mask_credentials(url)!r} is invalid; write postgresql://user:password@host:port/database."
            raise ConfigError(msg)
        if not isinstance(prefix, str) or not _PREFIX.match(prefix):
            msg = f"PostgresStore(prefix={prefix!r}) is invalid; use lower-case letters, digits and '_'."
            raise ConfigError(msg)
        for name, value in (("min_size", min_size), ("max_size", max_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "min_size" else 1):
                msg = f"PostgresStore({name}={value!r}) is invalid; give a positive integer."
                raise ConfigError(msg)
        if min_size > max_size:
            msg = f"PostgresStore(min_size={min_size}) is larger than max_size={max_size}."
            raise ConfigError(msg)
        self.url = url
        self.prefix = prefix
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = float(timeout)
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._opening: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._migrated = False
        self._closed = False
        p = prefix
        self._load_all = f"SELECT data FROM {p}messages WHERE conversation_id = %s ORDER BY seq"
        self._load_last = (
            f"SELECT data FROM (SELECT seq, data FROM {p}messages WHERE conversation_id = %s "
            "ORDER BY seq DESC LIMIT %s) AS tail ORDER BY seq"
        )
        self._insert = f"INSERT INTO {p}messages (conversation_id, data) VALUES (%s, %s)"
        self._save_pause = (
            f"INSERT INTO {p}pauses (conversation_id, data) VALUES (%s, %s) "
            "ON CONFLICT (conversation_id) DO UPDATE SET data = EXCLUDED.data"
        )
        self._clear_pause = f"DELETE FROM {p}pauses WHERE conversation_id = %s"
        self._load_pause = f"SELECT data FROM {p}pauses WHERE conversation_id = %s"
        self._clear = f"DELETE FROM {p}messages WHERE conversation_id = %s"
        self._take_pause = f"DELETE FROM {p}pauses WHERE conversation_id = %s RETURNING data"
        # compare-and-swap on the pause id, in one statement
        self._take_pause_id = (
            f"DELETE FROM {p}pauses WHERE conversation_id = %s AND (data::jsonb ->> 'pause_id') = %s RETURNING data"
        )
        self._claim = f"INSERT INTO {p}resumed (pause_id) VALUES (%s) ON CONFLICT (pause_id) DO NOTHING"
        # A replaced fact is deleted and inserted again: its new seq makes it the most recent.
        self._delete_facts = f"DELETE FROM {p}facts WHERE user_id = %s AND subject = ANY(%s)"
        self._insert_fact = f"INSERT INTO {p}facts (user_id, subject, text) VALUES (%s, %s, %s)"
        self._load_facts = f"SELECT subject, text FROM {p}facts WHERE user_id = %s ORDER BY seq"
        self._clear_facts = f"DELETE FROM {p}facts WHERE user_id = %s"

    def __repr__(self) -> str:
        return f"PostgresStore({mask_credentials(self.url)!r})"

    async def _get_pool(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        pool = self._pool
        if pool is not None and self._migrated:
            check_loop(self, self._loop)
            return pool
        if self._closed:
            msg = f"{self!r} is closed; open a new store (stores cannot be reopened)."
            raise StoreError(msg)
        if self._opening is None:
            self._loop = check_loop(self, None)
            self._opening = asyncio.Lock()
        else:
            check_loop(self, self._loop)
        async with self._opening:
            if self._pool is None:
                try:
                    from psycopg_pool import AsyncConnectionPool
                except ImportError as exc:
                    msg = "PostgresStore needs psycopg and psycopg-pool: pip install 'beamfilter-memory[postgres]'."
                    raise ConfigError(msg) from exc
                new_pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
                    self.url, min_size=self.min_size, max_size=self.max_size, timeout=self.timeout, open=False
                )
                try:
                    await new_pool.open(wait=True, timeout=self.timeout)
                except Exception as exc:
                    await new_pool.close()
                    raise store_failure(repr(self), "connecting", None, exc) from exc
                self._pool = new_pool
            if not self._migrated:
                await self._migrate(self._pool)
            return self._pool

    async def _migrate(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
                await conn.execute(_schema(self.prefix))
        except Exception as exc:
            raise store_failure(repr(self), "creating the schema", None, exc) from exc
        self._migrated = True

    async def migrate(self) -> None:
        """Create the tables and index if they do not exist (safe to run from many workers)."""
        pool = await self._get_pool()
        await self._migrate(pool)

    async def _with(self, action: str, cid: str | None, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        pool = await self._get_pool()
        try:
            async with pool.connection() as conn:
                return await fn(conn)
        except StoreError:
            raise
        except Exception as exc:
            from psycopg import Error
            from psycopg_pool import PoolTimeout

            if isinstance(exc, Error | PoolTimeout):
                raise store_failure(repr(self), action, cid, exc) from exc
            raise

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order (the last ``limit``, never starting on a tool result)."""
        cid = check_conversation_id(conversation_id)
        limit = check_limit(limit)

        async def read(conn: AsyncConnection[Any]) -> list[str]:
            if limit is None:
                cursor = await conn.execute(self._load_all, (cid,))
            else:
                cursor = await conn.execute(self._load_last, (cid, limit))
            return [row[0] for row in await cursor.fetchall()]

        rows = await self._with("load", cid, read)
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

        async def write(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                # Appends to one conversation take turns, so their sequence numbers never interleave.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (cid,))
                if rows:
                    async with conn.cursor() as cursor:
                        await cursor.executemany(self._insert, rows)
                if change is None:
                    await conn.execute(self._clear_pause, (cid,))
                elif change is not KEEP_PAUSE:
                    await conn.execute(self._save_pause, (cid, change))

        await self._with("append", cid, write)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation and its pause state (one transaction)."""
        cid = check_conversation_id(conversation_id)

        async def write(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (cid,))
                await conn.execute(self._clear, (cid,))
                await conn.execute(self._clear_pause, (cid,))

        await self._with("clear", cid, write)

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store the conversation's paused run."""
        cid = check_conversation_id(conversation_id)
        text = encode_pause(pause)

        async def write(conn: AsyncConnection[Any]) -> None:
            await conn.execute(self._save_pause, (cid, text))

        await self._with("save_pause", cid, write)

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        cid = check_conversation_id(conversation_id)

        async def read(conn: AsyncConnection[Any]) -> Any:
            cursor = await conn.execute(self._load_pause, (cid,))
            return await cursor.fetchone()

        row = await self._with("load_pause", cid, read)
        return None if row is None else decode_pause(row[0], f"of conversation {cid!r}")

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run."""
        cid = check_conversation_id(conversation_id)

        async def write(conn: AsyncConnection[Any]) -> None:
            await conn.execute(self._clear_pause, (cid,))

        await self._with("clear_pause", cid, write)

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Load and forget the conversation's paused run (only the one with ``pause_id``), in
        one ``DELETE ... RETURNING``."""
        cid = check_conversation_id(conversation_id)
        wanted = None if pause_id is None else check_pause_id(pause_id)

        async def take(conn: AsyncConnection[Any]) -> Any:
            if wanted is None:
                cursor = await conn.execute(self._take_pause, (cid,))
            else:
                cursor = await conn.execute(self._take_pause_id, (cid, wanted))
            return await cursor.fetchone()

        row = await self._with("take_pause", cid, take)
        return None if row is None else decode_pause(row[0], f"of conversation {cid!r}")

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed; True the first time only (a primary key decides)."""
        pid = check_pause_id(pause_id)

        async def claim(conn: AsyncConnection[Any]) -> int:
            cursor = await conn.execute(self._claim, (pid,))
            return cursor.rowcount

        return await self._with("claim_pause", None, claim) == 1

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts`` in one transaction, each replacing the user's fact on its subject."""
        uid = check_user_id(user_id)
        checked = check_facts(facts)
        if not checked:
            return

        async def write(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                # Saves for one user take turns, so two workers never both insert one subject.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (uid,))
                await conn.execute(self._delete_facts, (uid, [fact.subject for fact in checked]))
                async with conn.cursor() as cursor:
                    await cursor.executemany(self._insert_fact, [(uid, f.subject, f.text) for f in checked])

        await self._with(f"save_facts for user {uid!r}", None, write)

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        uid = check_user_id(user_id)

        async def read(conn: AsyncConnection[Any]) -> list[Any]:
            cursor = await conn.execute(self._load_facts, (uid,))
            return await cursor.fetchall()

        rows = await self._with(f"load_facts for user {uid!r}", None, read)
        return [Fact(subject, text) for subject, text in rows]

    async def clear_facts(self, user_id: str) -> None:
        """Forget the user's facts."""
        uid = check_user_id(user_id)

        async def write(conn: AsyncConnection[Any]) -> None:
            await conn.execute(self._clear_facts, (uid,))

        await self._with(f"clear_facts for user {uid!r}", None, write)

    async def aclose(self) -> None:
        """Close the pool (idempotent)."""
        self._closed = True
        pool = self._pool
        self._pool = None
        if pool is not None:
            await pool.close()
