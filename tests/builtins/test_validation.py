"""validation: re-enter with the transcript and feedback, bounded, pass-through rules."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import validation_filter
from beamfilter_builtins._validation import SPEC
from beamfilter_core import (
    ChatResponse,
    Decision,
    Kernel,
    Message,
    ScriptedModel,
    ToolCall,
    TurnResult,
    tool,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def must_say_ok(result: TurnResult) -> str | None:
    return None if "OK" in result.text else "the answer must contain OK"


async def test_retry_with_transcript_and_feedback(stream: bool) -> None:
    model = ScriptedModel(["nope", "OK now"])
    kernel = Kernel(model, filters=[validation_filter(must_say_ok)])
    result, streamed = await run_turn(kernel, "say ok", stream)
    assert result.text == "OK now"
    assert len(model.requests) == 2
    assert [(m.role, m.text) for m in model.requests[1].messages] == [
        ("user", "say ok"),
        ("assistant", "nope"),
        ("user", "Your last answer failed validation: the answer must contain OK. Please fix it and answer again."),
    ]
    assert streamed in (None, "nopeOK now")


async def test_exhaustion_returns_last_result_unchanged(stream: bool) -> None:
    model = ScriptedModel(["a", "b", "c", "d"])
    kernel = Kernel(model, filters=[validation_filter(must_say_ok, max_retries=2)])
    result, _ = await run_turn(kernel, "say ok", stream)
    assert result.status == "completed"
    assert result.text == "c"
    assert len(model.requests) == 3
    zero = Kernel(ScriptedModel(["a"]), filters=[validation_filter(must_say_ok, max_retries=0)])
    assert (await zero.run("x")).text == "a"


async def test_async_validate_and_custom_feedback() -> None:
    async def check(result: TurnResult) -> str | None:
        return None if result.text.isupper() else "not upper case"

    model = ScriptedModel(["low", "HIGH"])
    kernel = Kernel(model, filters=[validation_filter(check, feedback="Fix: {problem}")])
    assert (await kernel.run("x")).text == "HIGH"
    assert model.requests[1].messages[-1] == Message.user("Fix: not upper case")


async def test_paused_result_passes_through_and_resume_is_cleared() -> None:
    @tool(sensitive=True)
    def rm(path: str) -> str:
        """Remove."""
        return "removed"

    calls: list[str] = []

    def validate(result: TurnResult) -> str | None:
        calls.append(result.status)
        return "again" if result.text == "first" else None

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("rm", {"path": "/x"}, "c1")), "first", "second"])
    seen: list[bool] = []

    async def probe(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append(request.resume)
        return await call_next(request)

    from beamfilter_core import Filter

    kernel = Kernel(
        model,
        tools=[rm],
        filters=[validation_filter(validate), Filter("probe", around_turn=probe)],
        gate=lambda call, t, ctx: Decision.pause("confirm"),
    )
    paused = await kernel.run("remove /x")
    assert paused.status == "paused"
    assert calls == []  # never validated, never retried
    resumed = await kernel.resume(paused.pause, {"c1": "approve"})
    assert resumed.text == "second"
    assert calls == ["completed", "completed"]
    assert seen == [False, True, False]


def test_validation_options() -> None:
    with pytest.raises(ConfigError, match="max_retries=-1"):
        validation_filter(must_say_ok, max_retries=-1)
    with pytest.raises(ConfigError, match=r"containing .\{problem\}."):
        validation_filter(must_say_ok, feedback="no placeholder")
    assert SPEC.name == "validation"
    assert tuple(SPEC.scopes) == ("turn",)


@pytest.mark.packages  # uses beamfilter-memory
async def test_with_the_real_memory_filter_nothing_is_duplicated() -> None:
    from beamfilter_memory import InMemoryStore, memory_filter

    store = InMemoryStore()
    model = ScriptedModel(["OK 0", "bad", "OK 1"])
    kernel = Kernel(model, filters=[memory_filter(store), validation_filter(must_say_ok)])
    context = {"conversation_id": "c1"}
    await kernel.run("q0", context=context)
    result = await kernel.run("q1", context=context)
    assert result.text == "OK 1"
    feedback = "Your last answer failed validation: the answer must contain OK. Please fix it and answer again."
    assert [(m.role, m.text) for m in model.requests[2].messages] == [
        ("user", "q0"),
        ("assistant", "OK 0"),
        ("user", "q1"),
        ("assistant", "bad"),
        ("user", feedback),
    ]
    assert [m.text for m in await store.load("c1")] == ["q0", "OK 0", "q1", "bad", feedback, "OK 1"]
