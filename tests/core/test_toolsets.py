"""[[tools]] in config: Python references (the config's folder on the import path), plugin
toolsets from ``beamfilter_register_tools``, include/exclude/prefix/sensitive, every problem
at once, and toolsets the kernel opens before its first run and closes in aclose."""

from __future__ import annotations

import asyncio
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Kernel,
    Registry,
    ScriptedModel,
    Tool,
    ToolCall,
    Toolset,
    ToolsetSpec,
    hookimpl,
    tool,
)
from beamfilter_core.errors import ConfigError, ToolDefinitionError, ToolsetError

EVENTS: list[str] = []


@tool
def clock(zone: str = "UTC") -> str:
    """The time of day."""
    return f"12:00 {zone}"


class Opened(Toolset):
    """A toolset whose tools exist only once it is opened, like a server's."""

    def __init__(self, fail: bool = False) -> None:
        super().__init__(name="opened")
        self.fail = fail
        self.loops: list[int] = []

    async def open(self) -> Sequence[Tool]:
        EVENTS.append("open")
        self.loops.append(id(asyncio.get_running_loop()))
        await asyncio.sleep(0.01)  # concurrent runs must not open twice
        if self.fail:
            raise OSError("server binary missing")

        @tool
        def remote_read(path: str) -> str:
            """Read a file on the server."""
            return f"contents of {path}"

        @tool
        def remote_write(path: str, text: str) -> str:
            """Write a file on the server."""
            return f"wrote {len(text)} to {path}"

        return [remote_read, remote_write]

    async def aclose(self) -> None:
        EVENTS.append("close")


def clock_toolset(*, zone: str = "UTC") -> Any:
    EVENTS.append(f"factory:{zone}")
    return [clock]


class ToolPlugin:
    @hookimpl
    def beamfilter_register_tools(self) -> list[ToolsetSpec]:
        schema = {"type": "object", "properties": {"zone": {"type": "string"}}, "additionalProperties": False}
        return [
            ToolsetSpec("clock", clock_toolset, schema, "the time of day"),
            ToolsetSpec("opened", lambda: Opened(), summary="tools listed when opened"),
        ]


@pytest.fixture
def registry() -> Registry:
    EVENTS.clear()
    return Registry.from_plugins({"timely": ToolPlugin()})


def _write(folder: Path, tools: list[str], script: list[Any] | None = None) -> Path:
    (folder / "mytools.py").write_text(
        textwrap.dedent(
            '''
            from beamfilter_core import Toolset, tool

            def add(a: int, b: int) -> int:
                """Add two integers."""
                return a + b

            def sub(a: int, b: int) -> int:
                """Subtract b from a."""
                return a - b

            BOTH = [add, sub]
            SET = Toolset([add], name="maths")
            NOT_A_TOOL = 42
            '''
        )
    )
    path = folder / "beamfilter.toml"
    path.write_text('[model]\nuse = "scripted"\nscript = ["ok"]\n\n' + "\n".join(tools))
    return path


def test_a_python_function_beside_the_config_is_a_tool(tmp_path: Path, registry: Registry) -> None:
    config = _write(tmp_path, ['[[tools]]\nuse = "mytools:add"'])
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("add", {"a": 2, "b": 3})), "5"])
    kernel = Kernel.from_config(config, registry=registry, model=model)
    assert [t.name for t in kernel.tools] == ["add"]
    result = kernel.run_sync("2+3?")
    assert result.text == "5"
    assert model.requests[1].messages[-1].text == "5"


def test_lists_and_toolsets_and_core_options(tmp_path: Path, registry: Registry) -> None:
    config = _write(
        tmp_path,
        [
            '[[tools]]\nuse = "mytools:BOTH"\nprefix = "m_"\nsensitive = ["sub"]',
            '[[tools]]\nuse = "mytools:SET"\nprefix = "set_"',
            '[[tools]]\nuse = "clock"\nzone = "CET"\ninclude = ["clo*"]',
        ],
    )
    kernel = Kernel.from_config(config, registry=registry)
    assert [(t.name, t.sensitive) for t in kernel.tools] == [
        ("m_add", False),
        ("m_sub", True),
        ("set_add", False),
        ("clock", False),
    ]
    assert EVENTS == ["factory:CET"]


def test_every_problem_of_tools_is_reported_at_once(tmp_path: Path, registry: Registry) -> None:
    config = _write(
        tmp_path,
        [
            '[[tools]]\nuse = "mytools:nope"',
            '[[tools]]\nuse = "missing_module_xyz:f"',
            '[[tools]]\nuse = "clok"',
            '[[tools]]\nuse = "clock"\nzone = 3\ncolour = "red"',
            '[[tools]]\nuse = "mytools:add"\nzone = "x"',
            '[[tools]]\nuse = "mytools:NOT_A_TOOL"',
            '[[tools]]\nuse = "clock"\ninclude = "read_*"\nprefix = "a b"',
            "[[tools]]\nprefix = 'x'",
        ],
    )
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config, registry=registry)
    problems = list(caught.value.problems)
    assert problems[0] == "tools[0].use: 'mytools' has no attribute 'nope' (from 'mytools:nope')."
    assert problems[1].startswith(
        "tools[1].use: cannot import 'missing_module_xyz' for 'missing_module_xyz:f': "
        "No module named 'missing_module_xyz' (looked in "
    )
    assert problems[2].startswith(
        "tools[2].use: No installed plugin provides a toolset named 'clok'. Did you mean 'clock'?"
    )
    assert problems[2].endswith('(a Python function is named "package.module:function")')
    assert problems[3:] == [
        "tools[3].colour: unknown option for the toolset 'timely:clock'. Known options: zone.",
        "tools[3].zone: must be of type string, got 3",
        "tools[4]: 'mytools:add' is a Python reference and takes no options but include, exclude, prefix, "
        "sensitive; got zone.",
        "tools[5].use: mytools:NOT_A_TOOL gave 42 (a int); give a function, a Tool, a list of them or a Toolset.",
        "tools[6].include: must be a list of tool name patterns, e.g. [\"read_*\"], got 'read_*'.",
        "tools[6].prefix: must be letters, digits, '_' or '-' (it starts tool names), got 'a b'.",
        'tools[7].use: missing; name what to enable, e.g. use = "name" (got None).',
    ]
    assert str(caught.value).startswith(f"{config} has 10 problems:\n  - tools[0].use")


