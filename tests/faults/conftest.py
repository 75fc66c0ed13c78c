"""Fixtures of the fault suite: the real peers and database servers of the other suites, reused.

llmock and aimock come from ``tests/peers/conftest.py``, PostgreSQL and Redis (and the
``make_store`` factory over them) from ``tests/memory/conftest.py``; importing their fixtures
here starts one more instance of each for this directory when the suites run together
(session scope is per definition).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from memory.conftest import make_store, postgres_url, redis_url
from peers._peer import Peer
from peers.conftest import aimock, llmock_server

__all__ = ["aimock", "llmock", "llmock_server", "make_store", "postgres_url", "redis_url"]


@pytest.fixture
def llmock(llmock_server: Peer) -> Iterator[Peer]:
    """llmock with no queued behaviour left over from another test."""
    llmock_server.delete("/_llmock/scenario")
    yield llmock_server
    llmock_server.delete("/_llmock/scenario")
