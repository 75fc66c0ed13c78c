"""How the mcp toolset names a server and finds its program (no server is started)."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path

import pytest

from beamfilter_builtins._mcp import MCPToolset, _Stderr, find_program, short_name


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["/usr/local/bin/mcp-server-filesystem", "/home/eve/data"], "mcp-server-filesystem"),
        (
            ["npx", "-y", "@modelcontextprotocol/server-filesystem", "/home/eve"],
            "npx @modelcontextprotocol/server-filesystem",
        ),
        (["/opt/py/bin/python3.12", "-u", "/home/eve/srv/notes.py", "stdio"], "python3.12 notes.py"),
        (["uvx", "./tools/server.py"], "uvx server.py"),
        (["npx", "-y"], "npx"),
        (["node"], "node"),
    ],
)
def test_short_name_never_holds_the_whole_command_line(command: list[str], name: str) -> None:
    assert short_name(command) == name


def test_find_program(tmp_path: Path) -> None:
    script = tmp_path / "server.sh"
    script.write_text("#!/bin/sh\n")
    assert find_program("./server.sh", str(tmp_path)) is None  # not executable
    script.chmod(0o755)
    assert find_program("./server.sh", str(tmp_path)) == f"{tmp_path}/./server.sh"
    assert find_program(str(script), "/") == str(script)
    assert find_program("sh", str(tmp_path)) is not None  # on PATH
    assert find_program("no-such-program-29", str(tmp_path)) is None


def test_a_toolset_made_in_python_runs_in_the_current_folder_and_is_named_by_its_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    toolset = MCPToolset(command=[sys.executable, "server.py"])
    assert toolset.cwd == os.getcwd()
    assert toolset.name == f"{Path(sys.executable).name} server.py"
    assert toolset.label == repr(toolset.name)
    placed = MCPToolset(command=["srv"], cwd="sub", place="tools[2].command")
    assert placed.cwd == str(tmp_path / "sub")
    assert placed.label == "tools[2].command (srv)"
    assert MCPToolset(url="http://127.0.0.1:1/mcp").name == "http://127.0.0.1:1/mcp"


def test_stderr_lines_are_logged_with_the_place_and_the_last_ones_kept(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="beamfilter.mcp")
    stderr = _Stderr("tools[0].command")
    stderr.writer.write("starting\n\n   \n" + "".join(f"line {i}\n" for i in range(20)))
    stderr.writer.flush()
    lines = stderr.close(wait=5.0)
    assert lines == [f"line {i}" for i in range(8, 20)]  # the last twelve; blank lines skipped
    deadline = time.monotonic() + 5
    while len(caplog.records) < 21 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert caplog.messages[0] == "[tools[0].command] starting"
    assert len(caplog.messages) == 21
