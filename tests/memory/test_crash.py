"""Crash safety of whole turns: a worker process running a Kernel with the memory filter is
SIGKILLed mid-turn or while paused; the store keeps only whole turns and work goes on.

Integration tests with real processes and real SQLite / PostgreSQL / Redis.
"""

from __future__ import annotations

import asyncio

import pytest
from memory._processes import spawn, wait_then_kill
from memory._tools import PAUSE_KEY, transfer, weather

from beamfilter_core import Decision, Kernel, Message, ScriptedModel, ToolCall
from beamfilter_memory import ChatStore, memory_filter

pytestmark = [pytest.mark.anyio, pytest.mark.services, pytest.mark.slow]

DURABLE = ("sqlite", "postgres", "redis")
U, A, T = Message.user, Message.assistant, Message.tool


@pytest.mark.parametrize("kind", DURABLE)
async def test_a_worker_killed_mid_turn_leaves_only_whole_turns(kind: str, fresh_store: ChatStore) -> None:
    proc = spawn("turn", kind, fresh_store, "c1")
    # The worker completed turn 1, then hangs in turn 2's second LLM call (after a tool round trip).
    await asyncio.to_thread(wait_then_kill, proc, "mid-turn")
    turn1 = [U("first question"), A("first answer")]
    assert await fresh_store.load("c1") == turn1
    assert await fresh_store.load_pause("c1") is None
    # Another worker carries on with the conversation.
    model = ScriptedModel(["second answer"])
    kernel = Kernel(model, tools=[weather], filters=[memory_filter(fresh_store)])
    result = await kernel.run("second question, again", context={"conversation_id": "c1"})
    assert result.text == "second answer"
    assert model.requests[0].messages == (*turn1, U("second question, again"))
    assert await fresh_store.load("c1") == [*turn1, U("second question, again"), A("second answer")]


@pytest.mark.parametrize("kind", DURABLE)
async def test_a_pause_survives_its_worker_and_resumes_elsewhere(kind: str, fresh_store: ChatStore) -> None:
    proc = spawn("pause", kind, fresh_store, "c1")
    await asyncio.to_thread(wait_then_kill, proc, "paused")
    call = ToolCall("transfer", {"amount": 5}, "call_t")
    assert await fresh_store.load("c1") == [U("pay 5"), A(None, (call,))]
    pause = await fresh_store.load_pause("c1")
    assert pause is not None
    assert pause.awaiting == ("call_t",)
    model = ScriptedModel(["5 moved."])
    kernel = Kernel(model, tools=[transfer], filters=[memory_filter(fresh_store)], pause_key=PAUSE_KEY)
    result = await kernel.resume(conversation_id="c1", decisions={"call_t": Decision.approve()})
    assert result.text == "5 moved."
    assert await fresh_store.load("c1") == [
        U("pay 5"),
        A(None, (call,)),
        T("call_t", "moved 5", "transfer"),
        A("5 moved."),
    ]
    assert await fresh_store.load_pause("c1") is None
