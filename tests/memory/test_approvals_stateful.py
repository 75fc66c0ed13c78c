"""A stateful test of approvals end to end (issue 26): two workers (two kernels, each with
its own store object) on one store — memory://, SQLite, and real PostgreSQL and Redis
servers — and any interleaving of: a new message (which pauses, completes, or abandons a
pending pause), a resume with decisions (approve, reject, reply, an edit), a model failure
after the resumed calls, a tool failure, a worker crash (its resume task cancelled inside a
tool or inside the model call after them), a stale resume, two workers resuming at once,
and a new message while a resume is in flight.

Invariants after every step:
- an approved call's tool runs at most once;
- a call runs only with arguments that passed the gates (the gates approved them, or a
  human approved them as a pause showed them): an unapproved or rejected call never runs;
- the stored conversation has exactly one result per call (the pending pause's calls
  have none), and a call's stored result says what happened to it.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Decision,
    Filter,
    GateRequest,
    Kernel,
    Message,
    PauseState,
    ToolCall,
    tool,
)
from beamfilter_core.errors import AlreadyResumedError, ConversationBusyError
from beamfilter_memory import ChatStore, InMemoryStore, SQLiteStore, memory_filter

KEY = "stateful-test-pause-key"
CONVERSATIONS = ("a", "b")
#: amounts a model asks for: divisible by 3 is refused by the kernel's gate, above 50 waits for a
#: human, above 95 is capped to 95 by an outer gate filter (so the reviewer is shown 95)
AMOUNTS = (10, 20, 30, 55, 60, 70, 85, 99, 120)
INJECT = ("none", "none", "model fails", "tool fails", "crash in tool", "crash in model")


class Injected(ConnectionError):
    """The model failure the machine injects."""


class Model:
    """Asks for the calls planned for the next turn; answers "ok" after tool results.

    ``mode`` makes the next answer after tool results fail ("fail") or hang until its
    task is cancelled ("hang"); ``plan_fails`` makes the next user turn's call fail."""

    def __init__(self) -> None:
        self.plans: list[list[ToolCall]] = []
        self.mode = "ok"
        self.plan_fails = False
        self.waiting = asyncio.Event()

    async def complete(self, request: ChatRequest) -> ChatResponse:
        if request.messages[-1].role == "user":
            calls = self.plans.pop(0)
            if self.plan_fails:
                raise Injected("the model failed before answering")
            return ChatResponse.tool_calls(*calls)
        if self.mode == "fail":
            raise Injected("the model failed after the tools")
        if self.mode == "hang":
            self.waiting.set()
            await asyncio.Event().wait()
        return ChatResponse.from_text("ok")

    async def stream(self, request: ChatRequest, push: Callable[[str], None]) -> ChatResponse:
        return await self.complete(request)


def _kernel_gate(call: ToolCall, tool: Any, context: Any) -> Decision:
    amount = call.arguments["amount"]
    if amount % 3 == 0:
        return Decision.reject("policy")
    return Decision.pause("human") if amount > 50 else Decision.approve()


def _gate_allows(amount: int) -> bool:
    return amount % 3 != 0 and amount <= 50


async def _cap(
    request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
) -> Decision:
    call = request.call
    if call.arguments["amount"] > 95:
        call = ToolCall(call.name, {**call.arguments, "amount": 95}, call.id)
    return await call_next(request.replace(call=call))


def _capped(amount: int) -> int:
    return min(amount, 95)


