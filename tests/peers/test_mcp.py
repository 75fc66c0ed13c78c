"""The ``mcp`` toolset against real MCP servers started here: the npm reference servers
``@modelcontextprotocol/server-everything`` and ``@modelcontextprotocol/server-filesystem``
(pinned in package.json/package-lock.json) over stdio, and a server built with the Python
SDK (``mcp_server.py``) over streamable HTTP and stdio.

Every MCP call goes through the kernel's tool chain; a server that dies, hangs or writes
garbage fails the call as ``transient`` and the next call starts it again.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import free_port, require
from peers._peer import FILESYSTEM

from beamfilter_core import ChatResponse, Filter, Kernel, ScriptedModel, ToolCall
from beamfilter_core.errors import ConfigError, ToolsetError

pytest.importorskip("mcp")

pytestmark = pytest.mark.peers

HERE = Path(__file__).parent
BIN = HERE / "node_modules" / ".bin"
EVERYTHING = BIN / "mcp-server-everything"
NOTES_SERVER = HERE / "mcp_server.py"
PYTHON = os.path.basename(sys.executable)


def _npm_server(path: Path) -> str:
    require(path.exists(), f"{path.name} is not installed; run ./run setup (npm ci in tests/peers)")
    return str(path)


def _children(marker: str) -> list[int]:
    """Processes of this test run whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


def _tool_chain_log() -> tuple[Filter, list[str]]:
    seen: list[str] = []

    async def around_tool(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append(f"-> {request.tool.name}")
        result = await call_next(request)
        seen.append(f"<- {request.tool.name}: {'ok' if result.ok else result.error.kind}")
        return result

    return Filter("seen", around_tool=around_tool), seen


def _config(tools: list[dict[str, Any]], filters: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"model": {"use": "scripted", "script": ["unused"]}, "tools": tools, "filters": filters or []}


def _results(model: ScriptedModel, request: int, count: int = 1) -> list[str]:
    return [m.text for m in model.requests[request].messages[-count:]]


# -- @modelcontextprotocol/server-everything --------------------------------------------


def test_everything_server_tools_go_through_the_tool_chain() -> None:
    command = [_npm_server(EVERYTHING)]
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(
                ToolCall("ev_echo", {"message": "hi there"}, "c1"),
                ToolCall("ev_get-sum", {"a": 2, "b": 40}, "c2"),
            ),
            ChatResponse.tool_calls(ToolCall("ev_get-tiny-image", {}, "c3")),
            "done",
        ]
    )
    seen_filter, seen = _tool_chain_log()
    config = _config([{"use": "mcp", "command": command, "include": ["echo", "get-*"], "prefix": "ev_"}])
    kernel = Kernel.from_config(config, model=model).with_filters([seen_filter])

    async def scenario() -> tuple[Any, list[str], list[int]]:
        await kernel.start()
        names = [t.name for t in kernel.tools]
        result = await kernel.run("use the tools")
        alive = _children(str(EVERYTHING))
        await kernel.aclose()
        return result, names, alive

    result, names, alive = asyncio.run(scenario())
    assert {"ev_echo", "ev_get-sum", "ev_get-tiny-image"} <= set(names)
    assert all(n.startswith(("ev_echo", "ev_get-")) for n in names)
    assert "ev_toggle-simulated-logging" not in names
    # the schema comes from the server
    echo = next(t for t in kernel.tools if t.name == "ev_echo")
    assert echo.parameters["properties"]["message"]["type"] == "string"
    assert result.text == "done"
    assert _results(model, 1, 2) == ["Echo: hi there", "The sum of 2 and 40 is 42."]
    # the two calls of one batch run concurrently: their lines may interleave
    assert sorted(seen[:4]) == ["-> ev_echo", "-> ev_get-sum", "<- ev_echo: ok", "<- ev_get-sum: ok"]
    assert seen[4:] == ["-> ev_get-tiny-image", "<- ev_get-tiny-image: ok"]
    image_text = _results(model, 2)[0]
    assert "[image: image/png, " in image_text
    assert alive, "the server ran while the kernel was open"
    deadline = time.monotonic() + 5
    while _children(str(EVERYTHING)) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _children(str(EVERYTHING)) == [], "Kernel.aclose stopped the server"


