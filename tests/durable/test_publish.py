"""The publisher of a streamed turn's events: an attempt that replays a turn publishes only
what goes beyond what an earlier attempt published, so a reader gets each event once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from beamfilter_core import Event, TextDelta, ToolCall, ToolCallFinished, ToolCallStarted, ToolResult
from beamfilter_core.errors import DurableError
from beamfilter_durable._publish import Publisher, decode, encode

CALL = ToolCall("effect", {"n": 1}, id="c1")
TOOL = [ToolCallStarted(CALL), ToolCallFinished(CALL, ToolResult("done"))]


def publish(events: list[Event], published: list[dict[str, Any]], *, final: str | None = None) -> list[dict[str, Any]]:
    """Run one attempt over ``events`` after ``published``; returns the whole stream."""
    stream = list(published)

    async def write(value: Any) -> None:
        stream.append(value)

    async def attempt() -> None:
        publisher = Publisher(published, write)
        for event in events:
            await publisher.event(event)
        await publisher.finish(final)

    asyncio.run(attempt())
    return stream


def seen(stream: list[dict[str, Any]]) -> list[Event | str]:
    """What a reader gets: the events, text pieces joined."""
    out: list[Event | str] = []
    for value in stream:
        event = decode(value)
        if isinstance(event, TextDelta) and out and isinstance(out[-1], TextDelta):
            out[-1] = TextDelta(out[-1].text + event.text)
        else:
            out.append(event)
    return out


def tokens(text: str, size: int) -> list[Event]:
    return [TextDelta(text[i : i + size]) for i in range(0, len(text), size)]


@given(
    text=st.text(min_size=1, max_size=40),
    size=st.integers(1, 7),
    again=st.integers(1, 7),
    cut=st.integers(0, 60),
)
def test_a_replay_that_cut_anywhere_is_published_once(text: str, size: int, again: int, cut: int) -> None:
    full = [*TOOL, *tokens(text, size)]
    # the first attempt died after publishing its first `cut` pieces (each written at once)
    first = publish(full[:cut], [])
    second = publish([*TOOL, *tokens(text, again)], first, final=text)
    assert seen(second) == [*TOOL, TextDelta(text)]


def test_a_replayed_llm_step_that_streams_nothing_gets_its_answer_from_the_result() -> None:
    first = publish([*TOOL, TextDelta("Hel")], [])
    # the LLM step completed before the crash: the replay streams no token, only the tool events
    second = publish(list(TOOL), first, final="Hello.")
    assert seen(second) == [*TOOL, TextDelta("Hello.")]
    assert second[len(first) :] == [{"text": "lo."}]


def test_a_re_run_llm_call_that_answers_differently_is_published_from_the_differing_piece() -> None:
    first = publish([*TOOL, TextDelta("Hel"), TextDelta("lo")], [])
    # a reader cannot unsee "Hello": it gets the new answer from the first piece that differs
    second = publish([*TOOL, TextDelta("Hel"), TextDelta("p!")], first, final="Help!")
    assert second[len(first) :] == [{"text": "p!"}]


def test_a_pause_mark_is_published_once() -> None:
    async def run(published: list[dict[str, Any]]) -> list[dict[str, Any]]:
        stream = list(published)

        async def write(value: Any) -> None:
            stream.append(value)

        publisher = Publisher(published, write)
        await publisher.event(TextDelta("Paying"))
        await publisher.pause("t:pause-1")
        await publisher.finish(None)
        return stream

    first = asyncio.run(run([]))
    assert first == [{"text": "Paying"}, {"pause": "t:pause-1"}]
    assert asyncio.run(run(first)) == first
    assert decode(first[1]) == "t:pause-1"


def test_unknown_values_are_refused_with_their_keys() -> None:
    with pytest.raises(DurableError, match=r"^Unknown published value \['other'\] in a durable turn's stream\.$"):
        decode({"other": 1})
    assert decode(encode(TOOL[1])) == TOOL[1]
