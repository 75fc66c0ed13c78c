"""Approvals cannot be widened or bypassed: one gate scope, exact decisions, one id per call.

Each numbered finding of the approvals review (1, 2, 4, 7) has a regression test here;
the store-related ones (3, 5, 6) live in tests/memory/test_approvals_stores.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from core._run_tools import RAN, clear_ran, read_file  # noqa: F401  # clear_ran: an autouse fixture

from beamfilter_core import (
    ChatResponse,
    Decision,
    Filter,
    GateRequest,
    IterationRequest,
    IterationResult,
    Kernel,
    Message,
    ScriptedModel,
    ToolCall,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
    Usage,
    heal_tool_calls,
    tool,
)
from beamfilter_core.errors import ConfigError, ResumeError
from beamfilter_core.testing import scripted_calls


@tool
def look(path: str) -> str:
    """Look at a file."""
    RAN.append(("look", path))
    return f"saw {path}"


def _srv_pauses_etc_rejected(call: ToolCall, tool: Any, context: Any) -> Decision:
    if call.arguments["path"].startswith("/etc"):
        return Decision.reject("system files are off limits")
    return Decision.pause("needs a human")


def _srv_pauses_etc_allowed(call: ToolCall, tool: Any, context: Any) -> Decision:
    return Decision.approve() if call.arguments["path"].startswith("/etc") else Decision.pause("needs a human")


def _paused(calls: list[ToolCall], gate: Any = _srv_pauses_etc_rejected, **kw: Any) -> tuple[Kernel, Any]:
    kernel = Kernel(scripted_calls(*calls), tools=[read_file, look], gate=gate, **kw)
    result = kernel.run_sync("go")
    assert result.status == "paused"
    return kernel, result.pause


# -- finding 1: a resume decision never overrides the gate ---------------------------------


def test_finding_1_a_decision_for_a_call_the_gate_rejected_is_refused_and_nothing_runs() -> None:
    kernel, pause = _paused(
        [ToolCall("read_file", {"path": "/etc/shadow"}, "c_etc"), ToolCall("read_file", {"path": "/srv/a"}, "c_srv")]
    )
    assert pause.awaiting == ("c_srv",)
    with pytest.raises(ResumeError) as info:
        kernel.resume_sync(pause, {"c_srv": "approve", "c_etc": "approve"})
    assert str(info.value) == (
        "Cannot resume: call 'c_etc' was decided before the pause (reject); that is final. Awaited calls: c_srv."
    )
    assert RAN == []


def test_finding_1_approving_new_arguments_for_a_call_that_never_awaited_is_refused() -> None:
    kernel, pause = _paused(
        [ToolCall("look", {"path": "/srv/x"}, "c_look"), ToolCall("read_file", {"path": "/srv/a"}, "c_srv")]
    )
    with pytest.raises(ResumeError) as info:
        kernel.resume_sync(pause, {"c_srv": "approve", "c_look": Decision.approve({"path": "/etc/shadow"})})
    assert str(info.value) == "Cannot resume: call 'c_look' did not await a decision. Awaited calls: c_srv."
    assert RAN == []


def test_unknown_missing_and_pause_decisions_are_each_named() -> None:
    kernel, pause = _paused([ToolCall("read_file", {"path": "/srv/a"}, "c1")])
    with pytest.raises(ResumeError, match=r"^Cannot resume: call 'zz' is not in this pause\. Awaited calls: c1\.$"):
        kernel.resume_sync(pause, {"c1": "approve", "zz": "approve"})
    with pytest.raises(ResumeError, match=r"^Cannot resume: no decision for awaited calls: c1\. Awaited calls: c1\.$"):
        kernel.resume_sync(pause, {})
    with pytest.raises(ResumeError, match=r"decisions\['c1'\] is 'pause'; at resume give approve, reject or reply"):
        kernel.resume_sync(pause, {"c1": "pause"})
    with pytest.raises(ResumeError, match=r"decisions is \[\('c1', 'approve'\)\]; give a mapping"):
        kernel.resume_sync(pause, [("c1", "approve")])  # type: ignore[arg-type]
    assert RAN == []


def test_an_invalid_decision_value_is_reported_and_nothing_runs() -> None:
    kernel, pause = _paused([ToolCall("read_file", {"path": "/srv/a"}, "c1")])
    with pytest.raises(ResumeError) as info:
        kernel.resume_sync(pause, {"c1": "maybe"})
    assert str(info.value) == (
        "Cannot resume: decisions['c1'] is 'maybe'; give a Decision (Decision.approve(), Decision.reject(reason), "
        "Decision.reply(text), Decision.pause()) or one of 'approve', 'reject', 'pause'. Awaited calls: c1."
    )
    with pytest.raises(ResumeError, match=r"decisions\['c1'\] is 1;"):
        kernel.resume_sync(pause, {"c1": 1})  # 1 == True, but it is no decision
    assert RAN == []


def test_approved_arguments_are_validated_against_the_tool_schema() -> None:
    kernel, pause = _paused([ToolCall("read_file", {"path": "/srv/a"}, "c1")])
    with pytest.raises(ResumeError) as info:
        kernel.resume_sync(pause, {"c1": Decision.approve({"path": 7})})
    assert str(info.value) == (
        "Cannot resume: decisions['c1']: the approved arguments break the schema of tool 'read_file': "
        "data.path must be string. Awaited calls: c1."
    )
    with pytest.raises(ResumeError, match=r"the approved arguments \['/x'\] are not a mapping"):
        kernel.resume_sync(pause, {"c1": Decision.approve(["/x"])})  # type: ignore[arg-type]
    assert RAN == []
    # valid edited arguments go through the gate again: this gate pauses on /srv, a new pause
    again = kernel.resume_sync(pause, {"c1": Decision.approve({"path": "/srv/b"})})
    assert (again.status, RAN) == ("paused", [])
    assert [dict(c.arguments) for c in again.pause.calls] == [{"path": "/srv/b"}]
    done = kernel.resume_sync(again.pause, {"c1": "approve"})
    assert (done.status, RAN) == ("completed", [("read_file", "/srv/b")])


def test_approved_arguments_go_through_every_tool_filter_like_a_models_call() -> None:
    seen: list[tuple[str, dict[str, Any], bool]] = []

    async def guard(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        seen.append((request.call_id, dict(request.arguments), request.approved))
        if request.arguments.get("path", "").startswith("/etc"):
            return ToolResult.failure("permission", "guard: no /etc")
        return await call_next(request)  # type: ignore[no-any-return]

    calls = [ToolCall("read_file", {"path": "/srv/a"}, "c1"), ToolCall("read_file", {"path": "/srv/b"}, "c2")]
    kernel, pause = _paused(calls, filters=[Filter("guard", around_tool=guard)])
    done = kernel.resume_sync(pause, {"c1": Decision.approve({"path": "/etc/shadow"}), "c2": "approve"})
    # the gate judges the edit first and rejects it: it never reaches the tool filters
    assert sorted(seen) == [("c2", {"path": "/srv/b"}, True)]
    assert RAN == [("read_file", "/srv/b")]
    assert [m.text for m in done.messages if m.role == "tool"] == [
        "The call to 'read_file' was rejected: system files are off limits",
        "read /srv/b",
    ]
    # an edit the gates approve is judged by every tool filter like a model's call
    seen.clear()
    kernel, pause = _paused(calls, gate=_srv_pauses_etc_allowed, filters=[Filter("guard", around_tool=guard)])
    done = kernel.resume_sync(pause, {"c1": Decision.approve({"path": "/etc/hosts"}), "c2": "approve"})
    assert sorted(seen) == [("c1", {"path": "/etc/hosts"}, False), ("c2", {"path": "/srv/b"}, True)]
    assert [m.text for m in done.messages if m.role == "tool"] == ["guard: no /etc", "read /srv/b"]


def test_a_gate_returning_false_rejects_and_true_approves() -> None:
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"), answer="no")
    result = Kernel(model, tools=[read_file], gate=lambda c, t, x: False).run_sync("go")
    assert RAN == []
    assert result.messages[2].text == "The call to 'read_file' was rejected."
    assert result.messages[2].tool_call_id == "c1"
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"), answer="yes")
    Kernel(model, tools=[read_file], gate=lambda c, t, x: True).run_sync("go")
    assert RAN == [("read_file", "/a")]


def test_a_gate_returning_something_else_is_a_config_error() -> None:
    model = scripted_calls(ToolCall("read_file", {"path": "/a"}, "c1"), answer=None)
    with pytest.raises(
        ConfigError, match=r"^The gate's decision for call 'c1' \(read_file\) is 'yes'; give a Decision"
    ):
        Kernel(model, tools=[read_file], gate=lambda c, t, x: "yes").run_sync("go")
    assert RAN == []


# -- finding 2: one id, one call ------------------------------------------------------------


def test_finding_2_duplicate_ids_are_made_unique_in_the_message_and_its_results() -> None:
    calls = [
        ToolCall("read_file", {"path": "/etc/passwd"}, "call_1"),
        ToolCall("read_file", {"path": "/srv/cache"}, "call_1"),
    ]
    kernel, pause = _paused(calls, gate=lambda c, t, x: Decision.pause())
    assert [c.id for c in pause.calls] == ["call_1", "call_1_2"]
    assert pause.awaiting == ("call_1", "call_1_2")
    assert pause.messages[-1].tool_calls == pause.calls
    with pytest.raises(ResumeError, match=r"no decision for awaited calls: call_1_2"):
        kernel.resume_sync(pause, {"call_1": "approve"})
    assert RAN == []
    done = kernel.resume_sync(pause, {"call_1": "reject", "call_1_2": "approve"})
    assert RAN == [("read_file", "/srv/cache")]
    results = [(m.tool_call_id, m.text) for m in done.messages if m.role == "tool"]
    assert results == [("call_1", "The call to 'read_file' was rejected."), ("call_1_2", "read /srv/cache")]


def test_ids_repeated_across_rounds_or_missing_are_renamed_and_the_first_use_keeps_its_id() -> None:
    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("look", {"path": "a"}, "t")),
            ChatResponse.tool_calls(ToolCall("look", {"path": "b"}, "t"), ToolCall("look", {"path": "c"}, "t_2")),
            ChatResponse.tool_calls(ToolCall("look", {"path": "d"}, ""), ToolCall("look", {"path": "e"}, "")),
            "done",
        ]
    )
    result = Kernel(model, tools=[look]).run_sync("go")
    ids = [c.id for m in result.messages for c in m.tool_calls]
    answered = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert ids == ["t", "t_2", "t_2_2", "call_2", "call_3"]
    assert answered == ids
    # the model is sent the renamed ids it answered with, consistently
    assert [c.id for c in model.requests[3].messages[-3].tool_calls] == ["call_2", "call_3"]


# -- finding 4: what the gate decided is final, and the state is consistent ----------------


def test_finding_4_even_an_unsigned_state_whose_parts_disagree_is_refused() -> None:
    kernel, pause = _paused([ToolCall("read_file", {"path": "/srv/a"}, "c1")], unsafe_unsigned_pauses=True)
    pause = _evolve(pause, signature=None)
    extra = ToolCall("read_file", {"path": "/etc/shadow"}, "c2")
    with pytest.raises(ResumeError, match="its calls are not the tool calls of its last assistant message"):
        kernel.resume_sync(_evolve(pause, calls=(*pause.calls, extra)), {"c1": "approve"})
    with pytest.raises(ResumeError, match="it awaits no call"):
        kernel.resume_sync(_evolve(pause, awaiting=(), decided={"c1": Decision.approve({"path": "/etc/shadow"})}), {})
    with pytest.raises(ResumeError, match="calls both decided and awaiting a decision: c1"):
        kernel.resume_sync(_evolve(pause, decided={"c1": Decision.approve()}), {"c1": "approve"})
    with pytest.raises(ResumeError, match="it names calls it does not hold: c9"):
        kernel.resume_sync(_evolve(pause, awaiting=("c1", "c9")), {"c1": "approve", "c9": "approve"})
    assert RAN == []
    done = kernel.resume_sync(pause, {"c1": "approve"})  # the explicit unsafe option: unsigned is accepted
    assert (done.status, RAN) == ("completed", [("read_file", "/srv/a")])


def _evolve(pause: Any, **changes: Any) -> Any:
    import attrs

    return attrs.evolve(pause, **changes)


# -- the gate scope -------------------------------------------------------------------------


def test_gate_layers_run_in_list_order_and_the_kernel_gate_is_the_innermost() -> None:
    log: list[str] = []

    def layer(name: str) -> Filter:
        async def around_gate(request: GateRequest, state: dict[str, Any], call_next: Any) -> Decision:
            log.append(f"{name} {request.call.id} {request.tool.name}")
            decision: Decision = await call_next(request)
            log.append(f"{name} got {decision.kind}")
            return decision

        return Filter(name, around_gate=around_gate)

    def kernel_gate(call: ToolCall, tool: Any, context: Any) -> str:
        log.append(f"kernel {call.id}")
        return "approve"

    calls = [
        ToolCall("look", {"path": "a"}, "c1"),
        ToolCall("read_file", {"path": "b"}, "c2"),
        ToolCall("nope", {}, "c3"),
    ]
    model = scripted_calls(*calls)
    kernel = Kernel(model, tools=[look, read_file], filters=[layer("outer"), layer("inner")], gate=kernel_gate)
    assert [n for n, _ in [(kernel.filters[i].name, h) for i, h in kernel.chain("gate").layers]] == ["outer", "inner"]
    kernel.run_sync("go")
    assert log == [
        "outer c1 look",
        "inner c1 look",
        "inner got approve",
        "outer got approve",
        "outer c2 read_file",
        "inner c2 read_file",
        "kernel c2",
        "inner got approve",
        "outer got approve",
    ]
    assert sorted(RAN) == [("look", "a"), ("read_file", "b")]


def test_a_gate_layer_may_change_the_arguments_and_later_layers_see_them() -> None:
    seen: list[Any] = []

    async def rewrite(request: GateRequest, state: dict[str, Any], call_next: Any) -> Decision:
        call = request.call
        return await call_next(request.replace(call=ToolCall(call.name, {"path": "/safe"}, call.id)))  # type: ignore[no-any-return]

    def kernel_gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        seen.append(dict(call.arguments))
        return Decision.approve()

    model = scripted_calls(ToolCall("read_file", {"path": "/etc"}, "c1"))
    Kernel(model, tools=[read_file], filters=[Filter("rewrite", around_gate=rewrite)], gate=kernel_gate).run_sync("go")
    assert seen == [{"path": "/safe"}]
    assert RAN == [("read_file", "/safe")]


def test_a_gate_filter_pauses_without_a_kernel_gate_and_check_returns_names_a_bad_layer() -> None:
    async def hold(request: GateRequest, state: dict[str, Any], call_next: Any) -> Any:
        return Decision.pause("hold") if request.call.name == "look" else "approve"

    model = scripted_calls(ToolCall("look", {"path": "a"}, "c1"))
    kernel = Kernel(model, tools=[look], filters=[Filter("hold", around_gate=hold)])
    assert kernel.gate is None
    paused = kernel.run_sync("go")
    assert (paused.status, paused.pause.awaiting, paused.pause.reason) == ("paused", ("c1",), "hold")
    bad = Kernel(
        scripted_calls(ToolCall("read_file", {"path": "a"}, "c1"), answer=None),
        tools=[read_file],
        filters=[Filter("hold", around_gate=hold)],
        check_returns=True,
    )
    with pytest.raises(ConfigError, match=r"^Filter 'hold' returned 'approve' \(a str\) from around_gate"):
        bad.run_sync("go")
    assert RAN == []


# -- the tool loop around a resume (pinned behaviours) --------------------------------------


def test_usage_after_a_resume_adds_the_paused_runs_usage() -> None:
    first = ChatResponse(
        Message("assistant", None, (ToolCall("read_file", {"path": "/a"}, "c1"),)), "tool_calls", Usage(10, 2, 12)
    )
    model = ScriptedModel([first, ChatResponse.from_text("done", usage=Usage(20, 3, 23))])
    kernel = Kernel(model, tools=[read_file], gate=lambda c, t, x: "pause")
    paused = kernel.run_sync("go")
    assert paused.usage == Usage(10, 2, 12) == paused.pause.usage
    done = kernel.resume_sync(paused.pause, {"c1": "approve"})
    assert done.usage == Usage(30, 5, 35)
    assert (done.iterations, done.tool_calls_made) == (2, 1)


def test_a_turn_filter_that_replaces_the_context_reaches_the_tools_and_the_model() -> None:
    seen: list[Any] = []

    @tool
    def whoami(context: Any) -> str:
        """Say who the user is."""
        seen.append(dict(context))
        return str(context["user"])

    async def as_bob(request: TurnRequest, state: dict[str, Any], call_next: Any) -> TurnResult:
        return await call_next(request.replace(context={"user": "bob"}))  # type: ignore[no-any-return]

    model = scripted_calls(ToolCall("whoami", {}, "c1"))
    filters = [Filter("as_bob", around_turn=as_bob), _context_spy(contexts := [])]
    Kernel(model, tools=[whoami], filters=filters).run_sync("go", context={"user": "ann"})
    assert seen == [{"user": "bob"}]
    assert contexts == [{"user": "bob"}, {"user": "bob"}]


def _context_spy(contexts: list[dict[str, Any]]) -> Filter:
    async def spy(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        contexts.append(dict(request.context))
        return await call_next(request)

    return Filter("spy", around_chat=spy)


def test_a_rerun_round_starts_from_the_context_of_the_round_start() -> None:
    @tool
    def remember(key: str) -> ToolResult:
        """Remember a key."""
        return ToolResult("ok", writes={key: True})

    async def twice(request: IterationRequest, state: dict[str, Any], call_next: Any) -> IterationResult:
        if request.index == 0 and not state.get("done"):
            state["done"] = True
            await call_next(request)  # the first attempt writes "first", then is thrown away
        return await call_next(request)  # type: ignore[no-any-return]

    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("remember", {"key": "first"}, "c1")),
            ChatResponse.tool_calls(ToolCall("remember", {"key": "second"}, "c2")),
            "done",
        ]
    )
    contexts: list[dict[str, Any]] = []
    kernel = Kernel(model, tools=[remember], filters=[Filter("twice", around_iteration=twice), _context_spy(contexts)])
    result = kernel.run_sync("go", context={"kept": 1})
    assert contexts == [{"kept": 1}, {"kept": 1}, {"kept": 1, "second": True}]
    assert [c.id for m in result.messages for c in m.tool_calls] == ["c2"]


def test_heal_answers_only_the_unanswered_calls_of_a_partly_answered_batch() -> None:
    calls = (ToolCall("look", {"path": "a"}, "c1"), ToolCall("look", {"path": "b"}, "c2"))
    messages = (Message.user("go"), Message("assistant", None, calls), Message.tool("c1", "saw a", "look"))
    healed = heal_tool_calls(messages, "gone")
    assert healed is not None
    assert [(m.role, m.tool_call_id, m.text) for m in healed] == [
        ("user", None, "go"),
        ("assistant", None, ""),
        ("tool", "c1", "saw a"),
        ("tool", "c2", "gone"),
    ]
