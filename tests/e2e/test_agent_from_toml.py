"""End to end, a TOML file alone (no Python) gives an agent the real MCP filesystem server
(``@modelcontextprotocol/server-filesystem`` from npm), ``tool_policy`` denies a path
outside the root, a second ``tool_policy`` (``action = "pause"``, enabled under another
``name``) pauses a write for a human at the gate, the write tool is marked sensitive, and
``beamfilter run --trace`` shows each layer as the real command runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from _support import require
from peers._peer import FILESYSTEM, filesystem_tools

pytest.importorskip("mcp")
pytest.importorskip("beamfilter_builtins")

pytestmark = [pytest.mark.peers, pytest.mark.packages]

PAUSE_KEY = '[kernel]\npause_key = "e2e-pause-key-0123456789abcdef"\n'


def data_folder(tmp_path: Path) -> Path:
    """``tmp_path/data``, the folder the MCP filesystem server serves (``./data`` from the config)."""
    require(FILESYSTEM.exists(), "server-filesystem is not installed; run ./run setup (npm ci in tests/peers)")
    data = tmp_path / "data"
    data.mkdir()
    return data


def mcp_filesystem(*include: str, **keys: str) -> str:
    """The ``[[tools]]`` table of the filesystem server on ``./data``, its write tool marked sensitive."""
    return filesystem_tools("./data", *include, **keys, sensitive=["write_*"])


def model_writing(target: Path, then: str) -> str:
    """A scripted model that asks to write "hi" to ``target`` (call id w1), then answers ``then``."""
    call = f'{{ name = "write_file", arguments = {{ path = "{target}", content = "hi" }}, id = "w1" }}'
    return f'[model]\nuse = "scripted"\nscript = [{{ tool_calls = [{call}] }}, "{then}"]\n'


def write_config(tmp_path: Path, *sections: str) -> Path:
    """``tmp_path/beamfilter.toml`` made of ``sections`` (each dedented)."""
    config = tmp_path / "beamfilter.toml"
    config.write_text("\n".join(textwrap.dedent(section).strip() + "\n" for section in sections))
    return config


def python(config: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` in the config's folder, as a user's shell would run it."""
    return subprocess.run(
        [sys.executable, *args], input=stdin, capture_output=True, text=True, timeout=120, cwd=config.parent,
        check=False,
    )  # fmt: skip


def beamfilter_run(config: Path, prompt: str, *flags: str) -> subprocess.CompletedProcess[str]:
    """``beamfilter run CONFIG PROMPT FLAGS``."""
    return python(config, "-m", "beamfilter_core", "run", str(config), prompt, *flags)


def test_a_toml_file_alone_gives_an_agent_an_mcp_filesystem_with_policy(tmp_path: Path) -> None:
    data = data_folder(tmp_path)
    (data / "plan.txt").write_text("ship on friday")
    (tmp_path / "secret.txt").write_text("the launch codes")
    config = write_config(
        tmp_path,
        f"""
        [model]
        use = "scripted"
        script = [
          {{ tool_calls = [
            {{ name = "fs_read_text_file", arguments = {{ path = "{data / "plan.txt"}" }}, id = "in" }},
            {{ name = "fs_read_text_file", arguments = {{ path = "{tmp_path / "secret.txt"}" }}, id = "out" }},
          ] }},
          "The plan: ship on friday. The other file is outside what I may read.",
        ]
        """,
        mcp_filesystem("read_text_file", "list_directory", "write_file", prefix="fs_"),
        f"""
        [[filters]]
        use = "logging"

        [[filters]]
        use = "tool_errors"

        [[filters]]
        use = "tool_policy"
        rules = [{{ tool = "fs_*", kind = "path", roots = ["{data}"] }}]
        """,
    )
    done = beamfilter_run(config, "What is the plan?", "--trace")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "The plan: ship on friday. The other file is outside what I may read.\n"
    # the server's own log lines share stderr with the trace: keep the trace's
    lines = [line for line in done.stderr.splitlines() if line.lstrip().startswith(("-> ", "<- ", "[tool "))]
    # each layer, outermost first and indented by its place, on the way in and out
    assert lines[0] == "-> turn logging: 1 new message(s): 'What is the plan?'"
    assert lines[1] == "-> iteration logging: round 0, 10 model call(s) left"
    reads = [line for line in lines if line.startswith("    -> tool tool_policy: fs_read_text_file(")]
    assert len(reads) == 2
    denied = [line for line in lines if line.startswith('    <- tool tool_policy: failed (permission): "The call to')]
    assert len(denied) == 1, "\n".join(lines)
    assert "[short-circuited: the inner layers were not called]" in denied[0]
    allowed = [line for line in lines if line.startswith("    <- tool tool_policy: ok: 'ship on friday' [no change]")]
    assert len(allowed) == 1
    wrapped = [line for line in lines if line.startswith("  <- tool tool_errors: ")]
    assert len(wrapped) == 2
    assert any(line.startswith("<- turn logging: completed: 'The plan: ship on friday.") for line in lines)
    assert "[tool fs_read_text_file: ok]" in lines
    reason = (
        "[tool fs_read_text_file: failed: denied by the tool policy (rules[0] path 'path'): the path resolves to "
        f"'{os.path.realpath(tmp_path)}/secret.txt', outside the allowed roots ({os.path.realpath(data)})"
    )
    shown = [line for line in lines if line.startswith("[tool fs_read_text_file: failed: ")]
    assert len(shown) == 1
    assert reason.startswith(shown[0].removesuffix("…]"))  # one line, cut when long
    # the server's banner, with its absolute folders, is kept out of the command's output
    assert not any("Secure MCP Filesystem Server" in line for line in done.stderr.splitlines())
    # the server's write tool is there, marked sensitive for the gate and approval
    listed = python(config, "-c", _LIST.format(config=str(config)))
    assert listed.returncode == 0, listed.stderr
    assert sorted(listed.stdout.splitlines()) == [
        "fs_list_directory False",
        "fs_read_text_file False",
        "fs_write_file True",
    ]


