"""Approvals that hold end to end (issue 26, the parts without a store): edited arguments go
through the gate chain again, an outer gate's rewrite is what the reviewer sees and what
runs, a lone surrogate in a pause is a typed error, a pause is bound to its conversation.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Decision,
    Filter,
    GateRequest,
    Kernel,
    ScriptedModel,
    ToolCall,
    ToolRequest,
    ToolResult,
    tool,
)
from beamfilter_core.errors import ConfigError, PauseSignatureError

pytestmark = pytest.mark.anyio

KEY = "exactly-once-pause-key"


def _bank() -> tuple[Any, list[tuple[str, int]]]:
    paid: list[tuple[str, int]] = []

    @tool(sensitive=True)
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        paid.append((to, amount))
        return f"sent {amount} to {to}"

    return transfer, paid


def _pay(to: str, amount: int, call_id: str = "t1") -> ChatResponse:
    return ChatResponse.tool_calls(ToolCall("transfer", {"to": to, "amount": amount}, call_id))


def _policy(call: ToolCall, tool: Any, context: Any) -> Decision:
    """The kernel's gate: mallory is never paid, more than 1000 waits for a human."""
    if call.arguments["to"] == "mallory":
        return Decision.reject("not a payee")
    if call.arguments["amount"] > 1000:
        return Decision.pause("large payment")
    return Decision.approve()


def _judged(seen: list[tuple[str, int]]) -> Filter:
    """A gate filter that records every call it judges and refuses 'eve'."""

    async def around_gate(
        request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
    ) -> Decision:
        seen.append((request.call.arguments["to"], request.call.arguments["amount"]))
        if request.call.arguments["to"] == "eve":
            return Decision.reject("eve is blocked by the filter")
        return await call_next(request)

    return Filter("judge", around_gate=around_gate)


def _tool_log(seen: list[dict[str, Any]]) -> Filter:
    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        seen.append({"arguments": dict(request.arguments), "approved": request.approved})
        return await call_next(request)

    return Filter("tool_log", around_tool=around_tool)


