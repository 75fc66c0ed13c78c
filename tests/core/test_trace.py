"""``beamfilter run --trace`` in-process: the exact before/after lines of every filter's
hook — what it received, what it changed on the way in and out, a short circuit, inner
layers called twice, a wrapped tool function, a raise — indented by its place in the onion."""

from __future__ import annotations

import io
from typing import Any

import attrs
import pytest

from beamfilter_core import ChatResponse, Filter, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core._trace import traced_filters
from beamfilter_core.testing import passthrough


@tool
def lookup(order: int) -> str:
    """The status of an order."""
    return f"order {order}: shipped"


async def polite(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    """Turn: rewrites the user's text on the way in, and appends to the transcript on the
    way out (its answer, ``message``, stays the same)."""
    last = request.messages[-1]
    result = await call_next(attrs.evolve(request, messages=(Message("user", last.text + " please"),)))
    return attrs.evolve(result, messages=(*result.messages[:-1], Message("assistant", result.text + "!")))


async def add_system(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    """Chat: one more message in the prompt."""
    return await call_next(attrs.evolve(request, messages=(Message("system", "be brief"), *request.messages)))


async def next_order(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    """Tool: a changed argument and a changed result."""
    result = await call_next(attrs.evolve(request, arguments={"order": request.arguments["order"] + 1}))
    return attrs.evolve(result, content=result.content.upper())


async def rewrap(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    """Tool: the same tool with its function wrapped."""
    fn = request.tool.fn

    def wrapped(**arguments: Any) -> Any:
        return fn(**arguments)

    return await call_next(attrs.evolve(request, tool=attrs.evolve(request.tool, fn=wrapped)))


def _run(filters: list[Filter], script: list[Any], prompt: str = "order 7?") -> tuple[str, Any]:
    out = io.StringIO()
    kernel = Kernel(ScriptedModel(script), tools=[lookup], filters=traced_filters(filters, out, clock=lambda: 0.0))
    result = kernel.run_sync(prompt)
    return out.getvalue(), result


def test_the_trace_shows_each_change_on_the_way_in_and_out() -> None:
    filters = [
        Filter("polite", around_turn=polite),
        Filter("prompt", around_chat=add_system, around_iteration=passthrough),
        Filter("args", around_tool=next_order),
        Filter("wrap", around_tool=rewrap),
    ]
    trace, result = _run(filters, [ChatResponse.tool_calls(ToolCall("lookup", {"order": 7}, "c1")), "shipped"])
    assert result.text == "shipped"
    assert result.messages[-1] == Message("assistant", "shipped!")
    assert trace.splitlines() == [
        "-> turn polite: 1 new message(s): 'order 7?'",
        "  -> iteration prompt: round 0, 10 model call(s) left",
        "  -> chat prompt: 1 message(s), 1 tool(s)",
        "  <- chat prompt: calls lookup [changed the request (messages 1 -> 2)] (0.0 ms)",
        "    -> tool args: lookup({'order': 7})",
        "      -> tool wrap: lookup({'order': 8})",
        "      <- tool wrap: ok: 'order 8: shipped' [changed the request (the tool's function is wrapped)] (0.0 ms)",
        "    <- tool args: ok: 'ORDER 8: SHIPPED' [changed the request (arguments -> {'order': 8}); "
        "changed the response (result 'order 8: shipped' -> 'ORDER 8: SHIPPED')] (0.0 ms)",
        "  <- iteration prompt: continue [no change] (0.0 ms)",
        "  -> iteration prompt: round 1, 9 model call(s) left",
        "  -> chat prompt: 3 message(s), 1 tool(s)",
        "  <- chat prompt: 'shipped' [changed the request (messages 3 -> 4)] (0.0 ms)",
        "  <- iteration prompt: completed [no change] (0.0 ms)",
        "<- turn polite: completed: 'shipped' [changed the request (message text 'order 7?' -> 'order 7? please'); "
        "changed the response (completed: 'shipped')] (0.0 ms)",
    ]


async def canned(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    return ChatResponse.from_text("from the cache " + "x" * 80)


async def twice(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    await call_next(request)
    return await call_next(request)


async def explode(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    msg = "the guard broke"
    raise ValueError(msg)


def test_a_short_circuit_a_second_call_and_a_raise_are_named() -> None:
    trace, result = _run([Filter("retry", around_chat=twice), Filter("cache", around_chat=canned)], [])
    assert result.text.startswith("from the cache")
    cut = "'from the cache " + "x" * 44 + "…'"
    assert trace.splitlines() == [
        "-> chat retry: 1 message(s), 1 tool(s)",
        "  -> chat cache: 1 message(s), 1 tool(s)",
        f"  <- chat cache: {cut} [short-circuited: the inner layers were not called] (0.0 ms)",
        "  -> chat cache: 1 message(s), 1 tool(s)",
        f"  <- chat cache: {cut} [short-circuited: the inner layers were not called] (0.0 ms)",
        f"<- chat retry: {cut} [called the inner layers 2 times] (0.0 ms)",
    ]
    out = io.StringIO()
    kernel = Kernel(
        ScriptedModel(["hi"]), filters=traced_filters([Filter("guard", around_turn=explode)], out, lambda: 0.0)
    )
    with pytest.raises(Exception, match="the guard broke"):
        kernel.run_sync("hello")
    assert out.getvalue().splitlines() == [
        "-> turn guard: 1 new message(s): 'hello'",
        "<- turn guard: raised ValueError: the guard broke (0.0 ms)",
    ]
