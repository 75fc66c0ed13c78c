"""Which calls of a resumed batch the approval journal records: the calls of known tools,
each under its pause id and call id; a call naming no tool is answered as unknown and
never recorded (there is nothing it could have done)."""

from __future__ import annotations

import pytest
from memory._tools import recorded_transfer

from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall
from beamfilter_memory import StoreBase, memory_filter, open_store
from beamfilter_memory._journal import call_key

pytestmark = pytest.mark.anyio

UNKNOWN_TEXT = "Unknown tool 'refund'. Available tools: transfer. Call one of these."


async def test_a_resumed_batch_records_the_known_call_and_answers_the_unknown_one() -> None:
    ran: list[int] = []
    transfer = recorded_transfer(ran)
    store = open_store("memory://")
    assert isinstance(store, StoreBase)  # keeps keyed outcomes, where the journal records
    calls = ChatResponse.tool_calls(ToolCall("transfer", {"amount": 5}, "pay"), ToolCall("refund", {}, "back"))
    kernel = Kernel(
        ScriptedModel([calls, "Done."]),
        tools=[transfer],
        filters=[memory_filter(store)],
        gate=lambda call, tool, context: "pause",
        pause_key="r" * 32,
    )
    paused = await kernel.run("pay 5", context={"conversation_id": "c1"})
    assert paused.pause is not None
    assert paused.pause.awaiting == ("pay",)  # the gate is not asked about a call naming no tool
    pause_id = paused.pause.pause_id

    done = await kernel.resume(conversation_id="c1", decisions={"pay": "approve"})

    assert (done.status, done.text, ran) == ("completed", "Done.", [5])
    assert [(m.role, m.tool_call_id, m.text) for m in done.messages if m.role == "tool"] == [
        ("tool", "pay", "moved 5"),
        ("tool", "back", UNKNOWN_TEXT),
    ]
    kept = await store.load_outcome(call_key(pause_id, "pay"))
    assert kept is not None
    assert kept["result"]["content"] == "moved 5"
    assert await store.load_outcome(call_key(pause_id, "back")) is None