def test_a_toolset_plugin_is_listed_by_the_registry(registry: Registry) -> None:
    assert [(t.qualified, t.summary) for t in registry.toolsets()] == [
        ("timely:clock", "the time of day"),
        ("timely:opened", "tools listed when opened"),
    ]
    info = {i.name: i for i in registry.plugins()}["timely"]
    assert info.toolsets == ("clock", "opened")
    assert info.hooks == ("beamfilter_register_tools",)


def test_an_opened_toolset_is_opened_once_per_loop_and_closed(registry: Registry) -> None:
    config = {"model": {"use": "scripted", "script": ["x"]}, "tools": [{"use": "opened", "include": ["*_read"]}]}
    model = ScriptedModel(
        [ChatResponse.tool_calls(ToolCall("remote_read", {"path": "/a"})), "read it", "second", "third"]
    )
    kernel = Kernel.from_config(config, registry=registry, model=model)
    assert kernel.tools == ()  # nothing is listed before the kernel is opened

    async def two_runs_at_once() -> list[str]:
        await asyncio.gather(kernel.start(), kernel.start())  # opened once, not twice
        first = await kernel.run("read /a")
        second = await kernel.run("again")
        await kernel.aclose()
        return [first.text, second.text]

    assert asyncio.run(two_runs_at_once()) == ["read it", "second"]
    assert EVENTS == ["open", "close"]
    assert [t.name for t in model.requests[0].tools] == ["remote_read"]
    assert model.requests[1].messages[-1].text == "contents of /a"
    # a new event loop (run_sync) opens the toolset again, on that loop
    assert kernel.run_sync("third").text == "third"
    assert EVENTS == ["open", "close", "open"]


def test_a_toolset_that_cannot_open_fails_the_run_with_a_typed_error() -> None:
    EVENTS.clear()
    kernel = Kernel(ScriptedModel(["x", "y"]), tools=[Opened(fail=True)])
    with pytest.raises(ToolsetError) as caught:
        kernel.run_sync("hi")
    assert str(caught.value) == "The toolset 'opened' could not be opened: OSError: server binary missing"
    assert caught.value.toolset == "opened"
    # the next run tries again
    with pytest.raises(ToolsetError):
        kernel.run_sync("hi")
    assert EVENTS == ["open", "open"]


def test_an_opened_tool_clashing_with_a_kernel_tool_is_named() -> None:
    @tool
    def remote_read(path: str) -> str:
        """Local."""
        return path

    kernel = Kernel(ScriptedModel(["x"]), tools=[remote_read, Opened()])
    with pytest.raises(
        ToolDefinitionError, match=r"Two tools are named 'remote_read' \(the kernel's tools and toolset 'opened'\)"
    ):
        kernel.run_sync("hi")


def test_streaming_runs_open_toolsets_too() -> None:
    EVENTS.clear()
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("remote_write", {"path": "/b", "text": "hey"})), "done"])
    kernel = Kernel(model, tools=[Opened()])

    async def stream() -> list[str]:
        seen = [type(e).__name__ async for e in kernel.run_stream("write")]
        await kernel.aclose()
        return seen

    assert asyncio.run(stream()) == ["ToolCallStarted", "ToolCallFinished", "TextDelta", "RunFinished"]
    assert model.requests[1].messages[-1].text == "wrote 3 to /b"
    assert EVENTS == ["open", "close"]


def test_a_static_toolset_is_listed_at_once() -> None:
    kernel = Kernel(ScriptedModel(["x"]), tools=[Toolset([clock], name="time")])
    assert [t.name for t in kernel.tools] == ["clock"]
    with pytest.raises(ToolDefinitionError, match=r"toolset 'bad'\[0\] is 42; give a function, a Tool"):
        Toolset([42], name="bad")  # type: ignore[list-item]


def test_an_include_that_matches_none_of_the_tools_is_an_error_listing_them(tmp_path: Path, registry: Registry) -> None:
    config = _write(tmp_path, ['[[tools]]\nuse = "mytools:SET"\ninclude = ["ad*", "sub*"]'])
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config)
    assert caught.value.problems == ("tools[0].include: 'sub*' matches none of the tools of 'maths'; its tools: add.",)
    # a toolset that lists its tools when opened: the same check, when it is opened
    opened = {"model": {"use": "scripted", "script": ["x"]}, "tools": [{"use": "opened", "include": ["remote_reed"]}]}
    kernel = Kernel.from_config(opened, registry=registry)
    with pytest.raises(ToolsetError) as failed:
        kernel.run_sync("hi")
    assert str(failed.value) == (
        "tools[0].include: 'remote_reed' matches none of the tools of 'opened'; its tools: remote_read, remote_write."
    )
