"""approval: only sensitive tools reach the approver; a rejection is a tool result."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import approval_filter
from beamfilter_builtins._approval import SPEC
from beamfilter_core import ChatResponse, Decision, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError, FilterError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def make(approve: Any, ran: list[str]) -> tuple[Kernel, ScriptedModel]:
    @tool(sensitive=True)
    def delete(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete {path}")
        return f"deleted {path}"

    @tool
    def read(path: str) -> str:
        """Read a file."""
        ran.append(f"read {path}")
        return f"read {path}"

    calls = ChatResponse.tool_calls(ToolCall("delete", {"path": "/a"}, "c1"), ToolCall("read", {"path": "/b"}, "c2"))
    model = ScriptedModel([calls, "done"])
    return Kernel(model, tools=[delete, read], filters=[approval_filter(approve)]), model


async def test_rejection_is_a_tool_result_and_tool_never_runs(stream: bool) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    def approve(name: str, arguments: dict[str, Any]) -> bool:
        asked.append((name, arguments))
        return False

    ran: list[str] = []
    kernel, model = make(approve, ran)
    result, _ = await run_turn(kernel, "clean up", stream)
    assert result.text == "done"
    assert asked == [("delete", {"path": "/a"})]  # the non-sensitive tool never reaches it
    assert ran == ["read /b"]
    tool_messages = [m for m in model.requests[1].messages if m.role == "tool"]
    assert [(m.tool_call_id, m.text) for m in tool_messages] == [
        ("c1", "The user rejected this call to the sensitive tool 'delete'. Do not retry it."),
        ("c2", "read /b"),
    ]


async def test_async_approver_and_decisions(stream: bool) -> None:
    async def approve(name: str, arguments: dict[str, Any]) -> Decision:
        return Decision.approve({"path": "/safe"})

    ran: list[str] = []
    kernel, _ = make(approve, ran)
    result, _ = await run_turn(kernel, "go", stream)
    assert sorted(ran) == ["delete /safe", "read /b"]
    assert result.tool_calls_made == 2

    ran.clear()
    kernel, model = make(lambda n, a: Decision.reject("too risky"), ran)
    await run_turn(kernel, "go", stream)
    assert ran == ["read /b"]
    assert model.requests[1].messages[-2].text == (
        "The user rejected this call to the sensitive tool 'delete': too risky. Do not retry it."
    )
    ran.clear()
    kernel, model = make(lambda n, a: Decision.reply("pretend deleted"), ran)
    await run_turn(kernel, "go", stream)
    assert ran == ["read /b"]
    assert model.requests[1].messages[-2].text == "pretend deleted"


async def test_approved_runs_the_tool() -> None:
    ran: list[str] = []
    kernel, _ = make(lambda n, a: True, ran)
    await kernel.run("go")
    assert sorted(ran) == ["delete /a", "read /b"]


async def test_bad_verdict_and_options() -> None:
    kernel, _ = make(lambda n, a: "maybe", [])
    with pytest.raises(ConfigError, match="returned 'maybe'") as info:
        await kernel.run("go")
    assert info.value.filter_name == "approval"
    with pytest.raises(ConfigError, match="cannot import module 'no_such_mod'"):
        approval_filter("no_such_mod:fn")
    with pytest.raises(ConfigError, match="has no attribute 'nope'"):
        approval_filter("json:nope")
    with pytest.raises(ConfigError, match="not callable"):
        approval_filter("json:__doc__")
    assert approval_filter("json:dumps").scopes == ("gate",)
    assert SPEC.name == "approval"
    assert FilterError is not None


async def test_the_approver_can_pause_and_a_human_decides() -> None:
    ran: list[str] = []
    kernel, _model = make(lambda n, a: Decision.pause("ask Ann"), ran)
    paused = await kernel.run("go")
    assert (paused.status, paused.pause.awaiting, paused.pause.reason, ran) == ("paused", ("c1",), "ask Ann", [])
    done = await kernel.resume(paused.pause, {"c1": "approve"})
    assert done.text == "done"
    assert sorted(ran) == ["delete /a", "read /b"]


async def test_an_approval_still_reaches_the_kernel_gate() -> None:
    ran: list[str] = []
    kernel, _ = make(lambda n, a: Decision.approve({"path": "/tmp/x"}), ran)
    seen: list[dict[str, Any]] = []

    def gate(call: ToolCall, tool: Any, context: Any) -> Decision:
        seen.append(dict(call.arguments))
        return Decision.reject("the kernel says no")

    kernel = Kernel(kernel.model, tools=kernel.tools, filters=kernel.filters, gate=gate)
    result = await kernel.run("go")
    assert seen == [{"path": "/tmp/x"}]
    assert ran == ["read /b"]
    assert result.messages[2].text == "The call to 'delete' was rejected: the kernel says no"


async def test_without_an_approver_every_sensitive_call_waits_for_a_human(stream: bool) -> None:
    ran: list[str] = []
    kernel, model = make(None, ran)
    paused, _text = await run_turn(kernel, "go", stream=stream)
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause.awaiting == ("c1",)
    assert paused.pause.reason == "'delete' is a sensitive tool: a human decides"
    assert ran == []  # the batch waits: the read did not run either
    rejected = await kernel.resume(paused.pause, {"c1": Decision.reject("not today")})
    assert rejected.text == "done"
    assert ran == ["read /b"]
    assert len(model.requests) == 2


async def test_without_an_approver_a_human_approval_runs_the_call_once() -> None:
    ran: list[str] = []
    kernel, _ = make(None, ran)
    paused = await kernel.run("go")
    assert paused.pause is not None
    done = await kernel.resume(paused.pause, {"c1": "approve"})
    assert done.text == "done"
    assert sorted(ran) == ["delete /a", "read /b"]


def test_enabled_by_name_with_no_options_it_pauses_for_a_human() -> None:
    from beamfilter_core import Kernel as K

    kernel = K.from_config({"model": {"use": "scripted", "script": ["hi"]}, "filters": [{"use": "approval"}]})
    assert [f.name for f in kernel.filters] == ["approval"]
    assert kernel.filters[0].scopes == ("gate",)


def _cap_to(limit: int) -> Any:
    from beamfilter_core import Filter, GateRequest

    async def around_gate(request: GateRequest, state: dict[str, Any], call_next: Any) -> Decision:
        call = request.call
        capped = ToolCall(call.name, {**call.arguments, "amount": min(call.arguments["amount"], limit)}, call.id)
        return await call_next(request.replace(call=capped))  # type: ignore[no-any-return]

    return Filter("cap", around_gate=around_gate)


@pytest.mark.parametrize(
    "approve", [None, lambda name, arguments: Decision.pause("ask")], ids=["no approver", "approver pauses"]
)
async def test_a_pause_shows_and_runs_the_call_an_outer_gate_rewrote(approve: Any) -> None:
    paid: list[int] = []

    @tool(sensitive=True)
    def transfer(amount: int) -> str:
        """Send money."""
        paid.append(amount)
        return f"sent {amount}"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("transfer", {"amount": 10_000}, "t1")), "Sent."])
    kernel = Kernel(model, tools=[transfer], filters=[_cap_to(100), approval_filter(approve)], pause_key="k" * 16)
    paused = await kernel.run("pay 10000")
    assert paused.pause is not None
    assert [dict(call.arguments) for call in paused.pause.calls] == [{"amount": 100}]
    done = await kernel.resume(paused.pause, {"t1": "approve"})
    assert (done.text, paid) == ("Sent.", [100])
