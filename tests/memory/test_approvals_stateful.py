"""A stateful test of approvals: two kernels (two workers) on one store, any interleaving of
pause / decide / resume / stale resume / concurrent resume / a new turn instead of a decision.

Invariants after every step: every approved call ran exactly once; no rejected, replied,
never-awaited-and-rejected or abandoned call ever ran; the stored transcript of each
conversation has no duplicate call id and no orphan (every call answered, every result
answering a call) except the calls of its one pending pause.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from beamfilter_core import ChatRequest, ChatResponse, Decision, Kernel, Message, PauseState, ToolCall, tool
from beamfilter_core.errors import AlreadyResumedError
from beamfilter_memory import ChatStore, InMemoryStore, SQLiteStore, memory_filter

KEY = "stateful-test-pause-key"
CONVERSATIONS = ("a", "b")


class PlannedModel:
    """Asks for the calls planned for the next turn; answers "ok" after tool results."""

    def __init__(self) -> None:
        self.plans: list[list[ToolCall]] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        last = request.messages[-1]
        if last.role == "user":
            return ChatResponse.tool_calls(*self.plans.pop(0))
        return ChatResponse.from_text("ok")

    async def stream(self, request: ChatRequest, push: Callable[[str], None]) -> ChatResponse:
        return await self.complete(request)


def _gate(call: ToolCall, tool: Any, context: Any) -> Decision:
    # amounts divisible by 3 are rejected by the gate itself; the others wait for a human
    return Decision.reject("policy") if call.arguments["amount"] % 3 == 0 else Decision.pause("human")


class Approvals(RuleBasedStateMachine):
    """Model: which amounts a human approved (they must run once) and which must never run."""

    store_kind = "memory"
    tmp: Path = Path()

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.store: ChatStore = (
            InMemoryStore() if self.store_kind == "memory" else SQLiteStore(f"sqlite:///{self.tmp / next(_FILES)}.db")
        )
        self.ran: Counter[int] = Counter()
        self.approved: Counter[int] = Counter()
        self.amounts = itertools.count(1)
        self.pending: dict[str, PauseState] = {}
        self.stale: list[tuple[str, PauseState]] = []
        model = self.model = PlannedModel()

        @tool(sensitive=True)
        def transfer(amount: int) -> str:
            """Move money."""
            self.ran[amount] += 1
            return f"moved {amount}"

        self.workers = [
            Kernel(model, tools=[transfer], filters=[memory_filter(self.store)], gate=_gate, pause_key=KEY)
            for _ in range(2)
        ]

    def run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        self.run(self.store.aclose())
        self.loop.close()

    # -- rules ----------------------------------------------------------------------------

    @rule(cid=st.sampled_from(CONVERSATIONS), worker=st.integers(0, 1), count=st.integers(1, 3), dup=st.booleans())
    def new_turn(self, cid: str, worker: int, count: int, dup: bool) -> None:
        amounts = [next(self.amounts) for _ in range(count)]
        # a provider that repeats ids: the same id for every call of the batch, and across turns
        calls = [ToolCall("transfer", {"amount": a}, "dup" if dup else f"t{a}") for a in amounts]
        self.model.plans.append(calls)
        abandoned = self.pending.pop(cid, None)
        if abandoned is not None:
            self.stale.append((cid, abandoned))
        result = self.run(self.workers[worker].run("pay", context={"conversation_id": cid}))
        if all(a % 3 == 0 for a in amounts):
            assert result.status == "completed"
            return
        assert result.status == "paused"
        self.pending[cid] = result.pause
        ids = [c.id for c in result.pause.calls]
        assert len(set(ids)) == len(ids)

    @precondition(lambda self: bool(self.pending))
    @rule(
        data=st.data(),
        worker=st.integers(0, 1),
        by_id=st.booleans(),
        choices=st.lists(st.sampled_from(["approve", "reject", "reply"]), min_size=3, max_size=3),
    )
    def resume(self, data: st.DataObject, worker: int, by_id: bool, choices: list[str]) -> None:
        cid = data.draw(st.sampled_from(sorted(self.pending)))
        pause = self.pending.pop(cid)
        decisions = self._decisions(pause, choices)
        if by_id:
            result = self.run(self.workers[worker].resume(conversation_id=cid, decisions=decisions))
        else:
            result = self.run(self.workers[worker].resume(pause.to_json(), decisions))
        assert result.status == "completed"
        self.stale.append((cid, pause))

    @precondition(lambda self: bool(self.stale))
    @rule(data=st.data(), worker=st.integers(0, 1))
    def stale_resume(self, data: st.DataObject, worker: int) -> None:
        cid, pause = data.draw(st.sampled_from(self.stale))
        newer = self.pending.get(cid)
        decisions = {call_id: "approve" for call_id in pause.awaiting}
        with pytest.raises(AlreadyResumedError, match=r"^already resumed: "):
            self.run(self.workers[worker].resume(pause.to_json(), decisions))
        assert self.run(self.store.load_pause(cid)) == newer  # never cleared nor replaced

    @precondition(lambda self: bool(self.pending))
    @rule(data=st.data(), choices=st.lists(st.sampled_from(["approve", "reject"]), min_size=3, max_size=3))
    def concurrent_resume(self, data: st.DataObject, choices: list[str]) -> None:
        cid = data.draw(st.sampled_from(sorted(self.pending)))
        pause = self.pending.pop(cid)
        decisions = self._decisions(pause, choices)

        async def both() -> list[Any]:
            text = pause.to_json()
            return await asyncio.gather(
                *(w.resume(text, dict(decisions)) for w in self.workers), return_exceptions=True
            )

        outcomes = self.run(both())
        done = [o for o in outcomes if not isinstance(o, BaseException)]
        refused = [o for o in outcomes if isinstance(o, AlreadyResumedError)]
        assert (len(done), len(refused)) == (1, 1), outcomes
        self.stale.append((cid, pause))

    def _decisions(self, pause: PauseState, choices: list[str]) -> dict[str, Any]:
        amounts = {call.id: call.arguments["amount"] for call in pause.calls}
        decisions: dict[str, Any] = {}
        for call_id, choice in zip(pause.awaiting, choices, strict=False):
            decisions[call_id] = Decision.reply("not now") if choice == "reply" else choice
            if choice == "approve":
                self.approved[amounts[call_id]] += 1
        return decisions

    # -- invariants -----------------------------------------------------------------------

    @invariant()
    def approved_calls_ran_exactly_once_and_nothing_else_ran(self) -> None:
        assert self.ran == self.approved

    @invariant()
    def stored_transcripts_have_no_duplicates_and_no_orphans(self) -> None:
        for cid in CONVERSATIONS:
            messages: list[Message] = self.run(self.store.load(cid))
            calls = [c.id for m in messages for c in m.tool_calls]
            results = [m.tool_call_id for m in messages if m.role == "tool"]
            assert len(calls) == len(set(calls)), calls
            assert len(results) == len(set(results)), results
            assert set(results) <= set(calls)
            pending = self.pending.get(cid)
            waiting = {c.id for c in pending.calls} if pending is not None else set()
            assert set(calls) - set(results) == waiting


_FILES = (f"stateful-{n}" for n in itertools.count())
_SETTINGS = settings(
    max_examples=25, stateful_step_count=12, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


def test_approvals_state_machine_in_memory() -> None:
    Approvals.TestCase.settings = _SETTINGS
    Approvals.store_kind = "memory"
    Approvals.TestCase().runTest()


def test_approvals_state_machine_on_sqlite(tmp_path: Path) -> None:
    class OnSQLite(Approvals):
        store_kind = "sqlite"
        tmp = tmp_path

    OnSQLite.TestCase.settings = settings(_SETTINGS, max_examples=10)
    OnSQLite.TestCase().runTest()
