"""``redis://...``: a shared store for many workers (redis-py asyncio, one list per conversation)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

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
    from redis.asyncio import Redis


# Compare-and-delete: take the pause only if its JSON has the wanted pause_id.
_TAKE_IF_ID = """
local text = redis.call('GET', KEYS[1])
if not text then return false end
local ok, data = pcall(cjson.decode, text)
if ok and type(data) == 'table' and data['pause_id'] == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return text
end
return false
"""


class RedisStore:
    """Conversations in Redis: one list per conversation plus one key for its pause state.

    Keys are ``<prefix><conversation_id>:messages`` and ``<prefix><conversation_id>:pause``;
    the long-term facts of a user are one hash ``<prefix><user_id>:facts`` (subject ->
    order and text) plus its counter ``<prefix><user_id>:facts_seq``. Facts are durable:
    ``ttl`` applies to conversations only.
    Each :meth:`append` is one ``MULTI``/``EXEC`` transaction (the ``RPUSH`` of all its
    messages, the pause change and the TTL refresh), so no reader or crash ever sees half
    of it. With ``ttl`` (seconds) a conversation expires that long after its last append.

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
        self.url = url
        self.prefix = prefix
        self.ttl = ttl
        self._client: Redis | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"RedisStore({mask_credentials(self.url)!r}, prefix={self.prefix!r}, ttl={self.ttl!r})"

    def _redis(self) -> Redis:
        client = self._client
        if client is not None:
            check_loop(self, self._loop)
            return client
        if self._closed:
            msg = f"{self!r} is closed; open a new store (stores cannot be reopened)."
            raise StoreError(msg)
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

    def _failure(self, cid: str, action: str, exc: Exception) -> StoreError:
        return store_failure(repr(self), action, cid, exc)

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order (the last ``limit``, never starting on a tool result)."""
        cid = check_conversation_id(conversation_id)
        limit = check_limit(limit)
        key = self._keys(cid)[0]
        client = self._redis()
        try:
            rows: list[bytes | str] = await client.lrange(key, 0 if limit is None else -limit, -1)
        except Exception as exc:
            raise self._failure(cid, "load", exc) from exc
        return decode_all(rows, cid, limit is not None)

    async def append(
        self, conversation_id: str, messages: Sequence[Message], *, pause: PauseChange = KEEP_PAUSE
    ) -> None:
        """Store ``messages`` and the pause change in one MULTI/EXEC transaction."""
        checked = check_append(conversation_id, messages, pause)
        if checked is None:
            return
        cid, rows, change = checked
        messages_key, pause_key = self._keys(cid)
        ttl = self.ttl
        client = self._redis()
        try:
            async with client.pipeline(transaction=True) as pipe:
                if rows:
                    pipe.rpush(messages_key, *rows)
                if change is None:
                    pipe.delete(pause_key)
                elif change is not KEEP_PAUSE:
                    pipe.set(pause_key, change)
                if ttl is not None:
                    pipe.expire(messages_key, ttl)
                    pipe.expire(pause_key, ttl)
                await pipe.execute()
        except Exception as exc:
            raise self._failure(cid, "append", exc) from exc

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation and its pause state."""
        cid = check_conversation_id(conversation_id)
        client = self._redis()
        try:
            await client.delete(*self._keys(cid))
        except Exception as exc:
            raise self._failure(cid, "clear", exc) from exc

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store the conversation's paused run."""
        cid = check_conversation_id(conversation_id)
        text = encode_pause(pause)
        client = self._redis()
        try:
            await client.set(self._keys(cid)[1], text, ex=self.ttl)
        except Exception as exc:
            raise self._failure(cid, "save_pause", exc) from exc

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        cid = check_conversation_id(conversation_id)
        client = self._redis()
        try:
            text: Any = await client.get(self._keys(cid)[1])
        except Exception as exc:
            raise self._failure(cid, "load_pause", exc) from exc
        return None if text is None else decode_pause(text, f"of conversation {cid!r}")

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run."""
        cid = check_conversation_id(conversation_id)
        client = self._redis()
        try:
            await client.delete(self._keys(cid)[1])
        except Exception as exc:
            raise self._failure(cid, "clear_pause", exc) from exc

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Load and forget the conversation's paused run (``GETDEL``; with ``pause_id``, a
        Lua script that compares and deletes in one atomic step)."""
        cid = check_conversation_id(conversation_id)
        wanted = None if pause_id is None else check_pause_id(pause_id)
        client = self._redis()
        key = self._keys(cid)[1]
        try:
            if wanted is None:
                text: Any = await client.getdel(key)
            else:
                text = await client.eval(_TAKE_IF_ID, 1, key, wanted)
        except Exception as exc:
            raise self._failure(cid, "take_pause", exc) from exc
        return None if not text else decode_pause(text, f"of conversation {cid!r}")

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed (``SET NX``); True the first time only."""
        pid = check_pause_id(pause_id)
        client = self._redis()
        try:
            done: Any = await client.set(f"{self.prefix}resumed:{pid}", b"1", nx=True)
        except Exception as exc:
            raise store_failure(repr(self), f"claim_pause for pause {pid!r}", None, exc) from exc
        return bool(done)

    def _fact_keys(self, uid: str) -> tuple[str, str]:
        prefix = self.prefix
        return f"{prefix}{uid}:facts", f"{prefix}{uid}:facts_seq"

    def _fact_failure(self, uid: str, action: str, exc: Exception) -> StoreError:
        return store_failure(repr(self), f"{action} for user {uid!r}", None, exc)

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts`` in one MULTI/EXEC, each replacing the user's fact on its subject."""
        uid = check_user_id(user_id)
        checked = check_facts(facts)
        if not checked:
            return
        facts_key, seq_key = self._fact_keys(uid)
        client = self._redis()
        try:
            # Reserve one order number per fact first (INCRBY is atomic across workers).
            last = int(await client.incrby(seq_key, len(checked)))
            first = last - len(checked) + 1
            mapping = {
                fact.subject: json.dumps([first + index, fact.text], ensure_ascii=False)
                for index, fact in enumerate(checked)
            }
            async with client.pipeline(transaction=True) as pipe:
                pipe.hset(facts_key, mapping=mapping)  # type: ignore[arg-type]
                await pipe.execute()
        except Exception as exc:
            raise self._fact_failure(uid, "save_facts", exc) from exc

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        uid = check_user_id(user_id)
        client = self._redis()
        try:
            raw: Any = await client.hgetall(self._fact_keys(uid)[0])
        except Exception as exc:
            raise self._fact_failure(uid, "load_facts", exc) from exc
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
        return [Fact(name, text) for _, name, text in rows]

    async def clear_facts(self, user_id: str) -> None:
        """Forget the user's facts."""
        uid = check_user_id(user_id)
        client = self._redis()
        try:
            await client.delete(*self._fact_keys(uid))
        except Exception as exc:
            raise self._fact_failure(uid, "clear_facts", exc) from exc

    async def aclose(self) -> None:
        """Close the connection pool (idempotent)."""
        self._closed = True
        client = self._client
        self._client = None
        if client is not None:
            await client.aclose()
