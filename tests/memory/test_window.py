"""Property tests of windows: ``load(cid, limit)`` is the longest suffix of at most ``limit``
messages that does not start on a tool result, for in-memory and SQLite stores."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core import Message, ToolCall
from beamfilter_memory import InMemoryStore, SQLiteStore, trim_window


def _turns(shape: list[int]) -> list[Message]:
    """A transcript: per turn, a user message, then n tool calls answered, then an answer."""
    out: list[Message] = []
    for turn, calls in enumerate(shape):
        out.append(Message.user(f"q{turn}"))
        if calls:
            ids = [f"call_{turn}_{i}" for i in range(calls)]
            out.append(Message.assistant(None, tuple(ToolCall("f", {"i": i}, cid) for i, cid in enumerate(ids))))
            out.extend(Message.tool(cid, f"r{cid}", "f") for cid in ids)
        out.append(Message.assistant(f"a{turn}"))
    return out


def _expected(messages: list[Message], limit: int) -> list[Message]:
    tail = messages[-limit:]
    while tail and tail[0].role == "tool":
        tail = tail[1:]
    return tail


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=6), st.integers(1, 25))
def test_windows_match_the_rule_on_every_store(shape: list[int], limit: int) -> None:
    messages = _turns(shape)

    async def check() -> None:
        with tempfile.TemporaryDirectory() as folder:
            for store in (InMemoryStore(), SQLiteStore(f"sqlite:///{Path(folder) / 'w.db'}")):
                try:
                    await store.append("c", messages)
                    window = await store.load("c", limit)
                    assert window == _expected(messages, limit)
                    assert window == trim_window(messages[-limit:])
                    assert len(window) <= limit
                    assert not window or window[0].role != "tool"
                    answered = {m.tool_call_id for m in window if m.role == "tool"}
                    called = {c.id for m in window for c in m.tool_calls}
                    assert answered <= called  # no tool result without its call
                finally:
                    await store.aclose()

    asyncio.run(check())
