"""``memory://``: an in-process store for tests, notebooks and single-process demos."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from beamfilter_core import StoreSpec

from ._base import KEEP_PAUSE, Fact, _Keep
from ._store import StoreBase


class InMemoryStore(StoreBase):
    """Conversations in a dict of this process, gone when it exits.

    Messages are kept encoded, like the durable stores keep them, so what is loaded is a
    copy that later changes to the original objects cannot reach. Safe for many
    concurrent runs in one event loop (no primitive awaits between reading and writing).

    Example::

        store = InMemoryStore()
        kernel = Kernel(model, filters=[memory_filter(store)])
    """

    def __init__(self, url: str = "memory://") -> None:
        super().__init__(url)
        self._messages: dict[str, list[str]] = {}
        self._pauses: dict[str, str] = {}
        self._resumed: set[str] = set()  # the pause ledger
        self._outcomes: dict[str, str] = {}
        # user id -> subject -> text; dict order is save order (a replaced fact moves last).
        self._facts: dict[str, dict[str, str]] = {}

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._messages)} conversations)"

    async def _read(self, cid: str, limit: int | None) -> list[str]:
        rows = self._messages.get(cid, [])
        return rows if limit is None else rows[-limit:]

    async def _write(self, cid: str, rows: Sequence[str], pause: str | _Keep | None, *, clear: bool = False) -> None:
        if clear:
            self._messages.pop(cid, None)
        if rows:
            self._messages.setdefault(cid, []).extend(rows)
        if pause is None:
            self._pauses.pop(cid, None)
        elif pause is not KEEP_PAUSE:
            self._pauses[cid] = pause  # KEEP_PAUSE is ruled out above

    async def _read_pause(self, cid: str) -> str | None:
        return self._pauses.get(cid)

    async def _take_pause(self, cid: str, pause_id: str | None) -> str | None:
        text = self._pauses.get(cid)
        if text is None or (pause_id is not None and self.pause_id_of(text) != pause_id):
            return None
        del self._pauses[cid]
        return text

    async def _claim(self, pause_id: str) -> bool:
        if pause_id in self._resumed:
            return False
        self._resumed.add(pause_id)
        return True

    async def _list_pauses(self, limit: int | None) -> list[tuple[str, str]]:
        found = sorted(self._pauses.items())
        return found if limit is None else found[:limit]

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        if text is None:
            self._outcomes.pop(pause_id, None)
            return True
        if first and pause_id in self._outcomes:
            return False
        self._outcomes[pause_id] = text
        return True

    async def _get_outcome(self, pause_id: str) -> str | None:
        return self._outcomes.get(pause_id)

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        stored = self._facts.setdefault(uid, {})
        for fact in facts:
            stored.pop(fact.subject, None)  # a replaced fact becomes the most recent
            stored[fact.subject] = fact.text

    async def _load_facts(self, uid: str) -> list[tuple[str, str]]:
        return list(self._facts.get(uid, {}).items())

    async def _clear_facts(self, uid: str) -> None:
        self._facts.pop(uid, None)

    async def _close(self) -> None:
        self._messages.clear()
        self._pauses.clear()
        self._resumed.clear()
        self._outcomes.clear()
        self._facts.clear()


_NO_OPTIONS: dict[str, Any] = {"type": "object", "additionalProperties": False}

SPEC = StoreSpec("memory", InMemoryStore, ("memory",), _NO_OPTIONS, "In-process store (tests, notebooks).")