_LIST = """
import asyncio
from beamfilter_core import Kernel

kernel = Kernel.from_config({config!r})

async def main():
    await kernel.start()
    try:
        for tool in kernel.tools:
            print(tool.name, tool.sensitive)
    finally:
        await kernel.aclose()

asyncio.run(main())
"""


def test_a_write_pauses_for_a_human_from_toml_alone(tmp_path: Path) -> None:
    data = data_folder(tmp_path)
    target = data / "note.txt"
    config = write_config(
        tmp_path,
        model_writing(target, then="unused"),
        PAUSE_KEY,
        mcp_filesystem("read_text_file", "write_file"),
        f"""
        [[filters]]
        use = "tool_policy"
        rules = [{{ tool = "*", kind = "path", roots = ["{data}"] }}]

        [[filters]]
        use = "tool_policy"
        name = "writes_need_a_human"
        action = "pause"
        rules = [{{ tool = "write_*", kind = "deny", reason = "writes need a human" }}]
        """,
    )
    done = beamfilter_run(config, "Write a note", "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["status"] == "paused"
    assert result["pause"]["awaiting"] == ["w1"]
    assert "writes need a human" in result["pause"]["reason"]
    assert not target.exists()  # the write never reached the server
    assert "paused: awaiting a decision on 1 tool call: w1" in done.stderr


_RESUME = """
import asyncio, sys
from beamfilter_core import Kernel, ScriptedModel

async def main():
    # the same config; a scripted model's script does not survive its process, so this
    # worker's model holds what the model answers after the tool result
    kernel = Kernel.from_config({config!r}, model=ScriptedModel(["Written."]))
    try:
        result = await kernel.resume(sys.stdin.read(), {{"w1": "approve"}})
        print(result.status, result.text)
    finally:
        await kernel.aclose()

asyncio.run(main())
"""


def test_approval_from_toml_alone_pauses_a_write_and_a_second_process_completes_it(tmp_path: Path) -> None:
    target = data_folder(tmp_path) / "note.txt"
    config = write_config(
        tmp_path,
        model_writing(target, then="Written."),
        PAUSE_KEY,
        mcp_filesystem("write_file"),
        '[[filters]]\nuse = "approval"',
    )
    paused = beamfilter_run(config, "Write a note", "--json")
    assert paused.returncode == 0, paused.stderr
    result = json.loads(paused.stdout)
    assert result["status"] == "paused"
    assert result["pause"]["awaiting"] == ["w1"]
    assert result["pause"]["reason"] == "'write_file' is a sensitive tool: a human decides"
    assert not target.exists()  # nothing reached the server before the human decided
    # a second process (another worker) resumes the signed pause with the human's approval
    resumed = python(config, "-c", _RESUME.format(config=str(config)), stdin=json.dumps(result["pause"]))
    assert resumed.returncode == 0, resumed.stderr
    assert resumed.stdout == "completed Written.\n"
    assert target.read_text() == "hi"
