"""A tool from an MCP server configured in the gateway's config runs inside the gateway,
under the tool chain: the client sees only the answer, the upstream model the tool's
result, and tool_policy decides on the MCP call as on any other."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from llmock_upstream import model_table
from peers._peer import Peer, filesystem_tools
from server._serve import API_KEY, Gateway, mcp_root, open_config, scenario, start

pytestmark = [pytest.mark.peers, pytest.mark.packages]


@pytest.fixture
def mcp_gateway(llmock: Peer, tmp_path: Path) -> Iterator[tuple[Gateway, Path]]:
    root = mcp_root(tmp_path, {"note.txt": "the meeting moved to Thursday", "secret.txt": "do not read"})
    config = open_config(
        tmp_path,
        model_table(llmock.url),
        filesystem_tools(root, "read_text_file", prefix="fs_")
        + textwrap.dedent(f"""
        [[filters]]
        use = "tool_policy"
        rules = [{{ tool = "fs_*", kind = "path", roots = ["{root}"], deny_paths = ["*secret*"] }}]
        """),
    )
    gateway = start(config)
    yield gateway, root
    gateway.stop()


def _read_file_turn(gateway: Gateway, llmock: Peer, path: Path, reply: str) -> tuple[str | None, list[Any]]:
    """One request whose model reads ``path`` with the MCP tool, then answers ``reply``:
    the answer the client got and the requests the upstream saw."""
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0)
    call = {"name": "fs_read_text_file", "arguments": {"path": str(path)}}
    scenario(llmock, {"type": "reply", "tool_calls": [call]}, {"type": "reply", "text": reply})
    llmock.delete("/_llmock/requests")
    answer = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "Read it"}])
    assert answer.choices[0].message.tool_calls is None  # the server's tool never reaches the client
    return answer.choices[0].message.content, llmock.get("/_llmock/requests")["requests"]


def test_an_mcp_tool_runs_inside_the_gateway_under_the_tool_chain(
    mcp_gateway: tuple[Gateway, Path], llmock: Peer
) -> None:
    gateway, root = mcp_gateway
    text, requests = _read_file_turn(gateway, llmock, root / "note.txt", "It moved to Thursday.")
    assert text == "It moved to Thursday."
    assert len(requests) == 2
    offered = [tool["function"]["name"] for tool in requests[0]["body"]["tools"]]
    assert offered == ["fs_read_text_file"]
    sent = requests[-1]["body"]["messages"]
    assert sent[-1]["role"] == "tool"
    assert "the meeting moved to Thursday" in sent[-1]["content"]


def test_tool_policy_denies_an_mcp_call_before_the_server_sees_it(
    mcp_gateway: tuple[Gateway, Path], llmock: Peer
) -> None:
    gateway, root = mcp_gateway
    text, requests = _read_file_turn(gateway, llmock, root / "secret.txt", "I may not read it.")
    assert text == "I may not read it."
    sent = requests[-1]["body"]["messages"]
    assert sent[-1]["role"] == "tool"
    assert "do not read" not in sent[-1]["content"]
    assert sent[-1]["content"].startswith("The call to 'fs_read_text_file' was denied by the tool policy")
