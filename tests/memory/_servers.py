"""Start throwaway PostgreSQL and Redis servers on 127.0.0.1 (for the memory tests and bench).

PostgreSQL comes from /usr/lib/postgresql/*/bin (initdb + postgres into a temp dir, run as
``nobody`` when we are root, since postgres refuses root); Redis from ``redis-server``.
Both are stopped and their temp dirs removed when the ``with`` block ends.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


@contextmanager
def postgres_server(*, fsync: bool = False) -> Iterator[str]:
    """A fresh cluster on a free port; yields ``postgresql://beamfilter@127.0.0.1:PORT/postgres``."""
    bindir = postgres_bindir()
    if bindir is None:
        raise RuntimeError("PostgreSQL is not installed (/usr/lib/postgresql/*/bin/postgres)")
    root = Path(tempfile.mkdtemp(prefix="beamfilter-pg-"))
    data = root / "data"
    log = root / "postgres.log"
    try:
        if os.geteuid() == 0:
            shutil.chown(root, "nobody")
            os.chmod(root, 0o700)
        initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "beamfilter", "-A", "trust", "-E", "UTF8"]
        subprocess.run(_as_service_user([*initdb, "--no-sync", "--locale=C.UTF-8"]), check=True, capture_output=True)
        port = _free_port()
        argv = [str(bindir / "postgres"), "-D", str(data), "-p", str(port), "-h", "127.0.0.1", "-k", str(root)]
        argv += ["-c", f"fsync={'on' if fsync else 'off'}", "-c", "max_connections=200"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                _as_service_user(argv), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

        def ready() -> bool:
            probe = [str(bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)]
            return subprocess.run(probe, capture_output=True).returncode == 0

        try:
            _wait_for(ready, "postgres", proc, log)
            yield f"postgresql://beamfilter@127.0.0.1:{port}/postgres"
        finally:
            _stop(proc)
    finally:
        shutil.rmtree(root, ignore_errors=True)


@contextmanager
def redis_server() -> Iterator[str]:
    """A fresh redis-server on a free port without persistence; yields ``redis://127.0.0.1:PORT/0``."""
    binary = redis_binary()
    if binary is None:
        raise RuntimeError("redis-server is not installed")
    root = Path(tempfile.mkdtemp(prefix="beamfilter-redis-"))
    log = root / "redis.log"
    port = _free_port()
    try:
        argv = [binary, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        with open(log, "wb") as out:
            proc = subprocess.Popen(
                [*argv, "--dir", str(root)], stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

        def ready() -> bool:
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
