"""The protocol every chat model implements."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from .._records import ChatRequest, ChatResponse

#: Receives each streamed text delta, in order.
TokenSink = Callable[[str], None]


@runtime_checkable
class ChatModel(Protocol):
    """A chat model: one call in, one response out; streaming reports text as it comes.

    ``stream`` calls ``on_token`` for every text delta, in order, and returns the same
    complete :class:`ChatResponse` that ``complete`` would (text, tool calls, usage).
    It must raise, never return, when the stream breaks.
    """

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer ``request`` in one piece."""
        ...

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Answer ``request``, reporting text deltas to ``on_token`` as they arrive."""
        ...
