"""Paths of one run that no test reached, each pinned by the exact value it produces.

Found by mutation testing of ``beamfilter_core._run``: a sync call refused while every
tool thread is busy; errors leaving the kernel's gate, the iteration terminal and the
turn terminal, which belong to no filter even with a filter of that scope around them;
and a resumed turn entered again by a turn filter, which starts a fresh loop instead of
resuming the pause a second time.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from core._run_tools import RAN, clear_ran, echo, read_file  # noqa: F401  # clear_ran: an autouse fixture

from beamfilter_core import (
    ChatResponse,
    Filter,
    IterationRequest,
    Kernel,
    Message,
    ScriptedModel,
    ToolCall,
    ToolFailure,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
    _tools,
    tool,
)
from beamfilter_core.errors import ConfigError, MaxIterationsExceeded
from beamfilter_core.testing import passthrough, scripted_calls

# -- the sync-tool executor's busy answer ------------------------------------------------------


def test_a_sync_call_refused_while_every_tool_thread_is_busy_is_a_transient_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    idle = _tools._SyncCalls.busy  # threads another test left hanging, if any
    monkeypatch.setattr(_tools, "SYNC_TOOL_THREADS", idle + 2)
    release = threading.Event()

    @tool(timeout=0.05)
    def hang() -> str:
        """Hangs until released (10 s at most)."""
        release.wait(10)
        return "late"

    seen: list[ToolResult] = []

    async def spy(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        result: ToolResult = await call_next(request)
        seen.append(result)
        return result

    busy = (
        f"Tool 'echo' was not run: all {idle + 2} threads for sync tools are busy "
        "(tools that hang past their timeout keep theirs); try again later."
    )
    try:
        hung = ChatResponse.tool_calls(ToolCall("hang", {}, "h1"), ToolCall("hang", {}, "h2"))
        first = Kernel(ScriptedModel([hung, "gave up"]), tools=[hang]).run_sync("hang twice")
        assert [m.text for m in first.messages if m.role == "tool"] == ["Tool 'hang' timed out after 0.05 s."] * 2
        # both threads still hang: the next sync call is refused at once, without running
        model = scripted_calls(ToolCall("echo", {"text": "hi"}, "c1"), answer="later then")
        kernel = Kernel(model, tools=[echo], filters=[Filter("spy", around_tool=spy)])
        result = kernel.run_sync("echo hi")
        assert RAN == []
        assert [(r.content, r.error, r.ok) for r in seen] == [(busy, ToolFailure("transient", busy), False)]
        assert [(m.role, m.text) for m in result.messages] == [
            ("user", "echo hi"),
            ("assistant", ""),
            ("tool", busy),
            ("assistant", "later then"),
        ]
        assert model.requests[1].messages[-1] == Message.tool("c1", busy, "echo")
    finally:
        release.set()
    for _ in range(500):  # the released threads give their places back
        if _tools._SyncCalls.busy == idle:
            break
        time.sleep(0.01)
    assert _tools._SyncCalls.busy == idle
    assert Kernel(scripted_calls(ToolCall("echo", {"text": "again"}, "c1")), tools=[echo]).run_sync("go").text == "done"
    assert RAN == [("echo", "again")]


# -- errors leaving a terminal belong to no filter -----------------------------------------------


def test_the_kernel_gates_own_error_is_not_blamed_on_the_gate_filter_around_it() -> None:
    def gate(call: ToolCall, tool: Any, context: Any) -> str:
        raise ValueError(f"the review service is down (call {call.id})")

    kernel = Kernel(
        scripted_calls(ToolCall("read_file", {"path": "/srv/a"}, "c1")),
        tools=[read_file],
        gate=gate,
        filters=[Filter("audit", around_gate=passthrough)],
    )
    with pytest.raises(ValueError, match=r"^the review service is down \(call c1\)$") as info:
        kernel.run_sync("read it")
    assert type(info.value) is ValueError  # not a FilterError naming 'audit'
    assert RAN == []


def test_a_wrong_decision_of_the_kernels_gate_is_its_own_error_not_the_gate_filters() -> None:
    def gate(call: ToolCall, tool: Any, context: Any) -> Any:
        return 42

    kernel = Kernel(
        scripted_calls(ToolCall("read_file", {"path": "/srv/a"}, "c1")),
        tools=[read_file],
        gate=gate,
        filters=[Filter("audit", around_gate=passthrough)],
    )
    with pytest.raises(ConfigError) as info:
        kernel.run_sync("read it")
    assert info.value.filter_name is None
    assert str(info.value) == (
        "The gate's decision for call 'c1' (read_file) is 42; give a Decision (Decision.approve(), "
        "Decision.reject(reason), Decision.reply(text), Decision.pause()) or one of 'approve', 'reject', 'pause'."
    )
    assert RAN == []


def test_the_iteration_budget_error_is_not_blamed_on_the_iteration_filter_around_it() -> None:
    rounds: list[int] = []

    async def count(request: IterationRequest, state: dict[str, Any], call_next: Any) -> Any:
        rounds.append(request.index)
        return await call_next(request)

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("echo", {"text": "x"}, "c1"))], repeat=True)
    kernel = Kernel(model, tools=[echo], max_iterations=2, filters=[Filter("counter", around_iteration=count)])
    with pytest.raises(MaxIterationsExceeded) as info:
        kernel.run_sync("loop")
    error = info.value
    assert error.filter_name is None
    assert str(error) == (
        "The run needed more than max_iterations=2 LLM calls; "
        "raise max_iterations or stop the model from calling tools forever (e.g. loop_guard)."
    )
    assert (error.max_iterations, rounds, len(model.requests)) == (2, [0, 1, 2], 2)
    assert [m.role for m in error.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert RAN == [("echo", "x"), ("echo", "x")]


def test_a_wrong_iteration_result_is_the_runs_error_not_the_turn_filters_around_it() -> None:
    async def bad(request: IterationRequest, state: dict[str, Any], call_next: Any) -> Any:
        return "nope"

    kernel = Kernel(
        ScriptedModel(["never asked"]),
        filters=[Filter("outer", around_turn=passthrough), Filter("bad", around_iteration=bad)],
    )
    with pytest.raises(ConfigError) as info:
        kernel.run_sync("hi")
    assert info.value.filter_name is None  # the text names the chain; no filter's code raised it
    assert str(info.value) == (
        "the iteration chain (filters, outermost first: bad) returned 'nope' (a str); "
        "around_iteration hooks must return a IterationResult."
    )


# -- a resumed turn entered again ----------------------------------------------------------------


def _paused(kernel: Kernel) -> Any:
    paused = kernel.run_sync("read /srv/a")
    assert paused.status == "paused"
    assert paused.pause is not None
    return paused.pause


def test_a_turn_filter_entering_again_after_a_resume_starts_a_fresh_loop() -> None:
    entries: list[tuple[bool, int, int]] = []

    async def follow_up(request: TurnRequest, state: dict[str, Any], call_next: Any) -> TurnResult:
        entries.append((request.resume, len(request.history), len(request.messages)))
        result: TurnResult = await call_next(request)
        if request.resume:
            return await call_next(request.followup(result, Message.user("and the size?")))  # type: ignore[no-any-return]
        return result

    model = ScriptedModel(
        [ChatResponse.tool_calls(ToolCall("read_file", {"path": "/srv/a"}, "c1")), "it says a", "12 bytes"]
    )
    kernel = Kernel(
        model,
        tools=[read_file],
        gate=lambda call, tool, context: "pause",
        filters=[Filter("follow_up", around_turn=follow_up)],
    )
    pause = _paused(kernel)
    done = kernel.resume_sync(pause, {"c1": "approve"})
    assert RAN == [("read_file", "/srv/a")]  # the approved call ran once, not once per entry
    assert entries == [(False, 0, 1), (True, 0, 0)]
    assert (done.status, done.text, done.tool_calls_made, done.iterations) == ("completed", "12 bytes", 0, 1)
    assert [(m.role, m.text) for m in done.messages] == [
        ("user", "read /srv/a"),
        ("assistant", ""),
        ("tool", "read /srv/a"),
        ("assistant", "it says a"),
        ("user", "and the size?"),
        ("assistant", "12 bytes"),
    ]
    # the second entry's request: the resumed transcript as history, then the new question
    assert [(m.role, m.text) for m in model.requests[-1].messages] == [(m.role, m.text) for m in done.messages[:5]]
    assert len(model.requests) == 3
