"""The test servers (``_servers.py``) when the gate runs sessions side by side: a port that
another process takes between its choice and the bind is retried on a new one, and a server
of another session already on that port never passes for the one being started."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from _support import free_port, require
from memory import _servers

pytestmark = pytest.mark.services


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _first_port(monkeypatch: pytest.MonkeyPatch, taken: int) -> list[int]:
    """The servers' next port choice is ``taken``, then free ones; returns the ports handed out."""
    handed: list[int] = []
    queue: Iterator[int] = iter([taken])

    def choose() -> int:
        port = next(queue, None) or free_port()
        handed.append(port)
        return port

    monkeypatch.setattr(_servers, "free_port", choose)
    return handed


@contextmanager
def _held_port() -> Iterator[int]:
    """A port this test listens on, so no server can bind it."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        yield holder.getsockname()[1]


def _redis_ping(port: int) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"CLIENT ID\r\n")
        return sock.recv(64)


def test_redis_on_a_port_another_redis_holds_starts_on_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    require(_servers.redis_binary() is not None, "redis-server is not installed; apt-get install redis-server")
    with _servers.redis_server() as first:
        held = _port(first)
        handed = _first_port(monkeypatch, held)
        with _servers.redis_server() as second:
            assert handed[0] == held
            assert len(handed) == 2
            assert _port(second) == handed[1] != held
            assert _redis_ping(_port(second)).startswith(b":")
        assert _redis_ping(held).startswith(b":")  # the other session's server is untouched


def test_postgres_on_a_taken_port_starts_on_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    require(_servers.postgres_bindir() is not None, "PostgreSQL is not installed; apt-get install postgresql")
    with _held_port() as held:
        handed = _first_port(monkeypatch, held)
        with _servers.postgres_server() as url:
            assert handed[0] == held
            assert url == f"postgresql://beamfilter@127.0.0.1:{handed[1]}/postgres"


def test_a_port_taken_every_time_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    require(_servers.redis_binary() is not None, "redis-server is not installed; apt-get install redis-server")
    with _held_port() as held:
        monkeypatch.setattr(_servers, "free_port", lambda: held)
        with pytest.raises(RuntimeError, match=r"^redis-server exited with 1:\n") as caught, _servers.redis_server():
            pass
        assert "Address already in use" in str(caught.value)
