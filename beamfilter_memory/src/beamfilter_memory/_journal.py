"""The approval journal: what a resume did, kept in the memory filter's store.

A resume records each call's outcome, keyed by pause id and call id, right after the call
returns and before anything else happens (``Kernel`` finds the journal in the memory
filter's ``extras["journal"]``). If the resumed turn then fails, the memory filter gives
the pause back; approving it again continues from the recorded outcomes and never runs a
recorded call again. A resumed (or abandoned) pause leaves a consumed record, the digest
of its signed state, that outlives the pause row: the same pause inserted into the store
again is never taken again (``StoreBase.take_pause`` checks it).

Both live in the store's keyed outcomes (``save_outcome``/``load_outcome``), which every
store of this package has. With a store that has none, nothing is recorded: a resume that
fails after a call started keeps its pause consumed (approved calls run at most once).
"""

from __future__ import annotations

import asyncio
from typing import Any

from beamfilter_core import PauseState, ToolResult, converter
from beamfilter_core.errors import ConfigError

from ._stores._base import consumed_key

__all__ = ["Journal", "call_key"]


def call_key(pause_id: str, call_id: str) -> str:
    """The outcome key of one call of a pause (length-prefixed: ids may hold ``:``)."""
    return f"call:{len(pause_id)}:{pause_id}:{call_id}"


class Journal:
    """Records and finds the outcomes of a pause's calls in ``store``."""

    def __init__(self, store: Any) -> None:
        self.store = store
        kind = type(store)
        #: True when the store keeps keyed outcomes (every store of this package does).
        self.durable = (
            callable(getattr(kind, "save_outcome", None))
            and callable(getattr(kind, "load_outcome", None))
            and getattr(store, "shares_pauses", False) is True
        )
        # without a durable journal: the pauses whose resumed batch started in this process
        self._started: set[str] = set()

    def __repr__(self) -> str:
        return f"Journal({self.store!r}, durable={self.durable})"

    def started(self, pause_id: str) -> bool:
        """True once a resume of ``pause_id`` began running its calls (then forgotten)."""
        if pause_id in self._started:
            self._started.discard(pause_id)
            return True
        return False

    async def recorded(self, pause: PauseState, *, starting: bool = True) -> dict[str, ToolResult]:
        """The outcomes recorded for the pause's calls, by call id (``starting``: a resume
        is about to run its calls)."""
        if not self.durable:
            if starting:
                self._started.add(pause.pause_id)
            return {}
        load = self.store.load_outcome
        found = await asyncio.gather(*(load(call_key(pause.pause_id, call.id)) for call in pause.calls))
        return {
            call.id: converter.structure(data["result"], ToolResult)
            for call, data in zip(pause.calls, found, strict=True)
            if data is not None
        }

    async def record(self, pause: PauseState, call_id: str, result: ToolResult) -> None:
        """Keep one call's outcome; the first record of a call wins."""
        if not self.durable:
            return
        key = call_key(pause.pause_id, call_id)
        try:
            await self.store.save_outcome(key, {"result": converter.unstructure(result)}, first=True)
        except ConfigError:
            # context writes or content parts JSON cannot hold: keep what the model reads
            kept = ToolResult(result.content, result.error)
            await self.store.save_outcome(key, {"result": converter.unstructure(kept)}, first=True)

    async def consume(self, conversation_id: str, pause: PauseState) -> None:
        """Record ``pause`` as consumed (resumed, or abandoned by a newer turn)."""
        self._started.discard(pause.pause_id)
        if self.durable:
            record = {"pause_id": pause.pause_id, "conversation_id": conversation_id}
            await self.store.save_outcome(consumed_key(pause), record, first=True)
