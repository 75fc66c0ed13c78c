"""SIGTERM: the gateway stops accepting connections, lets running streams finish up to
``shutdown_grace``, cuts those past it, then closes the kernel (its stores, MCP servers and
model connections) and exits."""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from llmock_upstream import model_table
from peers._peer import Peer, filesystem_tools
from peers.test_mcp import _children
from server._serve import API_KEY, Gateway, mcp_root, open_config, scenario, start

pytestmark = [pytest.mark.peers, pytest.mark.packages]


def _gateway(llmock: Peer, folder: Path, shutdown_grace: int, rest: str) -> Gateway:
    """A keyless gateway on llmock with this ``shutdown_grace`` and ``rest`` (tools, filters)."""
    return start(open_config(folder, model_table(llmock.url), f"shutdown_grace = {shutdown_grace}\n" + rest))


def test_sigterm_lets_a_running_stream_finish_then_closes(llmock: Peer, tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'chats.db'}"
    gateway = _gateway(llmock, tmp_path, 20, f'[[filters]]\nuse = "memory"\nstore = "{store}"\n')
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


def _read_until(lines: Iterator[str], events: list[str], text: str) -> None:
    for line in lines:
        if line.startswith("data: "):
            events.append(line[6:])
        if any(text in event for event in events):
            return


def test_sigterm_cuts_streams_past_the_grace_and_stops_the_mcp_server(llmock: Peer, tmp_path: Path) -> None:
    root = mcp_root(tmp_path, {"note.txt": "hello"})
    gateway = _gateway(llmock, tmp_path, 4, filesystem_tools(root, "read_*"))
    assert len(_children(str(root))) >= 1  # the MCP server was started with the gateway
    scenario(
        llmock,
        {"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 1},
        {"type": "reply", "text": "short answer that ends in time"},
        {"type": "stream_fault", "kind": "stall", "after_chunks": 2, "stall_seconds": 120},
        {"type": "reply", "text": "long answer that never ends"},
    )
    body = {"model": "assistant", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    short: list[str] = []
    long: list[str] = []
    with (
        httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=120) as first,
        httpx.stream("POST", gateway.url + "/v1/chat/completions", json=body, timeout=120) as second,
    ):
        short_lines, long_lines = first.iter_lines(), second.iter_lines()
        _read_until(short_lines, short, '"content":"short')
        _read_until(long_lines, long, '"content":"long')
        stopped = time.monotonic()
        gateway.process.send_signal(signal.SIGTERM)
        short.extend(line[6:] for line in short_lines if line.startswith("data: "))
        with contextlib.suppress(httpx.HTTPError):  # cut at the grace: the connection closes
            long.extend(line[6:] for line in long_lines if line.startswith("data: "))
        cut_after = time.monotonic() - stopped
    assert short[-1] == "[DONE]"
    assert "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in short[:-1]) == (
        "short answer that ends in time"
    )
    assert "[DONE]" not in long
    assert 3 <= cut_after < 60  # cut at shutdown_grace (4 s), not at the stall's end (120 s)
    assert gateway.stop(timeout=60) in (0, -15)
    log = gateway.output
    assert log.index("Shutting down") < log.index("gateway closed: its stores, toolsets and model connections")
    deadline = time.monotonic() + 10
    while _children(str(root)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _children(str(root)) == []  # the MCP server was closed with the kernel
