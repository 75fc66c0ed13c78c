"""Edges of one run's terminals and tool loop, each pinned by the exact value it produces.

Found by mutation testing of ``beamfilter_core._run``: the system prompt on both model
paths, answer and stream transforms flushed together, the 200-character preview of bad
arguments, a rejection in the gate's own words, a batch whose unknown call comes before a
sensitive one, the first pause reason, a chat filter answering with repeated ids, a
resumed ``return_direct`` batch, and the exact iteration budget.
"""

from __future__ import annotations

from typing import Any

import pytest
from core._run_tools import RAN, clear_ran, echo, read_file  # noqa: F401  # clear_ran: an autouse fixture

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Decision,
    Filter,
    IterationRequest,
    IterationResult,
    Kernel,
    Message,
    RunFinished,
    ScriptedModel,
    TokenTransform,
    ToolCall,
    ToolRequest,
    ToolResult,
    tool,
)
from beamfilter_core._run import unique_calls
from beamfilter_core.errors import MaxIterationsExceeded
from beamfilter_core.testing import collect_stream, scripted_calls


@tool(sensitive=True, return_direct=True)
def publish(text: str) -> str:
    """Publish a text and answer with it."""
    RAN.append(("publish", text))
    return f"published {text}"


def _roles(request: ChatRequest) -> list[tuple[str, str]]:
    return [(m.role, m.text) for m in request.messages]


# -- the model call ----------------------------------------------------------------------------


def test_the_system_prompt_leads_the_messages_of_every_call_without_entering_the_transcript() -> None:
    model = scripted_calls(ToolCall("echo", {"text": "x"}, "c1"))
    result = Kernel(model, tools=[echo], system_prompt="Be brief.").run_sync("go")
    assert [_roles(r)[:2] for r in model.requests] == [[("system", "Be brief."), ("user", "go")]] * 2
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant"]


@pytest.mark.anyio
async def test_the_system_prompt_leads_a_streamed_call_too() -> None:
    model = ScriptedModel(["hello there"])
    text, _ = await collect_stream(Kernel(model, system_prompt="Be brief.").run_stream("go"))
    assert text == "hello there"
    assert _roles(model.requests[0]) == [("system", "Be brief."), ("user", "go")]


def test_without_a_system_prompt_the_prompt_is_the_transcript() -> None:
    model = ScriptedModel(["hi"])
    Kernel(model).run_sync("go")
    assert _roles(model.requests[0]) == [("user", "go")]


def _held(tag: str, applies_to: Any) -> TokenTransform:
    """Holds every token until the flush, then emits them joined behind ``tag``."""

    def step(token: str, state: list[str]) -> tuple[tuple[str, ...], list[str]]:
        state.append(token)
        return (), state

    return TokenTransform(step, init=list, flush=lambda state: (tag + "".join(state),), applies_to=applies_to)


@pytest.mark.anyio
async def test_a_streamed_call_flushes_the_answer_transforms_then_the_stream_transforms() -> None:
    filters = [Filter("stream", token=_held("S:", "stream")), Filter("answer", token=_held("A:", "answer"))]
    model = ScriptedModel(["one two"])
    text, events = await collect_stream(Kernel(model, filters=filters).run_stream("go"))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert final.result.text == "A:one two"
    assert text == "S:A:one two"


@pytest.mark.anyio
async def test_a_streamed_call_with_only_answer_transforms_flushes_them() -> None:
    model = ScriptedModel(["one two"])
    text, events = await collect_stream(
        Kernel(model, filters=[Filter("a", token=_held("A:", "answer"))]).run_stream("go")
    )
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert (text, final.result.text) == ("A:one two", "A:one two")


