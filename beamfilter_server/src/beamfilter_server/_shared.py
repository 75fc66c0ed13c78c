"""Pauses shared by every worker through the memory filter's store.

With ``memory`` on a store that several workers share (PostgreSQL, Redis, one SQLite file),
every worker's inbox lists every pending pause, any worker decides any of them exactly
once, and a client waiting on one worker learns how a pause decided on another ended.

The store holds the pauses (the memory filter saves them) and one outcome per decided
pause (``save_outcome``): ``{"status": "deciding", "decided_by": ...}``, written with
``first=True`` when a reviewer takes the pause (of two workers one wins, the other answers
"already decided"), then the pause's poll body once its resumed turn has ended.
"""

from __future__ import annotations

import asyncio
from typing import Any

from beamfilter_core import Kernel
from beamfilter_core.errors import GatewayError

__all__ = ["POLL_SECONDS", "SharedPauses", "already_decided", "recorded_error", "shared_store"]

#: How often a worker looks in the store for the outcome of a pause decided elsewhere.
POLL_SECONDS = 0.25
#: The most pauses an inbox lists.
LIST_LIMIT = 500


def shared_store(kernel: Kernel) -> Any | None:
    """The store of the kernel's memory filter when it shares pauses (``shares_pauses``)."""
    for item in kernel.filters:
        if item.memory is not None and getattr(item.memory.store, "shares_pauses", False) is True:
            return item.memory.store
    return None


class SharedPauses:
    """The pending pauses and decided outcomes of a shared store."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def __repr__(self) -> str:
        return f"SharedPauses({self.store!r})"

    async def pending(self) -> list[Any]:
        """The stored pauses nobody has taken for a decision (``PendingPause`` values)."""
        found = await self.store.pending_pauses(limit=LIST_LIMIT)
        outcomes = await asyncio.gather(*(self.store.load_outcome(item.pause.pause_id) for item in found))
        return [item for item, outcome in zip(found, outcomes, strict=True) if outcome is None]

    async def find(self, pause_id: str) -> Any | None:
        """The stored pause with that id (a ``PendingPause``), or None."""
        for item in await self.store.pending_pauses():
            if item.pause.pause_id == pause_id:
                return item
        return None

    async def claim(self, pause_id: str, reviewer: str, client: str | None) -> dict[str, Any] | None:
        """Take the pause for ``reviewer``: None when this worker won it, else the outcome
        stored by the one that did."""
        taken = {"status": "deciding", "decided_by": reviewer, "client": client}
        if await self.store.save_outcome(pause_id, taken, first=True):
            return None
        found: dict[str, Any] | None = await self.store.load_outcome(pause_id)
        return found or {}

    async def release(self, pause_id: str) -> None:
        """The decision was refused before anything ran: the pause is pending again."""
        await self.store.save_outcome(pause_id, None)

    async def record(self, pause_id: str, body: dict[str, Any]) -> None:
        """Keep how the pause ended, for clients polling any worker."""
        await self.store.save_outcome(pause_id, body)

    async def outcome(self, pause_id: str) -> dict[str, Any] | None:
        found: dict[str, Any] | None = await self.store.load_outcome(pause_id)
        return found


def already_decided(pause_id: str, by: Any) -> GatewayError:
    who = f" by {by}" if isinstance(by, str) and by else ""
    msg = f"already decided{who}: pause {pause_id} is no longer pending."
    return GatewayError(msg, status=409, code="already_decided")


def recorded_error(record: dict[str, Any]) -> GatewayError:
    """The error a turn decided on another worker failed with."""
    found = record.get("error")
    error: dict[str, Any] = found if isinstance(found, dict) else {}
    status = error.get("status")
    status = status if isinstance(status, int) else 500
    return GatewayError(
        str(error.get("message") or "The resumed turn failed; see the gateway's log."),
        status=status,
        type=str(error.get("type") or "server_error"),
        code=error.get("code") if isinstance(error.get("code"), str) else None,
    )
