"""tool_search: advertise the search tool plus found tools; discovery read from the transcript."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from beamfilter_builtins import BM25ToolIndex, RegexToolIndex, tool_search_filter
from beamfilter_builtins._tool_search import SPEC
from beamfilter_core import (
    ChatResponse,
    Filter,
    Kernel,
    Message,
    ScriptedModel,
    Tool,
    ToolCall,
    tool,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn
from beamfilter_core.text import words

pytestmark = pytest.mark.anyio


def catalog() -> list[Tool]:
    @tool
    def get_weather(city: str) -> str:
        """Current weather and temperature for a city."""
        return f"sunny in {city}"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail message to a recipient."""
        return "sent"

    @tool
    def createCalendarEvent(title: str) -> str:  # camelCase on purpose
        """Add an event to the calendar."""
        return "created"

    @tool
    def convert_currency(amount: float, to: str) -> str:
        """Convert money between currencies using exchange rates."""
        return "42"

    return [get_weather, send_email, createCalendarEvent, convert_currency]


def names(request: object) -> list[str]:
    return [t.name for t in request.tools]  # type: ignore[attr-defined]


async def test_search_then_call(stream: bool) -> None:
    tools = catalog()
    flt = tool_search_filter()
    search_tool = flt.tools[0]
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("tool_search", {"query": "weather"}, "s1")),
            ChatResponse.tool_calls(ToolCall("get_weather", {"city": "Oslo"}, "w1")),
            "It is sunny.",
        ]
    )
    kernel = Kernel(model, tools=[*tools, search_tool], filters=[flt])
    result, _ = await run_turn(kernel, "weather in Oslo?", stream)
    assert result.text == "It is sunny."
    assert names(model.requests[0]) == ["tool_search"]
    assert names(model.requests[1]) == ["get_weather", "tool_search"]
    assert names(model.requests[2]) == ["get_weather", "tool_search"]
    assert model.requests[1].messages[-1].text == '["get_weather"]'


async def test_accumulate_union_or_latest() -> None:
    script = [
        ChatResponse.tool_calls(ToolCall("tool_search", {"query": "weather"}, "s1")),
        ChatResponse.tool_calls(ToolCall("tool_search", {"query": "email"}, "s2")),
        "done",
    ]
    for accumulate, expected in (
        (True, ["get_weather", "send_email", "tool_search"]),
        (False, ["send_email", "tool_search"]),
    ):
        flt = tool_search_filter(accumulate=accumulate)
        model = ScriptedModel(list(script))
        await Kernel(model, tools=[*catalog(), *flt.tools], filters=[flt]).run("x")
        assert names(model.requests[2]) == expected


async def test_transcript_rules_and_unindexed_tools_pass() -> None:
    tools = catalog()
    flt = tool_search_filter(tools=tools[:3])  # convert_currency is not indexed: always shown
    seen: list[list[str]] = []

    def answer(request: object) -> str:
        seen.append(names(request))
        return "ok"

    history = [
        Message.user("earlier"),
        Message.assistant(None, (ToolCall("tool_search", {"query": "x"}, "s1"), ToolCall("other", {}, "o1"))),
        Message.tool("s1", '["send_email", "not_registered", 7]'),
        Message.tool("o1", '["get_weather"]'),  # another tool's result is never claimed
        Message.assistant(None, (ToolCall("tool_search", {"query": "y"}, "s2"),)),
        Message.tool("s2", "no json here"),  # malformed: no search
    ]
    model = ScriptedModel([answer])
    await Kernel(model, tools=[*tools, *flt.tools], filters=[flt]).run([*history, Message.user("now")])
    assert seen == [["send_email", "convert_currency", "tool_search"]]


async def test_no_tools_passes_through_and_search_results() -> None:
    flt = tool_search_filter(max_results=2)
    model = ScriptedModel(["hi"])
    await Kernel(model, filters=[flt]).run("x")
    # the kernel registers the search tool the filter provides; nothing else is indexed
    assert [t.name for t in model.requests[0].tools] == ["tool_search"]
    search = flt.tools[0]
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("tool_search", {"query": "calendar event"}, "s1")), "done"]),
        tools=[*catalog(), search],
        filters=[flt],
    )
    result = await kernel.run("x")
    assert json.loads(result.messages[2].text) == ["createCalendarEvent"]
    assert json.loads(await search.fn(query="")) == []
    # One term each ("e" of "e-mail" is a single letter, dropped); "weather" is a name word of
    # get_weather, worth twice a description word, so it ranks first; max_results=2 cuts the third.
    assert json.loads(await search.fn(query="money e-mail weather")) == ["get_weather", "send_email"]


def test_bm25_and_tokenizer() -> None:
    assert words("getHTTPServer_status") == ["get", "http", "server", "status"]
    assert words("天气预报") == ["天气", "气预", "预报"]
    assert words("天") == ["天"]
    index = BM25ToolIndex()
    index.build(catalog())
    assert index.search("calendar", 5) == ["createCalendarEvent"]
    assert index.search("send", 5) == ["send_email"]
    assert index.search("   ", 5) == []
    assert index.search("zebra", 5) == []


def test_regex_backend() -> None:
    index = RegexToolIndex()
    index.build(catalog())
    assert index.search("^send|calendar", 5) == ["createCalendarEvent", "send_email"]
    assert index.search("exchange", 5) == ["convert_currency"]  # description only
    assert index.search("currency|money", 5) == ["convert_currency"]
    assert index.search("(", 5) == []  # invalid regex: literal, no hits
    assert index.search("", 5) == []
    flt = tool_search_filter(backend="regex")
    assert isinstance(flt.extras["index"], RegexToolIndex)