def test_everything_server_image_and_resources_become_content_parts() -> None:
    from beamfilter_builtins._mcp import MCPToolset

    toolset = MCPToolset(command=[_npm_server(EVERYTHING)])

    async def scenario() -> tuple[Any, Any]:
        tools = {t.name: t for t in await toolset.open()}
        try:
            image = await tools["get-tiny-image"].fn()
            resource = await tools["get-resource-reference"].fn(resourceType="Text", resourceId=2)
        finally:
            await toolset.aclose()
        return image, resource

    image, resource = asyncio.run(scenario())
    kinds = [p.type for p in image.parts]
    assert kinds == ["text", "image_url", "text"]
    assert str(image.parts[1].url).startswith("data:image/png;base64,iVBOR")
    assert "[resource demo://resource/dynamic/text/2]" in resource.content
    assert resource.ok


# -- @modelcontextprotocol/server-filesystem with tool_policy ---------------------------


def test_filesystem_server_with_tool_policy_denying_a_path_outside_the_root(tmp_path: Path) -> None:
    pytest.importorskip("beamfilter_builtins")
    root = tmp_path / "data"
    root.mkdir()
    (root / "notes.txt").write_text("inside the root")
    secret = tmp_path / "secret.txt"
    secret.write_text("outside the root")
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(
                ToolCall("read_text_file", {"path": str(root / "notes.txt")}, "in"),
                ToolCall("read_text_file", {"path": str(secret)}, "out"),
                ToolCall("read_text_file", {"path": str(root / ".." / "secret.txt")}, "dotdot"),
            ),
            "done",
        ]
    )
    seen_filter, seen = _tool_chain_log()
    config = _config(
        [{"use": "mcp", "command": [_npm_server(FILESYSTEM), str(root)], "include": ["read_*", "list_*"]}],
        [{"use": "tool_policy", "rules": [{"tool": "read_*", "kind": "path", "roots": [str(root)]}]}],
    )
    kernel = Kernel.from_config(config, model=model)
    kernel = kernel.with_filters([*kernel.filters, seen_filter])  # innermost: sees what reaches the server

    async def scenario() -> Any:
        try:
            return await kernel.run("read them")
        finally:
            await kernel.aclose()

    result = asyncio.run(scenario())
    assert result.text == "done"
    inside, outside, dotdot = _results(model, 1, 3)
    assert inside == "inside the root"
    assert "denied by the tool policy" in outside
    assert str(secret) in outside
    assert "denied by the tool policy" in dotdot
    # the denied calls never reached the server
    assert [s for s in seen if s.startswith("->")] == ["-> read_text_file"]


# -- a Python SDK server over streamable HTTP -------------------------------------------


@pytest.fixture(scope="module")
def notes_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    port = free_port()
    token = "test-token-7f3a"
    log = tmp_path_factory.mktemp("notes") / "server.log"
    handle = log.open("w")
    process = subprocess.Popen(
        [sys.executable, str(NOTES_SERVER), "http", str(port), token], stdout=subprocess.DEVNULL, stderr=handle
    )
    try:
        deadline = time.monotonic() + 120  # generous: a loaded machine starts Python servers slowly
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"the notes MCP server did not start: {log.read_text()}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp", token
    finally:
        process.terminate()
        process.wait(10)
        handle.close()


