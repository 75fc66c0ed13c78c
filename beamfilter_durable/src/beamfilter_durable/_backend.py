"""The seam between beamfilter's durable turns and a durable-execution engine.

A backend runs a turn as a *workflow* whose id the caller chooses, records *steps* (one LLM
call, one tool call, one memory-store operation) in order, and carries messages to a
waiting workflow. DBOS implements it today (``_dbos.py``); a Temporal backend maps the
same calls onto a workflow, activities and signals (docs/durable.md says how).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import attrs

__all__ = ["FINISHED", "STATE_KEY", "DurableBackend", "StepSlot", "TurnInfo"]

T = TypeVar("T")

#: The stream a turn writes its milestones to, which waiters follow: ``{"paused": pause_id}``
#: when it pauses, ``{"end": True}`` just before it returns or fails.
STATE_KEY = "beamfilter.state"
#: The statuses of a turn that runs no more (until ``beamfilter durable resume`` restarts it).
FINISHED = frozenset({"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"})


class StepSlot(Protocol):
    """A step position taken now and run later: parallel tool calls take theirs in call
    order, so a recovering worker finds each call's recorded result at the same place."""

    @property
    def step_id(self) -> int: ...

    async def run(self, name: str, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` as the step ``name`` at this position, or return what it recorded."""
        ...


@attrs.frozen(slots=True)
class TurnInfo:
    """One durable turn as ``beamfilter durable list|show`` print it."""

    turn_id: str
    status: str
    created_at: float | None
    updated_at: float | None
    executor_id: str | None
    queue: str | None
    steps: tuple[Mapping[str, Any], ...] = ()
    error: str | None = None
    paused_on: tuple[str, ...] = ()


class DurableBackend(Protocol):
    """What durable turns need from an engine (workflow side, then caller side)."""

    name: str
    #: A secret every worker of this engine shares: pauses of kernels without a pause_key
    #: are signed with it, so a recovering worker resumes the very pause a dead one made.
    pause_secret: str

    # -- inside a turn's workflow ----------------------------------------------------------

    def current_turn(self) -> str | None:
        """The id of the turn whose workflow runs this code, or None outside one."""
        ...

    def take_step(self) -> StepSlot:
        """The next step position of the current workflow."""
        ...

    async def publish(self, key: str, value: Any) -> None:
        """Set the current workflow's value ``key`` (readable by any process)."""
        ...

    async def receive(self, topic: str, wait_seconds: float) -> Any:
        """The next message sent to the current workflow on ``topic`` (exactly once), or None."""
        ...

    async def append(self, key: str, value: Any) -> None:
        """Append ``value`` to the current workflow's stream ``key`` (not a step: any number
        of appends leaves the workflow's step ids as they are)."""
        ...

    async def published(self, key: str) -> list[Any]:
        """Every value the current workflow's stream ``key`` holds now (from earlier attempts)."""
        ...

    # -- callers ---------------------------------------------------------------------------

    async def submit(self, turn_id: str, payload: Mapping[str, Any], *, here: bool = False) -> None:
        """Start the turn ``turn_id`` (nothing happens if it exists already): on the queue
        when there is one, unless ``here`` (this process runs it)."""
        ...

    async def outcome(
        self, turn_id: str, *, pause_key: str, decided: str | None = None, pauses_seen: bool = False
    ) -> tuple[str, Any]:
        """Wait until the turn finishes (``("done", result)``) or publishes under
        ``pause_key`` a pause other than ``decided`` (``("paused", value)``), woken by the
        turn's :data:`STATE_KEY` stream rather than polling its status. ``pauses_seen``: the
        caller learns of the pauses of turns this process runs by itself (it only needs
        the outcome of a turn this process started)."""
        ...

    async def read(self, turn_id: str, key: str) -> Any:
        """The value the turn published under ``key``, or None."""
        ...

    def follow(self, turn_id: str, key: str, *, offset: int = 0) -> AsyncIterator[Any]:
        """The values of the turn's stream ``key`` from ``offset`` (its start), then as they
        are appended, until the turn's workflow ends."""
        ...

    async def send(self, turn_id: str, topic: str, message: Any, *, idempotency_key: str) -> None:
        """Send ``message`` to the turn; a second send with the same key is dropped."""
        ...

    async def info(self, turn_id: str) -> TurnInfo | None:
        """The turn's status, or None when no such turn exists."""
        ...

    async def turns(
        self, *, prefix: str | None = None, status: str | None = None, limit: int = 100
    ) -> Sequence[TurnInfo]:
        """Turns, newest first."""
        ...

    async def cancel(self, turn_id: str) -> None:
        """Stop the turn: it runs no further step, now or after a restart."""
        ...

    async def restart(self, turn_id: str) -> None:
        """Run a cancelled or failed turn again from its last completed step."""
        ...
