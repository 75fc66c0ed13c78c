"""Kernel.derive: a kernel sharing another's model, filters and compiled chains with more
tools, other model options or another pause key; and Kernel.has_pause_key."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import ChatResponse, Decision, Filter, Kernel, MemoryRole, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError, PauseSignatureError

pytestmark = pytest.mark.anyio


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool(sensitive=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def _seen() -> tuple[Filter, list[str]]:
    seen: list[str] = []

    async def around_chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append("chat")
        return await call_next(request)

    return Filter("seen", around_chat=around_chat), seen


def test_a_derived_kernel_has_more_tools_and_shares_filters_and_model() -> None:
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("add", {"a": 1, "b": 2})), "3"])
    seen, calls = _seen()
    kernel = Kernel(model, filters=[seen])
    derived = kernel.derive(tools=[add])
    assert [t.name for t in derived.tools] == ["add"]
    assert kernel.tools == ()  # the original is unchanged
    assert derived.filters == kernel.filters
    result = derived.run_sync("1 + 2?")
    assert result.text == "3"
    assert [m.text for m in result.messages if m.role == "tool"] == ["3"]
    assert calls == ["chat", "chat"]  # the shared filter ran in both rounds
    assert derived.derive() is not derived  # each call makes its own kernel


def test_a_derived_kernel_sends_other_model_options() -> None:
    model = ScriptedModel(["a", "b"])
    kernel = Kernel(model, options={"temperature": 0.5, "max_tokens": 10})
    kernel.derive(options={"temperature": 0.0}).run_sync("hi")
    kernel.run_sync("hi")
    assert [dict(r.options) for r in model.requests] == [{"temperature": 0.0}, {"temperature": 0.5, "max_tokens": 10}]


async def test_a_derived_pause_key_signs_pauses_another_kernel_with_that_key_resumes() -> None:
    def script() -> ScriptedModel:
        return ScriptedModel([ChatResponse.tool_calls(ToolCall("pay", {"amount": 5}, "p1")), "Paid."])

    def ask(call: ToolCall, tool: Any, context: Any) -> Decision:
        return Decision.pause("a human decides")

    unkeyed = Kernel(script(), tools=[pay], gate=ask)
    assert unkeyed.has_pause_key is False
    keyed = unkeyed.derive(pause_key="s" * 32)
    assert (keyed.has_pause_key, unkeyed.has_pause_key) == (True, False)
    paused = await keyed.run("pay 5")
    assert paused.pause is not None
    elsewhere = Kernel(script(), tools=[pay], pause_key="s" * 32)
    assert (await elsewhere.resume(paused.pause, {"p1": "approve"})).text == "Paid."
    other = Kernel(script(), tools=[pay], pause_key="t" * 32)
    with pytest.raises(PauseSignatureError):
        await other.resume(paused.pause, {"p1": "approve"})


def test_a_short_derived_pause_key_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        Kernel(ScriptedModel(["x"])).derive(pause_key="short")
    assert str(caught.value).startswith(
        "Kernel(pause_key=...) is 5 characters; give a secret str or bytes of at least 16"
    )


def test_a_filter_s_memory_role_is_checked_where_it_is_written() -> None:
    store = object()
    role = MemoryRole(store, rebuild=lambda other: Filter("memory"))
    assert Filter("memory", memory=role).memory is role
    with pytest.raises(ConfigError) as caught:
        Filter("memory", memory={"store": store})  # type: ignore[arg-type]
    assert str(caught.value) == (
        "Filter 'memory' has memory={'store': " + repr(store) + "}; give a MemoryRole(store, rebuild)."
    )
