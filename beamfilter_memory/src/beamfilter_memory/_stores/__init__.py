"""The stores of the memory filter: one module per backend, opened by URL."""

from __future__ import annotations

from typing import Any

from beamfilter_core import mask_credentials
from beamfilter_core.errors import ConfigError

from ._base import ChatStore

SCHEMES: dict[str, str] = {
    "memory": "memory://",
    "sqlite": "sqlite:///path.db",
    "postgresql": "postgresql://user:password@host:5432/database",
    "postgres": "postgres://user:password@host:5432/database",
    "redis": "redis://host:6379/0",
    "rediss": "rediss://host:6380/0",
    "unix": "unix:///path/to/redis.sock",
}


def open_store(url: str, **options: Any) -> ChatStore:
    """Build the store a URL names; nothing connects until the store is first used.

    ``memory://`` (in-process), ``sqlite:///path.db`` (the embedded default),
    ``postgresql://...`` and ``redis://...``. ``options`` go to the store class
    (e.g. ``ttl=3600`` for Redis, ``max_size=20`` for PostgreSQL).

    Example::

        store = open_store("sqlite:///chats.db")
    """
    if not isinstance(url, str):
        msg = f"open_store(url={url!r}) needs a URL str such as 'sqlite:///chats.db' or 'memory://'."
        raise ConfigError(msg)
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    try:
        if scheme == "memory":
            from ._memory import InMemoryStore

            return InMemoryStore(url, **options)
        if scheme == "sqlite":
            from ._sqlite import SQLiteStore

            return SQLiteStore(url, **options)
        if scheme in ("postgresql", "postgres"):
            from ._postgres import PostgresStore

            return PostgresStore(url, **options)
        if scheme in ("redis", "rediss", "unix"):
            from ._redis import RedisStore

            return RedisStore(url, **options)
    except TypeError as exc:  # an option the store does not take
        shown = mask_credentials(url)
        msg = f"open_store({shown!r}) got options it does not accept ({', '.join(sorted(options))}): {exc}"
        raise ConfigError(msg) from exc
    known = ", ".join(SCHEMES.values())
    msg = f"No memory store for the URL {mask_credentials(url)!r} (scheme {scheme!r}); use one of: {known}."
    raise ConfigError(msg)


async def migrate(url: str, **options: Any) -> str:
    """Create the tables of the store a URL names, ahead of a deployment (idempotent).

    SQLite and PostgreSQL create their tables; ``memory://`` and Redis need none. Returns
    a one-line description of what was done. This is what ``beamfilter memory migrate URL``
    runs.

    Example::

        asyncio.run(migrate("postgresql://app@db/chats"))
    """
    store = open_store(url, **options)
    try:
        run = getattr(store, "migrate", None)
        if run is None:
            return f"{store!r}: nothing to migrate (this store has no schema)."
        await run()
        return f"{store!r}: schema is up to date."
    finally:
        await store.aclose()
