"""Approvals exactly once with a store (issue 26), on every store: memory://, SQLite, real
PostgreSQL and Redis servers, and the third-party files store.

- a resume that fails after its tool ran gives the pause back; approving again never runs
  the tool a second time (each call's outcome is recorded, keyed by pause id and call id,
  before anything else happens in that resume);
- a new turn while a resume is in flight is refused (ConversationBusyError), never healed
  with "not run" and then given a second result;
- with write access to the store: a pause copied into another conversation does not run, a
  consumed pause inserted again does not run again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from memory._tools import recorded_transfer

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Decision,
    Kernel,
    Message,
    PauseState,
    ScriptedModel,
    ToolCall,
    tool,
)
from beamfilter_core.errors import AlreadyResumedError, ConversationBusyError, FilterError, PauseSignatureError
from beamfilter_memory import ABANDONED_CALL_TEXT, ChatStore, memory_filter

pytestmark = [pytest.mark.anyio, pytest.mark.services]

KEY = "j" * 32
CID = {"conversation_id": "c1"}


class Flaky:
    """A model that fails the calls listed in ``fail`` (by number), else follows ``script``."""

    def __init__(self, script: list[Any], fail: set[int]) -> None:
        self.inner = ScriptedModel(script)
        self.fail = fail
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls in self.fail:
            raise ConnectionError(f"model call {self.calls} failed")
        return await self.inner.complete(request)

    async def stream(self, request: ChatRequest, push: Callable[[str], None]) -> ChatResponse:
        return await self.complete(request)


def _pay(*amounts: int) -> ChatResponse:
    return ChatResponse.tool_calls(*(ToolCall("transfer", {"amount": n}, f"pay{n}") for n in amounts))


def _kernel(store: ChatStore, model: Any, ran: list[int]) -> Kernel:
    return Kernel(
        model,
        tools=[recorded_transfer(ran)],
        filters=[memory_filter(store), _boom_filter()],
        gate=lambda c, t, x: "pause",
        pause_key=KEY,
    )


def _one_result_per_call(messages: list[Message]) -> list[str]:
    calls = [c.id for m in messages for c in m.tool_calls]
    answered = [m.tool_call_id or "" for m in messages if m.role == "tool"]
    assert sorted(answered) == sorted(calls), (calls, answered)
    assert len(set(calls)) == len(calls), calls
    return calls


async def test_a_resume_whose_next_model_call_fails_never_pays_twice(store: ChatStore) -> None:
    ran: list[int] = []
    model = Flaky([_pay(5), "Paid."], fail={2})
    kernel = _kernel(store, model, ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    with pytest.raises(ConnectionError, match="model call 2 failed"):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert ran == [5]
    # the pause is pending again, and approving it again continues from the recorded result
    back = await store.load_pause("c1")
    assert back is not None
    assert back.pause_id == paused.pause.pause_id
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.status, done.text, ran) == ("completed", "Paid.", [5])
    stored = await store.load("c1")
    _one_result_per_call(stored)
    assert [(m.role, m.text) for m in stored] == [
        ("user", "pay 5"),
        ("assistant", ""),
        ("tool", "moved 5"),
        ("assistant", "Paid."),
    ]
    assert await store.load_pause("c1") is None


async def test_the_recorded_outcome_wins_over_a_later_decision(store: ChatStore) -> None:
    ran: list[int] = []
    model = Flaky([_pay(5, 7), "Done."], fail={2})
    kernel = _kernel(store, model, ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    decisions: dict[str, Decision | str] = {"pay5": "approve", "pay7": Decision.reject("no")}
    with pytest.raises(ConnectionError):
        await kernel.resume(paused.pause.to_json(), decisions)
    assert ran == [5]
    # the reviewer changes their mind: what happened is what the model reads
    flipped: dict[str, Decision | str] = {"pay5": Decision.reject("too late"), "pay7": "approve"}
    done = await kernel.resume(paused.pause.to_json(), flipped)
    assert (done.text, ran) == ("Done.", [5])
    results = {m.tool_call_id: m.text for m in done.messages if m.role == "tool"}
    assert results == {"pay5": "moved 5", "pay7": "The call to 'transfer' was rejected: no"}


class Hanging:
    """A model whose call number ``hang`` never answers (until its task is cancelled)."""

    def __init__(self, script: list[Any], hang: int) -> None:
        self.inner = ScriptedModel(script)
        self.hang = hang
        self.calls = 0
        self.waiting = asyncio.Event()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        if self.calls == self.hang:
            self.waiting.set()
            await asyncio.Event().wait()
        return await self.inner.complete(request)

    async def stream(self, request: ChatRequest, push: Callable[[str], None]) -> ChatResponse:
        return await self.complete(request)


async def test_a_resume_cancelled_after_its_tool_ran_never_pays_twice(store: ChatStore) -> None:
    ran: list[int] = []
    model = Hanging([_pay(5), "Paid."], hang=2)
    kernel = _kernel(store, model, ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    # a worker whose resume task is cancelled while the model call after the tool runs
    task = asyncio.ensure_future(kernel.resume(conversation_id="c1", decisions={"pay5": "approve"}))
    await model.waiting.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert ran == [5]
    assert (await store.load_pause("c1")) == paused.pause
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, ran) == ("Paid.", [5])


async def test_a_new_turn_during_a_resume_in_flight_is_refused(store: ChatStore) -> None:
    ran: list[int] = []
    entered, release = asyncio.Event(), asyncio.Event()

    @tool(sensitive=True)
    async def transfer(amount: int) -> str:
        """Move money."""
        entered.set()
        await release.wait()
        ran.append(amount)
        return f"moved {amount}"

    model = ScriptedModel([_pay(5), "Paid.", "Hello again."])
    kernel = Kernel(
        model, tools=[transfer], filters=[memory_filter(store)], gate=lambda c, t, x: "pause", pause_key=KEY
    )
    await kernel.run("pay 5", context=CID)
    resuming = asyncio.ensure_future(kernel.resume(conversation_id="c1", decisions={"pay5": "approve"}))
    await entered.wait()
    with pytest.raises(ConversationBusyError) as caught:
        await kernel.run("hello?", context=CID)
    assert str(caught.value) == (
        "Conversation 'c1' is busy: its last tool calls (pay5) have no results yet and no paused run is "
        "stored, so a resume of them is in flight (or the worker running it died). Nothing ran; send the "
        "message again once the resume has finished."
    )
    release.set()
    assert (await resuming).text == "Paid."
    again = await kernel.run("hello?", context=CID)
    assert (again.text, ran) == ("Hello again.", [5])
    stored = await store.load("c1")
    assert _one_result_per_call(stored) == ["pay5"]
    assert ABANDONED_CALL_TEXT not in [m.text for m in stored]


async def test_a_new_turn_instead_of_a_decision_and_a_racing_resume_never_both(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Moving on.", "Paid."]), ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    results = await asyncio.gather(
        kernel.run("never mind", context=CID),
        kernel.resume(paused.pause.to_json(), {"pay5": "approve"}),
        return_exceptions=True,
    )
    stored = await store.load("c1")
    assert _one_result_per_call(stored) == ["pay5"]
    refused = [r for r in results if isinstance(r, AlreadyResumedError | ConversationBusyError)]
    assert len(refused) == 1, results
    answer = next(m.text for m in stored if m.role == "tool")
    assert answer == ("moved 5" if ran == [5] else ABANDONED_CALL_TEXT)


async def test_a_new_turn_that_fails_gives_the_abandoned_pause_back(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, Flaky([_pay(5), "Paid."], fail={2}), ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    with pytest.raises(ConnectionError):
        await kernel.run("never mind", context=CID)
    back = await store.load_pause("c1")
    assert back is not None
    assert back.pause_id == paused.pause.pause_id
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, ran) == ("Paid.", [5])


async def test_a_pause_row_copied_into_another_conversation_does_not_run(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid."]), ran)
    paused = await kernel.run("pay 5", context={"conversation_id": "victim", "user_id": "ada"})
    assert paused.pause is not None
    await store.save_pause("attacker", paused.pause)  # write access to the store
    with pytest.raises(PauseSignatureError, match=r"was made in conversation 'victim' and is signed for it"):
        await kernel.resume(conversation_id="attacker", decisions={"pay5": "approve"})
    assert ran == []
    assert await store.load_pause("victim") == paused.pause  # the real one is untouched


async def test_a_consumed_pause_inserted_again_does_not_run_again(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid.", "Paid again?"]), ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, ran) == ("Paid.", [5])
    await store.save_pause("c1", paused.pause)  # a restored backup, a careless job, an attacker
    with pytest.raises(AlreadyResumedError, match=r"^already resumed: "):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    with pytest.raises(AlreadyResumedError, match=r"^already resumed: "):
        await kernel.resume(paused.pause.to_json(), {"pay5": "approve"})
    assert ran == [5]
    assert len(await store.load("c1")) == 4


async def test_an_abandoned_pause_inserted_again_does_not_run(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Moving on.", "Paid?"]), ran)
    paused = await kernel.run("pay 5", context=CID)
    assert paused.pause is not None
    await kernel.run("never mind", context=CID)
    await store.save_pause("c1", paused.pause)
    with pytest.raises(AlreadyResumedError):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert ran == []


async def test_the_consumed_record_outlives_the_pause_row(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid."]), ran)
    paused = await kernel.run("pay 5", context=CID)
    assert isinstance(paused.pause, PauseState)
    await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    await store.clear("c1")  # the conversation and its rows are gone, the record is not
    await store.save_pause("c1", paused.pause)
    assert await store.take_pause("c1", paused.pause.pause_id) is None
    assert await store.load_pause("c1") is None


async def test_a_new_turn_after_a_failed_resume_keeps_what_the_resume_ran(store: ChatStore) -> None:
    ran: list[int] = []
    kernel = _kernel(store, Flaky([_pay(5, 7), "Paid.", "Moving on."], fail={2}), ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    with pytest.raises(ConnectionError):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve", "pay7": "reject"})
    assert ran == [5]
    # no retry: the user moves on; the stored conversation says what happened to each call
    await kernel.run("never mind", context=CID)
    stored = await store.load("c1")
    assert _one_result_per_call(stored) == ["pay5", "pay7"]
    results = {m.tool_call_id: m.text for m in stored if m.role == "tool"}
    assert results == {"pay5": "moved 5", "pay7": "The call to 'transfer' was rejected."}
    assert ran == [5]


class NoOutcomes:
    """A ChatStore that keeps no outcomes (a custom store): resumes cannot be journalled."""

    def __init__(self) -> None:
        from beamfilter_memory import InMemoryStore

        self.inner = InMemoryStore()

    def __getattr__(self, name: str) -> Any:
        if name in ("save_outcome", "load_outcome", "shares_pauses"):
            raise AttributeError(name)
        return getattr(self.inner, name)

    def __repr__(self) -> str:
        return "NoOutcomes()"


@pytest.mark.parametrize("where", ["before the calls", "after the calls"])
async def test_without_outcomes_a_failed_resume_gives_the_pause_back_only_if_no_call_started(where: str) -> None:
    from beamfilter_memory._journal import Journal

    store = NoOutcomes()
    ran: list[int] = []
    fail = {2} if where == "after the calls" else set()
    model = Flaky([_pay(5), "Paid."], fail=fail)
    kernel = _kernel(store, model, ran)  # type: ignore[arg-type]
    journal = kernel.filters[0].extras["journal"]
    assert isinstance(journal, Journal)
    assert repr(journal) == "Journal(NoOutcomes(), durable=False)"
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    if where == "before the calls":
        with pytest.raises(FilterError, match=r"^Filter 'boom' raised ResumeErrorForTest: a filter failed before"):
            await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"}, context={"boom": True})
        assert ran == []
        assert await store.load_pause("c1") == paused.pause  # nothing started: pending again
        done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
        assert (done.text, ran) == ("Paid.", [5])
    else:
        with pytest.raises(ConnectionError):
            await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
        assert ran == [5]
        # a call started and nothing recorded it: the pause stays consumed (at most once)
        assert await store.load_pause("c1") is None
        with pytest.raises(AlreadyResumedError):
            await kernel.resume(paused.pause.to_json(), {"pay5": "approve"})
        assert ran == [5]
    await store.aclose()


class ResumeErrorForTest(Exception):
    """Raised by a turn filter before the resumed calls run."""


def _boom_filter() -> Any:
    from beamfilter_core import Filter

    async def around_turn(request: Any, state: Any, call_next: Any) -> Any:
        if request.context.get("boom"):
            raise ResumeErrorForTest("a filter failed before the calls")
        return await call_next(request)

    return Filter("boom", around_turn=around_turn)


async def test_an_outcome_json_cannot_hold_is_recorded_as_what_the_model_reads(store: ChatStore) -> None:
    from beamfilter_core import ToolResult

    ran: list[int] = []

    @tool(sensitive=True)
    def transfer(amount: int) -> ToolResult:
        """Move money, and remember an object no JSON holds."""
        ran.append(amount)
        return ToolResult(f"moved {amount}", writes={"receipt": object()})

    model = Flaky([_pay(5), "Paid."], fail={2})
    kernel = Kernel(
        model, tools=[transfer], filters=[memory_filter(store)], gate=lambda c, t, x: "pause", pause_key=KEY
    )
    await kernel.run("pay", context=CID)
    with pytest.raises(ConnectionError):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, ran) == ("Paid.", [5])
    assert [m.text for m in done.messages if m.role == "tool"] == ["moved 5"]


async def test_a_resume_cancelled_while_its_tool_runs_never_runs_the_tool_again(store: ChatStore) -> None:
    from beamfilter_memory import INTERRUPTED_CALL_TEXT

    entered: list[int] = []
    started = asyncio.Event()

    @tool(sensitive=True)
    async def transfer(amount: int) -> str:
        """Move money: the request is sent, then the answer never comes."""
        entered.append(amount)
        started.set()
        await asyncio.Event().wait()
        return "unreachable"

    model = ScriptedModel([_pay(5), "Checking."])
    kernel = Kernel(
        model, tools=[transfer], filters=[memory_filter(store)], gate=lambda c, t, x: "pause", pause_key=KEY
    )
    paused = await kernel.run("pay", context=CID)
    task = asyncio.ensure_future(kernel.resume(conversation_id="c1", decisions={"pay5": "approve"}))
    await started.wait()
    task.cancel()  # the worker's task dies inside the tool: its effect is unknown
    with pytest.raises(asyncio.CancelledError):
        await task
    assert (await store.load_pause("c1")) == paused.pause  # pending again: the call is recorded as interrupted
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, entered) == ("Checking.", [5])  # never entered again
    assert done.messages[-2].text == INTERRUPTED_CALL_TEXT
    assert done.messages[-2].tool_call_id == "pay5"


async def test_a_record_that_cannot_be_written_keeps_the_pause_consumed() -> None:
    from beamfilter_core.errors import StoreError
    from beamfilter_memory import InMemoryStore

    class Failing(InMemoryStore):
        async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
            if pause_id.startswith("call:"):
                raise OSError("disk full")
            return await super()._put_outcome(pause_id, text, first)

    store = Failing()
    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid."]), ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    with pytest.raises(StoreError, match=r"save_outcome for pause 'call:32:.*:pay5' failed: OSError: disk full"):
        await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert ran == [5]
    # the outcome is unknown to the store: the pause is not given back, so it never runs twice
    assert await store.load_pause("c1") is None
    with pytest.raises(AlreadyResumedError):
        await kernel.resume(paused.pause.to_json(), {"pay5": "approve"})
    assert ran == [5]


async def test_what_write_access_allows_a_forged_outcome_makes_a_call_look_done(store: ChatStore) -> None:
    from beamfilter_memory._journal import call_key

    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid."]), ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    forged = {"result": {"content": "moved 5", "error": None, "writes": {}, "parts": []}}
    await store.save_outcome(call_key(paused.pause.pause_id, "pay5"), forged)  # type: ignore[attr-defined]
    done = await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert (done.text, ran) == ("Paid.", [])
    assert done.messages[-2].text == "moved 5"


async def test_what_write_access_allows_deleting_every_record_replays_a_consumed_pause(store: ChatStore) -> None:
    from beamfilter_memory._journal import call_key
    from beamfilter_memory._stores._base import consumed_key

    ran: list[int] = []
    kernel = _kernel(store, ScriptedModel([_pay(5), "Paid.", "Paid again."]), ran)
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    # the limit docs/approvals.md states: the records live in the database they can write
    await store.save_outcome(consumed_key(paused.pause), None)  # type: ignore[attr-defined]
    await store.save_outcome(call_key(paused.pause.pause_id, "pay5"), None)  # type: ignore[attr-defined]
    await store.save_pause("c1", paused.pause)
    await kernel.resume(conversation_id="c1", decisions={"pay5": "approve"})
    assert ran == [5, 5]


async def test_the_journal_follows_at_most_1024_resumes_of_a_process() -> None:
    import attrs

    from beamfilter_memory._journal import Journal

    ran: list[int] = []
    kernel = _kernel(NoOutcomes(), ScriptedModel([_pay(5)]), ran)  # type: ignore[arg-type]
    paused = await kernel.run("pay", context=CID)
    assert paused.pause is not None
    journal = Journal(NoOutcomes())
    for n in range(1030):
        assert await journal.recorded(attrs.evolve(paused.pause, pause_id=f"p{n}")) == {}
    assert (len(journal._started), len(journal._recorded)) == (1024, 1024)
    assert next(iter(journal._started)) == "p6"  # the oldest are forgotten first
