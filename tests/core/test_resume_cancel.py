"""A resume whose cancel token is already cancelled ends at once, and runs nothing."""

from __future__ import annotations

import pytest

from beamfilter_core import (
    CancelToken,
    ChatResponse,
    Kernel,
    Message,
    RunFinished,
    ScriptedModel,
    ToolCall,
    TurnResult,
    tool,
)

pytestmark = pytest.mark.anyio

RAN: list[str] = []


@tool(sensitive=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    RAN.append(f"pay {amount}")
    return f"paid {amount}"


async def test_a_resume_cancelled_before_it_starts_runs_nothing_and_answers_the_call_as_cancelled() -> None:
    RAN.clear()
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("pay", {"amount": 5}, id="c1")), "done"])
    kernel = Kernel(model, tools=[pay], gate=lambda call, tool, context: "pause")
    paused = await kernel.run("pay 5")
    assert paused.status == "paused"
    token = CancelToken()
    token.cancel()

    result = await kernel.resume(paused.pause, {"c1": "approve"}, cancel=token)

    assert result.status == "cancelled"
    assert RAN == []
    assert len(model.requests) == 1  # the model was not asked again
    assert result.messages[-1] == Message.tool(
        "c1", "cancelled: the run was cancelled before this tool call finished", name="pay"
    )
    assert result.messages[:-1] == paused.messages
    assert (result.tool_calls_made, result.iterations) == (paused.tool_calls_made, paused.iterations)


async def test_a_streamed_resume_cancelled_before_it_starts_ends_cancelled() -> None:
    RAN.clear()
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("pay", {"amount": 5}, id="c1")), "done"])
    kernel = Kernel(model, tools=[pay], gate=lambda call, tool, context: "pause")
    paused = await kernel.run("pay 5")
    token = CancelToken()
    token.cancel()

    events = [event async for event in kernel.resume_stream(paused.pause, {"c1": "approve"}, cancel=token)]

    assert [type(event).__name__ for event in events] == ["RunFinished"]
    finished = events[-1]
    assert isinstance(finished, RunFinished)
    assert isinstance(finished.result, TurnResult)
    assert finished.result.status == "cancelled"
    assert RAN == []
