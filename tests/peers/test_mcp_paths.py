"""A relative path in a tool's arguments is judged where the tool resolves it.

The npm filesystem server resolves a relative path from its own folder (its cwd, the
config's folder by default); ``tool_policy`` must judge it from there, not from the first
root. These run the real server, from another current folder than the config's.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from _support import require
from peers._peer import FILESYSTEM, filesystem_tools

from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall

pytest.importorskip("mcp")
pytest.importorskip("beamfilter_builtins")

pytestmark = pytest.mark.peers


def _folder(tmp_path: Path) -> Path:
    require(FILESYSTEM.exists(), "server-filesystem is not installed; run ./run setup (npm ci in tests/peers)")
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "secret").mkdir()
    (project / "data" / "in.txt").write_text("inside")
    (project / "secret" / "outside.txt").write_text("the launch codes")
    return project


def _config(project: Path, calls: list[dict[str, Any]], **keys: str) -> Path:
    listed = ", ".join(
        f'{{ name = "{c["name"]}", arguments = {{ path = "{c["arguments"]["path"]}" }}, id = "{c["id"]}" }}'
        for c in calls
    )
    script = f'[{{ tool_calls = [{listed}] }}, "done"]'
    config = project / "beamfilter.toml"
    model = f'[model]\nuse = "scripted"\nscript = {script}\n\n'
    tools = filesystem_tools(".", "read_text_file", prefix="fs_", **keys)
    policy = '\n[[filters]]\nuse = "tool_policy"\nrules = [{ tool = "fs_*", kind = "path", roots = ["./data"] }]\n'
    config.write_text(model + tools + policy)
    return config


def _run(config: Path, cwd: Path) -> tuple[list[str], subprocess.CompletedProcess[str]]:
    done = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), "read", "--json"],
        capture_output=True, text=True, timeout=120, cwd=cwd, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)["messages"]
    return [m["content"] for m in messages if m["role"] == "tool"], done


def test_a_relative_path_outside_the_root_is_denied_where_the_server_resolves_it(tmp_path: Path) -> None:
    project = _folder(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = _config(
        project,
        [
            {"name": "fs_read_text_file", "arguments": {"path": "./secret/outside.txt"}, "id": "out"},
            {"name": "fs_read_text_file", "arguments": {"path": "./data/in.txt"}, "id": "in"},
            {"name": "fs_read_text_file", "arguments": {"path": "data/../secret/outside.txt"}, "id": "dotdot"},
        ],
    )
    results, done = _run(config, elsewhere)
    root = (project / "data").resolve()
    assert results == [
        "The call to 'fs_read_text_file' was denied by the tool policy (rules[0] path 'path'): the path resolves to "
        f"'{project.resolve()}/secret/outside.txt', outside the allowed roots ({root}). "
        "Do not retry it with the same arguments; choose another way or ask the user.",
        "inside",
        "The call to 'fs_read_text_file' was denied by the tool policy (rules[0] path 'path'): the path resolves to "
        f"'{project.resolve()}/secret/outside.txt', outside the allowed roots ({root}). "
        "Do not retry it with the same arguments; choose another way or ask the user.",
    ]
    assert "the launch codes" not in done.stdout
    # the server's banner (with its absolute folders) is not mixed into the command's output
    assert "Secure MCP Filesystem Server" not in done.stderr


def test_the_server_s_own_cwd_is_the_folder_a_relative_path_is_judged_from(tmp_path: Path) -> None:
    project = _folder(tmp_path)
    # the server runs in ./secret: "outside.txt" there is the secret, whatever the policy's roots say
    config = _config(
        project,
        [{"name": "fs_read_text_file", "arguments": {"path": "outside.txt"}, "id": "c1"}],
        cwd="secret",
    )
    results, _ = _run(config, tmp_path)
    assert results[0].startswith(
        "The call to 'fs_read_text_file' was denied by the tool policy (rules[0] path 'path'): the path resolves to "
        f"'{project.resolve()}/secret/outside.txt', outside the allowed roots"
    )


def test_a_tool_whose_folder_is_unknown_gets_relative_paths_denied_with_the_reason() -> None:
    from beamfilter_builtins import tool_policy_filter
    from beamfilter_core import Tool

    ran: list[str] = []

    async def read(path: str) -> str:
        ran.append(path)
        return "read"

    remote = Tool("read", "Read a file.", {"type": "object"}, read, is_async=True, workdir="")
    local = Tool("read_here", "Read a file.", {"type": "object"}, read, is_async=True)
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(
                ToolCall("read", {"path": "notes.txt"}, "c1"),
                ToolCall("read_here", {"path": "notes.txt"}, "c2"),
                ToolCall("read", {"path": "/srv/data/notes.txt"}, "c3"),
            ),
            "done",
        ]
    )
    policy = tool_policy_filter([{"tool": "read*", "kind": "path", "roots": ["/srv/data"]}])
    kernel = Kernel(model, tools=[remote, local], filters=[policy])
    asyncio.run(kernel.run("read"))
    texts = [m.text for m in model.requests[1].messages[-3:]]
    assert texts[0] == (
        "The call to 'read' was denied by the tool policy (rules[0] path 'path'): the relative path 'notes.txt' is "
        "resolved by the tool in a folder not known here (a remote server); give an absolute path. "
        "Do not retry it with the same arguments; choose another way or ask the user."
    )
    assert texts[1] == (
        "The call to 'read_here' was denied by the tool policy (rules[0] path 'path'): the relative path 'notes.txt' "
        "cannot be judged: the folder the tool resolves it in is not known (give the rule a base, or an absolute "
        "path). Do not retry it with the same arguments; choose another way or ask the user."
    )
    assert texts[2] == "read"
    assert ran == ["/srv/data/notes.txt"]


def test_cli_lines_say_why_a_server_s_call_failed_and_its_stderr_is_logged_with_its_place(tmp_path: Path) -> None:
    project = _folder(tmp_path)
    notes = Path(__file__).parent / "mcp_server.py"
    config = project / "beamfilter.toml"
    model = textwrap.dedent("""
        [model]
        use = "scripted"
        script = [{ tool_calls = [
          { name = "fs_read_text_file", arguments = { path = "./data/nothere.txt" }, id = "m" },
          { name = "die", arguments = {}, id = "d" },
        ] }, "done"]

        """)
    notes_tools = f'\n[[tools]]\nuse = "mcp"\ncommand = ["{sys.executable}", "{notes}", "stdio"]\ninclude = ["die"]\n'
    config.write_text(model + filesystem_tools(".", "read_text_file", prefix="fs_") + notes_tools)
    quiet = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), "go", "--log", "info"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert quiet.returncode == 0, quiet.stderr
    lines = quiet.stderr.splitlines()
    python = Path(sys.executable).name
    # a crashed server: its exit status (the notes server's die tool exits with 3)
    assert (
        f"[tool die: failed: ToolServerError: the MCP server '{python} mcp_server.py' exited with status 3 "
        "during 'die']" in lines
    )
    assert (
        "[tool fs_read_text_file: failed: ENOENT: no such file or directory, open "
        f"'{project.resolve()}/data/nothere.txt']" in lines
    )
    # the server's own lines are log records with its place, shown with --log info
    assert "INFO beamfilter.mcp: [tools[0].command] Secure MCP Filesystem Server running on stdio" in lines
    plain = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), "go"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert "Secure MCP Filesystem Server" not in plain.stderr
    assert plain.stdout == "done\n"
