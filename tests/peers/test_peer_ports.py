"""llmock is started on a port chosen beforehand (its CLI takes no ephemeral port): when
another session's llmock already holds that port, the new one starts on another port and
the old one is never taken for it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from _support import free_port
from peers import _peer

pytestmark = pytest.mark.peers


def test_llmock_on_a_port_another_llmock_holds_starts_on_a_new_one(monkeypatch: pytest.MonkeyPatch) -> None:
    with _peer.llmock_running() as first:
        held = int(first.url.rsplit(":", 1)[1])
        handed: list[int] = []
        queue: Iterator[int] = iter([held])

        def choose() -> int:
            handed.append(next(queue, None) or free_port())
            return handed[-1]

        monkeypatch.setattr(_peer, "free_port", choose)
        first.post("/_llmock/scenario", {"behaviors": [{"type": "reply", "text": "from the first"}]})
        with _peer.llmock_running() as second:
            assert handed[0] == held
            assert second.url == f"http://127.0.0.1:{handed[1]}"
            assert second.get("/_llmock/scenario") == {"pending": []}  # a fresh server, not the first
        assert first.get("/_llmock/scenario")["pending"] != []  # the first one is untouched
