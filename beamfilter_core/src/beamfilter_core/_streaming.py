"""Stream events, the token-transform pipeline and the channel behind ``run_stream``."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
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

#: set on an exception a token transform raised: (the transform, its place in the pipeline)
TRANSFORM_MARK = "_beamfilter_transform"


@attrs.frozen(slots=True, init=False)
class TextDelta:
    """A piece of the answer's text, after token transforms."""

    text: str

    def __init__(self, text: str) -> None:
        # One per streamed token: set the slot directly instead of attrs' frozen
        # __init__, which builds a bound object.__setattr__ for every instance.
        _set_text(self, text)


_set_text = TextDelta.__dict__["text"].__set__  # the slot's member descriptor


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


def _mark(exc: Exception, transform: TokenTransform, position: int) -> None:
    """Note on ``exc`` which transform raised it, so the kernel can name its filter."""
    if getattr(exc, TRANSFORM_MARK, None) is None:  # the innermost transform raised it first
        object.__setattr__(exc, TRANSFORM_MARK, (transform, position))


def _stage(
    transform: TokenTransform, position: int, down: Sink, down_flush: Callable[[], None] | None
) -> tuple[Sink, Callable[[], None]]:
    # Closures rather than a class: per token, a closure's cell loads are cheaper than
    # a bound method call plus slot loads and stores. A ``try`` costs nothing until
    # something raises.
    step = transform.step
    end = transform.flush
    state: Any = transform.new_state()
    flushed = False

    def push(token: str) -> None:
        nonlocal state
        try:
            out, state = step(token, state)
        except Exception as exc:
            _mark(exc, transform, position)
            raise
        for item in out:
            down(item)

    def flush() -> None:
        nonlocal flushed
        if flushed:
            return
        flushed = True
        if end is not None:
            try:
                out = end(state)
            except Exception as exc:
                _mark(exc, transform, position)
                raise
            for item in out:
                down(item)
        if down_flush is not None:
            down_flush()

    return push, flush


def pipeline(transforms: Sequence[TokenTransform], sink: Sink) -> tuple[Sink, Callable[[], None] | None]:
    """Chain ``transforms`` (first sees the raw token first) in front of ``sink``.

    Returns the entry point and the flush function (None with no transforms, in which
    case the entry point is ``sink`` itself).
    """
    push: Sink = sink
    flush: Callable[[], None] | None = None
    for position in range(len(transforms) - 1, -1, -1):
        push, flush = _stage(transforms[position], position, push, flush)
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
    """A single-consumer queue of events with cheap wake-ups (no per-item task switch).

    The consumer pops ``items`` itself and calls :meth:`wait` only when it is empty;
    ``closed`` turns true when the producer is done.
    """

    __slots__ = ("_waiter", "closed", "items")

    def __init__(self) -> None:
        self.items: deque[Any] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self.closed = False

    def push(self, item: Any) -> None:
        self.items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def push_text(self, text: str) -> None:
        # push() inlined: this runs once per streamed token.
        self.items.append(TextDelta(text))
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def close(self) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self) -> None:
        """Wait until an item is pushed or the channel is closed."""
        if self.items or self.closed:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        await self._waiter