class Approvals(RuleBasedStateMachine):
    """The model of what may run: per call, the amounts that passed the gates."""

    make_store: Callable[[str], ChatStore] = staticmethod(lambda run: InMemoryStore())
    shared_object = True  # memory://: both workers hold the one store object

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tag = uuid.uuid4().hex[:8]  # fresh conversations on a shared database
        first = self.make_store(self.tag)
        self.stores = [first, first if self.shared_object else self.make_store(self.tag)]
        self.model = Model()
        self.effects: Counter[str] = Counter()  # call ref -> tool effects
        self.effect_amount: dict[str, int] = {}
        self.allowed: dict[str, set[int]] = {}  # call ref -> amounts that passed the gates
        self.pending: dict[str, PauseState] = {}
        self.stale: list[PauseState] = []
        self.refs = itertools.count(1)
        self.tool_mode = "ok"
        self.tool_waiting = asyncio.Event()
        self.hold: asyncio.Event | None = None

        @tool(sensitive=True)
        async def transfer(amount: int, ref: str) -> str:
            """Move money."""
            if self.tool_mode == "hang":
                self.tool_waiting.set()
                await asyncio.Event().wait()
            if self.hold is not None:
                self.tool_waiting.set()
                await self.hold.wait()
            if self.tool_mode == "fail":
                raise RuntimeError("the bank is down")
            self.effects[ref] += 1
            self.effect_amount[ref] = amount
            return f"moved {amount}"

        self.workers = [
            Kernel(
                self.model,
                tools=[transfer],
                filters=[memory_filter(store), Filter("cap", around_gate=_cap)],
                gate=_kernel_gate,
                pause_key=KEY,
            )
            for store in self.stores
        ]

    def run(self, coro: Awaitable[Any]) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        for store in {id(s): s for s in self.stores}.values():
            self.run(store.aclose())
        self.loop.close()

    def cid(self, name: str) -> str:
        return f"{self.tag}-{name}"

    def context(self, name: str) -> dict[str, str]:
        return {"conversation_id": self.cid(name)}

    def reset(self) -> None:
        self.model.mode = "ok"
        self.model.plan_fails = False
        self.model.waiting = asyncio.Event()
        self.tool_mode = "ok"
        self.tool_waiting = asyncio.Event()

    # -- rules ----------------------------------------------------------------------------

    @rule(
        name=st.sampled_from(CONVERSATIONS),
        worker=st.integers(0, 1),
        amounts=st.lists(st.sampled_from(AMOUNTS), min_size=1, max_size=3),
        fails=st.sampled_from(["no", "no", "no", "before", "after"]),
    )
    def new_message(self, name: str, worker: int, amounts: list[int], fails: str) -> None:
        refs = [f"r{next(self.refs)}" for _ in amounts]
        calls = [ToolCall("transfer", {"amount": a, "ref": r}, r) for a, r in zip(amounts, refs, strict=True)]
        self.model.plans.append(calls)
        self.model.plan_fails = fails == "before"
        self.model.mode = "fail" if fails == "after" else "ok"
        for amount, ref in zip(amounts, refs, strict=True):
            if _gate_allows(amount):
                self.allowed.setdefault(ref, set()).add(amount)
        try:
            result = self.run(self.workers[worker].run("pay", context=self.context(name)))
        except Injected:
            # nothing of the turn was stored: a pending pause stays pending
            return
        finally:
            self.reset()
        abandoned = self.pending.pop(name, None)
        if abandoned is not None:
            self.stale.append(abandoned)
        if result.status == "paused":
            self.pending[name] = result.pause
            for call in result.pause.calls:  # the reviewer is shown the capped amount
                asked = dict(zip(refs, amounts, strict=True))[call.id]
                assert call.arguments["amount"] == _capped(asked)
        else:
            assert result.status == "completed"

    @precondition(lambda self: bool(self.pending))
    @rule(
        data=st.data(),
        worker=st.integers(0, 1),
        by_id=st.booleans(),
        choices=st.lists(st.sampled_from(["approve", "approve", "reject", "reply", "edit"]), min_size=3, max_size=3),
        edits=st.lists(st.sampled_from(AMOUNTS), min_size=3, max_size=3),
        inject=st.sampled_from(INJECT),
    )
    def resume(
        self, data: st.DataObject, worker: int, by_id: bool, choices: list[str], edits: list[int], inject: str
    ) -> None:
        name = data.draw(st.sampled_from(sorted(self.pending)))
        pause = self.pending[name]
        decisions: dict[str, Decision | str] = {}
        shown = {call.id: call.arguments["amount"] for call in pause.calls}
        for call_id, choice, amount in zip(pause.awaiting, choices, edits, strict=False):
            if choice == "approve":
                decisions[call_id] = "approve"
                self.allowed.setdefault(call_id, set()).add(shown[call_id])
            elif choice == "edit":
                decisions[call_id] = Decision.approve({"amount": amount, "ref": call_id})
                capped = _capped(amount)  # the outer gate filter judges the edit too
                if _gate_allows(capped):
                    self.allowed.setdefault(call_id, set()).add(capped)
            elif choice == "reply":
                decisions[call_id] = Decision.reply("not now")
            else:
                decisions[call_id] = "reject"
        kernel = self.workers[worker]
        cid = self.cid(name)
        if by_id:
            work = kernel.resume(conversation_id=cid, decisions=decisions)
        else:
            work = kernel.resume(pause.to_json(), decisions)
        self.model.mode = {"model fails": "fail", "crash in model": "hang"}.get(inject, "ok")
        self.tool_mode = {"tool fails": "fail", "crash in tool": "hang"}.get(inject, "ok")
        try:
            outcome = self.run(self._settle(work, crash=inject.startswith("crash")))
        finally:
            self.reset()
        if isinstance(outcome, Injected | asyncio.CancelledError):
            # the pause is pending again: nothing of the resumed turn was stored
            assert self.run(self.stores[0].load_pause(cid)) == pause
            return
        self.stale.append(pause)
        if outcome.status == "paused":  # an edit the gates paused again
            self.pending[name] = outcome.pause
            assert set(outcome.pause.awaiting) <= {
                c for c, d in decisions.items() if isinstance(d, Decision) and d.arguments
            }
        else:
            assert outcome.status == "completed"
            del self.pending[name]

    async def _settle(self, work: Awaitable[Any], *, crash: bool) -> Any:
        task = asyncio.ensure_future(work)
        if crash:
            waits = [asyncio.ensure_future(e.wait()) for e in (self.model.waiting, self.tool_waiting)]
            await asyncio.wait([task, *waits], return_when=asyncio.FIRST_COMPLETED)
            for wait in waits:
                wait.cancel()
            task.cancel()  # the worker dies here (a no-op when the resume already ended)
        try:
            return await task
        except (Injected, asyncio.CancelledError) as exc:
            return exc

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data(), worker=st.integers(0, 1))
    def stale_resume(self, data: st.DataObject, worker: int) -> None:
        pause = data.draw(st.sampled_from(self.stale))
        decisions = dict.fromkeys(pause.awaiting, "approve")
        with pytest.raises(AlreadyResumedError, match=r"^already resumed: "):
            self.run(self.workers[worker].resume(pause.to_json(), decisions))

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data())
    def concurrent_resume(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.pending)))
        pause = self.pending.pop(name)
        shown = {call.id: call.arguments["amount"] for call in pause.calls}
        for call_id in pause.awaiting:
            self.allowed.setdefault(call_id, set()).add(shown[call_id])

        async def both() -> list[Any]:
            text = pause.to_json()
            decisions = dict.fromkeys(pause.awaiting, "approve")
            return await asyncio.gather(
                *(w.resume(text, dict(decisions)) for w in self.workers), return_exceptions=True
            )

        outcomes = self.run(both())
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, AlreadyResumedError)]
        assert (len(done), len(refused)) == (1, 1), outcomes
        assert done[0].status == "completed"
        self.stale.append(pause)

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data(), worker=st.integers(0, 1))
    def new_message_during_a_resume(self, data: st.DataObject, worker: int) -> None:
        name = data.draw(st.sampled_from(sorted(self.pending)))
        pause = self.pending[name]
        shown = {call.id: call.arguments["amount"] for call in pause.calls}
        for call_id in pause.awaiting:
            self.allowed.setdefault(call_id, set()).add(shown[call_id])
        self.hold = asyncio.Event()
        self.model.plans.append([])  # never used: the new turn is refused before the model

        async def race() -> Any:
            resuming = asyncio.ensure_future(
                self.workers[worker].resume(pause.to_json(), dict.fromkeys(pause.awaiting, "approve"))
            )
            entered = asyncio.ensure_future(self.tool_waiting.wait())
            await asyncio.wait([resuming, entered], return_when=asyncio.FIRST_COMPLETED)
            entered.cancel()
            if not resuming.done():  # a tool of the resume runs (none does when all were recorded)
                with pytest.raises(ConversationBusyError, match=r"^Conversation '.*' is busy: "):
                    await self.workers[1 - worker].run("hello?", context=self.context(name))
            assert self.hold is not None
            self.hold.set()
            return await resuming

        try:
            result = self.run(race())
        finally:
            self.hold = None
            self.model.plans.pop()
            self.reset()
        assert result.status == "completed"
        del self.pending[name]
        self.stale.append(pause)

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def approved_calls_run_at_most_once_and_only_as_the_gates_passed_them(self) -> None:
        for ref, count in self.effects.items():
            assert count == 1, (ref, count)
            assert self.effect_amount[ref] in self.allowed.get(ref, set()), (ref, self.effect_amount[ref], self.allowed)

    @invariant()
    def the_stored_conversation_has_one_true_result_per_call(self) -> None:
        for name in CONVERSATIONS:
            messages: list[Message] = self.run(self.stores[1].load(self.cid(name)))
            calls = [c.id for m in messages for c in m.tool_calls]
            results = {m.tool_call_id or "": m.text for m in messages if m.role == "tool"}
            assert len(calls) == len(set(calls)), calls
            assert len(results) == len([m for m in messages if m.role == "tool"]), messages
            assert set(results) <= set(calls)
            pending = self.pending.get(name)
            waiting = {c.id for c in pending.calls} if pending is not None else set()
            assert set(calls) - set(results) == waiting
            for ref, text in results.items():
                if self.effects[ref]:
                    assert text == f"moved {self.effect_amount[ref]}", (ref, text)
                else:
                    assert not text.startswith("moved"), (ref, text)


