"""tool_retry: transient tool failures are retried with backoff; others pass through."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from beamfilter_builtins import tool_retry_filter
from beamfilter_builtins._backoff import Backoff
from beamfilter_builtins._tool_retry import SPEC
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def flaky_tool(failures: int, exc: type[Exception], times: list[float]) -> Any:
    @tool
    def flaky(x: int) -> str:
        """Fails ``failures`` times, then works."""
        times.append(time.perf_counter())
        if len(times) <= failures:
            raise exc("backend unavailable")
        return f"ok {x}"

    return flaky


def one_call() -> ScriptedModel:
    return ScriptedModel([ChatResponse.tool_calls(ToolCall("flaky", {"x": 1})), "done"])


async def test_transient_failures_are_retried_with_exponential_backoff(stream: bool) -> None:
    times: list[float] = []
    retry = tool_retry_filter(initial_delay=0.05, multiplier=2, jitter=False)
    kernel = Kernel(one_call(), tools=[flaky_tool(2, ConnectionError, times)], filters=[retry])
    result, streamed = await run_turn(kernel, "go", stream)
    assert len(times) == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 0.05 <= gaps[0] < 0.09
    assert 0.10 <= gaps[1] < 0.15
    assert [m.content for m in result.messages if m.role == "tool"] == ["ok 1"]
    assert result.text == "done"
    if stream:
        assert streamed == "done"


async def test_exhausted_retries_return_the_last_failure() -> None:
    times: list[float] = []
    retry = tool_retry_filter(max_retries=2, initial_delay=0.001, jitter=False)
    kernel = Kernel(one_call(), tools=[flaky_tool(10, ConnectionResetError, times)], filters=[retry])
    result = await kernel.run("go")
    assert len(times) == 3
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "Tool 'flaky' failed: ConnectionResetError: backend unavailable"
    ]


async def test_semantic_failures_are_not_retried(stream: bool) -> None:
    times: list[float] = []
    kernel = Kernel(
        one_call(), tools=[flaky_tool(10, ValueError, times)], filters=[tool_retry_filter(initial_delay=0.001)]
    )
    result, _ = await run_turn(kernel, "go", stream)
    assert len(times) == 1
    assert [m.content for m in result.messages if m.role == "tool"] == [
        "Tool 'flaky' failed: ValueError: backend unavailable"
    ]


async def test_retry_on_and_tools_options() -> None:
    times: list[float] = []
    semantic = tool_retry_filter(retry_on=["semantic"], initial_delay=0.001)
    await Kernel(one_call(), tools=[flaky_tool(1, ValueError, times)], filters=[semantic]).run("go")
    assert len(times) == 2
    times.clear()
    others = tool_retry_filter(tools=["other"], initial_delay=0.001)
    await Kernel(one_call(), tools=[flaky_tool(1, ConnectionError, times)], filters=[others]).run("go")
    assert len(times) == 1


def test_backoff_schedule() -> None:
    fixed = Backoff(1.0, 30.0, 2.0, jitter=False)
    assert [fixed.delay(n) for n in range(7)] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    jittered = Backoff(1.0, 30.0, 2.0, jitter=True)
    for attempt in range(7):
        base = fixed.delay(attempt)
        for _ in range(50):
            assert base / 2 <= jittered.delay(attempt) <= base


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_retries": -1}, "tool_retry_filter(max_retries=-1) is invalid; give an integer >= 0."),
        ({"multiplier": 0.5}, "tool_retry_filter(multiplier=0.5) is invalid; give a number >= 1."),
        (
            {"retry_on": ["flaky"]},
            "tool_retry_filter(retry_on=['flaky']) is invalid; "
            "give a list of kinds among transient, semantic, permission.",
        ),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        tool_retry_filter(**options)
    assert str(caught.value) == message


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("tool_retry", ("tool",))
