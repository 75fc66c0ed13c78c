"""Helpers shared by the test suites (importable as ``_support``)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import venv
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

if TYPE_CHECKING:
    from beamfilter_core import Tool

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip when ``condition`` is false locally; fail in CI (CI=true), where it must hold."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """An ephemeral TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run_clean(
    *args: str | Path,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    stdin: str | None = None,
    timeout: float = 600,
) -> subprocess.CompletedProcess[str]:
    """Run a command as a user's shell would: without this process's ``BEAMFILTER_*``,
    ``PYTHON*`` and ``MYPY*`` variables (plus ``env``); ``stdin`` as its input, output
    captured as text."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("BEAMFILTER_", "PYTHON", "MYPY"))}
    environ.update(env or {})
    return subprocess.run(
        [str(a) for a in args],
        input=stdin,
        capture_output=True,
        text=True,
        env=environ,
        cwd=cwd,
        timeout=timeout,
        check=False,
    )


def run_beamfilter(
    site: Path,
    *args: str | Path,
    stdin: str = "",
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run the ``beamfilter`` command (``python -m beamfilter_core``) with ``run_clean``:
    the modules in ``site`` importable (PYTHONPATH), ``stdin`` as its whole input (never
    the terminal), its output in UTF-8."""
    environ = {"PYTHONPATH": str(site), "PYTHONIOENCODING": "utf-8", **(env or {})}
    return run_clean(sys.executable, "-m", "beamfilter_core", *args, env=environ, cwd=cwd, stdin=stdin, timeout=120)


def fresh_venv(root: Path, packages: Sequence[Path]) -> Path:
    """A new venv in ``root/venv`` (no system site-packages) holding ``packages`` built as
    wheels, with pytest and anyio; returns its folder. pip resolves their dependencies from
    what ``./run setup`` already fetched (its cache or the configured index)."""
    wheels = root / "wheels"
    built = run_clean(sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", wheels, *packages)
    require(built.returncode == 0, f"building the wheels needs hatchling from the package index: {built.stderr[-500:]}")
    env_dir = root / "venv"
    venv.EnvBuilder(with_pip=False, system_site_packages=False).create(env_dir)
    # the running pip installs into the fresh environment (no ensurepip: faster)
    installed = run_clean(
        sys.executable, "-m", "pip", "--python", env_dir / "bin" / "python", "install", "-q",
        *sorted(wheels.glob("*.whl")), "pytest>=8", "anyio>=4",
    )  # fmt: skip
    require(installed.returncode == 0, f"pip install into the fresh venv failed: {installed.stderr[-500:]}")
    return env_dir


def errors_in_threads(target: Callable[[], object], count: int) -> list[BaseException]:
    """Run ``target`` in ``count`` threads at once and wait for them all; returns what each
    raised (an empty list when none did), for the test thread to assert on."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # noqa: BLE001  # handed to the test thread
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


_Server = TypeVar("_Server", bound=ThreadingHTTPServer)


@contextmanager
def http_server(
    handler: type[BaseHTTPRequestHandler],
    server_class: type[_Server] = ThreadingHTTPServer,  # type: ignore[assignment]
) -> Iterator[_Server]:
    """A small HTTP server of the test (``handler`` answering each request) on a free port of
    127.0.0.1, served from a thread for the block, then shut down and closed."""
    server = server_class(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def stop_process(process: subprocess.Popen[Any], grace: float, stop: signal.Signals = signal.SIGTERM) -> None:
    """Stop a server a test started: ``stop`` (SIGTERM), then SIGKILL if it has not exited
    within ``grace`` seconds (nothing when it has exited already)."""
    if process.poll() is None:
        process.send_signal(stop)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)


def slow_tool() -> tuple[Tool, asyncio.Event]:
    """A tool named ``slow`` and the event it sets when it starts: it then waits 10 s (long
    enough for a test to cancel the run first) and answers ``"late"``."""
    from beamfilter_core import tool  # here: the other helpers serve suites that do not import it

    started = asyncio.Event()

    @tool
    async def slow() -> str:
        """Slow."""
        started.set()
        await asyncio.sleep(10)
        return "late"

    return slow, started


def record_retry_waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Make the model providers' retry waits instant; returns the list of the waits they
    asked for, in order."""
    from beamfilter_core._models import _http

    waits: list[float] = []

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(_http, "_sleep", record)
    return waits
