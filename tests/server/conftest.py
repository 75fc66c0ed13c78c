"""Fixtures of the gateway tests: llmock (PyPI) as the upstream model for the session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from peers._peer import Peer, llmock_running
from peers.conftest import aimock  # noqa: F401  # the aimock peer, for the upstream tests
from server._serve import API_KEY, OTHER_KEY, PAUSE_KEY, REVIEWER_KEY, WRONG_KEY, Gateway, shop_config, start

pytest.importorskip("beamfilter_server")


@pytest.fixture(scope="session")
def llmock() -> Iterator[Peer]:
    """llmock on a free port, scripted per test through /_llmock/scenario."""
    with llmock_running() as peer:
        yield peer


@pytest.fixture(scope="session")
def tools_gateway(llmock: Peer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """The gateway of the tests: server tools (one sensitive), memory, tool_policy, approval
    and redact; its log must never show a key."""
    folder = tmp_path_factory.mktemp("tools")
    config = shop_config(
        folder,
        llmock.url,
        f"""
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
        server="max_body_bytes = 20000\nmax_messages = 8\nmax_answer_chars = 400\n",
        tools=("lookup_order", "refund"),
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
