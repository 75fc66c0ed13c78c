"""Fixtures of the gateway tests: llmock (PyPI) as the upstream model for the session."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator

import httpx
import pytest
from _support import free_port
from peers._peer import Peer, _start, _stop

pytest.importorskip("beamfilter_server")


@pytest.fixture(scope="session")
def llmock() -> Iterator[Peer]:
    """llmock on a free port, scripted per test through /_llmock/scenario."""
    port = free_port()
    argv = [
        sys.executable,
        "-c",
        "import sys; from llmock.cli import app; sys.exit(app())",
        "serve",
        "-h",
        "127.0.0.1",
        "-p",
        str(port),
        "--log-level",
        "warning",
    ]
    process, output = _start("llmock", argv, {**os.environ, "NO_COLOR": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/_llmock/scenario", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail("llmock did not start:\n" + "\n".join(output))
            time.sleep(0.1)
        yield Peer("llmock", process, url, output, {})
    finally:
        _stop(process)
