"""Helpers of the peer tests: where the peers live and how to talk to their control APIs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support import free_port

HERE = Path(__file__).parent
AIMOCK_CLI = HERE / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
AIMOCK_FIXTURES = HERE / "aimock_fixtures.json"
#: aimock answers 401 to any other key.
AIMOCK_KEY = "beam-test-key"
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


class Peer:
    """A running peer: its process, root URL and captured output."""

    def __init__(
        self, name: str, process: subprocess.Popen[str], url: str, output: list[str], headers: dict[str, str]
    ) -> None:
        self.name = name
        self.headers = headers
        self.process = process
        self.url = url
        self.base_url = url + "/v1"
        self.output = output

    def get(self, path: str, **params: Any) -> Any:
        response = httpx.get(self.url + path, params=params, headers=self.headers, timeout=10)
        response.raise_for_status()
        return response.json() if "json" in response.headers.get("content-type", "") else response.text

    def post(self, path: str, body: Any = None) -> Any:
        response = httpx.post(self.url + path, json=body, headers=self.headers, timeout=10)
        response.raise_for_status()
        return response.json()

    def delete(self, path: str) -> Any:
        response = httpx.delete(self.url + path, headers=self.headers, timeout=10)
        response.raise_for_status()
        return response.json()


def _drain(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line.rstrip("\n"))


def _start(name: str, argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], list[str]]:
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=HERE)
    output: list[str] = []
    threading.Thread(target=_drain, args=(process.stdout, output), name=f"{name}-output", daemon=True).start()
    return process, output


def _stop(process: subprocess.Popen[str]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(5)
    if process.stdout is not None:
        process.stdout.close()


def _says(process: subprocess.Popen[str], output: list[str], text: str, seconds: float) -> bool:
    """Whether ``process`` printed a line holding ``text`` before it exited or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(text in line for line in list(output)):
            return True
        if process.poll() is not None:
            time.sleep(0.2)  # the last lines may still be on their way to ``output``
            return any(text in line for line in list(output))
        time.sleep(0.05)
    return False


@contextmanager
def llmock_running(attempts: int = 3) -> Iterator[Peer]:
    """llmock (PyPI) on a free port, scripted per test through ``/_llmock/scenario``.

    Its CLI cannot listen on an ephemeral port, so the port is chosen first: one that another
    process takes before llmock binds it (test sessions run side by side) is retried on a new
    one. It is up when it says so itself (uvicorn's "running on" line), never because
    something else answered on the port.
    """
    code = "import sys; from llmock.cli import app; sys.exit(app())"
    for _ in range(attempts):
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-c", code, "serve", "-h", "127.0.0.1", "-p", str(port), "--log-level", "info"]
        process, output = _start("llmock", argv, {**os.environ, "NO_COLOR": "1"})
        # generous: a loaded machine starts it slowly
        if _says(process, output, f"Uvicorn running on {url}", 120) and process.poll() is None:
            break
        _stop(process)
        if not any("address already in use" in line.lower() for line in output):
            pytest.fail("llmock did not start:\n" + "\n".join(output))
    else:
        pytest.fail(f"llmock did not start: the port it was given was taken {attempts} times")
    try:
        yield Peer("llmock", process, url, output, {})
    finally:
        _stop(process)
