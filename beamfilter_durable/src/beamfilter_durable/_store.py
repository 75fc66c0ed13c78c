"""A memory store whose operations are steps of the durable turn that calls them.

The memory filter loads the history when a turn starts and commits the turn in one append
at its end. In a durable turn both are steps: a recovering worker gets the history the turn
started with (not the one it may have committed since), and an append that committed just
before its worker died is recognised instead of stored twice. A pause is taken by its id
only: the recovered turn resumes the very pause it stored (same id, same signature).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from beamfilter_core import Message, PauseState, converter
from beamfilter_core.errors import ConfigError

if TYPE_CHECKING:
    from beamfilter_memory import ChatStore

    from ._backend import DurableBackend

__all__ = ["DurableStore"]


#: ``append``'s default: keep the stored pause (the memory package's KEEP_PAUSE, looked up
#: when used, so that beamfilter-durable imports without beamfilter-memory).
_KEEP: Any = object()


def keep_pause() -> Any:
    """beamfilter-memory's ``KEEP_PAUSE`` marker.

    Raises:
        ConfigError: beamfilter-memory is not installed.
    """
    try:
        from beamfilter_memory import KEEP_PAUSE
    except ImportError as exc:
        msg = (
            "A durable turn with the memory filter needs beamfilter-memory, which is not installed "
            f"({exc}); install it: pip install beamfilter-memory."
        )
        raise ConfigError(msg) from exc
    return KEEP_PAUSE


def _messages(data: Any) -> list[Message]:
    return [converter.structure(item, Message) for item in data]


class DurableStore:
    """Wraps a :class:`ChatStore`: inside a durable turn each call is a recorded step."""

    def __init__(self, inner: ChatStore, backend: DurableBackend) -> None:
        self.inner = inner
        self.backend = backend
        # (turn id, conversation id) -> how many messages the conversation held after this
        # turn's last load or append: what an append is checked against.
        self._sizes: dict[tuple[str, str], int] = {}
        # (turn id, conversation id) -> the pause this turn committed (the turn's own)
        self._pauses: dict[tuple[str, str], PauseState] = {}

    def __getattr__(self, name: str) -> Any:
        # facts, clear, migrate, url...: not part of a turn's steps
        return getattr(self.inner, name)

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        turn = self.backend.current_turn()
        if turn is None:
            return await self.inner.load(conversation_id, limit)

        async def load() -> dict[str, Any]:
            everything = await self.inner.load(conversation_id)
            shown = everything if limit is None else await self.inner.load(conversation_id, limit)
            return {"messages": converter.unstructure(shown), "size": len(everything)}

        recorded = await self.backend.take_step().run("beamfilter.memory.load", load)
        self._sizes[turn, conversation_id] = recorded["size"]
        return _messages(recorded["messages"])

    async def append(self, conversation_id: str, messages: Sequence[Message], *, pause: Any = _KEEP) -> None:
        if pause is _KEEP:
            pause = keep_pause()
        turn = self.backend.current_turn()
        if turn is None:
            await self.inner.append(conversation_id, messages, pause=pause)
            return
        key = (turn, conversation_id)
        size = self._sizes.get(key)
        batch = list(messages)
        pausing = pause if isinstance(pause, PauseState) else None

        async def append() -> dict[str, Any]:
            if size is not None:
                stored = await self.inner.load(conversation_id)
                if stored[size : size + len(batch)] == batch and len(stored) >= size + len(batch):
                    # committed by an attempt whose worker died before the step was recorded;
                    # that attempt's pause was never published, so this attempt's replaces it
                    if pausing is not None:
                        await self.inner.save_pause(conversation_id, pausing)
                    return {"size": len(stored), "pause": pausing.to_json() if pausing else None}
            await self.inner.append(conversation_id, batch, pause=pause)
            return {"size": (size or 0) + len(batch), "pause": pausing.to_json() if pausing else None}

        recorded = await self.backend.take_step().run("beamfilter.memory.append", append)
        self._sizes[key] = recorded["size"]
        if recorded["pause"] is not None:
            # the pause the store holds: on a replay, the first attempt's, not this one's
            self._pauses[key] = PauseState.from_json(recorded["pause"])

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        turn = self.backend.current_turn()
        if turn is None:
            return await self.inner.take_pause(conversation_id, pause_id)
        own = self._pauses.get((turn, conversation_id))
        # Which attempt of this turn first came this far: another one than this means an
        # attempt was killed around the take below.
        attempt = uuid.uuid4().hex

        async def arrive() -> str:
            return attempt

        first = await self.backend.take_step().run("beamfilter.memory.taking_pause", arrive)

        async def take() -> str | None:
            # a compare-and-swap on the pause id, as outside durable turns: a pause with
            # another id (a stale or forged state) is never taken
            taken = await self.inner.take_pause(conversation_id, pause_id)
            if (
                taken is None
                and first != attempt
                and own is not None
                and pause_id == own.pause_id
                and await self.inner.load_pause(conversation_id) is None
            ):
                # This turn stored that pause, and an earlier attempt of this step took it
                # and was killed before the step was recorded: it is still this turn's.
                return own.to_json()
            return taken.to_json() if taken is not None else None

        recorded = await self.backend.take_step().run("beamfilter.memory.take_pause", take)
        return PauseState.from_json(recorded) if recorded is not None else None

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        if self.backend.current_turn() is None:
            await self.inner.save_pause(conversation_id, pause)
            return

        async def save() -> None:
            await self.inner.save_pause(conversation_id, pause)

        await self.backend.take_step().run("beamfilter.memory.save_pause", save)

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        return await self.inner.load_pause(conversation_id)

    async def clear_pause(self, conversation_id: str) -> None:
        await self.inner.clear_pause(conversation_id)

    def forget(self, turn_id: str) -> None:
        """Drop what this store kept about a finished turn."""
        for key in [k for k in self._sizes if k[0] == turn_id]:
            del self._sizes[key]
        for key in [k for k in self._pauses if k[0] == turn_id]:
            del self._pauses[key]

    async def aclose(self) -> None:
        await self.inner.aclose()
