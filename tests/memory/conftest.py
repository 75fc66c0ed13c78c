"""Real PostgreSQL and Redis servers for the memory tests, started once per session on 127.0.0.1.

PostgreSQL comes from /usr/lib/postgresql/*/bin (initdb + postgres into a temp dir, run as
``nobody`` when the tests run as root, since postgres refuses root); Redis from
``redis-server`` on PATH. Missing binaries skip locally and fail in CI (``require``).
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from _support import free_port, require

from beamfilter_memory import ChatStore, InMemoryStore, SQLiteStore

STORE_KINDS = ("memory", "sqlite", "postgres", "redis")


def _pg_bin() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def _as_service_user(argv: list[str]) -> list[str]:
    """Run ``argv`` as ``nobody`` when we are root (postgres will not run as root)."""
    if os.geteuid() != 0:
        return argv
    return ["runuser", "-u", "nobody", "--", *argv]


def _wait_for(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        if check():
            return
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not start within 30 s:\n{log.read_text(errors='replace')[-3000:]}")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL cluster on a free port; yields its URL (database ``postgres``)."""
    bindir = _pg_bin()
    require(
        bindir is not None,
        "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres); apt-get install postgresql",
    )
    assert bindir is not None
    root = Path(tempfile.mkdtemp(prefix="beamfilter-pg-"))
    data = root / "data"
    log = root / "postgres.log"
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "nobody")
            os.chmod(root, 0o700)
        subprocess.run(
            _as_service_user(
                [
                    str(bindir / "initdb"),
                    "-D",
                    str(data),
                    "-U",
                    "beamfilter",
                    "-A",
                    "trust",
                    "-E",
                    "UTF8",
                    "--no-sync",
                    "--locale=C.UTF-8",
                ]
            ),
            check=True,
            capture_output=True,
        )
        port = free_port()
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                _as_service_user(
                    [
                        str(bindir / "postgres"),
                        "-D",
                        str(data),
                        "-p",
                        str(port),
                        "-h",
                        "127.0.0.1",
                        "-k",
                        str(root),
                        "-c",
                        "fsync=off",
                        "-c",
                        "max_connections=200",
                        "-c",
                        "shared_buffers=64MB",
                    ]
                ),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        url = f"postgresql://beamfilter@127.0.0.1:{port}/postgres"

        def ready() -> bool:
            return (
                subprocess.run(
                    [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)], capture_output=True
                ).returncode
                == 0
            )

        try:
            _wait_for(ready, "postgres", proc, log)
            yield url
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def redis_url() -> Iterator[str]:
    """A fresh redis-server on a free port (no persistence); yields its URL."""
    binary = shutil.which("redis-server")
    require(binary is not None, "redis-server is not installed; apt-get install redis-server")
    assert binary is not None
    root = Path(tempfile.mkdtemp(prefix="beamfilter-redis-"))
    log = root / "redis.log"
    port = free_port()
    try:
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [
                    binary,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(root),
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

        def ready() -> bool:
            import socket

            try:
                with socket.create_connection(("127.0.0.1", port), timeout=0.5) as sock:
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        try:
            _wait_for(ready, "redis-server", proc, log)
            yield f"redis://127.0.0.1:{port}/0"
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


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
        raise AssertionError(kind)

    return make


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest, make_store: Callable[..., ChatStore]) -> AsyncIterator[ChatStore]:
    """One store of each kind (parametrised), closed after the test."""
    made = make_store(request.param)
    try:
        yield made
    finally:
        await made.aclose()
