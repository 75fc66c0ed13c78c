"""A streamed turn's events, published to the engine so that any process can attach to it.

A turn started with ``run_stream`` publishes its events (text, tool calls, pauses) to the
workflow's stream ``beamfilter.events``; the worker that recovers it after a crash goes on
publishing there, and ``DurableRunner.attach(turn_id)`` reads the stream from any process.

A recovering worker replays the run, so it emits again what the dead worker published
(its tool events, and the text of an LLM step that is run again). The publisher reads
what is published first and publishes only what goes beyond it: a reader sees each event
once. When a re-run LLM call answers differently from the interrupted one, its text is
published from the first token that differs (a reader sees the interrupted text, then
that; the result holds the final answer).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from beamfilter_core import Event, TextDelta, ToolCallFinished, ToolCallStarted, converter
from beamfilter_core.errors import DurableError

__all__ = ["EVENTS_KEY", "Publisher", "decode", "encode"]

#: The key of a turn's published events in its workflow's streams.
EVENTS_KEY = "beamfilter.events"
#: Text is gathered for at most this long before it is written (one transaction a write).
FLUSH_SECONDS = 0.05

_KINDS: dict[str, type[Any]] = {"started": ToolCallStarted, "finished": ToolCallFinished}


def encode(event: Event) -> dict[str, Any]:
    """``event`` as the plain data written to the stream."""
    if isinstance(event, TextDelta):
        return {"text": event.text}
    for kind, cls in _KINDS.items():
        if isinstance(event, cls):
            return {kind: converter.unstructure(event)}
    msg = f"A durable turn publishes text and tool events; got {type(event).__name__}."
    raise DurableError(msg)


def decode(value: Mapping[str, Any]) -> Event | str:
    """A published value as its event, or the pause id of a ``{"pause": id}`` mark."""
    if "text" in value:
        return TextDelta(value["text"])
    if "pause" in value:
        return str(value["pause"])
    for kind, cls in _KINDS.items():
        if kind in value:
            event: Event = converter.structure(value[kind], cls)
            return event
    msg = f"Unknown published value {sorted(value)!r} in a durable turn's stream."
    raise DurableError(msg)


class Publisher:
    """Publishes one turn's events through ``write`` (one stream append each), after the
    ``published`` values an earlier attempt of the turn wrote: the events that repeat them
    are not written again."""

    def __init__(self, published: Sequence[Mapping[str, Any]], write: Callable[[Any], Awaitable[None]]) -> None:
        self._write = write
        #: published values this attempt has not reproduced yet, in order
        self._ahead: deque[dict[str, Any]] = deque(dict(v) for v in published)
        self._text = ""  # text gathered, not written yet
        self._since = time.monotonic()
        #: the text readers got from this attempt since its last tool event (published or matched)
        self.answer = ""

    async def event(self, event: Event) -> None:
        if isinstance(event, TextDelta):
            self.answer += event.text
            text = self._match_text(event.text)
            if text:
                self._text += text
                if time.monotonic() - self._since >= FLUSH_SECONDS:
                    await self.flush()
            return
        value = encode(event)
        if self._ahead and self._ahead[0] == value:
            self._ahead.popleft()
            self.answer = ""
            return
        self._ahead.clear()  # this attempt took another path: publish all from here
        await self.flush()
        await self._write(value)
        self.answer = ""

    async def pause(self, pause_id: str) -> None:
        """Mark where the turn paused (readers stop there until it is decided)."""
        await self.flush()
        if self._ahead and self._ahead[0] == {"pause": pause_id}:
            self._ahead.popleft()
            return
        self._ahead.clear()
        await self._write({"pause": pause_id})

    async def finish(self, text: str | None) -> None:
        """Write what is gathered, and the part of the final answer ``text`` no step streamed
        (an LLM step replayed from its record streams nothing)."""
        # what readers got of the answer: this attempt's text, then what an earlier one published beyond it
        seen = "".join(v["text"] for v in _after_last_tool([{"text": self.answer}, *self._ahead]))
        self._ahead.clear()
        if text and text.startswith(seen) and len(text) > len(seen):
            self._text += text[len(seen) :]
        await self.flush()

    async def flush(self) -> None:
        self._since = time.monotonic()
        if self._text:
            text, self._text = self._text, ""
            await self._write({"text": text})

    def _match_text(self, text: str) -> str:
        """The part of ``text`` beyond what is published already."""
        while text and self._ahead:
            head = self._ahead[0].get("text")
            if head is None:  # published a tool event or a pause here: another path
                self._ahead.clear()
                break
            n = min(len(head), len(text))
            if head[:n] != text[:n]:
                self._ahead.clear()
                break
            text = text[n:]
            if n == len(head):
                self._ahead.popleft()
            else:
                self._ahead[0] = {"text": head[n:]}
        return text


def _after_last_tool(values: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    tail: list[Mapping[str, Any]] = []
    for value in values:
        if "text" in value:
            tail.append(value)
        else:
            tail.clear()
    return tail
