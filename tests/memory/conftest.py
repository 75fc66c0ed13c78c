"""Real PostgreSQL and Redis servers for the memory tests, started once per session on 127.0.0.1
(see ``_servers.py``). Missing binaries skip locally and fail in CI (``require``).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from _support import require
from memory._servers import postgres_url, redis_binary, redis_server  # noqa: F401  # postgres_url: a fixture of these tests

from beamfilter_core import Registry, StaticEntryPoint
from beamfilter_memory import ChatStore, InMemoryStore, SQLiteStore, open_store

# The third-party store of docs/stores.md (examples/beamfilter-files), reached the way a
# config reaches it: through its plugin's StoreSpec, by URL scheme.
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "beamfilter-files" / "src"))
THIRD_PARTY = Registry(
    entry_points=[StaticEntryPoint("files", "beamfilter_files", "beamfilter-files", "0.1.0")], environ={}
)

STORE_KINDS = ("memory", "sqlite", "postgres", "redis", "files")


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A fresh redis-server on a free port (no persistence); yields its URL."""
    require(redis_binary() is not None, "redis-server is not installed; apt-get install redis-server")
    with redis_server() as url:
        yield url


@pytest.fixture
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., ChatStore]:
    """``make_store(kind, **options)``: a new store of ``kind`` on fresh data (closed by the test)."""
    suffix = uuid.uuid4().hex[:10]

    def make(kind: str, **options: object) -> ChatStore:
        if kind == "memory":
            return InMemoryStore()
        if kind == "sqlite":
            return SQLiteStore(f"sqlite:///{tmp_path / 'memory.db'}", **options)  # type: ignore[arg-type]
        if kind == "postgres":
            from beamfilter_memory import PostgresStore

            url = request.getfixturevalue("postgres_url")
            return PostgresStore(url, prefix=options.pop("prefix", f"t{suffix}_"), **options)  # type: ignore[arg-type]
        if kind == "redis":
            from beamfilter_memory import RedisStore

            url = request.getfixturevalue("redis_url")
            return RedisStore(url, prefix=options.pop("prefix", f"t{suffix}:"), **options)  # type: ignore[arg-type]
        if kind == "files":
            return open_store(f"files://{tmp_path / ('files-' + suffix)}", registry=THIRD_PARTY)
        raise AssertionError(kind)

    return make


@pytest.fixture
async def fresh_store(kind: str, make_store: Callable[..., ChatStore]) -> AsyncIterator[ChatStore]:
    """A store of the kind the test is parametrised with (``kind``), closed after the test."""
    made = make_store(kind)
    try:
        yield made
    finally:
        await made.aclose()


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, make_store: Callable[..., ChatStore]) -> AsyncIterator[ChatStore]:
    """One store of each kind (parametrised), closed after the test."""
    made = make_store(request.param)
    try:
        yield made
    finally:
        await made.aclose()
