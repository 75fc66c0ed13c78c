"""A resumed run is the paused run: filters persist per-run state with the pause, sealed (finding 5)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Decision,
    Filter,
    Kernel,
    PersistHook,
    ScriptedModel,
    ToolCall,
    tool,
)
from beamfilter_core.errors import ConfigError, PauseSignatureError, ResumeError

KEY = "s" * 32
SENT: list[dict[str, Any]] = []

pytestmark = pytest.mark.packages  # the pii built-in seals its state here


def pii_filter() -> Any:
    """The pii built-in (these tests need beamfilter-builtins: marked ``packages``)."""
    from beamfilter_builtins import pii_filter as make

    return make()


@tool(sensitive=True)
def send_mail(to: str, body: str) -> str:
    """Send an e-mail."""
    SENT.append({"to": to, "body": body})
    return "sent"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SENT.clear()


def _pii_kernel(script: list[Any], **kw: Any) -> Kernel:
    return Kernel(
        ScriptedModel(script),
        tools=[send_mail],
        filters=[pii_filter()],
        gate=lambda c, t, x: Decision.pause("mail needs approval"),
        pause_key=KEY,
        **kw,
    )


def test_finding_5_pii_and_a_pause_in_another_kernel_send_the_real_address() -> None:
    call = ToolCall("send_mail", {"to": "<EMAIL_1>", "body": "hi"}, "m1")
    model = ScriptedModel([ChatResponse.tool_calls(call), "done"])
    kernel = Kernel(model, tools=[send_mail], filters=[pii_filter()], gate=lambda c, t, x: "pause", pause_key=KEY)
    paused = kernel.run_sync("mail ada@example.com please")
    assert paused.pause is not None
    assert model.requests[0].messages[-1].text == "mail <EMAIL_1> please"
    text = paused.pause.to_json()
    data = json.loads(text)
    assert data["filter_state"] is not None
    assert "ada@example.com" not in data["filter_state"]  # sealed, never in clear
    assert data["calls"][0]["arguments"] == {"to": "<EMAIL_1>", "body": "hi"}  # what the human approves
    worker = _pii_kernel(["done"])
    done = worker.resume_sync(text, {"m1": "approve"})
    assert done.text == "done"
    assert SENT == [{"to": "ada@example.com", "body": "hi"}]
    # and the resumed run's prompt still masks the address
    assert "ada@example.com" not in json.dumps([m.text for m in worker.model.requests[0].messages])  # type: ignore[attr-defined]


def test_sealed_state_is_bound_to_the_key_and_the_pause() -> None:
    call = ToolCall("send_mail", {"to": "<EMAIL_1>", "body": "hi"}, "m1")
    paused = _pii_kernel([ChatResponse.tool_calls(call)]).run_sync("mail ada@example.com")
    assert paused.pause is not None
    data = json.loads(paused.pause.to_json())
    other = _pii_kernel([ChatResponse.tool_calls(call)]).run_sync("mail bob@example.com")
    assert other.pause is not None
    # a sealed state moved to another pause: the signature no longer matches
    data["filter_state"] = json.loads(other.pause.to_json())["filter_state"]
    with pytest.raises(PauseSignatureError, match="does not match"):
        _pii_kernel(["x"]).resume_sync(json.dumps(data), {"m1": "approve"})
    # with unsigned states trusted, the seal still refuses: it is bound to the pause id
    data["signature"] = None
    with pytest.raises(PauseSignatureError, match=r"the sealed filter state of pause '[0-9a-f]{32}' cannot be opened"):
        _pii_kernel(["x"], unsafe_unsigned_pauses=True).resume_sync(json.dumps(data), {"m1": "approve"})
    assert SENT == []


def test_a_kernel_without_the_filter_that_kept_state_refuses_the_resume() -> None:
    call = ToolCall("send_mail", {"to": "<EMAIL_1>", "body": "hi"}, "m1")
    paused = _pii_kernel([ChatResponse.tool_calls(call)]).run_sync("mail ada@example.com")
    bare = Kernel(ScriptedModel(["x"]), tools=[send_mail], pause_key=KEY)
    with pytest.raises(ResumeError) as info:
        bare.resume_sync(paused.pause, {"m1": "approve"})
    assert str(info.value) == (
        "Cannot resume: the pause carries the state of filter(s) 'pii', which this kernel does not have; "
        "resume with a kernel built with the same filters."
    )
    assert SENT == []


def test_any_filter_can_persist_state_through_the_hook() -> None:
    order: list[str] = []

    async def count(request: ChatRequest, state: dict[str, Any], call_next: Any) -> ChatResponse:
        state["calls"] = state.get("calls", 0) + 1
        order.append(f"call {state['calls']}")
        return await call_next(request)  # type: ignore[no-any-return]

    def save(state: dict[str, Any]) -> Any:
        return {"calls": state.get("calls", 0)}

    def restore(state: dict[str, Any], data: Any) -> None:
        state["calls"] = data["calls"]

    counter = Filter("counter", around_chat=count, persist=PersistHook(save, restore))
    call = ToolCall("send_mail", {"to": "a", "body": "b"}, "m1")
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(call), "done"]),
        tools=[send_mail],
        filters=[counter],
        gate=lambda c, t, x: "pause",
    )
    paused = kernel.run_sync("go")
    kernel.resume_sync(paused.pause, {"m1": "approve"})
    assert order == ["call 1", "call 2"]
    with pytest.raises(ConfigError, match=r"has persist=3; give a PersistHook\(save, restore\)"):
        Kernel(ScriptedModel(["x"]), filters=[Filter("bad", around_chat=count, persist=3)])  # type: ignore[arg-type]