def test_http_server_tools_with_include_and_prefix(notes_http: tuple[str, str]) -> None:
    url, token = notes_http
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(
                ToolCall("notes_read_note", {"name": "hello"}, "r1"),
                ToolCall("notes_read_note", {"name": "nope"}, "r2"),
                ToolCall("notes_add", {"a": 2, "b": "x"}, "r3"),
            ),
            "done",
        ]
    )
    config = _config(
        [
            {
                "use": "mcp",
                "url": url,
                "headers": {"Authorization": f"Bearer {token}"},
                "include": ["read_*", "add"],
                "prefix": "notes_",
            }
        ]
    )
    kernel = Kernel.from_config(config, model=model)

    async def scenario() -> Any:
        try:
            return await kernel.run("read the hello note")
        finally:
            await kernel.aclose()

    result = asyncio.run(scenario())
    assert sorted(t.name for t in kernel.tools) == ["notes_add", "notes_read_note"]
    assert result.text == "done"
    found, missing, bad = _results(model, 1, 3)
    assert found == "Hello from the notes server."
    # the SDK server reports a raising tool as is_error: a semantic failure the model reads
    assert missing == "Error executing tool read_note"
    # arguments are checked against the server's schema before the call
    assert bad.startswith("Invalid arguments for tool 'notes_add'")


def test_http_server_headers_come_from_env_in_toml(notes_http: tuple[str, str], tmp_path: Path) -> None:
    url, token = notes_http
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n'
        f'[[tools]]\nuse = "mcp"\nurl = "{url}"\n'
        'headers = { Authorization = { "$env" = "NOTES_BEARER" } }\n'
    )
    os.environ["NOTES_BEARER"] = f"Bearer {token}"
    try:
        kernel = Kernel.from_config(config)
    finally:
        del os.environ["NOTES_BEARER"]

    async def names() -> list[str]:
        try:
            await kernel.start()
            return sorted(t.name for t in kernel.tools)
        finally:
            await kernel.aclose()

    assert asyncio.run(names()) == ["add", "die", "garble", "hang", "read_note", "write_note"]


def test_http_server_refusing_the_token_is_a_typed_error_without_the_token(notes_http: tuple[str, str]) -> None:
    url, _ = notes_http
    kernel = Kernel.from_config(
        _config([{"use": "mcp", "url": url, "headers": {"Authorization": "Bearer wrong-secret-123"}}])
    )
    with pytest.raises(ToolsetError) as caught:
        kernel.run_sync("hi")
    assert str(caught.value) == (
        f"The MCP server tools[0].url ({url}) could not be started: MCPError: Server returned an error response."
    )
    assert "wrong-secret-123" not in str(caught.value)
    assert "wrong-secret-123" not in repr(kernel.tools) + repr(kernel._toolsets)


# -- servers that die, hang or write garbage --------------------------------------------


@pytest.mark.parametrize(
    ("tool_name", "expected"),
    [
        ("hang", "did not answer 'hang' within 1 s"),
        ("die", "exited with status 3 during 'die'"),
        ("garble", "did not answer 'garble' within 1 s"),
    ],
)
def test_a_misbehaving_server_fails_the_call_as_transient_and_the_loop_goes_on(tool_name: str, expected: str) -> None:
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall(tool_name, {}, "bad")),
            ChatResponse.tool_calls(ToolCall("add", {"a": 20, "b": 22}, "good")),
            "recovered",
        ]
    )
    seen_filter, seen = _tool_chain_log()
    command = [sys.executable, str(NOTES_SERVER), "stdio"]
    kernel = Kernel.from_config(
        _config([{"use": "mcp", "command": command, "timeout": 1, "start_timeout": 30}]),
        model=model,
    ).with_filters([seen_filter])

    async def scenario() -> Any:
        try:
            return await kernel.run("go")
        finally:
            await kernel.aclose()

    started = time.monotonic()
    result = asyncio.run(scenario())
    assert time.monotonic() - started < 30
    assert result.text == "recovered"
    failure = _results(model, 1)[0]
    # the server by its program and script, never its whole command line with its folders
    assert failure.startswith(f"Tool {tool_name!r} failed: ToolServerError: the MCP server '{PYTHON} mcp_server.py' ")
    assert str(HERE) not in failure
    assert expected in failure
    assert seen == [f"-> {tool_name}", f"<- {tool_name}: transient", "-> add", "<- add: ok"]
    # the next call started the server again
    assert _results(model, 2) == ["42"]


