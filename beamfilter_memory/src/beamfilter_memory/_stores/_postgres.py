"""``postgresql://...``: a shared store for many workers (psycopg 3 async + a pool)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from beamfilter_core import StoreSpec, mask_credentials
from beamfilter_core.errors import ConfigError

from ._base import KEEP_PAUSE, Fact, _Keep, check_loop, store_failure
from ._store import StoreBase

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
CREATE TABLE IF NOT EXISTS {prefix}pause_outcomes (
    pause_id TEXT PRIMARY KEY,
    data TEXT NOT NULL
);
"""


class PostgresStore(StoreBase):
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

    has_schema = True

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
        super().__init__(url)
        self.prefix = prefix
        self.min_size = min_size
        self.max_size = max_size
        self.timeout = float(timeout)
        self._pool: AsyncConnectionPool[AsyncConnection[Any]] | None = None
        self._opening: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._migrated = False
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
        self._take_any = f"DELETE FROM {p}pauses WHERE conversation_id = %s RETURNING data"
        self._lock_pause = f"SELECT data FROM {p}pauses WHERE conversation_id = %s FOR UPDATE"
        self._claim_id = f"INSERT INTO {p}resumed (pause_id) VALUES (%s) ON CONFLICT (pause_id) DO NOTHING"
        self._list_pauses_query = f"SELECT conversation_id, data FROM {p}pauses ORDER BY conversation_id LIMIT %s"
        self._put_outcome_query = (
            f"INSERT INTO {p}pause_outcomes (pause_id, data) VALUES (%s, %s) "
            "ON CONFLICT (pause_id) DO UPDATE SET data = EXCLUDED.data"
        )
        self._first_outcome = (
            f"INSERT INTO {p}pause_outcomes (pause_id, data) VALUES (%s, %s) ON CONFLICT (pause_id) DO NOTHING"
        )
        self._delete_outcome = f"DELETE FROM {p}pause_outcomes WHERE pause_id = %s"
        self._get_outcome_query = f"SELECT data FROM {p}pause_outcomes WHERE pause_id = %s"
        # A replaced fact is deleted and inserted again: its new seq makes it the most recent.
        self._delete_facts = f"DELETE FROM {p}facts WHERE user_id = %s AND subject = ANY(%s)"
        self._insert_fact = f"INSERT INTO {p}facts (user_id, subject, text) VALUES (%s, %s, %s)"
        self._select_facts = f"SELECT subject, text FROM {p}facts WHERE user_id = %s ORDER BY seq"
        self._delete_all_facts = f"DELETE FROM {p}facts WHERE user_id = %s"

    async def _get_pool(self) -> AsyncConnectionPool[AsyncConnection[Any]]:
        pool = self._pool
        if pool is not None and self._migrated:
            check_loop(self, self._loop)
            return pool
        if self._opening is None:
            self._loop = check_loop(self, None)
            self._opening = asyncio.Lock()
        else:
            check_loop(self, self._loop)
        async with self._opening:
            if self._closed:
                raise self._closed_error()
            if self._pool is None:
                try:
                    from psycopg import AsyncConnection
                    from psycopg_pool import AsyncConnectionPool
                except ImportError as exc:
                    msg = "PostgresStore needs psycopg and psycopg-pool: pip install 'beamfilter-memory[postgres]'."
                    raise ConfigError(msg) from exc
                new_pool: AsyncConnectionPool[AsyncConnection[Any]] = AsyncConnectionPool(
                    self.url, min_size=self.min_size, max_size=self.max_size, timeout=self.timeout, open=False
                )
                try:
                    # One connection of our own first: a refused or unknown server fails at
                    # once with the driver's reason, where the pool would retry for
                    # `timeout` seconds and then say only that it timed out.
                    probe = await asyncio.wait_for(AsyncConnection.connect(self.url), self.timeout)
                    await probe.close()
                    await new_pool.open(wait=True, timeout=self.timeout)
                except Exception as exc:
                    await new_pool.close()
                    raise store_failure(repr(self), "connecting", None, exc) from exc
                self._pool = new_pool
            if not self._migrated:
                await self._create_schema(self._pool)
            return self._pool

    async def _create_schema(self, pool: AsyncConnectionPool[AsyncConnection[Any]]) -> None:
        try:
            async with pool.connection() as conn, conn.transaction():
                await conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATE_LOCK,))
                await conn.execute(_schema(self.prefix))
        except Exception as exc:
            raise store_failure(repr(self), "creating the schema", None, exc) from exc
        self._migrated = True

    async def _with(self, fn: Callable[[AsyncConnection[Any]], Awaitable[T]]) -> T:
        pool = await self._get_pool()
        async with pool.connection() as conn:
            return await fn(conn)

    async def _fetch(self, query: str, params: tuple[Any, ...]) -> list[Any]:
        async def fetch(conn: AsyncConnection[Any]) -> list[Any]:
            cursor = await conn.execute(query, params)
            return await cursor.fetchall()

        return await self._with(fetch)

    # -- primitives -----------------------------------------------------------------------

    async def _migrate(self) -> None:
        await self._create_schema(await self._get_pool())

    async def _read(self, cid: str, limit: int | None) -> list[str]:
        if limit is None:
            rows = await self._fetch(self._load_all, (cid,))
        else:
            rows = await self._fetch(self._load_last, (cid, limit))
        return [row[0] for row in rows]

    async def _write(self, cid: str, rows: Sequence[str], pause: str | _Keep | None, *, clear: bool = False) -> None:
        async def write(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                # Writes to one conversation take turns, so their sequence numbers never interleave.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (cid,))
                if clear:
                    await conn.execute(self._clear, (cid,))
                if rows:
                    async with conn.cursor() as cursor:
                        await cursor.executemany(self._insert, [(cid, text) for text in rows])
                if pause is None:
                    await conn.execute(self._clear_pause, (cid,))
                elif pause is not KEEP_PAUSE:
                    await conn.execute(self._save_pause, (cid, pause))

        await self._with(write)

    async def _read_pause(self, cid: str) -> str | None:
        rows = await self._fetch(self._load_pause, (cid,))
        return rows[0][0] if rows else None

    async def _take_pause(self, cid: str, pause_id: str | None) -> str | None:
        if pause_id is None:  # one DELETE ... RETURNING
            rows = await self._fetch(self._take_any, (cid,))
            return rows[0][0] if rows else None

        # Compare-and-swap: the row is locked from the compare to the delete; a second taker
        # waits, then finds the row gone. The id is compared in Python, so a corrupt row is
        # left in place like in every store (a jsonb cast in SQL would fail on it).
        async def take(conn: AsyncConnection[Any]) -> str | None:
            async with conn.transaction():
                cursor = await conn.execute(self._lock_pause, (cid,))
                row = await cursor.fetchone()
                if row is None or self.pause_id_of(row[0]) != pause_id:
                    return None
                await conn.execute(self._clear_pause, (cid,))
                return row[0]  # type: ignore[no-any-return]

        return await self._with(take)

    async def _claim(self, pause_id: str) -> bool:
        async def claim(conn: AsyncConnection[Any]) -> bool:
            cursor = await conn.execute(self._claim_id, (pause_id,))
            return cursor.rowcount == 1  # the primary key decides

        return await self._with(claim)

    async def _list_pauses(self, limit: int | None) -> list[tuple[str, str]]:
        rows = await self._fetch(self._list_pauses_query, (limit,))  # LIMIT NULL is no limit
        return [(row[0], row[1]) for row in rows]

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        async def write(conn: AsyncConnection[Any]) -> bool:
            if text is None:
                await conn.execute(self._delete_outcome, (pause_id,))
                return True
            cursor = await conn.execute(self._first_outcome if first else self._put_outcome_query, (pause_id, text))
            return cursor.rowcount == 1  # the primary key decides

        return await self._with(write)

    async def _get_outcome(self, pause_id: str) -> str | None:
        rows = await self._fetch(self._get_outcome_query, (pause_id,))
        return rows[0][0] if rows else None

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        async def write(conn: AsyncConnection[Any]) -> None:
            async with conn.transaction():
                # Saves for one user take turns, so two workers never both insert one subject.
                await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (uid,))
                await conn.execute(self._delete_facts, (uid, [fact.subject for fact in facts]))
                async with conn.cursor() as cursor:
                    await cursor.executemany(self._insert_fact, [(uid, f.subject, f.text) for f in facts])

        await self._with(write)

    async def _load_facts(self, uid: str) -> list[tuple[str, str]]:
        return await self._fetch(self._select_facts, (uid,))

    async def _clear_facts(self, uid: str) -> None:
        async def write(conn: AsyncConnection[Any]) -> None:
            await conn.execute(self._delete_all_facts, (uid,))

        await self._with(write)

    async def _close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            await pool.close()


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "min_size": {"type": "integer", "minimum": 0},
        "max_size": {"type": "integer", "minimum": 1},
        "prefix": {"type": "string", "pattern": "^[a-z_][a-z0-9_]*$"},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
}

SPEC = StoreSpec(
    "postgresql",
    PostgresStore,
    ("postgresql", "postgres"),
    OPTIONS,
    "PostgreSQL shared by many workers (extra: postgres).",
)
