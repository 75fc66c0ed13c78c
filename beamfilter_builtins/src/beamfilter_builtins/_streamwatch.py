"""Knowing whether a chat call already streamed text towards the consumer.

A chat hook cannot see the run's token sink. A filter that retries or falls back must
still never do so once the consumer may have seen part of an answer (the user would get
two answers glued together). :class:`StreamWatch` pairs the hook with a pass-through
:class:`TokenTransform` of the same filter:

- the hook opens a :meth:`StreamWatch.attempt` before ``call_next``; it stores a fresh
  :class:`Attempt` in a :class:`contextvars.ContextVar` owned by this filter instance;
- the chat terminal builds the token pipeline inside the same task, so the transform's
  ``init`` picks that attempt up as its per-stream state; ``step`` sets
  ``attempt.streamed`` on the first non-empty token and passes every token on unchanged.

Every token the consumer receives passes through every stream transform, so
``streamed`` is False only if the consumer has seen nothing. It may be True a little
early when a later transform (``hold_release``, ``redact``) still holds the text back:
the check errs on the safe side. Non-streaming runs never run stream transforms, so
``streamed`` stays False there. The ContextVar is per filter instance and task-local:
concurrent runs and nested retry/fallback filters never see each other's attempts.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from beamfilter_core import TokenTransform


class Attempt:
    """One try of a chat call; ``streamed`` turns True once text went downstream."""

    __slots__ = ("streamed",)

    def __init__(self) -> None:
        self.streamed = False


def _step(token: str, state: Attempt) -> tuple[Sequence[str], Attempt]:
    if token:
        state.streamed = True
    return (token,), state


class StreamWatch:
    """The ContextVar and pass-through transform of one retrying filter instance."""

    __slots__ = ("_current", "transform")

    def __init__(self, name: str) -> None:
        self._current: contextvars.ContextVar[Attempt | None] = contextvars.ContextVar(f"{name}_attempt", default=None)
        self.transform = TokenTransform(_step, init=self._init)

    def _init(self) -> Attempt:
        # Called by the chat terminal while our hook awaits it (same task, same context).
        return self._current.get() or Attempt()

    @contextmanager
    def attempt(self) -> Iterator[Attempt]:
        """Track one try of ``call_next``."""
        attempt = Attempt()
        token = self._current.set(attempt)
        try:
            yield attempt
        finally:
            self._current.reset(token)
