"""Stream events, the token-transform pipeline and the channel behind ``run_stream``."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from ._filter import TokenTransform
from ._lazy import lazy_module
from ._messages import ToolCall
from ._records import ToolResult, TurnResult

if TYPE_CHECKING:
    import asyncio
else:
    asyncio = lazy_module("asyncio", globals())

Sink = Callable[[str], None]


@attrs.frozen(slots=True)
class TextDelta:
    """A piece of the answer's text, after token transforms."""

    text: str


@attrs.frozen(slots=True)
class ToolCallStarted:
    """A tool call is about to run."""

    call: ToolCall


@attrs.frozen(slots=True)
class ToolCallFinished:
    """A tool call finished (successfully or not)."""

    call: ToolCall
    result: ToolResult


@attrs.frozen(slots=True)
class RunFinished:
    """The last event of a stream: the run's result."""

    result: TurnResult


Event = TextDelta | ToolCallStarted | ToolCallFinished | RunFinished


class _Stage:
    __slots__ = ("_flush", "_flushed", "down", "down_flush", "state", "step")

    def __init__(self, transform: TokenTransform, down: Sink, down_flush: Callable[[], None] | None) -> None:
        self.step = transform.step
        self._flush = transform.flush
        self.state: Any = transform.new_state()
        self.down = down
        self.down_flush = down_flush
        self._flushed = False

    def push(self, token: str) -> None:
        out, self.state = self.step(token, self.state)
        down = self.down
        for item in out:
            down(item)

    def flush(self) -> None:
        if self._flushed:
            return
        self._flushed = True
        if self._flush is not None:
            down = self.down
            for item in self._flush(self.state):
                down(item)
        if self.down_flush is not None:
            self.down_flush()


def pipeline(transforms: Sequence[TokenTransform], sink: Sink) -> tuple[Sink, Callable[[], None] | None]:
    """Chain ``transforms`` (first sees the raw token first) in front of ``sink``.

    Returns the entry point and the flush function (None with no transforms, in which
    case the entry point is ``sink`` itself).
    """
    push: Sink = sink
    flush: Callable[[], None] | None = None
    for transform in reversed(transforms):
        stage = _Stage(transform, push, flush)
        push, flush = stage.push, stage.flush
    return push, flush


def apply_to_text(transforms: Sequence[TokenTransform], text: str) -> str:
    """Run a whole text through ``transforms`` as one token, then flush."""
    out: list[str] = []
    push, flush = pipeline(transforms, out.append)
    push(text)
    if flush is not None:
        flush()
    return "".join(out)


class Channel:
    """A single-consumer queue of events with cheap wake-ups (no per-item task switch)."""

    __slots__ = ("_closed", "_error", "_items", "_waiter")

    def __init__(self) -> None:
        self._items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._closed = False

    def push(self, item: Any) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def push_text(self, text: str) -> None:
        self.push(TextDelta(text))

    def close(self) -> None:
        self._closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def drain(self) -> AsyncIterator[Any]:
        items = self._items
        while True:
            while items:
                yield items.popleft()
            if self._closed:
                return
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
