"""Third-party OpenAI-compatible servers for the peer tests, started on 127.0.0.1.

- aimock (``@copilotkit/aimock``, npm, pinned in ``package.json``/``package-lock.json``)
  replays the fixtures in ``aimock_fixtures.json``; it listens on an ephemeral port.
- llmock (PyPI, pinned in ``requirements-test.txt``) is scripted per test through its
  ``/_llmock/scenario`` API and grades our retry behaviour at ``/_llmock/verdict``.

Both run as child processes for the whole session and are stopped at the end. In CI
(``CI=true``) a missing node or aimock fails instead of skipping.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from peers._peer import AIMOCK_FIXTURES, AIMOCK_KEY, Peer, aimock_running, llmock_running


@pytest.fixture(scope="session")
def aimock() -> Iterator[Peer]:
    """aimock on an ephemeral port, with the fixtures of ``aimock_fixtures.json``."""
    with aimock_running("aimock", AIMOCK_FIXTURES, key=AIMOCK_KEY) as peer:
        yield peer


@pytest.fixture(scope="session")
def llmock_server() -> Iterator[Peer]:
    """llmock on a free port, quiet logs."""
    with llmock_running() as peer:
        yield peer
