"""A submitted durable turn: what ``DurableRunner.submit`` returns without waiting."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING

from beamfilter_core import Decision, Event, TurnResult

from ._backend import TurnInfo

if TYPE_CHECKING:
    from ._runner import DurableRunner

__all__ = ["TurnHandle"]


class TurnHandle:
    """One durable turn, submitted: any worker runs it while the caller does something else.

    Example::

        handle = await runner.submit("Book the flight", context={"conversation_id": "ada"})
        print(handle.turn_id)             # "ada:turn-1": look it up from any process
        result = await handle.result()    # completed, or paused for a decision
    """

    __slots__ = ("runner", "turn_id")

    def __init__(self, runner: DurableRunner, turn_id: str) -> None:
        self.runner = runner
        self.turn_id = turn_id

    def __repr__(self) -> str:
        return f"TurnHandle({self.turn_id!r})"

    async def result(self, *, decided: str | None = None) -> TurnResult:
        """Wait for the turn: its result once it completes, or a ``paused`` result while it
        waits for a decision (see :meth:`DurableRunner.result`)."""
        return await self.runner.result(self.turn_id, decided=decided)

    async def info(self) -> TurnInfo | None:
        """The turn's status and steps now."""
        return await self.runner.info(self.turn_id)

    async def decide(self, decisions: Mapping[str, Decision | str]) -> str:
        """Send the decisions of the turn's current pause; returns the pause id."""
        return await self.runner.decide(self.turn_id, decisions)

    async def resume(self, decisions: Mapping[str, Decision | str]) -> TurnResult:
        """:meth:`decide`, then wait for the turn."""
        return await self.runner.resume(self.turn_id, decisions)

    async def cancel(self) -> None:
        """Cancel the turn: it runs no further step."""
        await self.runner.cancel(self.turn_id)

    def attach(self) -> AsyncIterator[Event]:
        """The turn's events from its start (see :meth:`DurableRunner.attach`)."""
        return self.runner.attach(self.turn_id)
