"""Start throwaway PostgreSQL and Redis servers on 127.0.0.1 (for the memory tests and bench).

PostgreSQL comes from /usr/lib/postgresql/*/bin (initdb + postgres into a temp dir, run as
``nobody`` when we are root, since postgres refuses root); Redis from ``redis-server``.
Both are stopped and their temp dirs removed when the ``with`` block ends.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import pytest
from _support import free_port, require, stop_process


def postgres_bindir() -> Path | None:
    """The newest installed PostgreSQL bin folder, or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    return Path(found[-1]).parent if found else None


def redis_binary() -> str | None:
    """The path of redis-server, or None."""
    return shutil.which("redis-server")


def _as_service_user(argv: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return argv
    # setpriv execs the server itself: signals reach it, not a wrapper that turns them into
    # a SIGKILL two seconds later (runuser's way)
    return ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups", *argv]


#: How long a server may take to answer: generous, a loaded machine starts them slowly.
_START_SECONDS = 120
#: Starts on a port another process took between its choice and the bind (test sessions run
#: side by side): retried on a new port this many times.
_PORT_ATTEMPTS = 3


_Found = TypeVar("_Found")


class _PortTaken(RuntimeError):
    """The server could not bind its port: another process has it."""


def _wait_for(check: Callable[[], bool], what: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _START_SECONDS
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = log.read_text(errors="replace")
            error = _PortTaken if "address already in use" in text.lower() else RuntimeError
            raise error(f"{what} exited with {proc.returncode}:\n{text[-3000:]}")
        if check():
            return
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"{what} did not start within {_START_SECONDS} s:\n{log.read_text(errors='replace')[-3000:]}")


def _spawn(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    """Start a server in a session of its own, its output to ``log``."""
    with open(log, "wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def _started(
    start: Callable[[int], subprocess.Popen[bytes]], ready: Callable[[int], bool], what: str, log: Path
) -> tuple[subprocess.Popen[bytes], int]:
    """Start a server on a free port and wait until it answers; a port taken meanwhile is retried."""
    for attempt in range(_PORT_ATTEMPTS):
        port = free_port()
        proc = start(port)
        try:
            _wait_for(functools.partial(ready, port), what, proc, log)
        except _PortTaken:
            if attempt + 1 == _PORT_ATTEMPTS:
                raise
            continue
        return proc, port
    raise AssertionError("unreachable")


@contextmanager
def _running(
    start: Callable[[int], subprocess.Popen[bytes]],
    ready: Callable[[int], bool],
    what: str,
    log: Path,
    stop: signal.Signals = signal.SIGTERM,
) -> Iterator[int]:
    """A server :func:`_started` on a free port, for the block; yields the port, then stops
    it with ``stop``."""
    proc, port = _started(start, ready, what, log)
    try:
        yield port
    finally:
        stop_process(proc, grace=15, stop=stop)


def _installed(found: _Found | None, missing: str) -> _Found:
    """What a lookup of a server's program ``found``; a RuntimeError saying ``missing`` when none."""
    if found is None:
        raise RuntimeError(missing)
    return found


@contextmanager
def _scratch(prefix: str) -> Iterator[Path]:
    """A new temp folder for one server's data, log and socket, removed after the block."""
    root = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[str]:
    """A fresh cluster on a free port; yields ``postgresql://beamfilter@127.0.0.1:PORT/postgres``."""
    bindir = _installed(postgres_bindir(), "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres)")
    with _scratch("beamfilter-pg-") as root:
        data = root / "data"
        log = root / "postgres.log"
        if os.geteuid() == 0:
            shutil.chown(root, "nobody")
            os.chmod(root, 0o700)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "beamfilter", "-A", "trust", "-E", "UTF8"]
        subprocess.run(_as_service_user([*initdb, "--no-sync", "--locale=C.UTF-8"]), check=True, capture_output=True)

        def start(port: int) -> subprocess.Popen[bytes]:
            argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(root)]
            argv += ["-c", f"fsync={'on' if fsync else 'off'}", "-c", "max_connections=200"]
            return _spawn(_as_service_user(argv), log)

        def ready(port: int) -> bool:
            # through the socket in our own folder: a server of another test session that holds
            # the port must not pass for ours
            probe = [str(bindir / "pg_isready"), "-h", str(root), "-p", str(port)]
            return subprocess.run(probe, capture_output=True).returncode == 0

        # SIGINT is PostgreSQL's fast shutdown: it ends the clients' sessions (a test's pool
        # may still hold some) where SIGTERM would wait for each to hang up
        with _running(start, ready, "postgres", log, stop=signal.SIGINT) as port:
            yield f"postgresql://beamfilter@127.0.0.1:{port}/postgres"


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server on a free port without persistence; yields ``redis://127.0.0.1:PORT/0``."""
    binary = _installed(redis_binary(), "redis-server is not installed")
    with _scratch("beamfilter-redis-") as root:
        log = root / "redis.log"
        unix = root / "redis.sock"

        def start(port: int) -> subprocess.Popen[bytes]:
            argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            argv += ["--dir", str(root), "--unixsocket", str(unix)]
            return _spawn(argv, log)

        def ready(_port: int) -> bool:
            # through the socket in our own folder, which only our server opens (after its port)
            try:
                with socket.socket(socket.AF_UNIX) as sock:
                    sock.settimeout(0.5)
                    sock.connect(str(unix))
                    sock.sendall(b"PING\r\n")
                    return sock.recv(16).startswith(b"+PONG")
            except OSError:
                return False

        with _running(start, ready, "redis-server", log) as port:
            yield f"redis://127.0.0.1:{port}/0"


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh PostgreSQL cluster on a free port, for the session; yields its URL (database
    ``postgres``). The memory, durable, fault and gateway tests import this fixture."""
    require(
        postgres_bindir() is not None,
        "PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres); apt-get install postgresql",
    )
    with postgres_server() as url:
        yield url
