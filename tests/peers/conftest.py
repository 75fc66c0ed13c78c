"""Third-party OpenAI-compatible servers for the peer tests, started on 127.0.0.1.

- aimock (``@copilotkit/aimock``, npm, pinned in ``package.json``/``package-lock.json``)
  replays the fixtures in ``aimock_fixtures.json``; it listens on an ephemeral port.
- llmock (PyPI, pinned in ``requirements-test.txt``) is scripted per test through its
  ``/_llmock/scenario`` API and grades our retry behaviour at ``/_llmock/verdict``.

Both run as child processes for the whole session and are stopped at the end. In CI
(``CI=true``) a missing node or aimock fails instead of skipping.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest
from _support import require
from peers._peer import _LISTENING, AIMOCK_CLI, AIMOCK_FIXTURES, AIMOCK_KEY, Peer, _start, _stop, llmock_running


@pytest.fixture(scope="session")
def aimock() -> Iterator[Peer]:
    """aimock on an ephemeral port, with the fixtures of ``aimock_fixtures.json``."""
    node = shutil.which("node")
    require(
        node is not None, "node is not installed; the aimock peer tests need Node >= 20 (apt-get install nodejs npm)"
    )
    require(AIMOCK_CLI.exists(), f"aimock is not installed at {AIMOCK_CLI}; run ./run setup (npm ci in tests/peers)")
    assert node is not None
    argv = [node, str(AIMOCK_CLI), "-p", "0", "-h", "127.0.0.1", "-f", str(AIMOCK_FIXTURES), "--log-level", "info"]
    process, output = _start("aimock", argv, {**os.environ, "AIMOCK_API_KEYS": AIMOCK_KEY})
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
        yield Peer("aimock", process, url, output, {"Authorization": f"Bearer {AIMOCK_KEY}"})
    finally:
        _stop(process)


@pytest.fixture(scope="session")
def llmock_server() -> Iterator[Peer]:
    """llmock on a free port, quiet logs."""
    with llmock_running() as peer:
        yield peer
