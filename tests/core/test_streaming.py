"""Integration tests of streaming, token transforms and cancellation (issue 2, contracts 10-11)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from _support import slow_tool

from beamfilter_core import (
    CancelToken,
    ChatResponse,
    Filter,
    Kernel,
    RunFinished,
    ScriptedModel,
    TextDelta,
    TokenTransform,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    tool,
)
from beamfilter_core.errors import FilterError, ScriptExhaustedError
from beamfilter_core.testing import collect_stream


def _prefix(tag: str) -> TokenTransform:
    return TokenTransform(lambda token, state: ((tag + token,), state))


@pytest.mark.anyio
async def test_first_filter_sees_the_raw_token_first() -> None:
    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("a", token=_prefix("A")), Filter("b", token=_prefix("B"))])
    text, _ = await collect_stream(kernel.run_stream("go"))
    assert text == "BAx"


@pytest.mark.anyio
async def test_one_to_many_and_flush_cascades_inward() -> None:
    log: list[str] = []

    def hold_step(token: str, state: list[str]) -> tuple[tuple[str, ...], list[str]]:
        return (), [*state, token]

    def hold_flush(state: list[str]) -> tuple[str, ...]:
        log.append("outer flush")
        return ("".join(state),)

    def split_step(token: str, state: int) -> tuple[tuple[str, ...], int]:
        return tuple(token), state + 1

    def split_flush(state: int) -> tuple[str, ...]:
        log.append(f"inner flush after {state} steps")
        return ("!",)

    kernel = Kernel(
        ScriptedModel(["ab cd"]),
        filters=[
            Filter("hold", token=TokenTransform(hold_step, init=list, flush=hold_flush)),
            Filter("split", token=TokenTransform(split_step, init=0, flush=split_flush)),
        ],
    )
    text, events = await collect_stream(kernel.run_stream("go"))
    assert text == "ab cd!"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["a", "b", " ", "c", "d", "!"]
    # the outer flush output went through the inner step (1 step) before the inner flush
    assert log == ["outer flush", "inner flush after 1 steps"]
    final = events[-1]
    assert isinstance(final, RunFinished)
    # stream transforms change delivery only, not the answer
    assert final.result.text == "ab cd"


@pytest.mark.anyio
async def test_nothing_is_flushed_on_error() -> None:
    flushed: list[str] = []

    def step(token: str, state: list[str]) -> tuple[tuple[str, ...], list[str]]:
        return (), [*state, token]

    def flush(state: list[str]) -> tuple[str, ...]:
        flushed.append("".join(state))
        return tuple(state)

    def explode(request: Any) -> ChatResponse:
        raise RuntimeError("model broke")

    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("ping", {}), text="thinking"), explode])
    kernel = Kernel(model, tools=[ping], filters=[Filter("hold", token=TokenTransform(step, init=list, flush=flush))])
    deltas: list[str] = []

    async def consume() -> None:
        async for event in kernel.run_stream("go"):
            if isinstance(event, TextDelta):
                deltas.append(event.text)

    with pytest.raises(RuntimeError, match="model broke"):
        await consume()
    # the first round ended normally and flushed; the failing round flushed nothing
    assert flushed == ["thinking"]
    assert deltas == ["thinking"]


@pytest.mark.anyio
async def test_no_transforms_means_the_sink_is_passed_through() -> None:
    from beamfilter_core._streaming import pipeline

    def sink(token: str) -> None:
        pass

    push, flush = pipeline((), sink)
    assert push is sink
    assert flush is None


def test_sync_runs_ignore_stream_transforms() -> None:
    calls: list[str] = []

    def step(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        calls.append(token)
        return (token.upper(),), state

    kernel = Kernel(ScriptedModel(["quiet words"]), filters=[Filter("up", token=TokenTransform(step))])
    assert kernel.run_sync("go").text == "quiet words"
    assert calls == []


@pytest.mark.anyio
async def test_answer_transforms_make_streamed_equal_returned() -> None:
    def mask(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        return (token.replace("secret", "******"),), state

    answer = Filter("mask", token=TokenTransform(mask, applies_to="answer"))
    model = ScriptedModel(["the secret is out"], repeat=True)
    kernel = Kernel(model, filters=[answer])
    text, events = await collect_stream(kernel.run_stream("go"))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert text == final.result.text == "the ****** is out"
    assert final.result.messages[-1].content == "the ****** is out"
    # the non-streaming run rewrites the answer too
    assert (await kernel.run("go")).text == "the ****** is out"


@pytest.mark.anyio
async def test_stream_events_include_tool_calls_in_order() -> None:
    @tool
    def ping() -> str:
        """Ping."""
        return "pong"

    call = ToolCall("ping", {}, "c1")
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(call), "all good"]), tools=[ping])
    text, events = await collect_stream(kernel.run_stream("go"))
    assert text == "all good"
    kinds = [type(e).__name__ for e in events]
    assert kinds == ["ToolCallStarted", "ToolCallFinished", "TextDelta", "TextDelta", "RunFinished"]
    assert isinstance(events[0], ToolCallStarted)
    assert events[0].call == call
    assert isinstance(events[1], ToolCallFinished)
    assert events[1].result.content == "pong"


@pytest.mark.anyio
async def test_stream_and_run_share_chains() -> None:
    seen: list[str] = []

    async def chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append("chat")
        return await call_next(request)

    kernel = Kernel(ScriptedModel(["a b", "c d"]), filters=[Filter("f", around_chat=chat)])
    await kernel.run("x")
    await collect_stream(kernel.run_stream("y"))
    assert seen == ["chat", "chat"]


@pytest.mark.anyio
async def test_cancel_token_ends_the_run_cancelled_without_dangling_calls() -> None:
    slow, started = slow_tool()

    token = CancelToken()
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(ToolCall("slow", {}, "c1")), "never"]), tools=[slow])
    task = asyncio.create_task(kernel.run("go", cancel=token))
    await asyncio.wait_for(started.wait(), 5)
    token.cancel()
    result = await asyncio.wait_for(task, 5)
    assert result.status == "cancelled"
    assert [m.role for m in result.messages] == ["user", "assistant", "tool"]
    assert result.messages[-1].tool_call_id == "c1"
    assert result.messages[-1].content == "cancelled: the run was cancelled before this tool call finished"


@pytest.mark.anyio
async def test_cancelled_result_passes_through_turn_filters() -> None:
    statuses: list[str] = []

    async def watch(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        result = await call_next(request)
        statuses.append(result.status)
        return result

    token = CancelToken()
    token.cancel()
    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("w", around_turn=watch)])
    result = await kernel.run("go", cancel=token)
    assert result.status == "cancelled"
    assert statuses == ["cancelled"]


@pytest.mark.anyio
async def test_breaking_out_of_a_stream_cancels_the_run() -> None:
    model = ScriptedModel(["one two three four five six"], token_delay=0.01)
    kernel = Kernel(model)
    seen = []
    stream = kernel.run_stream("go")
    async for event in stream:
        seen.append(event)
        if len(seen) == 2:
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert len(seen) == 2
    # the run's task was cancelled and awaited: nothing is left running
    leftover = [t for t in asyncio.all_tasks() if "Kernel._execute" in repr(t.get_coro())]
    assert leftover == []
    assert len(model.requests) == 1


@pytest.mark.anyio
async def test_script_exhaustion_is_a_clear_error() -> None:
    kernel = Kernel(ScriptedModel(["only"]))
    await kernel.run("one")
    with pytest.raises(ScriptExhaustedError, match=r"ScriptedModel got call 2 but has only 1 scripted responses"):
        await kernel.run("two")


@pytest.mark.anyio
async def test_a_raising_transform_is_named() -> None:
    def broken(token: str, state: Any) -> Any:
        raise ValueError("bad token")

    kernel = Kernel(ScriptedModel(["x"]), filters=[Filter("breaker", token=TokenTransform(broken))])
    with pytest.raises(FilterError, match=r"Filter 'breaker' raised ValueError: bad token") as info:
        await collect_stream(kernel.run_stream("go"))
    assert info.value.filter_name == "breaker"


@pytest.mark.anyio
async def test_answers_no_model_streamed_still_reach_the_stream() -> None:
    from beamfilter_core import IterationResult, Message, TurnResult

    # return_direct: the tool results are the answer (answer transforms apply to them too)
    @tool(return_direct=True)
    def lookup() -> str:
        """Look up."""
        return "the secret is 42"

    def mask(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        return (token.replace("secret", "******"),), state

    direct = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("lookup", {}))], repeat=True),
        tools=[lookup],
        filters=[Filter("mask", token=TokenTransform(mask, applies_to="answer"))],
    )
    text, events = await collect_stream(direct.run_stream("go"))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert text == final.result.text == "the ****** is 42"
    assert (await direct.run("go")).text == "the ****** is 42"

    # a turn filter answering without the loop, through a stream-only transform
    async def canned(request: Any, state: dict[str, Any], call_next: Any) -> TurnResult:
        return TurnResult("completed", Message.assistant("canned"), request.messages)

    turn = Kernel(ScriptedModel([]), filters=[Filter("canned", around_turn=canned, token=_prefix(">"))])
    text, _ = await collect_stream(turn.run_stream("go"))
    assert text == ">canned"

    # an iteration filter ending the turn: delivered once, after nothing else was streamed
    async def stop(request: Any, state: dict[str, Any], call_next: Any) -> IterationResult:
        return IterationResult("completed", (Message.assistant("stopped"),))

    iteration = Kernel(ScriptedModel([]), filters=[Filter("stop", around_iteration=stop)])
    text, events = await collect_stream(iteration.run_stream("go"))
    assert text == "stopped"
    assert [type(e).__name__ for e in events] == ["TextDelta", "RunFinished"]

    # a streamed model answer is never delivered twice
    streamed = Kernel(ScriptedModel(["one two"]))
    text, _ = await collect_stream(streamed.run_stream("go"))
    assert text == "one two"


def test_flushing_a_pipeline_twice_emits_the_tail_once() -> None:
    from beamfilter_core._streaming import pipeline

    out: list[str] = []
    ends: list[str] = []

    def hold(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        return (), state + token

    def inner_flush(state: Any) -> tuple[str, ...]:
        ends.append("inner")
        return ()

    push, flush = pipeline(
        (
            TokenTransform(hold, init="", flush=lambda state: (state.upper(),)),
            TokenTransform(lambda t, s: ((t,), s), flush=inner_flush),
        ),
        out.append,
    )
    push("ab")
    push("c")
    assert flush is not None
    flush()
    flush()
    assert (out, ends) == (["ABC"], ["inner"])


def test_apply_to_text_runs_the_whole_text_and_the_flush() -> None:
    from beamfilter_core._streaming import apply_to_text

    def hold(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
        return (token[:1],), state + token[1:]

    assert apply_to_text((TokenTransform(hold, init="", flush=lambda state: ("|", state)),), "hello") == "h|ello"
    assert apply_to_text((), "as is") == "as is"


@pytest.mark.anyio
async def test_a_channel_wakes_its_consumer_on_push_and_close_only() -> None:
    from beamfilter_core._streaming import Channel, TextDelta

    channel = Channel()
    channel.push_text("a")
    await asyncio.wait_for(channel.wait(), 1)  # items waiting: returns at once
    assert [item.text for item in channel.items] == ["a"]
    channel.items.clear()
    waiting = asyncio.ensure_future(channel.wait())
    await asyncio.sleep(0)
    assert not waiting.done()  # nothing to read yet
    channel.push(TextDelta("b"))
    await asyncio.wait_for(waiting, 1)
    channel.items.clear()
    waiting = asyncio.ensure_future(channel.wait())
    await asyncio.sleep(0)
    assert not waiting.done()
    channel.close()
    await asyncio.wait_for(waiting, 1)
    assert channel.closed
    await asyncio.wait_for(channel.wait(), 1)  # closed and empty: returns at once