def test_a_program_that_does_not_exist_is_a_config_error_with_its_place() -> None:
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(_config([{"use": "mcp", "command": ["/nonexistent/mcp-server-xyz"]}]))
    assert caught.value.problems == (
        "tools[0].command[0]: the program '/nonexistent/mcp-server-xyz' does not exist or is not executable; "
        "install it or fix the path.",
    )


def test_a_program_not_found_in_this_process(tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["x"]\n\n[[tools]]\nuse = "mcp"\ncommand = ["npxx-29"]\n'
        '\n[[tools]]\nuse = "mcp"\ncommand = ["./server.py"]\ncwd = "srv"\n'
    )
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config)
    assert caught.value.problems == (
        "tools[0].command[0]: the program 'npxx-29' is not found on PATH; install it or fix the path.",
        f"tools[1].command[0]: the program './server.py' is not found in {tmp_path}/srv (cwd); "
        "install it or fix the path.",
    )


def test_a_program_not_on_path_is_a_config_error_and_exit_2(tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["x"]\n\n[[tools]]\nuse = "mcp"\ncommand = ["npxx-29", "srv"]\n'
        '\n[[tools]]\nuse = "mcp"\ncommand = ["./server.py"]\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), "hi"],
        capture_output=True, text=True, timeout=120, cwd="/", check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == (
        f"beamfilter run: {config} has 2 problems:\n"
        "  - tools[0].command[0]: the program 'npxx-29' is not found on PATH; install it or fix the path.\n"
        f"  - tools[1].command[0]: the program './server.py' is not found in {tmp_path} (cwd); "
        "install it or fix the path.\n"
    )


def test_a_server_that_exits_at_start_names_its_status_stderr_and_place(tmp_path: Path) -> None:
    server = tmp_path / "server.sh"
    server.write_text(
        "#!/bin/sh\necho 'starting' >&2\n"
        "echo 'npm error 404 Not Found - GET https://registry.example/@nope%2fserver' >&2\nexit 3\n"
    )
    server.chmod(0o755)
    kernel = Kernel.from_config(_config([{"use": "mcp", "command": [str(server), "--flag", str(tmp_path)]}]))
    with pytest.raises(ToolsetError) as caught:
        kernel.run_sync("hi")
    assert str(caught.value) == (
        "The MCP server tools[0].command (server.sh) exited with status 3 before it listed its tools. "
        "Its last lines on stderr:\n"
        "  starting\n"
        "  npm error 404 Not Found - GET https://registry.example/@nope%2fserver"
    )
    assert caught.value.toolset == "server.sh"


def test_a_server_killed_at_start_names_the_signal(tmp_path: Path) -> None:
    server = tmp_path / "server.sh"
    server.write_text("#!/bin/sh\nkill -9 $$\n")
    server.chmod(0o755)
    kernel = Kernel.from_config(_config([{"use": "mcp", "command": [str(server)]}]))
    with pytest.raises(ToolsetError) as caught:
        kernel.run_sync("hi")
    assert (
        str(caught.value)
        == "The MCP server tools[0].command (server.sh) was killed by signal 9 before it listed its tools."
    )


def test_an_include_that_matches_none_of_the_server_s_tools_lists_them() -> None:
    command = [sys.executable, str(NOTES_SERVER), "stdio"]
    kernel = Kernel.from_config(_config([{"use": "mcp", "command": command, "include": ["add", "read_notes"]}]))
    with pytest.raises(ToolsetError) as caught:
        kernel.run_sync("hi")
    assert str(caught.value) == (
        f"tools[0].include: 'read_notes' matches none of the tools of '{PYTHON} mcp_server.py'; "
        "its tools: add, read_note, write_note, hang, die, garble."
    )