@pytest.mark.anyio
async def test_a_chat_filter_can_route_a_streamed_call_to_another_model() -> None:
    other = ScriptedModel(["from the other model"])

    async def route(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        return await call_next(request.replace(model=other))  # type: ignore[no-any-return]

    main = ScriptedModel(["from the main model"])
    text, _ = await collect_stream(Kernel(main, filters=[Filter("route", around_chat=route)]).run_stream("go"))
    assert text == "from the other model"
    assert (len(main.requests), len(other.requests)) == (0, 1)


@pytest.mark.anyio
async def test_a_streamed_answer_with_only_tool_calls_is_delivered_by_the_return_direct_tool() -> None:
    @tool(return_direct=True)
    def final(text: str) -> str:
        """Answer with the text."""
        return text

    model = scripted_calls(ToolCall("final", {"text": "the end"}, "c1"), answer=None)
    text, events = await collect_stream(Kernel(model, tools=[final]).run_stream("go"))
    final_event = events[-1]
    assert isinstance(final_event, RunFinished)
    assert (text, final_event.result.text, final_event.result.return_direct) == ("the end", "the end", True)


def test_a_chat_filter_answering_with_repeated_ids_gets_them_made_unique() -> None:
    async def answer(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        if len(request.messages) == 1:
            return ChatResponse.tool_calls(ToolCall("echo", {"text": "a"}, "x"), ToolCall("echo", {"text": "b"}, "x"))
        return await call_next(request)  # type: ignore[no-any-return]

    model = ScriptedModel(["done"])
    result = Kernel(model, tools=[echo], filters=[Filter("answer", around_chat=answer)]).run_sync("go")
    assert [c.id for c in result.messages[1].tool_calls] == ["x", "x_2"]
    assert [(m.tool_call_id, m.text) for m in result.messages if m.role == "tool"] == [("x", "a"), ("x_2", "b")]
    assert result.text == "done"


# -- the tool terminal -------------------------------------------------------------------------


def _bad_arguments(raw: str) -> str:
    call = ToolCall.from_json("echo", raw, "c1")
    model = scripted_calls(call)
    result = Kernel(model, tools=[echo]).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    return answer.text


def test_arguments_that_are_not_an_object_are_shown_up_to_200_characters() -> None:
    exactly = "[" + "1," * 99 + "1]"  # 201 characters
    assert len(exactly[:200]) == 200
    shown = "[" + "1," * 99 + "1"
    assert len(shown) == 200
    assert _bad_arguments(shown + "]") == (
        f"Arguments for tool 'echo' are not a JSON object: {shown + '...'!r}. "
        "Call the tool again with a JSON object of arguments."
    )
    whole = "[" + "1," * 98 + "1]"  # 199 characters
    assert _bad_arguments(whole) == (
        f"Arguments for tool 'echo' are not a JSON object: {whole!r}. "
        "Call the tool again with a JSON object of arguments."
    )
    two_hundred = "[" + "1," * 98 + "11]"
    assert len(two_hundred) == 200
    assert _bad_arguments(two_hundred).startswith(f"Arguments for tool 'echo' are not a JSON object: {two_hundred!r}.")
    assert RAN == []


def test_a_tool_returning_a_circular_value_is_a_semantic_error() -> None:
    @tool
    def loop() -> Any:
        """Return a list that holds itself."""
        value: list[Any] = []
        value.append(value)
        return value

    model = scripted_calls(ToolCall("loop", {}, "c1"))
    result = Kernel(model, tools=[loop]).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == (
        "Tool 'loop' returned a list, which is not JSON-serialisable; "
        "the tool should return a str, JSON data or a ToolResult."
    )


# -- the gate ----------------------------------------------------------------------------------


def test_a_rejection_with_a_result_is_told_to_the_model_in_those_words() -> None:
    def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.reject("not logged", result="Access denied by policy P-7.")

    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    result = Kernel(model, tools=[read_file], gate=gate).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == "Access denied by policy P-7."
    assert RAN == []


def test_a_rejection_without_a_reason_ends_with_a_full_stop() -> None:
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    result = Kernel(model, tools=[read_file], gate=lambda c, t, x: Decision.reject()).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == "The call to 'read_file' was rejected."


def test_an_unknown_call_before_a_sensitive_one_does_not_stop_the_gate() -> None:
    calls = [ToolCall("nosuch", {}, "c1"), ToolCall("read_file", {"path": "/a"}, "c2")]
    model = scripted_calls(*calls)
    result = Kernel(model, tools=[read_file], gate=lambda c, t, x: Decision.pause("ask")).run_sync("go")
    assert result.status == "paused"
    assert (result.pause.awaiting, result.pause.reason) == (("c2",), "ask")
    assert RAN == []


def test_the_first_pause_reason_of_a_batch_is_kept() -> None:
    calls = [ToolCall("read_file", {"path": "/a"}, "c1"), ToolCall("read_file", {"path": "/b"}, "c2")]
    model = scripted_calls(*calls)

    def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.pause(f"ask about {call.arguments['path']}")

    result = Kernel(model, tools=[read_file], gate=gate).run_sync("go")
    assert (result.pause.awaiting, result.pause.reason) == (("c1", "c2"), "ask about /a")


def test_a_later_pause_reason_fills_in_for_an_earlier_pause_without_one() -> None:
    calls = [ToolCall("read_file", {"path": "/a"}, "c1"), ToolCall("read_file", {"path": "/b"}, "c2")]
    model = scripted_calls(*calls)

    def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.pause(None if call.id == "c1" else "ask about /b")

    result = Kernel(model, tools=[read_file], gate=gate).run_sync("go")
    assert result.pause.reason == "ask about /b"


@pytest.mark.anyio
async def test_an_async_kernel_gate_is_awaited() -> None:
    async def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.reply("answered by the gate")

    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    result = await Kernel(model, tools=[read_file], gate=gate).run("go")
    assert [m.text for m in result.messages if m.role == "tool"] == ["answered by the gate"]
    assert RAN == []


# -- resume ------------------------------------------------------------------------------------


def test_a_resumed_return_direct_batch_completes_without_another_model_call() -> None:
    model = scripted_calls(ToolCall("publish", {"text": "hi"}, "c1"), answer=None)
    kernel = Kernel(model, tools=[publish], gate=lambda c, t, x: "pause")
    paused = kernel.run_sync("go")
    assert paused.status == "paused"
    done = kernel.resume_sync(paused.pause, {"c1": "approve"})
    assert (done.status, done.text, done.return_direct) == ("completed", "published hi", True)
    assert (done.iterations, done.tool_calls_made, len(model.requests)) == (1, 1, 1)
    assert [(m.role, m.text) for m in done.messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "published hi"),
        ("assistant", "published hi"),
    ]
    assert RAN == [("publish", "hi")]


def test_a_resumed_batch_with_a_rejected_return_direct_call_goes_back_to_the_model() -> None:
    model = scripted_calls(ToolCall("publish", {"text": "hi"}, "c1"), answer="understood")
    kernel = Kernel(model, tools=[publish], gate=lambda c, t, x: "pause")
    paused = kernel.run_sync("go")
    done = kernel.resume_sync(paused.pause, {"c1": Decision.reject("no")})
    assert (done.status, done.text, done.return_direct) == ("completed", "understood", False)
    assert (done.iterations, len(model.requests)) == (2, 2)
    assert RAN == []


# -- the iteration budget ----------------------------------------------------------------------


@pytest.mark.parametrize("budget", [1, 2, 3])
def test_max_iterations_allows_exactly_that_many_model_calls(budget: int) -> None:
    calls = [ChatResponse.tool_calls(ToolCall("echo", {"text": str(i)}, f"c{i}")) for i in range(budget)]
    model = ScriptedModel([*calls, "done"])
    with pytest.raises(MaxIterationsExceeded) as caught:
        Kernel(model, tools=[echo], max_iterations=budget).run_sync("go")
    assert caught.value.max_iterations == budget
    assert len(model.requests) == budget
    model = ScriptedModel([*calls[: budget - 1], "done"])
    result = Kernel(model, tools=[echo], max_iterations=budget).run_sync("go")
    assert (result.text, result.iterations, result.tool_calls_made) == ("done", budget, budget - 1)


def test_rounds_see_their_index_and_the_remaining_budget() -> None:
    seen: list[tuple[int, int]] = []

    async def spy(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        seen.append((request.index, request.remaining))
        return await call_next(request)  # type: ignore[no-any-return]

    calls = [ChatResponse.tool_calls(ToolCall("echo", {"text": str(i)}, f"c{i}")) for i in range(2)]
    Kernel(
        ScriptedModel([*calls, "done"]), tools=[echo], filters=[Filter("spy", around_iteration=spy)], max_iterations=5
    ).run_sync("go")
    assert seen == [(0, 5), (1, 4), (2, 3)]


def test_a_tool_result_writes_the_context_of_the_next_round() -> None:
    @tool
    def remember(key: str) -> ToolResult:
        """Remember a key."""
        return ToolResult("ok", writes={key: 1})

    contexts: list[dict[str, Any]] = []

    async def spy(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        contexts.append(dict(request.context))
        return await call_next(request)  # type: ignore[no-any-return]

    model = scripted_calls(ToolCall("remember", {"key": "k"}, "c1"))
    Kernel(model, tools=[remember], filters=[Filter("spy", around_chat=spy)]).run_sync("go", context={"a": 0})
    assert contexts == [{"a": 0}, {"a": 0, "k": 1}]


def test_the_tool_messages_of_a_round_name_their_call_and_tool() -> None:
    calls = [ToolCall("echo", {"text": "a"}, "c1"), ToolCall("echo", {"text": "b"}, "c2")]
    result = Kernel(scripted_calls(*calls), tools=[echo]).run_sync("go")
    tools = [m for m in result.messages if m.role == "tool"]
    assert [(m.tool_call_id, m.name, m.text) for m in tools] == [("c1", "echo", "a"), ("c2", "echo", "b")]
    assert result.messages[-1] == Message("assistant", "done")


def test_an_error_raised_in_the_tool_terminal_is_not_blamed_on_the_tool_filter_around_it() -> None:
    async def bad(request: Any, state: dict[str, Any], call_next: Any) -> ToolResult:
        return await call_next(request.replace(arguments=[1, 2]))  # type: ignore[no-any-return]

    model = scripted_calls(ToolCall("echo", {"text": "a"}, "c1"))
    kernel = Kernel(model, tools=[echo], filters=[Filter("bad", around_tool=bad)])
    with pytest.raises(TypeError, match=r"^cannot convert dictionary update sequence element #0 to a sequence$"):
        kernel.run_sync("go")
    assert RAN == []


# -- ids made unique ---------------------------------------------------------------------------


def test_unique_calls_numbers_repeats_from_two_and_skips_numbers_taken() -> None:
    calls = [ToolCall("echo", {}, i) for i in ("x", "x", "x_2", "x", "")]
    fixed = unique_calls(calls)
    assert fixed is not None
    assert [c.id for c in fixed] == ["x", "x_2", "x_2_2", "x_3", "call_2"]
    assert [c.name for c in fixed] == ["echo"] * 5
    assert unique_calls([ToolCall("echo", {}, "a"), ToolCall("echo", {}, "b")]) is None
    assert unique_calls([ToolCall("echo", {}, "a")]) is None


def test_unique_calls_renames_ids_already_in_the_prompt() -> None:
    prompt = [Message("assistant", None, (ToolCall("echo", {}, "a"),)), Message.tool("a", "a", "echo")]
    (single,) = unique_calls([ToolCall("echo", {}, "a")], prompt) or ()
    assert single.id == "a_2"
    first, second = unique_calls([ToolCall("echo", {}, "b"), ToolCall("echo", {}, "a")], prompt) or ()
    assert (first.id, second.id) == ("b", "a_2")
    (empty,) = unique_calls([ToolCall("echo", {"k": 1}, "", raw_arguments="x")]) or ()
    assert (empty.id, empty.arguments, empty.raw_arguments) == ("call_2", {"k": 1}, "x")


def _ids_seen_by_chat_filters(calls: list[ToolCall], seen: list[list[str]]) -> Filter:
    async def spy(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        response: ChatResponse = await call_next(request)
        seen.append([c.id for c in response.message.tool_calls])
        return response

    return Filter("spy", around_chat=spy)


def test_chat_filters_see_the_ids_made_unique_at_the_model() -> None:
    seen: list[list[str]] = []
    calls = [ToolCall("echo", {"text": "a"}, "x"), ToolCall("echo", {"text": "b"}, "x")]
    model = scripted_calls(*calls)
    Kernel(model, tools=[echo], filters=[_ids_seen_by_chat_filters(calls, seen)]).run_sync("go")
    assert seen == [["x", "x_2"], []]


@pytest.mark.anyio
async def test_chat_filters_of_a_streamed_run_see_the_ids_made_unique_at_the_model() -> None:
    seen: list[list[str]] = []
    calls = [ToolCall("echo", {"text": "a"}, "x"), ToolCall("echo", {"text": "b"}, "x")]
    model = scripted_calls(*calls)
    kernel = Kernel(model, tools=[echo], filters=[_ids_seen_by_chat_filters(calls, seen)])
    text, _ = await collect_stream(kernel.run_stream("go"))
    assert (text, seen) == ("done", [["x", "x_2"], []])


# -- answers and tools -------------------------------------------------------------------------


def test_answer_transforms_leave_a_tool_call_message_without_text_alone() -> None:
    model = scripted_calls(ToolCall("echo", {"text": "a"}, "c1"))
    result = Kernel(model, tools=[echo], filters=[Filter("a", token=_held("A:", "answer"))]).run_sync("go")
    assert [(m.role, m.content) for m in result.messages] == [
        ("user", "go"),
        ("assistant", None),
        ("tool", "a"),
        ("assistant", "A:done"),
    ]


def test_an_unknown_tool_is_answered_with_the_tools_there_are() -> None:
    model = scripted_calls(ToolCall("nosuch", {}, "c1"))
    result = Kernel(model).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == "Unknown tool 'nosuch'. Available tools: none. Call one of these."
    model = scripted_calls(ToolCall("nosuch", {}, "c1"))
    result = Kernel(model, tools=[read_file, echo]).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == "Unknown tool 'nosuch'. Available tools: echo, read_file. Call one of these."


# -- the flags a tool filter sees -----------------------------------------------------------------


def _tool_spy(seen: list[tuple[str, Any, bool, str | None]]) -> Filter:
    async def spy(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        seen.append((request.call_id, dict(request.arguments), request.approved, request.raw_arguments))
        return await call_next(request)  # type: ignore[no-any-return]

    return Filter("spy", around_tool=spy)


def test_only_a_call_a_human_approved_as_paused_is_marked_approved() -> None:
    seen: list[tuple[str, Any, bool, str | None]] = []
    calls = [ToolCall("read_file", {"path": "/a"}, "c1"), ToolCall("read_file", {"path": "/b"}, "c2")]
    model = scripted_calls(*calls)
    kernel = Kernel(model, tools=[read_file], gate=lambda c, t, x: "pause", filters=[_tool_spy(seen)])
    paused = kernel.run_sync("go")
    again = kernel.resume_sync(paused.pause, {"c1": "approve", "c2": Decision.approve({"path": "/c"})})
    assert (again.status, seen) == ("paused", [])  # the edit paused again: nothing ran
    done = kernel.resume_sync(again.pause, {"c2": "approve"})
    assert done.status == "completed"
    # c1 was approved as paused before; c2 is approved as the new pause showed it
    assert seen == [("c1", {"path": "/a"}, True, None), ("c2", {"path": "/c"}, True, None)]
    assert RAN == [("read_file", "/a"), ("read_file", "/c")]


def test_raw_arguments_reach_the_tool_filter_only_for_the_models_own_arguments() -> None:
    seen: list[tuple[str, Any, bool, str | None]] = []
    call = ToolCall.from_json("echo", "[1]", "c1")
    model = scripted_calls(call)
    Kernel(model, tools=[echo], filters=[_tool_spy(seen)]).run_sync("go")
    assert seen == [("c1", {}, False, "[1]")]


def test_a_kernel_gate_approving_other_arguments_runs_the_tool_with_them() -> None:
    def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.approve({"path": "/safe"})

    seen: list[tuple[str, Any, bool, str | None]] = []
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    Kernel(model, tools=[read_file], gate=gate, filters=[_tool_spy(seen)]).run_sync("go")
    assert RAN == [("read_file", "/safe")]
    assert seen == [("c1", {"path": "/safe"}, False, None)]


def test_a_gate_filter_without_a_kernel_gate_approves_a_sensitive_call_by_calling_on() -> None:
    decisions: list[Decision] = []

    async def watch(request: Any, state: dict[str, Any], call_next: Any) -> Decision:
        decision: Decision = await call_next(request)
        decisions.append(decision)
        return decision

    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    result = Kernel(model, tools=[read_file], filters=[Filter("watch", around_gate=watch)]).run_sync("go")
    assert result.text == "done"
    assert decisions == [Decision(kind="approve", arguments={"path": "/a"})]
    assert RAN == [("read_file", "/a")]


# -- resume, streamed ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_streamed_resume_of_a_return_direct_batch_delivers_its_answer() -> None:
    model = scripted_calls(ToolCall("publish", {"text": "hi"}, "c1"), answer=None)
    kernel = Kernel(model, tools=[publish], gate=lambda c, t, x: "pause")
    paused = await kernel.run("go")
    text, events = await collect_stream(kernel.resume_stream(paused.pause, {"c1": "approve"}))
    final = events[-1]
    assert isinstance(final, RunFinished)
    assert (text, final.result.text, final.result.return_direct) == ("published hi", "published hi", True)


def test_an_approval_naming_arguments_is_not_an_approval_as_paused_even_with_the_paused_mapping() -> None:
    seen: list[tuple[str, Any, bool, str | None]] = []
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"))
    asked: list[str] = []

    def gate(call: ToolCall, tool: Any, context: Any) -> str:
        asked.append(call.id)  # pauses the model's call, approves the edit judged at resume
        return "pause" if len(asked) == 1 else "approve"

    kernel = Kernel(model, tools=[read_file], gate=gate, filters=[_tool_spy(seen)])
    paused = kernel.run_sync("go")
    same = paused.pause.calls[0].arguments
    kernel.resume_sync(paused.pause, {"c1": Decision.approve(same)})
    assert asked == ["c1", "c1"]
    assert seen == [("c1", {"path": "/a"}, False, None)]
    assert RAN == [("read_file", "/a")]


def test_an_iteration_filter_pausing_without_a_pause_state_returns_the_transcript() -> None:
    async def hold(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        return IterationResult(status="paused")

    model = ScriptedModel(["never"])
    result = Kernel(model, filters=[Filter("hold", around_iteration=hold)]).run_sync("go")
    assert (result.status, result.pause, result.iterations, len(model.requests)) == ("paused", None, 0, 0)
    assert [(m.role, m.text) for m in result.messages] == [("user", "go")]


def test_json_data_a_tool_returns_reaches_the_model_unescaped() -> None:
    @tool
    def city() -> dict[str, str]:
        """Name a city."""
        return {"city": "Zürich", "emoji": "☀"}

    model = scripted_calls(ToolCall("city", {}, "c1"))
    result = Kernel(model, tools=[city]).run_sync("go")
    (answer,) = [m for m in result.messages if m.role == "tool"]
    assert answer.text == '{"city": "Zürich", "emoji": "☀"}'


def test_an_empty_id_in_a_batch_of_otherwise_unique_ids_is_renamed() -> None:
    fixed = unique_calls([ToolCall("echo", {}, "a"), ToolCall("echo", {}, "")])
    assert fixed is not None
    assert [c.id for c in fixed] == ["a", "call_2"]


def test_a_round_completed_with_several_messages_answers_with_the_last() -> None:
    async def answer(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        return IterationResult(status="completed", messages=(Message("assistant", "one"), Message("assistant", "two")))

    result = Kernel(ScriptedModel(["never"]), filters=[Filter("answer", around_iteration=answer)]).run_sync("go")
    assert (result.text, [m.text for m in result.messages]) == ("two", ["go", "one", "two"])
