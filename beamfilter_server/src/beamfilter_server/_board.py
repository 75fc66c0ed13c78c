"""Where the gateway's pauses wait for a decision: one protocol, two boards.

:class:`LocalBoard` keeps the pauses of this process only (its :class:`Inbox`).
:class:`SharedBoard` adds the pauses every worker stored in a shared memory store
(:class:`SharedPauses`): it lists them all, lets any worker decide any of them once, and
finds how a pause decided on another worker ended. A turn without a conversation id is not
stored, so its pause stays on the board of the worker that made it, in either board.

The gateway talks to the board only; it never asks which one it holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import zlib
from collections.abc import Callable
from typing import Any, Protocol

from beamfilter_core import PauseState
from beamfilter_core.errors import GatewayError

from ._inbox import Entry, Inbox
from ._shared import POLL_SECONDS, SharedPauses, already_decided

__all__ = ["LocalBoard", "PauseBoard", "SharedBoard", "listing_version", "unknown_pause"]

#: Builds the entry of a pause another worker made: ``adopt(pause, conversation_id)``.
Adopt = Callable[[PauseState, str], Entry]


def unknown_pause(pause_id: str) -> GatewayError:
    msg = f"No pause {pause_id[:80]!r} is known here."
    return GatewayError(msg, status=404, code="unknown_pause")


def listing_version(entries: list[Entry]) -> int:
    """A number for the listing's pauses and refusals (the same on every worker)."""
    seen = "|".join(f"{entry.pause_id}:{entry.refusal or ''}" for entry in entries)
    return zlib.crc32(seen.encode())


