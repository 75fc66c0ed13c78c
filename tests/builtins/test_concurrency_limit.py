"""concurrency_limit: a limit shared by every run, measured with real concurrent tool calls."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

import pytest

from beamfilter_builtins import concurrency_limit_filter
from beamfilter_builtins._concurrency_limit import SPEC
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall, TurnResult, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def run(kernel: Kernel, text: str, stream: bool) -> TurnResult:
    return (await run_turn(kernel, text, stream))[0]


class Meter:
    """Counts concurrent executions per tool, and the highest count seen."""

    def __init__(self) -> None:
        self.now: dict[str, int] = {}
        self.peak: dict[str, int] = {}
        self.peak_total = 0
        self.calls = 0

    async def hold(self, key: str, seconds: float) -> None:
        self.calls += 1
        self.now[key] = self.now.get(key, 0) + 1
        self.peak[key] = max(self.peak.get(key, 0), self.now[key])
        self.peak_total = max(self.peak_total, sum(self.now.values()))
        try:
            await asyncio.sleep(seconds)
        finally:
            self.now[key] -= 1


def make_kernel(meter: Meter, plan: list[str], limiter: Any, seconds: float = 0.05) -> Kernel:
    """A kernel whose model asks for the tools in ``plan`` in parallel, then answers "done"."""
    ids = itertools.count()

    @tool
    async def search(q: str) -> str:
        """Search."""
        await meter.hold("search", seconds)
        return f"found {q}"

    @tool
    async def agent_a(task: str) -> str:
        """Sub-agent A."""
        await meter.hold("agents", seconds)
        return f"a did {task}"

    @tool
    async def agent_b(task: str) -> str:
        """Sub-agent B."""
        await meter.hold("agents", seconds)
        return f"b did {task}"

    def respond(request: ChatRequest) -> ChatResponse | str:
        if any(m.role == "tool" for m in request.delta):
            return "done"
        arg = {"search": "q"}
        return ChatResponse.tool_calls(
            *(ToolCall(name, {arg.get(name, "task"): f"x{n}"}, f"c{next(ids)}") for n, name in enumerate(plan))
        )

    model = ScriptedModel([respond], repeat=True)
    return Kernel(model, tools=[search, agent_a, agent_b], filters=[limiter])


async def test_limit_is_shared_across_concurrent_runs(stream: bool) -> None:
    meter = Meter()
    limiter = concurrency_limit_filter(2)
    kernel = make_kernel(meter, ["search", "search", "search"], limiter)
    started = time.perf_counter()
    results = await asyncio.gather(*(run(kernel, f"go {i}", stream) for i in range(4)))
    elapsed = time.perf_counter() - started
    assert [r.text for r in results] == ["done"] * 4
    assert meter.calls == 12
    assert meter.peak["search"] == 2  # 12 calls of 50 ms, two at a time across four runs
    assert 0.29 <= elapsed < 3.0  # at least 6 waves of 50 ms (the upper bound only catches a hang)
    assert limiter.extras["running"]("search") == 0
    assert limiter.extras["waiting"]("search") == 0


async def test_two_kernels_share_one_filter_object() -> None:
    meter = Meter()
    limiter = concurrency_limit_filter(1)
    first = make_kernel(meter, ["search", "search"], limiter)
    second = make_kernel(meter, ["search", "search"], limiter)
    results = await asyncio.gather(first.run("a"), second.run("b"))
    assert [r.text for r in results] == ["done", "done"]
    assert meter.calls == 4
    assert meter.peak["search"] == 1


async def test_without_the_filter_calls_overlap() -> None:
    # the control experiment: the meter does see overlap when nothing limits it
    meter = Meter()
    kernel = make_kernel(meter, ["search", "search", "search"], concurrency_limit_filter(None))
    await asyncio.gather(*(kernel.run(f"go {i}") for i in range(2)))
    assert meter.peak["search"] == 6


async def test_groups_share_a_limit_and_limits_override(stream: bool) -> None:
    meter = Meter()
    limiter = concurrency_limit_filter(None, limits={"subagents": 1}, groups={"subagents": ["agent_a", "agent_b"]})
    kernel = make_kernel(meter, ["agent_a", "agent_b", "search", "search"], limiter)
    results = await asyncio.gather(*(run(kernel, f"go {i}", stream) for i in range(2)))
    assert [r.text for r in results] == ["done", "done"]
    assert meter.peak["agents"] == 1  # both sub-agent tools count against one slot
    assert meter.peak["search"] == 4  # search is unlimited (max_concurrent=None)


async def test_timeout_gives_a_transient_tool_error(stream: bool) -> None:
    meter = Meter()
    limiter = concurrency_limit_filter(1, timeout=0.05)
    kernel = make_kernel(meter, ["search", "search"], limiter, seconds=0.3)
    result = await run(kernel, "go", stream)
    assert result.text == "done"
    tool_messages = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.text) for m in tool_messages] == [
        ("c0", "found x0"),  # the first call takes the only slot
        (
            "c1",
            "Tool 'search' is busy: 1 call(s) of 'search' are already running and this call waited 0.05 s. "
            "Try again later or continue without it.",
        ),
    ]
    assert meter.calls == 1


async def test_timeout_failure_kind_and_custom_message() -> None:
    seen: list[Any] = []
    limiter = concurrency_limit_filter(1, timeout=0.0, busy_message="{tool} full ({key}, {limit})")

    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(0.1)
        return "ok"

    def respond(request: ChatRequest) -> ChatResponse | str:
        if any(m.role == "tool" for m in request.delta):
            seen.extend(m.text for m in request.delta)
            return "done"
        return ChatResponse.tool_calls(ToolCall("slow", {}, "a"), ToolCall("slow", {}, "b"))

    from beamfilter_core import Filter, ToolResult

    kinds: list[str | None] = []

    async def record(request: Any, state: dict[str, Any], call_next: Any) -> ToolResult:
        result: ToolResult = await call_next(request)
        kinds.append(None if result.error is None else result.error.kind)
        return result

    kernel = Kernel(
        ScriptedModel([respond], repeat=True), tools=[slow], filters=[Filter("rec", around_tool=record), limiter]
    )
    assert (await kernel.run("go")).text == "done"
    assert seen == ["ok", "slow full (slow, 1)"]
    assert kinds == ["transient", None]  # the waiter fails first, long before the running call ends


async def test_sequential_run_sync_calls_reuse_the_filter() -> None:
    # each run_sync has its own event loop; the filter keeps one set of limiters per loop
    meter = Meter()
    limiter = concurrency_limit_filter(1)
    kernel = make_kernel(meter, ["search", "search"], limiter, seconds=0.01)
    for _ in range(2):
        assert (await asyncio.to_thread(kernel.run_sync, "go")).text == "done"
    assert meter.peak["search"] == 1
    assert meter.calls == 4


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"concurrency_limit_filter\(max_concurrent=0\) is invalid"):
        concurrency_limit_filter(0)
    with pytest.raises(ConfigError, match=r"limits\['x'\]=0"):
        concurrency_limit_filter(limits={"x": 0})
    with pytest.raises(ConfigError, match=r"tool 'a' is in groups 'g1' and 'g2'"):
        concurrency_limit_filter(groups={"g1": ["a"], "g2": ["a"]})
    with pytest.raises(ConfigError, match=r"groups\['g'\]='a'\) is invalid"):
        concurrency_limit_filter(groups={"g": "a"})
    with pytest.raises(ConfigError, match=r"timeout=-1\) is invalid"):
        concurrency_limit_filter(timeout=-1)
    assert concurrency_limit_filter().scopes == ("tool",)
    assert SPEC.name == "concurrency_limit"
    assert SPEC.scopes == ("tool",)
