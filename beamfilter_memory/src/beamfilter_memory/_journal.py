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

__all__ = ["INTERRUPTED_CALL_TEXT", "Journal", "call_key"]


def call_key(pause_id: str, call_id: str) -> str:
    """The outcome key of one call of a pause (length-prefixed: ids may hold ``:``)."""
    return f"call:{len(pause_id)}:{pause_id}:{call_id}"


#: What a call reads when the resume running it stopped while it ran (cancelled, or its
#: outcome could not be recorded): it is not run again.
INTERRUPTED_CALL_TEXT = (
    "interrupted: the run stopped while this call ran, so whether it took effect is unknown; "
    "it was not run again. Check its effect before calling it again."
)


#: How many resumes of this process the journal follows at once.
_TRACKED = 1024


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
        # pause id -> the calls of a resume in this process that started, and that have a record
        self._started: dict[str, set[str]] = {}
        self._recorded: dict[str, set[str]] = {}

    def __repr__(self) -> str:
        return f"Journal({self.store!r}, durable={self.durable})"

    async def recorded(self, pause: PauseState, *, starting: bool = True) -> dict[str, ToolResult]:
        """The outcomes recorded for the pause's calls, by call id (``starting``: a resume
        is about to run its calls)."""
        if starting:
            for kept in (self._started, self._recorded):
                if len(kept) >= _TRACKED:  # resumes no memory turn settles (no conversation id)
                    del kept[next(iter(kept))]
                kept[pause.pause_id] = set()
        if not self.durable:
            return {}
        load = self.store.load_outcome
        found = await asyncio.gather(*(load(call_key(pause.pause_id, call.id)) for call in pause.calls))
        return {
            call.id: converter.structure(data["result"], ToolResult)
            for call, data in zip(pause.calls, found, strict=True)
            if data is not None
        }

    def starting(self, pause: PauseState, call_id: str) -> None:
        """A call of the resumed batch starts: until it is recorded, its outcome is unknown."""
        self._started.setdefault(pause.pause_id, set()).add(call_id)

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
        self._recorded.setdefault(pause.pause_id, set()).add(call_id)

    async def settle(self, pause: PauseState) -> bool:
        """After a resume of ``pause`` failed: True when the pause may be given back, because
        no call of it can run twice. A call that started and has no record (cancelled while
        it ran, or its record failed) is recorded as interrupted; without a journal, or when
        that record fails too, nothing may be given back once a call started."""
        started = self._started.pop(pause.pause_id, set())
        done = self._recorded.pop(pause.pause_id, set())
        unknown = sorted(started - done)
        if not unknown:
            return True
        if not self.durable:
            return False
        interrupted = {"result": converter.unstructure(ToolResult.failure("transient", INTERRUPTED_CALL_TEXT))}
        try:
            for call_id in unknown:
                await self.store.save_outcome(call_key(pause.pause_id, call_id), interrupted, first=True)
        except Exception:  # noqa: BLE001  # the store failed too: keep the pause consumed
            return False
        return True

    async def consume(self, conversation_id: str, pause: PauseState) -> None:
        """Record ``pause`` as consumed (resumed, or abandoned by a newer turn)."""
        self._started.pop(pause.pause_id, None)
        self._recorded.pop(pause.pause_id, None)
        if self.durable:
            record = {"pause_id": pause.pause_id, "conversation_id": conversation_id}
            await self.store.save_outcome(consumed_key(pause), record, first=True)
