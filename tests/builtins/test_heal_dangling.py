"""heal_dangling: dangling tool calls get a synthetic result before a new turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from beamfilter_builtins import heal_dangling_filter
from beamfilter_builtins._heal_dangling import DEFAULT_TEXT, SPEC, heal_messages
from beamfilter_core import ChatRequest, ChatResponse, Decision, Filter, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


def shape(messages: Any) -> list[tuple[str, str | None, str]]:
    return [(m.role, m.tool_call_id, m.text) for m in messages]


A = ToolCall("search", {"q": "x"}, "call_a")
B = ToolCall("fetch", {"url": "u"}, "call_b")
OLD = (
    Message.user("first question"),
    Message.assistant(None, (A, B)),
    Message.tool("call_a", "hits", "search"),  # call_b never answered
    Message.tool("call_zzz", "orphan result", "gone"),
    Message.user("second question"),
)


def test_heal_messages() -> None:
    healed = heal_messages(OLD)
    assert healed is not None
    assert shape(healed) == [
        ("user", None, "first question"),
        ("assistant", None, ""),
        ("tool", "call_a", "hits"),
        ("tool", "call_b", DEFAULT_TEXT),
        ("user", None, "second question"),
    ]
    assert heal_messages(healed) is None  # a clean transcript is left alone
    kept = heal_messages(OLD, "gone", drop_orphans=False)
    assert kept is not None
    assert [m.tool_call_id for m in kept if m.role == "tool"] == ["call_a", "call_zzz", "call_b"]
    trailing = heal_messages((Message.user("q"), Message.assistant(None, (A,))))
    assert trailing is not None
    assert shape(trailing)[-1] == ("tool", "call_a", DEFAULT_TEXT)


async def test_entry_transcript_is_healed_before_the_model_sees_it(stream: bool) -> None:
    model = ScriptedModel(["answer"])
    kernel = Kernel(model, filters=[heal_dangling_filter(on_chat=False)])
    result, streamed = await run_turn(kernel, OLD, stream)
    assert shape(model.requests[0].messages)[3] == ("tool", "call_b", DEFAULT_TEXT)
    assert len(model.requests[0].messages) == 5
    assert model.requests[0].delta == model.requests[0].messages
    assert result.text == "answer"
    if stream:
        assert streamed == "answer"


async def test_history_of_a_followup_is_healed() -> None:
    model = ScriptedModel(["first", "second"])
    broken_history = (Message.user("q"), Message.assistant(None, (A,)))

    async def reenter(request: Any, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        first = await call_next(request)
        return await call_next(request.followup(first.replace(messages=broken_history), Message.user("again")))

    kernel = Kernel(model, filters=[Filter("reenter", around_turn=reenter), heal_dangling_filter(on_chat=False)])
    await kernel.run("q")
    assert shape(model.requests[1].messages) == [
        ("user", None, "q"),
        ("assistant", None, ""),
        ("tool", "call_a", DEFAULT_TEXT),
        ("user", None, "again"),
    ]
    assert shape(model.requests[1].delta) == [("user", None, "again")]


async def test_chat_scope_heals_history_loaded_inside_the_chat_chain(stream: bool) -> None:
    # A memory-like filter that loads a broken stored history into every prompt.
    async def memory(request: ChatRequest, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        return await call_next(request.replace(messages=(*OLD[:3], *request.messages)))

    model = ScriptedModel(["ok"])
    kernel = Kernel(model, filters=[Filter("memory", around_chat=memory), heal_dangling_filter(text="cancelled")])
    await run_turn(kernel, "new question", stream)
    assert shape(model.requests[0].messages) == [
        ("user", None, "first question"),
        ("assistant", None, ""),
        ("tool", "call_a", "hits"),
        ("tool", "call_b", "cancelled"),
        ("user", None, "new question"),
    ]


async def test_resume_is_not_healed() -> None:
    @tool(sensitive=True)
    def wire(amount: int) -> str:
        """Send money."""
        return f"sent {amount}"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("wire", {"amount": 5}, "w1")), "done"])
    kernel = Kernel(model, tools=[wire], filters=[heal_dangling_filter()], gate=lambda call, t, ctx: "pause")
    paused = await kernel.run("pay")
    assert paused.status == "paused"
    result = await kernel.resume(paused.pause, {"w1": Decision.approve()})
    assert [m.content for m in result.messages if m.role == "tool"] == ["sent 5"]
    assert result.text == "done"


def test_bad_options_and_spec() -> None:
    with pytest.raises(ConfigError) as caught:
        heal_dangling_filter(text=" ")
    assert str(caught.value) == (
        "heal_dangling_filter(text=' ') is invalid; give the text of the synthetic tool result."
    )
    assert (SPEC.name, tuple(SPEC.scopes)) == ("heal_dangling", ("turn", "chat"))
    assert heal_dangling_filter(on_chat=False).scopes == ("turn",)