_SETTINGS = settings(max_examples=20, stateful_step_count=20, deadline=None, suppress_health_check=list(HealthCheck))


def _check(machine: type[Approvals], examples: int) -> None:
    machine.TestCase.settings = settings(_SETTINGS, max_examples=examples)
    machine.TestCase().runTest()


def test_approvals_state_machine_in_memory() -> None:
    _check(Approvals, 200)


def test_approvals_state_machine_on_sqlite(tmp_path: Path) -> None:
    class OnSQLite(Approvals):
        shared_object = False
        make_store = staticmethod(lambda tag: SQLiteStore(f"sqlite:///{tmp_path / 'approvals.db'}"))

    _check(OnSQLite, 120)


@pytest.mark.services
def test_approvals_state_machine_on_postgresql(postgres_url: str) -> None:
    from beamfilter_memory import PostgresStore

    class OnPostgres(Approvals):
        shared_object = False
        make_store = staticmethod(lambda tag: PostgresStore(postgres_url, prefix="stateful_", max_size=4))

    _check(OnPostgres, 100)


@pytest.mark.services
def test_approvals_state_machine_on_redis(redis_url: str) -> None:
    from beamfilter_memory import RedisStore

    class OnRedis(Approvals):
        shared_object = False
        make_store = staticmethod(lambda tag: RedisStore(redis_url, prefix="stateful:"))

    _check(OnRedis, 120)
