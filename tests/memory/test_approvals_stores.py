"""Each pause resumes exactly once, on every store (finding 3; findings 5 and 6 with memory).

Runs on memory://, SQLite, and real PostgreSQL and Redis servers (see conftest.py).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import date
from typing import Any

import pytest
from memory._tools import pause_gate, recorded_transfer

from beamfilter_core import ChatResponse, Kernel, Message, PauseState, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import AlreadyResumedError, ConfigError, ResumeError
from beamfilter_memory import ChatStore, InMemoryStore, memory_filter

pytestmark = pytest.mark.anyio


def pii_filter() -> Any:
    """The pii built-in (these tests need beamfilter-builtins: the test using it is marked ``packages``)."""
    from beamfilter_builtins import pii_filter as make

    return make()


KEY = "m" * 32
CID = {"conversation_id": "c1"}


def _pay(n: int) -> ChatResponse:
    return ChatResponse.tool_calls(ToolCall("transfer", {"amount": n}, f"pay{n}"))


def _kernel(store: ChatStore, script: list[Any], ran: list[int], **kw: Any) -> Kernel:
    return Kernel(
        ScriptedModel(script),
        tools=[recorded_transfer(ran)],
        filters=[memory_filter(store)],
        gate=pause_gate,
        pause_key=KEY,
        **kw,
    )


def _ids(messages: list[Message]) -> list[str]:
    calls = [c.id for m in messages for c in m.tool_calls]
    answered = [m.tool_call_id or "" for m in messages if m.role == "tool"]
    assert len(calls) == len(set(calls)), f"duplicate calls: {calls}"
    assert sorted(answered) == sorted(calls), f"orphans: calls {calls}, results {answered}"
    return calls


async def test_finding_3_a_stale_approval_never_pays_twice_nor_clears_the_newer_pause(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, [_pay(5), _pay(7), "all paid"], ran)
    first = await kernel.run("pay 5 then 7", context=CID)
    assert first.pause is not None
    stale = first.pause.to_json()
    again = await kernel.resume(stale, {"pay5": "approve"})
    assert (again.status, ran) == ("paused", [5])
    newer = await store.load_pause("c1")
    assert newer is not None
    assert newer == again.pause
    assert newer.pause_id != first.pause.pause_id
    stored = await store.load("c1")
    for attempt in (
        lambda: kernel.resume(stale, {"pay5": "approve"}),
        lambda: kernel.resume(first.pause, {"pay5": "approve"}, conversation_id="c1"),
    ):
        with pytest.raises(AlreadyResumedError) as info:
            await attempt()
        assert str(info.value) == (
            f"already resumed: pause {first.pause.pause_id!r} of conversation 'c1' is no longer pending "
            "(another worker resumed it, or a newer turn answered its calls); nothing ran."
        )
        assert info.value.filter_name == "memory"
    assert ran == [5]
    assert await store.load("c1") == stored  # nothing written
    assert await store.load_pause("c1") == newer  # the newer pause is untouched
    done = await kernel.resume(conversation_id="c1", decisions={"pay7": "approve"})
    assert (done.text, ran) == ("all paid", [5, 7])
    _ids(await store.load("c1"))


async def test_two_workers_resuming_at_once_run_the_call_once(
    store: ChatStore, make_store: Callable[..., ChatStore], request: pytest.FixtureRequest
) -> None:
    ran: list[int] = []
    paused = await _kernel(store, [_pay(5)], ran).run("pay 5", context=CID)
    assert paused.pause is not None
    kind = request.node.callspec.params["store"]
    stores = [store] + [store if isinstance(store, InMemoryStore) else make_store(kind) for _ in range(3)]
    try:
        workers = [_kernel(s, ["paid"], ran) for s in stores]
        outcomes = await asyncio.gather(
            *(w.resume(paused.pause.to_json(), {"pay5": "approve"}) for w in workers), return_exceptions=True
        )
    finally:
        for s in stores[1:]:
            if s is not store:
                await s.aclose()
    done = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, AlreadyResumedError)]
    assert (len(done), len(refused), ran) == (1, 3, [5])
    assert [m.role for m in await store.load("c1")] == ["user", "assistant", "tool", "assistant"]


async def test_take_pause_with_an_id_is_a_compare_and_swap(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, [_pay(1), _pay(2)], ran)
    first = (await kernel.run("one", context=CID)).pause
    second = (await kernel.run("two", context=CID)).pause  # a new turn replaces the pause
    assert first is not None
    assert second is not None
    assert await store.take_pause("c1", first.pause_id) is None
    assert await store.load_pause("c1") == second
    assert await store.take_pause("c1", second.pause_id) == second
    assert await store.take_pause("c1", second.pause_id) is None
    assert await store.take_pause("nobody", second.pause_id) is None
    with pytest.raises(ConfigError, match=r"pause_id is ''; give the pause_id of a PauseState"):
        await store.take_pause("c1", "")


async def test_the_pause_ledger_claims_each_id_once_even_under_contention(
    store: ChatStore, make_store: Callable[..., ChatStore], request: pytest.FixtureRequest
) -> None:
    assert await store.claim_pause("p1") is True
    assert await store.claim_pause("p1") is False
    kind = request.node.callspec.params["store"]
    others = [store if isinstance(store, InMemoryStore) else make_store(kind) for _ in range(3)]
    try:
        claims = await asyncio.gather(*(s.claim_pause(f"p{n % 4}") for n in range(12) for s in [store, *others]))
    finally:
        for s in others:
            if s is not store:
                await s.aclose()
    # p1 was claimed before; p0, p2, p3 exactly once each among 48 concurrent claims
    assert claims.count(True) == 3


async def test_a_ledger_without_the_memory_filter_makes_resume_exactly_once(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = Kernel(
        ScriptedModel([_pay(5), "paid"]),
        tools=[recorded_transfer(ran)],
        gate=pause_gate,
        pause_key=KEY,
        pause_ledger=store,
    )
    paused = await kernel.run("pay 5")
    assert paused.pause is not None
    text = paused.pause.to_json()
    assert (await kernel.resume(text, {"pay5": "approve"})).text == "paid"
    with pytest.raises(AlreadyResumedError) as info:
        await kernel.resume(text, {"pay5": "approve"})
    assert str(info.value) == f"already resumed: pause {paused.pause.pause_id!r} was resumed before; nothing ran."
    assert ran == [5]


async def test_a_resume_refused_for_bad_decisions_claims_nothing(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, [_pay(5), "paid"], ran, pause_ledger=store)
    paused = await kernel.run("pay 5", context=CID)
    with pytest.raises(ResumeError, match="is 'maybe'"):
        await kernel.resume(paused.pause, {"pay5": "maybe"})
    assert await store.load_pause("c1") == paused.pause
    assert (await kernel.resume(paused.pause, {"pay5": "approve"})).text == "paid"
    assert ran == [5]


async def test_what_the_store_returns_is_verified(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, [_pay(5)], ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    data = json.loads(paused.pause.to_json())
    data["calls"][0]["arguments"]["amount"] = 500
    data["messages"][-1]["tool_calls"][0]["arguments"]["amount"] = 500
    await store.save_pause("c1", PauseState.from_json(json.dumps(data)))  # someone with database access
    with pytest.raises(ResumeError, match="does not match: the state was changed"):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert ran == []


@pytest.mark.packages
async def test_finding_5_pii_with_memory_sends_the_real_address_after_a_resume_elsewhere(store: ChatStore) -> None:
    sent: list[str] = []

    @tool(sensitive=True)
    def send_mail(to: str) -> str:
        """Send an e-mail."""
        sent.append(to)
        return "sent"

    def kernel(script: list[Any]) -> Kernel:
        return Kernel(
            ScriptedModel(script),
            tools=[send_mail],
            filters=[memory_filter(store), pii_filter()],
            gate=pause_gate,
            pause_key=KEY,
        )

    call = ToolCall("send_mail", {"to": "<EMAIL_1>"}, "m1")
    await kernel([ChatResponse.tool_calls(call)]).run("mail ada@example.com", context=CID)
    stored = await store.load_pause("c1")
    assert stored is not None
    assert stored.filter_state is not None
    assert "ada@example.com" not in stored.filter_state
    done = await kernel(["sent it"]).resume(conversation_id="c1", decisions={"m1": "approve"})
    assert (done.text, sent) == ("sent it", ["ada@example.com"])


async def test_finding_6_a_non_json_context_value_is_refused_and_nothing_is_stored(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, [_pay(5)], ran)
    with pytest.raises(ConfigError, match=r"^The run paused with context\['day'\] = datetime\.date\(2024, 1, 2\)"):
        await kernel.run("pay 5", context={**CID, "day": date(2024, 1, 2)})
    assert await store.load("c1") == []
    assert await store.load_pause("c1") is None
    kernel = _kernel(store, [_pay(5), "paid"], ran, transient_context=["day"])
    paused = await kernel.run("pay 5", context={**CID, "day": date(2024, 1, 2)})
    assert paused.pause is not None
    assert "day" not in paused.pause.context
    assert (await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})).text == "paid"
