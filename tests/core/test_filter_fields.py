"""The typed fields a filter gives the kernel (tools, resources, load_pause, persist),
checked when the Filter is made; ``extras`` is never read by the kernel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beamfilter_core import Filter, Kernel, PersistHook, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError, ResumeError
from beamfilter_core.testing import scripted_calls


@tool
def lookup(term: str) -> str:
    """Look a term up."""
    return f"{term}: found"


class Closing:
    def __init__(self, log: list[str], name: str) -> None:
        self.log = log
        self.name = name

    async def aclose(self) -> None:
        self.log.append(self.name)


def test_tools_and_resources_become_tuples() -> None:
    closed: list[str] = []
    store = Closing(closed, "store")
    flt = Filter("f", tools=[lookup], resources=[store])
    assert flt.tools == (lookup,)
    assert flt.resources == (store,)
    assert Filter("g").tools == ()
    assert Filter("g").resources == ()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools": lookup}, "Filter 'f' has tools=Tool("),
        ({"tools": "lookup"}, "Filter 'f' has tools='lookup'; give a list of Tools (built with @tool)."),
        ({"tools": {"lookup": lookup}}, "Filter 'f' has tools={'lookup': "),
        ({"tools": [lookup, print]}, "Filter 'f' has tools=[..., <built-in function print>, ...], which is not a Tool"),
        ({"resources": 3}, "Filter 'f' has resources=3; give a list of objects with async aclose()."),
        (
            {"resources": [object]},
            "Filter 'f' has resources=[..., <class 'object'>, ...], which has no aclose(); the kernel closes "
            "each resource with 'await resource.aclose()'.",
        ),
        ({"load_pause": "memory"}, "Filter 'f' has load_pause='memory'; give an async callable."),
        ({"persist": 3}, "Filter 'f' has persist=3; give a PersistHook(save, restore)."),
        ({"token": len}, "Filter 'f' has token=<built-in function len>; it must be a TokenTransform."),
    ],
)
def test_a_wrong_field_fails_where_the_filter_is_made(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as raised:
        Filter("f", **kwargs)
    assert str(raised.value).startswith(message)


def test_a_filter_like_object_is_checked_with_its_place() -> None:
    class Like:
        name = "like"
        tools = ("lookup",)

    with pytest.raises(ConfigError) as raised:
        Kernel(ScriptedModel([]), filters=[Filter("first"), Like()])
    assert str(raised.value) == (
        "filters[1]: Filter 'like' has tools=[..., 'lookup', ...], which is not a Tool; build tools with @tool."
    )


def test_a_filter_like_objects_tools_and_resources_are_used() -> None:
    closed: list[str] = []

    class Like:
        name = "like"
        tools = (lookup,)
        resources = (Closing(closed, "res"),)

    model = scripted_calls(ToolCall("lookup", {"term": "x"}))
    kernel = Kernel(model, filters=[Like()])
    assert [t.name for t in kernel.tools] == ["lookup"]
    assert kernel.run_sync("go").text == "done"
    asyncio.run(kernel.aclose())
    assert closed == ["res"]


def test_the_kernel_never_reads_extras() -> None:
    closed: list[str] = []
    flt = Filter("f", extras={"tools": [lookup], "store": Closing(closed, "store"), "load_pause": None})
    kernel = Kernel(ScriptedModel([]), filters=[flt])
    assert kernel.tools == ()
    asyncio.run(kernel.aclose())
    assert closed == []


def test_each_resource_is_closed_once_in_filter_order() -> None:
    closed: list[str] = []
    first, second = Closing(closed, "first"), Closing(closed, "second")
    kernel = Kernel(
        ScriptedModel([]),
        filters=[Filter("a", resources=[first, second]), Filter("b", resources=[second, first])],
    )
    asyncio.run(kernel.aclose())
    assert closed == ["first", "second"]


def test_load_pause_finds_the_paused_run_only_through_the_field() -> None:
    calls: list[str] = []

    async def load_pause(conversation_id: str) -> None:
        calls.append(conversation_id)

    kernel = Kernel(ScriptedModel([]), filters=[Filter("m", load_pause=load_pause)])
    with pytest.raises(ResumeError, match=r"^No paused run is stored for conversation 'c1'\.$"):
        asyncio.run(kernel.resume(conversation_id="c1"))
    assert calls == ["c1"]
    bare = Kernel(ScriptedModel([]), filters=[Filter("m", extras={"load_pause": load_pause})])
    with pytest.raises(ResumeError, match=r"no filter of this kernel stores pauses"):
        asyncio.run(bare.resume(conversation_id="c1"))
    assert calls == ["c1"]


def test_persist_hook_is_accepted() -> None:
    hook = PersistHook(lambda state: None, lambda state, data: None)
    assert Filter("p", persist=hook).persist is hook