async def test_an_edit_the_kernel_gate_rejects_never_runs() -> None:
    transfer, paid = _bank()
    seen: list[tuple[str, int]] = []
    model = ScriptedModel([_pay("bob", 5000), "Understood."])
    kernel = Kernel(model, tools=[transfer], filters=[_judged(seen)], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay bob 5000")
    assert paused.status == "paused"
    result = await kernel.resume(paused.pause, {"t1": Decision.approve({"to": "mallory", "amount": 5})})
    assert paid == []
    assert seen == [("bob", 5000), ("mallory", 5)]
    assert result.text == "Understood."
    tool_message = result.messages[-2]
    assert (tool_message.role, tool_message.tool_call_id, tool_message.text) == (
        "tool",
        "t1",
        "The call to 'transfer' was rejected: not a payee",
    )


async def test_an_edit_a_gate_filter_rejects_never_runs() -> None:
    transfer, paid = _bank()
    seen: list[tuple[str, int]] = []
    model = ScriptedModel([_pay("bob", 5000), "Understood."])
    kernel = Kernel(model, tools=[transfer], filters=[_judged(seen)], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay bob 5000")
    result = await kernel.resume(paused.pause, {"t1": Decision.approve({"to": "eve", "amount": 5})})
    assert paid == []
    assert seen == [("bob", 5000), ("eve", 5)]
    assert result.messages[-2].text == "The call to 'transfer' was rejected: eve is blocked by the filter"


async def test_an_edit_a_gate_pauses_again_is_a_new_pause_not_a_run() -> None:
    transfer, paid = _bank()
    seen: list[tuple[str, int]] = []
    model = ScriptedModel([_pay("bob", 5000), "Sent."])
    kernel = Kernel(model, tools=[transfer], filters=[_judged(seen)], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay bob 5000")
    assert paused.pause is not None
    again = await kernel.resume(paused.pause, {"t1": Decision.approve({"to": "carol", "amount": 2000})})
    assert paid == []
    assert again.status == "paused"
    pause = again.pause
    assert pause is not None
    assert pause.pause_id != paused.pause.pause_id
    assert (pause.awaiting, pause.reason) == (("t1",), "large payment")
    # the reviewer is shown the edited call, in the pause and in its transcript
    assert [(c.id, dict(c.arguments)) for c in pause.calls] == [("t1", {"to": "carol", "amount": 2000})]
    assert pause.messages[-1].tool_calls == pause.calls
    done = await kernel.resume(pause, {"t1": "approve"})
    assert (done.status, done.text, paid) == ("completed", "Sent.", [("carol", 2000)])
    assert seen == [("bob", 5000), ("carol", 2000)]


async def test_an_edit_the_gates_approve_runs_once_and_is_checked_by_tool_filters() -> None:
    transfer, paid = _bank()
    gate_seen: list[tuple[str, int]] = []
    tool_seen: list[dict[str, Any]] = []
    model = ScriptedModel([_pay("bob", 5000), "Sent."])
    filters = [_judged(gate_seen), _tool_log(tool_seen)]
    kernel = Kernel(model, tools=[transfer], filters=filters, gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay bob 5000")
    done = await kernel.resume(paused.pause, {"t1": Decision.approve({"to": "bob", "amount": 50})})
    assert (done.text, paid) == ("Sent.", [("bob", 50)])
    assert gate_seen == [("bob", 5000), ("bob", 50)]
    # an edited call is not "approved as paused": tool filters judge it like a model's call
    assert tool_seen == [{"arguments": {"to": "bob", "amount": 50}, "approved": False}]


async def test_an_edit_with_several_calls_re_pauses_only_the_edited_one_and_runs_nothing() -> None:
    transfer, paid = _bank()
    calls = ChatResponse.tool_calls(
        ToolCall("transfer", {"to": "bob", "amount": 5000}, "a"),
        ToolCall("transfer", {"to": "ann", "amount": 3000}, "b"),
    )
    kernel = Kernel(ScriptedModel([calls, "Both sent."]), tools=[transfer], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay both")
    assert paused.pause is not None
    assert paused.pause.awaiting == ("a", "b")
    again = await kernel.resume(paused.pause, {"a": "approve", "b": Decision.approve({"to": "ann", "amount": 4000})})
    assert (again.status, paid) == ("paused", [])
    assert again.pause is not None
    assert again.pause.awaiting == ("b",)
    assert again.pause.decided == {"a": Decision.approve()}
    done = await kernel.resume(again.pause, {"b": "approve"})
    assert (done.text, sorted(paid)) == ("Both sent.", [("ann", 4000), ("bob", 5000)])


def _cap(limit: int) -> Filter:
    async def around_gate(
        request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
    ) -> Decision:
        call = request.call
        if call.arguments["amount"] > limit:
            call = ToolCall(call.name, {**call.arguments, "amount": limit}, call.id)
        return await call_next(request.replace(call=call))

    return Filter("cap", around_gate=around_gate)


async def test_an_outer_gates_rewrite_is_what_the_reviewer_sees_and_what_runs() -> None:
    transfer, paid = _bank()
    model = ScriptedModel([_pay("bob", 10_000), "Sent."])
    pause_all = lambda call, tool, context: Decision.pause("a human decides")  # noqa: E731
    kernel = Kernel(model, tools=[transfer], filters=[_cap(100)], gate=pause_all, pause_key=KEY)
    paused = await kernel.run("pay bob 10000")
    pause = paused.pause
    assert pause is not None
    assert [dict(c.arguments) for c in pause.calls] == [{"to": "bob", "amount": 100}]
    assert pause.messages[-1].tool_calls == pause.calls
    done = await kernel.resume(pause, {"t1": "approve"})
    assert (done.text, paid) == ("Sent.", [("bob", 100)])


async def test_a_gate_filter_that_pauses_may_name_the_arguments_it_was_shown() -> None:
    transfer, paid = _bank()

    async def pause_here(
        request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
    ) -> Decision:
        return Decision("pause", request.call.arguments, "shown")

    model = ScriptedModel([_pay("bob", 10_000), "Sent."])
    kernel = Kernel(model, tools=[transfer], filters=[_cap(100), Filter("ask", around_gate=pause_here)], pause_key=KEY)
    paused = await kernel.run("pay")
    assert paused.pause is not None
    assert [dict(c.arguments) for c in paused.pause.calls] == [{"to": "bob", "amount": 100}]
    await kernel.resume(paused.pause, {"t1": "approve"})
    assert paid == [("bob", 100)]


async def test_a_lone_surrogate_in_paused_arguments_is_a_typed_error() -> None:
    transfer, paid = _bank()
    model = ScriptedModel([_pay("b\udc80b", 5000)])
    kernel = Kernel(model, tools=[transfer], gate=_policy, pause_key=KEY)
    with pytest.raises(ConfigError) as caught:
        await kernel.run("pay")
    assert str(caught.value) == (
        "The run paused with a lone surrogate (an undecodable byte) at calls[0].arguments['to'] = 'b\\udc80b', "
        "which a pause cannot carry: a pause is signed UTF-8 JSON. Decode the text properly (or encode the "
        "bytes, e.g. as hex or base64) before it reaches the call, the context or the transcript."
    )
    assert paid == []


async def test_a_lone_surrogate_in_the_context_of_a_pause_is_a_typed_error() -> None:
    transfer, _ = _bank()
    kernel = Kernel(ScriptedModel([_pay("bob", 5000)]), tools=[transfer], gate=_policy, pause_key=KEY)
    with pytest.raises(ConfigError, match=r"at context\['path'\] = '/tmp/\\udcff', which a pause cannot carry"):
        await kernel.run("pay", context={"path": "/tmp/\udcff"})


async def test_a_pause_resumed_in_another_conversation_is_refused_before_anything_runs() -> None:
    transfer, paid = _bank()
    kernel = Kernel(ScriptedModel([_pay("bob", 5000), "Sent."]), tools=[transfer], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay", context={"conversation_id": "ada", "user_id": "ada"})
    assert paused.pause is not None
    text = paused.pause.to_json()
    expected = (
        f"Cannot resume: pause {paused.pause.pause_id!r} was made in conversation 'ada' and is signed for it; "
        "it cannot resume in conversation 'mallory' (a copied or moved pause)."
    )
    for attempt in (
        lambda: kernel.resume(text, {"t1": "approve"}, conversation_id="mallory"),
        lambda: kernel.resume(text, {"t1": "approve"}, context={"conversation_id": "mallory"}),
    ):
        with pytest.raises(PauseSignatureError) as caught:
            await attempt()
        assert str(caught.value) == expected
    assert paid == []
    done = await kernel.resume(text, {"t1": "approve"}, conversation_id="ada")
    assert (done.text, paid) == ("Sent.", [("bob", 5000)])


async def test_a_pause_made_without_a_conversation_is_refused_in_one() -> None:
    transfer, paid = _bank()
    kernel = Kernel(ScriptedModel([_pay("bob", 5000), "Sent."]), tools=[transfer], gate=_policy, pause_key=KEY)
    paused = await kernel.run("pay")
    assert paused.pause is not None
    with pytest.raises(
        PauseSignatureError, match=r"was made outside any conversation; it cannot resume in conversation 'x'"
    ):
        await kernel.resume(paused.pause, {"t1": "approve"}, conversation_id="x")
    assert paid == []
    assert json.loads(paused.pause.to_json())["context"] == {}


@pytest.mark.parametrize(
    ("context", "text", "where"),
    [
        ({"k\udc80": 1}, "pay", "context (a key) = 'k\\udc80'"),
        ({}, "pay \udc81 now", "messages[0].content = 'pay \\udc81 now'"),
        ({"x": ["a", "b\udc82"]}, "pay", "context['x'][1] = 'b\\udc82'"),
        ({"long": "\udc83" + "x" * 80}, "pay", "context['long'] = '\\udc83" + "x" * 59 + "'..."),
    ],
)
async def test_a_lone_surrogate_anywhere_in_a_pause_is_named_by_its_place(
    context: dict[str, Any], text: str, where: str
) -> None:
    transfer, _ = _bank()
    kernel = Kernel(ScriptedModel([_pay("bob", 5000)]), tools=[transfer], gate=_policy, pause_key=KEY)
    with pytest.raises(ConfigError) as caught:
        await kernel.run(text, context=context)
    assert str(caught.value).startswith(f"The run paused with a lone surrogate (an undecodable byte) at {where}, ")


async def test_an_edit_for_a_tool_this_kernel_lacks_is_answered_as_an_unknown_tool() -> None:
    transfer, paid = _bank()
    made = Kernel(ScriptedModel([_pay("bob", 5000)]), tools=[transfer], gate=_policy, pause_key=KEY)
    paused = await made.run("pay")
    assert paused.pause is not None

    @tool
    def look(path: str) -> str:
        """Look."""
        return path

    other = Kernel(ScriptedModel(["No such tool."]), tools=[look], gate=_policy, pause_key=KEY)
    done = await other.resume(paused.pause, {"t1": Decision.approve({"to": "carol", "amount": 5})})
    assert (done.text, paid) == ("No such tool.", [])
    assert done.messages[-2].text == "Unknown tool 'transfer'. Available tools: look. Call one of these."
