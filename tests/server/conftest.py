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
from peers.conftest import aimock  # noqa: F401  # the aimock peer, for the upstream tests
from server._serve import API_KEY, OTHER_KEY, PAUSE_KEY, REVIEWER_KEY, WRONG_KEY, Gateway, shop_config, start

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


@pytest.fixture(scope="session")
def tools_gateway(llmock: Peer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The gateway of the tests: server tools (one sensitive), memory, tool_policy, approval
    and redact; its log must never show a key."""
    folder = tmp_path_factory.mktemp("tools")
    config = shop_config(
        folder,
        llmock.url,
        f"""
        max_body_bytes = 20000
        max_messages = 8
        max_answer_chars = 400

        [[tools]]
        use = "shop:lookup_order"

        [[tools]]
        use = "shop:refund"
        sensitive = ["refund"]

        [[filters]]
        use = "memory"
        store = "sqlite:///{folder / "chats.db"}"

        [[filters]]
        use = "tool_policy"
        rules = [{{ tool = "delete_*", kind = "deny", reason = "accounts are deleted by support only" }}]

        [[filters]]
        use = "approval"

        [[filters]]
        use = "redact"
        """,
    )
    served = start(config, env={"BF_TEST_PAUSE_KEY": PAUSE_KEY})
    yield served
    assert served.stop() in (0, -15)  # uvicorn exits by the signal it handled
    log = served.output
    assert "Application shutdown complete." in log
    assert API_KEY not in log
    assert OTHER_KEY not in log
    assert REVIEWER_KEY not in log
    assert WRONG_KEY not in log
