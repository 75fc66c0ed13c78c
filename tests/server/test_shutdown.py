"""SIGTERM: the gateway stops accepting connections, lets a running stream finish, then
closes the kernel (its stores, toolsets and model connections) and exits."""

from __future__ import annotations

import json
import signal
import textwrap
import time
from pathlib import Path

import httpx
import pytest
from peers._peer import Peer
from server._serve import API_KEY, scenario, start, upstream

pytestmark = [pytest.mark.peers, pytest.mark.packages]


def test_sigterm_lets_a_running_stream_finish_then_closes(llmock: Peer, tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        upstream(llmock.url)
        + textwrap.dedent(
            f"""
            [server]
            model_name = "assistant"
            shutdown_grace = 20

            [[filters]]
            use = "memory"
            store = "sqlite:///{tmp_path / "chats.db"}"
            """
        )
    )
    gateway = start(config)
    scenario(
        llmock,
        {"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 2},
        {"type": "reply", "text": "one two three four five six seven eight"},
    )
    body = {"model": "assistant", "stream": True, "messages": [{"role": "user", "content": "count"}]}
    headers = {"Authorization": f"Bearer {API_KEY}", "Beamfilter-Conversation": "counting"}
    events: list[str] = []
    with httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, headers=headers, timeout=60) as stream:
        lines = stream.iter_lines()
        for line in lines:
            if line.startswith("data: "):
                events.append(line[6:])
            if any('"content":"one' in e for e in events):
                break
        gateway.process.send_signal(signal.SIGTERM)
        # a new client is turned away while the stream drains
        deadline = time.monotonic() + 20
        refused = False
        while time.monotonic() < deadline and not refused:
            try:
                httpx.get(gateway.url + "/healthz", timeout=2)
                time.sleep(0.05)
            except httpx.HTTPError:
                refused = True
        assert refused
        events.extend(line[6:] for line in lines if line.startswith("data: "))
    assert events[-1] == "[DONE]"
    text = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1])
    assert text == "one two three four five six seven eight"
    assert gateway.stop(timeout=30) in (0, -15)
    log = gateway.output
    assert log.index("Shutting down") < log.index("gateway closed: its stores, toolsets and model connections")
    assert "Application shutdown complete." in log
