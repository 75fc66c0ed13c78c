"""tools/llmock_upstream.py: the llmock the tests and bench_serve start, and its [model] table.

The port-taken-by-another-llmock case is in tests/peers/test_peer_ports.py; here a port held
by a plain socket, a process that never comes up, and the config text.
"""

from __future__ import annotations

import socket
import tomllib
from pathlib import Path

import httpx
import llmock_upstream
import pytest

pytestmark = pytest.mark.peers


def test_the_model_table_points_an_openai_model_at_the_servers_v1() -> None:
    table = tomllib.loads(llmock_upstream.model_table("http://127.0.0.1:9"))
    assert table == {
        "model": {
            "use": "openai",
            "model": "gpt-4o-mini",
            "base_url": "http://127.0.0.1:9/v1",
            "api_key": "llmock-key",
            "max_retries": 0,
        }
    }
    assert tomllib.loads(llmock_upstream.model_table("http://h:1", "k"))["model"]["api_key"] == "k"


def test_a_port_held_by_another_process_is_retried_then_given_up_with_the_count(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        held = holder.getsockname()[1]
        handed: list[int] = []

        def choose() -> int:
            handed.append(held)
            return held

        with pytest.raises(llmock_upstream.LLMockDidNotStart) as caught:
            llmock_upstream.start(tmp_path / "llmock.log", choose_port=choose, attempts=2)
    assert str(caught.value) == "llmock did not start: the port it was given was taken 2 times"
    assert handed == [held, held]
    assert "address already in use" in (tmp_path / "llmock.log").read_text().lower()


def test_a_process_that_exits_is_reported_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(llmock_upstream.LLMockDidNotStart) as caught:
        llmock_upstream.start(tmp_path / "llmock.log", env={"LLMOCK_RESPONSE_STYLE": "no-such-style"})
    message = str(caught.value)
    assert message.startswith("llmock did not start:\n")
    assert message.endswith("ValueError: LLMOCK_RESPONSE_STYLE must be one of: echo, hello, static, varied.")


def test_it_serves_until_stopped_and_its_output_is_in_the_log(tmp_path: Path) -> None:
    mock = llmock_upstream.start(tmp_path / "llmock.log")
    try:
        assert httpx.get(mock.url + "/_llmock/scenario", timeout=10).json() == {"pending": []}
        assert any(f"Uvicorn running on {mock.url}" in line for line in mock.output)
    finally:
        mock.stop()
    assert mock.process.returncode is not None
    with pytest.raises(httpx.ConnectError):
        httpx.get(mock.url + "/_llmock/scenario", timeout=2)
