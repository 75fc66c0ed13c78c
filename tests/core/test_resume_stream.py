"""``Kernel.resume_stream``: the resumed run's events, and the checks of ``resume``
before the first event."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Kernel,
    PauseState,
    RunFinished,
    ScriptedModel,
    TextDelta,
    ToolCall,
    ToolCallFinished,
    ToolCallStarted,
    TurnResult,
    tool,
)
from beamfilter_core.errors import AlreadyResumedError, ResumeError
from beamfilter_core.testing import collect_stream

KEY = "k" * 32
RUNS: list[str] = []


@tool(sensitive=True)
def delete(path: str) -> str:
    """Delete a file."""
    RUNS.append(path)
    return f"deleted {path}"


class Ledger:
    def __init__(self) -> None:
        self.claimed: set[str] = set()

    async def claim_pause(self, pause_id: str) -> bool:
        if pause_id in self.claimed:
            return False
        self.claimed.add(pause_id)
        return True


def paused_kernel(*answers: str, ledger: Ledger | None = None) -> tuple[Kernel, PauseState]:
    RUNS.clear()
    script: list[Any] = [ChatResponse.tool_calls(ToolCall("delete", {"path": "/tmp/x"}, "c1")), *answers]
    kernel = Kernel(
        ScriptedModel(script), tools=[delete], gate=lambda c, t, x: "pause", pause_key=KEY, pause_ledger=ledger
    )
    paused = kernel.run_sync("clean up")
    assert paused.status == "paused"
    assert paused.pause is not None
    return kernel, paused.pause


def test_resume_stream_yields_the_tool_events_the_text_and_the_result() -> None:
    kernel, pause = paused_kernel("Deleted /tmp/x.")
    text, events = asyncio.run(collect_stream(kernel.resume_stream(pause, {"c1": "approve"})))
    assert RUNS == ["/tmp/x"]
    assert text == "Deleted /tmp/x."
    kinds = [type(e) for e in events]
    assert kinds[:2] == [ToolCallStarted, ToolCallFinished]
    assert kinds[-1] is RunFinished
    assert set(kinds[2:-1]) == {TextDelta}  # the scripted model streams word by word
    started, finished = events[0], events[1]
    assert isinstance(started, ToolCallStarted)
    assert started.call == ToolCall("delete", {"path": "/tmp/x"}, "c1")
    assert isinstance(finished, ToolCallFinished)
    assert finished.result.content == "deleted /tmp/x"
    last = events[-1]
    assert isinstance(last, RunFinished)
    result: TurnResult = last.result
    assert (result.status, result.text, result.tool_calls_made, result.iterations) == (
        "completed",
        "Deleted /tmp/x.",
        1,
        2,
    )


def test_resume_stream_equals_resume() -> None:
    kernel, pause = paused_kernel("Done.")
    streamed = asyncio.run(collect_stream(kernel.resume_stream(pause.to_json(), {"c1": "reject"})))[1][-1]
    assert isinstance(streamed, RunFinished)
    again, pause_again = paused_kernel("Done.")
    plain = again.resume_sync(pause_again.to_json(), {"c1": "reject"})
    assert RUNS == []
    assert streamed.result.messages[1:] == plain.messages[1:]
    assert streamed.result.text == plain.text == "Done."


def test_a_refused_resume_raises_before_any_event_and_runs_nothing() -> None:
    kernel, pause = paused_kernel("never")
    stream = kernel.resume_stream(pause, {"c2": "approve"})
    with pytest.raises(ResumeError, match=r"'c2'"):
        asyncio.run(collect_stream(stream))
    assert RUNS == []
    tampered = PauseState.from_json(pause.to_json().replace("/tmp/x", "/etc/passwd"))
    with pytest.raises(ResumeError):
        asyncio.run(collect_stream(kernel.resume_stream(tampered, {"c1": "approve"})))
    assert RUNS == []


def test_resume_stream_consumes_the_pause_once() -> None:
    ledger = Ledger()
    kernel, pause = paused_kernel("Deleted.", "Deleted again.", ledger=ledger)
    asyncio.run(collect_stream(kernel.resume_stream(pause, {"c1": "approve"})))
    with pytest.raises(AlreadyResumedError, match=r"^already resumed: pause '[0-9a-f]{32}' was resumed before"):
        asyncio.run(collect_stream(kernel.resume_stream(pause, {"c1": "approve"})))
    assert RUNS == ["/tmp/x"]


def test_a_resume_stream_closed_early_cancels_the_run() -> None:
    kernel, pause = paused_kernel("Deleted /tmp/x.")

    async def first_event() -> Any:
        stream = kernel.resume_stream(pause, {"c1": "approve"})
        event = await stream.__anext__()
        await stream.aclose()  # type: ignore[attr-defined]
        return event

    event = asyncio.run(first_event())
    assert isinstance(event, ToolCallStarted)