def test_custom_index_and_options() -> None:
    class Fixed:
        def build(self, tools: object) -> None:
            self.built = True

        def search(self, query: str, limit: int) -> list[str]:
            return ["send_email"]

    assert tool_search_filter(backend=Fixed()).extras["index"].__class__ is Fixed
    with pytest.raises(ConfigError, match="backend='vector'"):
        tool_search_filter(backend="vector")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="no build"):
        tool_search_filter(backend=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_results=0"):
        tool_search_filter(max_results=0)
    assert isinstance(tool_search_filter(), Filter)
    assert SPEC.name == "tool_search"
    assert tuple(SPEC.scopes) == ("chat",)


@pytest.mark.packages  # uses beamfilter-memory
async def test_discovery_survives_turns_through_memory() -> None:
    from beamfilter_memory import InMemoryStore, memory_filter

    flt = tool_search_filter()
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("tool_search", {"query": "email"}, "s1")),
            "found it",
            "second turn",
        ]
    )
    kernel = Kernel(model, tools=[*catalog(), *flt.tools], filters=[memory_filter(InMemoryStore()), flt])
    context = {"conversation_id": "c1"}
    await kernel.run("find mail", context=context)
    await kernel.run("now send it", context=context)
    assert names(model.requests[2]) == ["send_email", "tool_search"]


def test_bm25_name_boost_and_cjk() -> None:
    tools = [
        Tool.declaration("calendar_sync", "Synchronise things.", {"type": "object"}),
        Tool.declaration("other_tool", "Calendar helper for calendar things.", {"type": "object"}),
        Tool.declaration("weather_cn", "查询天气预报", {"type": "object"}),
    ]
    index = BM25ToolIndex()
    index.build(tools)
    assert index.search("calendar", 5) == ["calendar_sync", "other_tool"]  # name tokens count 3x
    assert index.search("天气", 5) == ["weather_cn"]
    unboosted = BM25ToolIndex(name_boost=1)
    unboosted.build(tools)
    assert unboosted.search("calendar", 5) == ["other_tool", "calendar_sync"]


def test_regex_invalid_pattern_is_literal() -> None:
    index = RegexToolIndex()
    index.build([Tool.declaration("adder", "Add (sum) two numbers.", {"type": "object"})])
    assert index.search("(sum", 5) == ["adder"]
    exact = RegexToolIndex(case_sensitive=True)
    exact.build([Tool.declaration("adder", "Add (sum) two numbers.", {"type": "object"})])
    assert exact.search("ADD", 5) == []
    assert exact.search("Add", 5) == ["adder"]
    assert index.search("ADD", 5) == ["adder"]


def test_enabled_by_name_in_config_the_search_tool_is_registered() -> None:
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("tool_search", {"query": "calendar event"}, "s1")),
            ChatResponse.tool_calls(ToolCall("createCalendarEvent", {}, "c1")),
            "booked",
        ]
    )
    kernel = Kernel.from_config({"filters": [{"use": "tool_search"}]}, tools=catalog(), model=model)
    result = kernel.run_sync("book it")
    assert result.text == "booked"
    assert [[t.name for t in r.tools] for r in model.requests] == [
        ["tool_search"],
        ["createCalendarEvent", "tool_search"],
        ["createCalendarEvent", "tool_search"],
    ]


async def test_a_slow_custom_index_builds_once_in_a_thread_while_the_loop_runs() -> None:
    import asyncio
    import threading
    import time

    class SlowIndex:
        def __init__(self) -> None:
            self.builds: list[tuple[str, ...]] = []
            self.threads: set[str] = set()
            self.ticks_during_build = 0

        def build(self, tools: Sequence[Tool]) -> None:
            self.threads.add(threading.current_thread().name)
            before = ticks
            time.sleep(0.3)  # an embedding pass: seconds of CPU in real life
            self.ticks_during_build = ticks - before
            self.builds.append(tuple(t.name for t in tools))

        def search(self, query: str, limit: int) -> list[str]:
            self.threads.add(threading.current_thread().name)
            return ["get_weather"][:limit]

    index = SlowIndex()
    flt = tool_search_filter(backend=index)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    def kernel() -> Kernel:
        model = ScriptedModel([ChatResponse.tool_calls(ToolCall("tool_search", {"query": "weather"}, "s1")), "ok"])
        return Kernel(model, tools=catalog(), filters=[flt])

    task = asyncio.create_task(ticker())
    try:
        results = await asyncio.gather(kernel().run("a"), kernel().run("b"))
    finally:
        task.cancel()
    assert [r.text for r in results] == ["ok", "ok"]
    assert index.builds == [("get_weather", "send_email", "createCalendarEvent", "convert_currency")]
    assert threading.main_thread().name not in index.threads
    assert index.ticks_during_build >= 1  # the loop kept running during the 0.3 s build


async def test_a_huge_query_is_cut_before_searching() -> None:
    import time

    from beamfilter_builtins._tool_search import MAX_QUERY_CHARS

    flt = tool_search_filter(tools=catalog())
    search = flt.tools[0]
    head = "weather " + "zq " * 700
    huge = head + " send an email" * 100_000  # 1.4 MB; the e-mail words lie past the cut
    started = time.perf_counter()
    found = json.loads(await search.fn(query=huge))
    assert time.perf_counter() - started < 5
    assert found == json.loads(await search.fn(query=huge[:MAX_QUERY_CHARS])) == ["get_weather"]
