"""Integration tests of the turn and iteration chains (issue 2, contracts 6 and 7)."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Decision,
    Filter,
    IterationRequest,
    IterationResult,
    Kernel,
    Message,
    ScriptedModel,
    ToolCall,
    TurnRequest,
    TurnResult,
    tool,
)
from beamfilter_core.errors import MaxIterationsExceeded
from beamfilter_core.testing import scripted_calls


@tool
def ping() -> str:
    """Ping."""
    return "pong"


def _reentering(max_retries: int, seen: list[TurnRequest]) -> Filter:
    async def around_turn(request: TurnRequest, state: dict[str, Any], call_next: Any) -> TurnResult:
        seen.append(request)
        result = await call_next(request)
        for _ in range(max_retries):
            if result.status != "completed" or "good" in result.text:
                return result
            feedback = Message.user(f"'{result.text}' is not good; try again")
            seen.append(request.followup(result, feedback))
            result = await call_next(seen[-1])
        return result

    return Filter("reenter", around_turn=around_turn)


def test_turn_reentry_keeps_the_question_without_memory_and_gets_fresh_budget() -> None:
    seen: list[TurnRequest] = []
    script = [
        ChatResponse.tool_calls(ToolCall("ping", {})),
        "bad",
        ChatResponse.tool_calls(ToolCall("ping", {})),
        "good",
    ]
    model = ScriptedModel(script)
    # max_iterations=2: each loop makes 2 LLM calls, so the re-entry needs a fresh budget
    kernel = Kernel(model, tools=[ping], filters=[_reentering(2, seen)], max_iterations=2)
    result = kernel.run_sync("question?")
    assert result.status == "completed"
    assert result.text == "good"
    assert len(model.requests) == 4
    third = model.requests[2]
    assert [m.role for m in third.messages] == ["user", "assistant", "tool", "assistant", "user"]
    assert third.messages[0].content == "question?"
    assert third.messages[-1].content == "'bad' is not good; try again"
    assert third.delta == (Message.user("'bad' is not good; try again"),)
    assert result.messages[0].content == "question?"
    assert result.iterations == 2  # counts the second loop only
    assert seen[1].resume is False


def test_paused_and_cancelled_results_pass_through_reentry_unchanged() -> None:
    seen: list[TurnRequest] = []

    @tool(sensitive=True)
    def launch() -> str:
        """Launch."""
        return "launched"

    model = scripted_calls(ToolCall("launch", {}, "c1"), answer=None)
    kernel = Kernel(model, tools=[launch], filters=[_reentering(3, seen)], gate=lambda c, t, ctx: "pause")
    result = kernel.run_sync("go")
    assert result.status == "paused"
    assert len(seen) == 1
    assert len(model.requests) == 1


def test_iteration_runs_every_round_with_index_and_remaining() -> None:
    seen: list[tuple[int, int, int, str]] = []

    async def around_iteration(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        result = await call_next(request)
        seen.append((request.index, request.remaining, len(request.messages), result.status))
        return result

    model = ScriptedModel(
        [ChatResponse.tool_calls(ToolCall("ping", {})), ChatResponse.tool_calls(ToolCall("ping", {})), "end"]
    )
    kernel = Kernel(model, tools=[ping], filters=[Filter("it", around_iteration=around_iteration)], max_iterations=5)
    kernel.run_sync("go")
    assert seen == [(0, 5, 1, "continue"), (1, 4, 1, "continue"), (2, 3, 1, "completed")]


def test_iteration_filter_rewrites_next_delta() -> None:
    async def nudge(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        result = await call_next(request)
        if result.status == "continue":
            return result.replace(messages=(*result.messages, Message.user("be brief")))
        return result

    model = scripted_calls(ToolCall("ping", {}, "c1"), answer="ok")
    kernel = Kernel(model, tools=[ping], filters=[Filter("nudge", around_iteration=nudge)])
    result = kernel.run_sync("go")
    assert [m.content for m in model.requests[1].delta] == ["pong", "be brief"]
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "user", "assistant"]


def test_iteration_filter_short_circuits_to_completed() -> None:
    async def stop(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        if request.index == 1:
            return IterationResult("completed", (Message.assistant("stopped early"),))
        return await call_next(request)

    model = scripted_calls(ToolCall("ping", {}), answer="never")
    kernel = Kernel(model, tools=[ping], filters=[Filter("stop", around_iteration=stop)])
    result = kernel.run_sync("go")
    assert result.text == "stopped early"
    assert len(model.requests) == 1
    assert result.messages[-1] == Message.assistant("stopped early")


def test_iteration_rerun_really_happens_and_counts_against_the_budget() -> None:
    tool_runs: list[int] = []

    @tool
    def count() -> str:
        """Count."""
        tool_runs.append(1)
        return str(len(tool_runs))

    async def twice(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        await call_next(request)
        return await call_next(request)

    script = [ChatResponse.tool_calls(ToolCall("count", {}, f"c{i}")) for i in range(4)] + ["a", "b"]
    model = ScriptedModel(script)
    kernel = Kernel(model, tools=[count], filters=[Filter("twice", around_iteration=twice)], max_iterations=3)
    with pytest.raises(MaxIterationsExceeded) as info:
        kernel.run_sync("go")
    # round 0: two LLM calls + two batches; round 1: one LLM call + batch, then the budget is spent
    assert len(model.requests) == 3
    assert len(tool_runs) == 3
    error = info.value
    assert error.max_iterations == 3
    assert str(error).startswith("The run needed more than max_iterations=3 LLM calls")
    # each re-run replaced the previous attempt of its round in the transcript (c0 and c2 are gone)
    assert [m.role for m in error.messages] == ["user", "assistant", "tool"]
    assert [m.tool_call_id for m in error.messages if m.role == "tool"] == ["c1"]


def test_max_iterations_raises_with_transcript() -> None:
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("ping", {}, f"c{i}")) for i in range(5)])
    kernel = Kernel(model, tools=[ping], max_iterations=3)
    with pytest.raises(MaxIterationsExceeded) as info:
        kernel.run_sync("go")
    assert len(model.requests) == 3
    assert [m.role for m in info.value.messages] == ["user"] + ["assistant", "tool"] * 3


def test_turn_filter_can_short_circuit_and_rewrite() -> None:
    async def canned(request: TurnRequest, state: dict[str, Any], call_next: Any) -> TurnResult:
        if request.messages[0].text == "ping":
            return TurnResult("completed", Message.assistant("pong"), (*request.messages, Message.assistant("pong")))
        return await call_next(request.replace(messages=(Message.user(request.messages[0].text.upper()),)))

    model = ScriptedModel(["answer"])
    kernel = Kernel(model, filters=[Filter("canned", around_turn=canned)])
    assert kernel.run_sync("ping").text == "pong"
    assert model.requests == []
    kernel.run_sync("hello")
    assert model.requests[0].messages == (Message.user("HELLO"),)


def test_resume_enters_turn_chain_with_resume_flag_once() -> None:
    flags: list[bool] = []

    async def watch(request: TurnRequest, state: dict[str, Any], call_next: Any) -> TurnResult:
        flags.append(request.resume)
        return await call_next(request)

    @tool(sensitive=True)
    def launch() -> str:
        """Launch."""
        return "launched"

    model = scripted_calls(ToolCall("launch", {}, "c1"))
    kernel = Kernel(model, tools=[launch], filters=[Filter("watch", around_turn=watch)], gate=lambda c, t, x: "pause")
    paused = kernel.run_sync("go")
    result = kernel.resume_sync(paused.pause, {"c1": Decision.approve()})
    assert flags == [False, True]
    assert result.text == "done"


def test_short_circuit_keeps_the_round_delta_in_the_transcript() -> None:
    async def guard(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        if request.index == 1:
            return IterationResult("completed", (Message.assistant("No more."),), blocked_by="guard")
        return await call_next(request)

    model = scripted_calls(ToolCall("ping", {}, "c1"), answer=None)
    kernel = Kernel(model, tools=[ping], filters=[Filter("guard", around_iteration=guard)])
    result = kernel.run_sync("a question")
    assert [(m.role, m.text) for m in result.messages] == [
        ("user", "a question"),
        ("assistant", ""),
        ("tool", "pong"),
        ("assistant", "No more."),
    ]
    assert result.blocked_by == "guard"

    first_round = Kernel(ScriptedModel([]), filters=[Filter("g", around_iteration=guard_all)])
    assert [(m.role, m.text) for m in first_round.run_sync("forbidden").messages] == [
        ("user", "forbidden"),
        ("assistant", "No."),
    ]


async def guard_all(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
    return IterationResult("completed", (Message.assistant("No."),))
