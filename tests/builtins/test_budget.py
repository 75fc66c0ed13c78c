"""budget: reported or calibrated usage per turn and conversation; limits raise or finish."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import budget_filter
from beamfilter_core import ChatResponse, Kernel, Message, ScriptedModel, ToolCall, TurnResult, Usage, tool
from beamfilter_core.errors import ConfigError, LimitExceeded
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def run(kernel: Kernel, text: str, stream: bool, conversation: str | None = None) -> TurnResult:
    context = {"conversation_id": conversation} if conversation else None
    return (await run_turn(kernel, text, stream, context=context))[0]


def answer(text: str, prompt: int, completion: int) -> ChatResponse:
    return ChatResponse(Message.assistant(text), "stop", Usage(prompt, completion, prompt + completion))


def calls(*items: ToolCall, usage: Usage) -> ChatResponse:
    response: ChatResponse = ChatResponse.tool_calls(*items).replace(usage=usage)
    return response


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def test_reported_usage_per_turn_and_conversation(stream: bool) -> None:
    model = ScriptedModel([answer("one", 10, 2), answer("two", 30, 4)])
    flt = budget_filter()
    kernel = Kernel(model, filters=[flt])
    first = await run(kernel, "hi", stream, "c1")
    second = await run(kernel, "again", stream, "c1")
    assert first.usage == Usage(10, 2, 12)
    assert second.usage == Usage(30, 4, 34)
    assert flt.extras["report"]("c1") == {
        "prompt_tokens": 40,
        "completion_tokens": 6,
        "total_tokens": 46,
        "cost": 0.0,
        "reported_calls": 2,
        "estimated_calls": 0,
    }
    assert flt.extras["report"]("other")["total_tokens"] == 0


async def test_estimate_then_calibrated_estimate(stream: bool) -> None:
    # 40 characters -> 10 prompt tokens, 20 characters -> 5 completion tokens (4 chars per token)
    question, reply = "q" * 40, "a" * 20
    model = ScriptedModel([reply, answer(reply, 20, 10), reply])
    flt = budget_filter()
    kernel = Kernel(model, filters=[flt])
    assert (await run(kernel, question, stream)).usage == Usage(10, 5, 15)  # plain estimate
    assert (await run(kernel, question, stream)).usage == Usage(20, 10, 30)  # reported: ratio 30/15 learned
    assert flt.extras["calibration"]() == {"default": 2.0}
    assert (await run(kernel, question, stream)).usage == Usage(20, 10, 30)  # estimate x 2


async def test_turn_limit_raises_before_the_next_call(stream: bool) -> None:
    model = ScriptedModel([calls(ToolCall("lookup", {"q": "x"}, "c1"), usage=Usage(50, 10, 60)), "never"])
    kernel = Kernel(model, [lookup], [budget_filter(max_tokens_per_turn=50)])
    with pytest.raises(LimitExceeded) as info:
        await run(kernel, "go", stream)
    assert str(info.value) == "Budget exceeded: this turn used 60 tokens of its budget of 50 (max_tokens_per_turn)."
    assert (info.value.limit, info.value.value, info.value.maximum) == ("max_tokens_per_turn", 60, 50)
    assert len(model.requests) == 1


async def test_turn_limit_finish_ends_the_turn(stream: bool) -> None:
    model = ScriptedModel([calls(ToolCall("lookup", {"q": "x"}, "c1"), usage=Usage(50, 10, 60)), "never"])
    kernel = Kernel(model, [lookup], [budget_filter(max_tokens_per_turn=50, on_limit="finish")])
    result = await run(kernel, "go", stream)
    assert result.status == "completed"
    assert result.text == "I have to stop here: this turn used 60 tokens of its budget of 50 (max_tokens_per_turn)."
    assert result.blocked_by == "budget"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]
    assert result.messages[2].text == "found x"
    assert result.usage == Usage(50, 10, 60)
    assert len(model.requests) == 1


async def test_cost_limit_over_a_conversation(stream: bool) -> None:
    model = ScriptedModel([answer("a", 1000, 500), answer("b", 1000, 500)])
    flt = budget_filter(
        max_cost=2.0,
        prompt_price=0.5,
        completion_price=1.5,
        on_limit="finish",
        finish_message="Budget spent ({reason}).",
    )
    kernel = Kernel(model, filters=[flt])
    first = await run(kernel, "hi", stream, "c9")
    assert first.text == "a"
    assert flt.extras["report"]("c9")["cost"] == 1.25
    second = await run(kernel, "hi", stream, "c9")
    assert second.text == "b"  # 1.25 < 2: the call may start
    third = await run(kernel, "hi", stream, "c9")
    assert third.text == "Budget spent (this conversation cost 2.5000 of its budget of 2 (max_cost))."
    assert third.blocked_by == "budget"
    assert len(model.requests) == 2
    other = Kernel(ScriptedModel(["fresh"]), filters=[flt])
    assert (await run(other, "hi", stream, "c10")).text == "fresh"  # other conversations are not affected


async def test_prices_per_model_key() -> None:
    class Named(ScriptedModel):
        model = "big-model"

    seen: list[Any] = []

    async def route(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append(request)
        return await call_next(request.replace(model=named))

    from beamfilter_core import Filter

    named = Named([answer("x", 2000, 1000)])
    flt = budget_filter(prices={"big-model": {"prompt": 1.0, "completion": 2.0}}, prompt_price=100.0)
    kernel = Kernel(ScriptedModel([]), filters=[Filter("router", around_chat=route), flt])
    await kernel.run("hi", context={"conversation_id": "p"})
    assert flt.extras["report"]("p")["cost"] == 4.0
    assert len(seen) == 1


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"max_cost=1.0\) needs prices"):
        budget_filter(max_cost=1.0)
    with pytest.raises(ConfigError, match=r"on_limit='stop'\) is invalid; give one of 'raise', 'finish'"):
        budget_filter(on_limit="stop")
    with pytest.raises(ConfigError, match=r"prices\['m'\]=\{'input': 1\}\) is invalid"):
        budget_filter(prices={"m": {"input": 1}})
    with pytest.raises(ConfigError, match=r"max_tokens_per_turn=0\) is invalid"):
        budget_filter(max_tokens_per_turn=0)


async def test_from_config() -> None:
    kernel = Kernel.from_config(
        {
            "model": {"use": "scripted", "script": ["hello there"]},
            "filters": [{"use": "budget", "max_tokens_per_turn": 100, "chars_per_token": 2}],
        }
    )
    result = await kernel.run("hi you")  # 6 chars -> 3 tokens, 11 chars -> 6 tokens
    assert result.usage == Usage(3, 6, 9)


async def test_calibration_is_keyed_by_the_kernels_model() -> None:
    from beamfilter_core import BuildContext

    class Named(ScriptedModel):
        model = "small-model"

    # 8 + 4 characters -> 2 + 1 estimated tokens; 12 reported -> ratio 4.0
    model = Named([answer("abcd", 9, 3), "abcd"])
    flt = budget_filter(build=BuildContext(model=model))
    kernel = Kernel(model, filters=[flt])
    await kernel.run("abcdefgh")
    assert flt.extras["calibration"]() == {"small-model": 4.0}
    assert (await kernel.run("abcdefgh")).usage == Usage(8, 4, 12)
