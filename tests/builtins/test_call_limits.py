"""call_limits: LLM-call and tool-call caps per turn, raise or finish, parallel batches."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beamfilter_builtins import call_limits_filter
from beamfilter_builtins._call_limits import SPEC
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError, LimitExceeded
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def make_tools(log: list[str]) -> list[Any]:
    @tool
    async def search(q: str) -> str:
        """Search."""
        await asyncio.sleep(0.01 * len(q))  # later calls finish first
        log.append(f"search {q}")
        return f"hits for {q}"

    @tool
    def fetch(url: str) -> str:
        """Fetch."""
        log.append(f"fetch {url}")
        return "page"

    return [search, fetch]


def search_round(*queries: str) -> ChatResponse:
    return ChatResponse.tool_calls(*(ToolCall("search", {"q": q}) for q in queries))


async def test_model_call_limit_raises_before_the_extra_call(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([search_round("a"), search_round("b"), search_round("c"), "never"])
    kernel = Kernel(model, tools=make_tools(log), filters=[call_limits_filter(max_model_calls=2)])
    with pytest.raises(LimitExceeded) as caught:
        await run_turn(kernel, "go", stream)
    assert str(caught.value) == "Call limit exceeded: the limit of 2 LLM calls per turn was reached (max_model_calls)."
    assert (caught.value.limit, caught.value.value, caught.value.maximum) == ("max_model_calls", 3, 2)
    assert caught.value.filter_name == "call_limits"
    assert len(model.requests) == 2
    assert log == ["search a", "search b"]


async def test_model_call_limit_finish_ends_completed(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([search_round("a"), search_round("b"), "never"])
    limits = call_limits_filter(max_model_calls=2, on_limit="finish")
    kernel = Kernel(model, tools=make_tools(log), filters=[limits])
    result, streamed = await run_turn(kernel, "go", stream)
    assert result.status == "completed"
    assert result.blocked_by == "call_limits"
    assert result.text == (
        "I stopped before finishing because the limit of 2 LLM calls per turn was reached (max_model_calls)."
    )
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert len(model.requests) == 2
    if stream:
        assert streamed == result.text  # delivered as one text delta at the end


async def test_parallel_batch_runs_calls_within_budget_in_call_order(stream: bool) -> None:
    log: list[str] = []
    # 4 parallel calls, budget 3: the first three (call order) run, the last is refused.
    model = ScriptedModel([search_round("aaaa", "bbb", "cc", "d"), "never"])
    kernel = Kernel(model, tools=make_tools(log), filters=[call_limits_filter(max_tool_calls=3)])
    with pytest.raises(LimitExceeded) as caught:
        await run_turn(kernel, "go", stream)
    assert str(caught.value) == "Call limit exceeded: the limit of 3 tool calls per turn was reached (max_tool_calls)."
    assert (caught.value.value, caught.value.maximum) == (4, 3)
    assert log == ["search cc", "search bbb", "search aaaa"]  # finish order; "d" never ran
    assert len(model.requests) == 1


async def test_tool_limit_finish_keeps_every_call_answered(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([search_round("x", "y"), search_round("z"), "never"])
    limits = call_limits_filter(max_tool_calls=2, on_limit="finish", finish_message="Budget {spent}: {reason}.")
    kernel = Kernel(model, tools=make_tools(log), filters=[limits])
    result, _ = await run_turn(kernel, "go", stream)
    assert sorted(log) == ["search x", "search y"]
    tool_texts = [m.content for m in result.messages if m.role == "tool"]
    assert tool_texts == [
        "hits for x",
        "hits for y",
        "Not run: the limit of 2 tool calls per turn was reached (max_tool_calls).",
    ]
    assert result.text == "Budget {spent}: the limit of 2 tool calls per turn was reached (max_tool_calls)."
    assert result.blocked_by == "call_limits"
    assert result.messages[-1].role == "assistant"


async def test_per_tool_limit() -> None:
    log: list[str] = []
    fetches = ChatResponse.tool_calls(ToolCall("fetch", {"url": "u1"}), ToolCall("fetch", {"url": "u2"}))
    model = ScriptedModel([search_round("a"), fetches, "never"])
    limits = call_limits_filter(max_calls_per_tool={"fetch": 1}, on_limit="finish")
    result = await Kernel(model, tools=make_tools(log), filters=[limits]).run("go")
    assert log == ["search a", "fetch u1"]
    assert result.text == (
        "I stopped before finishing because the limit of 1 calls of tool 'fetch' per turn was reached "
        "(max_calls_per_tool['fetch'])."
    )


async def test_within_limits_nothing_changes(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([search_round("a"), "done"])
    limits = call_limits_filter(max_model_calls=2, max_tool_calls=1, max_calls_per_tool={"search": 1})
    result, streamed = await run_turn(Kernel(model, tools=make_tools(log), filters=[limits]), "go", stream)
    assert result.text == "done"
    assert result.blocked_by is None
    if stream:
        assert streamed == "done"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "call_limits_filter() sets no limit; give max_model_calls, max_tool_calls or max_calls_per_tool."),
        ({"max_model_calls": 0}, "call_limits_filter(max_model_calls=0) is invalid; give an integer >= 1 or None."),
        (
            {"max_tool_calls": 1, "on_limit": "warn"},
            "call_limits_filter(on_limit='warn') is invalid; give one of 'raise', 'finish'.",
        ),
        (
            {"max_calls_per_tool": {"fetch": -1}},
            "call_limits_filter(max_calls_per_tool['fetch']=-1) is invalid; give an integer >= 0.",
        ),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        call_limits_filter(**options)
    assert str(caught.value) == message


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("call_limits", ("iteration", "tool"))
