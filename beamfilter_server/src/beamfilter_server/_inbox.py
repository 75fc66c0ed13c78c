"""The pending pauses of this gateway process and their outcomes.

A pause is taken for a decision at most once here (``take`` checks and marks it in one step
of the event loop, so a second click or a second reviewer is told it was decided); across
processes the memory store's compare-and-swap (or the kernel's pause ledger) is what makes a
resume run once (docs/approvals.md).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from typing import Any, Literal

import attrs

from beamfilter_core import Kernel, PauseState, TurnResult

from ._client_tools import ClientCalls

__all__ = ["Entry", "Inbox", "Outcome"]

Status = Literal["pending", "deciding", "completed", "failed"]


@attrs.frozen(slots=True)
class Outcome:
    """How a turn ended, with the client tool calls it handed over or refused."""

    result: TurnResult
    calls: ClientCalls


@attrs.define(slots=True, eq=False)
class Entry:
    """One paused turn: what resuming it needs, who decided it, and how it ended."""

    pause: PauseState
    conversation_id: str | None
    kernel: Kernel
    model: str
    tool_names: frozenset[str]
    #: The client key's id (``key-...``), None on a gateway without keys.
    client: str | None = None
    #: The conversation id as the client sent it (``conversation_id`` is scoped to the client).
    shown_conversation: str | None = None
    created: float = attrs.Factory(time.time)
    status: Status = "pending"
    decided_by: str | None = None
    decisions: dict[str, Any] = attrs.Factory(dict)
    outcome: Outcome | None = None
    error: BaseException | None = None
    #: Why the last decision was refused before anything ran (shown in the inbox).
    refusal: str | None = None
    #: Which filter paused each awaited call and why (``{call_id: {"filter", "reason"}}``);
    #: it travels in the signed pause, so a pause adopted from another worker has it too.
    paused_by: dict[str, dict[str, str]] = attrs.Factory(dict)
    done: asyncio.Event = attrs.Factory(asyncio.Event)

    @property
    def pause_id(self) -> str:
        return self.pause.pause_id


class Inbox:
    """Pending pauses by id, and the last ``keep`` decided ones for clients that poll."""

    def __init__(self, keep: int = 1000) -> None:
        self._entries: OrderedDict[str, Entry] = OrderedDict()
        self._keep = keep
        #: Bumped on every change; the inbox page reloads when it moves.
        self.version = 0
        #: True once the gateway shuts down: waits end at once.
        self.closed = False
        self._changed = asyncio.Event()

    def __repr__(self) -> str:
        return f"Inbox({len(self.pending())} pending)"

    def _bump(self) -> None:
        self.version += 1
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, since: int, seconds: float) -> int:
        """The version once it differs from ``since`` (or after ``seconds``)."""
        if self.version == since:
            waiter = self._changed
            try:
                async with asyncio.timeout(seconds):
                    await waiter.wait()
            except TimeoutError:
                pass
        return self.version

    def add(self, entry: Entry) -> None:
        self._entries[entry.pause_id] = entry
        decided = [key for key, e in self._entries.items() if e.status in ("completed", "failed")]
        for key in decided[: max(0, len(decided) - self._keep)]:
            del self._entries[key]
        self._bump()

    def get(self, pause_id: str) -> Entry | None:
        return self._entries.get(pause_id)

    def pending(self) -> list[Entry]:
        """Pending pauses, oldest first."""
        return [entry for entry in self._entries.values() if entry.status == "pending"]

    def take(self, pause_id: str, reviewer: str) -> Entry | None:
        """The pending entry, now marked as being decided by ``reviewer``; None when it is
        unknown or was decided already (no await between the check and the mark)."""
        entry = self._entries.get(pause_id)
        if entry is None or entry.status != "pending":
            return None
        entry.status = "deciding"
        entry.decided_by = reviewer
        self._bump()
        return entry

    def give_back(self, entry: Entry) -> None:
        """A decision that was refused before anything ran: the pause is pending again."""
        entry.status = "pending"
        entry.decided_by = None
        self._bump()

    def finish(self, entry: Entry, outcome: Outcome | None, error: BaseException | None) -> None:
        entry.outcome = outcome
        entry.error = error
        entry.status = "failed" if error is not None else "completed"
        entry.done.set()
        self._bump()

    def close(self) -> None:
        """Wake everything waiting (shutdown)."""
        self.closed = True
        self._changed.set()
        for entry in self._entries.values():
            entry.done.set()
