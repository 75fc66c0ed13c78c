"""The caller side of the DBOS backend without running turns here (DBOSClient).

A web front end or a test driver submits turns to a queue and waits for them; only the
workers run them. Nothing is launched in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from dbos import DBOSClient, EnqueueOptions
from dbos._error import DBOSAwaitedWorkflowCancelledError

from beamfilter_core.errors import DurableError

from ._backend import TurnInfo
from ._dbos import TURN_WORKFLOW, app_version, info_of, sqlite_engine, waiting
from ._options import DurableOptions

__all__ = ["DbosClientBackend"]


class DbosClientBackend:
    """Submits turns to ``options.queue`` and reads them; runs none."""

    name = "dbos"

    def __init__(self, options: DurableOptions) -> None:
        self.options = options
        if options.database.startswith("sqlite"):
            self.client = DBOSClient(system_database_engine=sqlite_engine(options.database))
        else:
            self.client = DBOSClient(system_database_url=options.database)

    async def submit(self, turn_id: str, payload: Mapping[str, Any], *, here: bool = False) -> None:
        if self.options.queue is None or here:
            msg = (
                "A durable runner that runs no turns itself (worker=False) submits them to a queue; "
                'add queue = { name = "turns" } to [durable] and start workers (`beamfilter durable worker`).'
            )
            raise DurableError(msg)
        enqueue: EnqueueOptions = {
            "workflow_name": TURN_WORKFLOW,
            "queue_name": self.options.queue.name,
            "workflow_id": turn_id,
            "app_version": app_version(self.options),
        }
        await self.client.enqueue_async(enqueue, dict(payload))

    async def outcome(
        self, turn_id: str, *, pause_key: str, poll: float = 0.05, decided: str | None = None
    ) -> tuple[str, Any]:
        try:
            handle: Any = await self.client.retrieve_workflow_async(turn_id)
        except Exception as exc:  # DBOSNonExistentWorkflowError
            msg = f"No durable turn {turn_id!r} exists."
            raise DurableError(msg) from exc
        finished = asyncio.ensure_future(handle.get_result(polling_interval_sec=poll))
        try:
            while True:
                done, _ = await asyncio.wait({finished}, timeout=poll)
                if done:
                    try:
                        return "done", finished.result()
                    except DBOSAwaitedWorkflowCancelledError:
                        msg = f"The durable turn {turn_id!r} was cancelled; `beamfilter durable resume` runs it on."
                        raise DurableError(msg) from None
                paused = await self.client.get_event_async(turn_id, pause_key, timeout_seconds=0)
                if waiting(paused, decided):
                    return "paused", paused
        finally:
            if not finished.done():
                finished.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await finished

    async def read(self, turn_id: str, key: str) -> Any:
        return await self.client.get_event_async(turn_id, key, timeout_seconds=0)

    async def send(self, turn_id: str, topic: str, message: Any, *, idempotency_key: str) -> None:
        await self.client.send_async(turn_id, message, topic, idempotency_key=idempotency_key)

    async def info(self, turn_id: str) -> TurnInfo | None:
        found = await self.client.list_workflows_async(workflow_ids=[turn_id], load_input=False, load_output=False)
        if not found:
            return None
        steps = await self.client.list_workflow_steps_async(turn_id, load_output=False)
        return info_of(found[0], steps)

    async def turns(
        self, *, prefix: str | None = None, status: str | None = None, limit: int = 100
    ) -> Sequence[TurnInfo]:
        found = await self.client.list_workflows_async(
            name=TURN_WORKFLOW,
            workflow_id_prefix=prefix,
            status=status,
            limit=limit,
            sort_desc=True,
            load_input=False,
            load_output=False,
        )
        return [info_of(s) for s in found]

    async def cancel(self, turn_id: str) -> None:
        await self.client.cancel_workflow_async(turn_id)

    async def restart(self, turn_id: str) -> None:
        await self.client.resume_workflow_async(turn_id)

    def close(self) -> None:
        self.client.destroy()
