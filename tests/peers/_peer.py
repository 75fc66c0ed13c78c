"""Helpers of the peer tests: where the peers live and how to talk to their control APIs."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import llmock_upstream
import pytest
from _support import free_port, require, stop_process

HERE = Path(__file__).parent
AIMOCK_CLI = HERE / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
AIMOCK_FIXTURES = HERE / "aimock_fixtures.json"
#: The npm filesystem MCP server (``npm ci`` in tests/peers installs it).
FILESYSTEM = HERE / "node_modules" / ".bin" / "mcp-server-filesystem"
#: aimock answers 401 to any other key.
AIMOCK_KEY = "beam-test-key"
_LISTENING = re.compile(r"listening on (http://127\.0\.0\.1:\d+)")


def filesystem_tools(root: str | Path, *include: str, **keys: str | list[str]) -> str:
    """The ``[[tools]]`` table of a config that serves ``root`` with the filesystem MCP
    server: only the tools named ``include`` (all when none), then ``keys`` as more keys of
    the table (``prefix="fs_"``, ``sensitive=["write_*"]``, ``cwd="..."``)."""
    lines = ["[[tools]]", 'use = "mcp"', f"command = {json.dumps([str(FILESYSTEM), str(root)])}"]
    if include:
        lines.append(f"include = {json.dumps(list(include))}")
    lines += [f"{key} = {json.dumps(value)}" for key, value in keys.items()]
    return "\n".join(lines) + "\n"


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
    stop_process(process, grace=10)
    if process.stdout is not None:
        process.stdout.close()


@contextmanager
def aimock_running(name: str, fixtures: Path, *, key: str | None) -> Iterator[Peer]:
    """aimock (npm) on an ephemeral port serving ``fixtures``; with ``key`` it answers only
    requests carrying it (as the Peer's control calls do), without one it takes any request.
    Stopped when the block ends."""
    node = shutil.which("node")
    require(
        node is not None, "node is not installed; the aimock peer tests need Node >= 20 (apt-get install nodejs npm)"
    )
    require(AIMOCK_CLI.exists(), f"aimock is not installed at {AIMOCK_CLI}; run ./run setup (npm ci in tests/peers)")
    assert node is not None
    argv = [node, str(AIMOCK_CLI), "-p", "0", "-h", "127.0.0.1", "-f", str(fixtures), "--log-level", "info"]
    env = {k: v for k, v in os.environ.items() if k != "AIMOCK_API_KEYS"}
    process, output = _start(name, argv, env if key is None else {**env, "AIMOCK_API_KEYS": key})
    try:
        deadline = time.monotonic() + 120  # generous: a loaded machine starts node slowly
        url = None
        while url is None:
            found = [m for line in list(output) if (m := _LISTENING.search(line))]
            if found:
                url = found[0].group(1)
            elif process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("aimock did not start:\n" + "\n".join(output))
            else:
                time.sleep(0.05)
        yield Peer(name, process, url, output, {} if key is None else {"Authorization": f"Bearer {key}"})
    finally:
        _stop(process)


@contextmanager
def llmock_running() -> Iterator[Peer]:
    """llmock (PyPI) on a free port, scripted per test through ``/_llmock/scenario``; started
    by ``tools/llmock_upstream.py`` (a port another process takes first is retried on a new one)."""
    with tempfile.TemporaryDirectory(prefix="llmock-") as folder:
        try:
            mock = llmock_upstream.start(Path(folder) / "llmock.log", choose_port=free_port)
        except llmock_upstream.LLMockDidNotStart as error:
            pytest.fail(str(error))
        try:
            yield Peer("llmock", mock.process, mock.url, mock.output, {})
        finally:
            mock.stop()