async def wait_for(event: asyncio.Event, seconds: float) -> None:
    """Wait until ``event`` is set or ``seconds`` pass (a finite number, checked by the caller)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()


class PauseBoard(Protocol):
    """The pending pauses the gateway can list, decide and poll."""

    inbox: Inbox

    async def listing(self) -> list[Entry]:
        """The pending pauses, oldest first."""

    async def version(self) -> int:
        """A number that changes when the listing does."""

    async def changed(self, since: int, seconds: float) -> int:
        """The version once it differs from ``since``, or after ``seconds``."""

    async def entry(self, pause_id: str) -> Entry:
        """The entry of a pending or decided pause. Raises 404 when unknown, 409 when it was
        decided on another worker (this one holds no entry for it)."""

    async def claim(self, pause_id: str, reviewer: str) -> Entry:
        """Take the pause for ``reviewer``, once across every worker. Raises 404 or 409."""

    async def release(self, entry: Entry) -> None:
        """A decision refused before anything ran: the pause is pending again."""

    async def record(self, entry: Entry, body: dict[str, Any]) -> None:
        """Keep how a decided pause ended, for clients polling another worker."""

    async def decided(self, pause_id: str) -> dict[str, Any] | None:
        """The stored outcome of a pause decided on any worker (a poll body with ``client``)."""

    async def stored_owner(self, pause_id: str) -> tuple[bool, Any]:
        """``(True, client)`` when the pause is pending in the shared store, else ``(False, None)``."""

    def step(self, entry: Entry, left: float) -> float:
        """How long to wait on ``entry.done`` before looking for an outcome stored elsewhere."""


class LocalBoard:
    """The pauses of this process only."""

    def __init__(self) -> None:
        self.inbox = Inbox()

    def __repr__(self) -> str:
        return f"LocalBoard({self.inbox!r})"

    async def listing(self) -> list[Entry]:
        return self.inbox.pending()

    async def version(self) -> int:
        return self.inbox.version

    async def changed(self, since: int, seconds: float) -> int:
        return await self.inbox.changed(since, seconds)

    async def entry(self, pause_id: str) -> Entry:
        entry = self.inbox.get(pause_id)
        if entry is None:
            raise unknown_pause(pause_id)
        return entry

    async def claim(self, pause_id: str, reviewer: str) -> Entry:
        entry = await self.entry(pause_id)
        taken = self.inbox.take(pause_id, reviewer)
        if taken is None:
            raise already_decided(pause_id, entry.decided_by)
        return taken

    async def release(self, entry: Entry) -> None:
        self.inbox.give_back(entry)

    async def record(self, entry: Entry, body: dict[str, Any]) -> None:
        return None  # the entry itself is the record

    async def decided(self, pause_id: str) -> dict[str, Any] | None:
        return None

    async def stored_owner(self, pause_id: str) -> tuple[bool, Any]:
        return False, None

    def step(self, entry: Entry, left: float) -> float:
        return left


class SharedBoard(LocalBoard):
    """This process's pauses and those of every worker sharing the memory store."""

    def __init__(self, shared: SharedPauses, adopt: Adopt) -> None:
        super().__init__()
        self.shared = shared
        self._adopt = adopt

    def __repr__(self) -> str:
        return f"SharedBoard({self.shared!r}, {self.inbox!r})"

    @staticmethod
    def _stored(entry: Entry | None) -> bool:
        # a turn without a conversation id is not in the store
        return entry is None or entry.conversation_id is not None

    async def listing(self) -> list[Entry]:
        listed: dict[str, Entry] = {}
        for item in await self.shared.pending():
            known = self.inbox.get(item.pause.pause_id)
            if known is None:
                listed[item.pause.pause_id] = self._adopt(item.pause, item.conversation_id)
            elif known.status == "pending":
                listed[known.pause_id] = known
        for entry in self.inbox.pending():
            if not self._stored(entry):
                listed[entry.pause_id] = entry
        return sorted(listed.values(), key=lambda entry: entry.created)

    async def version(self) -> int:
        return listing_version(await self.listing())

    async def changed(self, since: int, seconds: float) -> int:
        deadline = time.monotonic() + seconds
        while True:
            version = await self.version()
            left = deadline - time.monotonic()
            if version != since or left <= 0 or self.inbox.closed:
                return version
            await self.inbox.changed(self.inbox.version, min(left, 1.0))

    async def entry(self, pause_id: str) -> Entry:
        entry = self.inbox.get(pause_id)
        if entry is not None:
            return entry
        found = await self.shared.find(pause_id)
        if found is not None:
            entry = self.inbox.get(pause_id) or self._adopt(found.pause, found.conversation_id)
            self.inbox.add(entry)
            return entry
        record = await self.shared.outcome(pause_id)
        if record is not None:
            raise already_decided(pause_id, record.get("decided_by"))
        raise unknown_pause(pause_id)

    async def claim(self, pause_id: str, reviewer: str) -> Entry:
        taken = await super().claim(pause_id, reviewer)
        if not self._stored(taken):
            return taken
        try:
            record = await self.shared.claim(pause_id, reviewer, taken.client)
        except BaseException:
            self.inbox.give_back(taken)
            raise
        if record is not None:  # another worker took it first
            self.inbox.give_back(taken)
            raise already_decided(pause_id, record.get("decided_by"))
        return taken

    async def release(self, entry: Entry) -> None:
        self.inbox.give_back(entry)
        if self._stored(entry):
            await self.shared.release(entry.pause_id)

    async def record(self, entry: Entry, body: dict[str, Any]) -> None:
        if self._stored(entry):
            await self.shared.record(entry.pause_id, body)

    async def decided(self, pause_id: str) -> dict[str, Any] | None:
        if not self._stored(self.inbox.get(pause_id)):
            return None
        return await self.shared.outcome(pause_id)

    async def stored_owner(self, pause_id: str) -> tuple[bool, Any]:
        if not self._stored(self.inbox.get(pause_id)):
            return False, None
        found = await self.shared.find(pause_id)
        if found is None:
            return False, None
        meta = found.pause.context.get("gateway")
        return True, meta.get("client") if isinstance(meta, dict) else None

    def step(self, entry: Entry, left: float) -> float:
        return min(left, POLL_SECONDS) if self._stored(entry) else left
