"""``redis://...``: a shared store for many workers (redis-py asyncio, one list per conversation)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from beamfilter_core import StoreSpec, mask_credentials
from beamfilter_core.errors import ConfigError, StoreError

from ._base import KEEP_PAUSE, Fact, _Keep, check_loop
from ._store import StoreBase

if TYPE_CHECKING:
    from redis.asyncio import Redis


# Compare-and-delete: take the pause only if its JSON has the wanted pause_id.
_TAKE_IF_ID = """
local text = redis.call('GET', KEYS[1])
if not text then return false end
local ok, data = pcall(cjson.decode, text)
if ok and type(data) == 'table' and data['pause_id'] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('SREM', KEYS[2], ARGV[2])
  return text
end
return false
"""


class RedisStore(StoreBase):
    """Conversations in Redis: one list per conversation plus one key for its pause state.

    Keys are ``<prefix><conversation_id>:messages`` and ``<prefix><conversation_id>:pause``
    (the set ``<prefix>paused_conversations`` names the conversations with a pause, and
    ``<prefix>outcome:<pause_id>`` keeps a decided pause's outcome);
    the long-term facts of a user are one hash ``<prefix><user_id>:facts`` (subject ->
    order and text) plus its counter ``<prefix><user_id>:facts_seq``. Facts are durable:
    ``ttl`` applies to conversations only.
    Each :meth:`append` is one ``MULTI``/``EXEC`` transaction (the ``RPUSH`` of all its
    messages, the pause change and the TTL refresh), so no reader or crash ever sees half
    of it. With ``ttl`` (seconds) a conversation expires that long after its last write.

    Args:
        url: ``redis://host:6379/0`` (``rediss://`` for TLS, ``unix://`` for a socket).
        prefix: key prefix, default ``beamfilter:``.
        ttl: seconds a conversation is kept after its last write, or None (forever).

    Example::

        store = RedisStore("redis://localhost:6379/0", ttl=7 * 24 * 3600)
    """

    def __init__(self, url: str, *, prefix: str = "beamfilter:", ttl: int | None = None) -> None:
        if not url.startswith(("redis://", "rediss://", "unix://")):
            msg = f"Redis store URL {mask_credentials(url)!r} is invalid; write redis://host:port/db (or rediss://, unix://)."
            raise ConfigError(msg)
        if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0):
            msg = f"RedisStore(ttl={ttl!r}) is invalid; give whole seconds > 0, or None to keep forever."
            raise ConfigError(msg)
        if not isinstance(prefix, str):
            msg = f"RedisStore(prefix={prefix!r}) is invalid; give a str such as 'beamfilter:'."
            raise ConfigError(msg)
        super().__init__(url)
        self.prefix = prefix
        self.ttl = ttl
        self._client: Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"RedisStore({mask_credentials(self.url)!r}, prefix={self.prefix!r}, ttl={self.ttl!r})"

    def _redis(self) -> Redis:
        client = self._client
        if client is not None:
            check_loop(self, self._loop)
            return client
        if self._closed:
            raise self._closed_error()
        try:
            from redis.asyncio import Redis
        except ImportError as exc:
            msg = "RedisStore needs redis-py: pip install 'beamfilter-memory[redis]'."
            raise ConfigError(msg) from exc
        self._loop = check_loop(self, None)
        client = self._client = Redis.from_url(self.url)
        return client

    def _keys(self, cid: str) -> tuple[str, str]:
        prefix = self.prefix
        return f"{prefix}{cid}:messages", f"{prefix}{cid}:pause"

    @property
    def _paused(self) -> str:
        return f"{self.prefix}paused_conversations"

    def _fact_keys(self, uid: str) -> tuple[str, str]:
        prefix = self.prefix
        return f"{prefix}{uid}:facts", f"{prefix}{uid}:facts_seq"

    # -- primitives -----------------------------------------------------------------------

    async def _read(self, cid: str, limit: int | None) -> list[bytes]:
        rows: list[bytes] = await self._redis().lrange(self._keys(cid)[0], 0 if limit is None else -limit, -1)  # type: ignore[assignment]
        return rows

    async def _write(self, cid: str, rows: Sequence[str], pause: str | _Keep | None, *, clear: bool = False) -> None:
        messages_key, pause_key = self._keys(cid)
        ttl = self.ttl
        async with self._redis().pipeline(transaction=True) as pipe:
            if clear:
                pipe.delete(messages_key)
            if rows:
                pipe.rpush(messages_key, *rows)
            if pause is None:
                pipe.delete(pause_key)
                pipe.srem(self._paused, cid)
            elif pause is not KEEP_PAUSE:
                pipe.set(pause_key, pause)  # KEEP_PAUSE is ruled out above
                pipe.sadd(self._paused, cid)
            if ttl is not None:
                pipe.expire(messages_key, ttl)
                pipe.expire(pause_key, ttl)
            await pipe.execute()

    async def _read_pause(self, cid: str) -> bytes | None:
        text: Any = await self._redis().get(self._keys(cid)[1])
        return text  # type: ignore[no-any-return]

    async def _take_pause(self, cid: str, pause_id: str | None) -> bytes | None:
        # GETDEL; with a pause id, a Lua script that compares and deletes in one atomic step
        client, key = self._redis(), self._keys(cid)[1]
        if pause_id is None:
            async with client.pipeline(transaction=True) as pipe:
                pipe.getdel(key)
                pipe.srem(self._paused, cid)
                text: Any = (await pipe.execute())[0]
        else:
            text = await client.eval(_TAKE_IF_ID, 2, key, self._paused, pause_id, cid)
        return text or None

    async def _list_pauses(self, limit: int | None) -> list[tuple[str, bytes]]:
        client = self._redis()
        members: Any = await client.smembers(self._paused)
        cids = sorted(m.decode() if isinstance(m, bytes) else m for m in members)
        if not cids:
            return []
        texts: Any = await client.mget([self._keys(cid)[1] for cid in cids])
        found = [(cid, text) for cid, text in zip(cids, texts, strict=True) if text is not None]
        gone = [cid for cid, text in zip(cids, texts, strict=True) if text is None]
        if gone:  # pauses whose conversation expired (ttl): drop them from the set
            await client.srem(self._paused, *gone)
        return found if limit is None else found[:limit]

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        client, key = self._redis(), f"{self.prefix}outcome:{pause_id}"
        if text is None:
            await client.delete(key)
            return True
        return bool(await client.set(key, text, nx=first, ex=self.ttl))

    async def _get_outcome(self, pause_id: str) -> bytes | None:
        text: Any = await self._redis().get(f"{self.prefix}outcome:{pause_id}")
        return text  # type: ignore[no-any-return]

    async def _claim(self, pause_id: str) -> bool:
        # SET NX: only the first claim sets the key
        return bool(await self._redis().set(f"{self.prefix}resumed:{pause_id}", b"1", nx=True))

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        facts_key, seq_key = self._fact_keys(uid)
        client = self._redis()
        # Reserve one order number per fact first (INCRBY is atomic across workers).
        last = int(await client.incrby(seq_key, len(facts)))
        first = last - len(facts) + 1
        mapping = {
            fact.subject: json.dumps([first + index, fact.text], ensure_ascii=False) for index, fact in enumerate(facts)
        }
        await client.hset(facts_key, mapping=mapping)  # type: ignore[arg-type]

    async def _load_facts(self, uid: str) -> list[tuple[str, str]]:
        raw: Any = await self._redis().hgetall(self._fact_keys(uid)[0])
        rows: list[tuple[int, str, str]] = []
        for subject, value in raw.items():
            name = subject.decode() if isinstance(subject, bytes) else subject
            try:
                seq, text = json.loads(value)
            except (ValueError, TypeError) as exc:
                msg = f"Cannot read the stored fact {name!r} of user {uid!r} in {self!r}: {exc}"
                raise StoreError(msg) from exc
            rows.append((int(seq), name, str(text)))
        rows.sort()
        return [(name, text) for _, name, text in rows]

    async def _clear_facts(self, uid: str) -> None:
        await self._redis().delete(*self._fact_keys(uid))

    async def _close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "prefix": {"type": "string"},
        "ttl": {"type": ["integer", "null"], "minimum": 1},
    },
    "additionalProperties": False,
}

SPEC = StoreSpec(
    "redis",
    RedisStore,
    ("redis", "rediss", "unix"),
    OPTIONS,
    "Redis shared by many workers, optional TTL (extra: redis).",
)
