"""DurableRunner: run turns as durable workflows, with the Kernel's run/run_stream shape."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

from beamfilter_core import Decision, Event, Message, RunFinished, TextDelta, TurnResult, converter
from beamfilter_core.errors import DurableError

from ._backend import FINISHED, TurnInfo
from ._dbos import DbosBackend, DbosClientBackend
from ._handle import TurnHandle
from ._kernels import config_folder, config_reference
from ._options import DurableOptions
from ._publish import EVENTS_KEY, decode
from ._runtime import DECISION_TOPIC, PAUSE_KEY, Runtime, runtime

__all__ = ["DurableRunner", "FINISHED"]


def _as_messages(value: str | Message | Sequence[Message]) -> list[Message]:
    if isinstance(value, str):
        return [Message("user", value)]
    if isinstance(value, Message):
        return [value]
    return list(value)


def _decision(value: Decision | str, call_id: str) -> Decision:
    if isinstance(value, Decision):
        return value
    if value == "approve":
        return Decision("approve")
    if value == "reject":
        return Decision("reject")
    msg = f"decisions[{call_id!r}] is {value!r}; give a Decision or 'approve' / 'reject'."
    raise DurableError(msg)


class DurableRunner:
    """Runs the turns of ``config`` (a beamfilter.toml path or ``"module:attribute"``) as
    durable workflows on the engine ``options`` name; any worker can finish them.

    A turn's id is the caller's ``turn_id=`` (an idempotency key), else
    ``"<conversation_id>:turn-<n>"`` (the conversation's next turn number), else a random
    id. Submitting an id that exists already waits for that turn: a completed turn returns
    its recorded :class:`TurnResult` without calling the model or any tool.

    Example::

        runner = DurableRunner("beamfilter.toml", DurableOptions(database="sqlite:///turns.db"))
        result = await runner.run("Book the flight", context={"conversation_id": "ada"})
    """

    def __init__(self, config: Any, options: DurableOptions | None = None, *, worker: bool = True) -> None:
        self.options = options or DurableOptions()
        self.reference = config_reference(self.options.kernel or config)
        #: The config file's folder: a ``kernel = "module:attribute"`` is imported from it
        #: first, as ``[[tools]]`` modules are (None when ``config`` is not a file).
        self.folder = config_folder(config)
        #: False: this process runs no turn; it submits turns to the queue and waits for workers.
        self.worker = worker
        #: The id of the turn this runner started last (for messages such as "paused: ...").
        self.last_turn_id: str | None = None
        self._client: DbosClientBackend | None = None

    @classmethod
    def from_config(
        cls, config: str | os.PathLike[str], *, worker: bool = True, executor_id: str | None = None
    ) -> DurableRunner:
        """The runner of a beamfilter.toml's turns, with the options of its ``[durable]``
        section (as ``beamfilter run`` and ``beamfilter durable`` build it). ``worker=False``
        makes a runner that runs nothing in this process: it submits turns to the section's
        queue, decides, inspects and waits (a web front end, a script). ``executor_id``
        overrides the section's. A ``[model]`` is not needed when ``[durable] kernel`` names
        the kernel.

        Example::

            client = DurableRunner.from_config("beamfilter.toml", worker=False)
            handle = await client.submit("Book the flight", context={"conversation_id": "ada"})

        Raises:
            ConfigError: the file is missing or invalid, or has no ``[durable]`` section.
        """
        import attrs

        from ._config import build_durable_config, durable_options

        built = build_durable_config(config)
        options = durable_options(built)
        if executor_id is not None:
            options = attrs.evolve(options, executor_id=executor_id)
        return cls(os.path.abspath(os.fspath(config)), options, worker=worker)

    @property
    def runtime(self) -> Runtime:
        """This process's durable runtime (the engine launches on first use)."""
        if not self.worker:
            msg = "This DurableRunner was made with worker=False: it runs no turns in this process."
            raise DurableError(msg)
        return runtime(self.options, {self.reference: self.folder} if self.folder else None)

    @property
    def backend(self) -> DbosBackend | DbosClientBackend:
        """The engine's caller side: this process's runtime, or a client of the queue."""
        if self.worker:
            return self.runtime.backend
        if self._client is None:
            self._client = DbosClientBackend(self.options)
        return self._client

    def __repr__(self) -> str:
        return f"DurableRunner({self.reference!r}, {self.options.use}, {self.options.database!r})"

    # -- submitting ------------------------------------------------------------------------

    async def turn_id_for(self, context: Mapping[str, Any] | None, turn_id: str | None = None) -> str:
        """The id a turn with ``context`` gets (see the class docstring)."""
        if turn_id is not None:
            if not isinstance(turn_id, str) or not turn_id or len(turn_id) > 200:
                msg = f"turn_id={turn_id!r} is invalid; give a non-empty string of at most 200 characters."
                raise DurableError(msg)
            return turn_id
        cid = (context or {}).get("conversation_id")
        if cid is None:
            return f"turn-{uuid.uuid4().hex}"
        prefix = f"{cid}:turn-"
        earlier = await self.backend.turns(prefix=prefix, limit=100_000)
        running = [t.turn_id for t in earlier if t.status not in FINISHED]
        if running:
            msg = (
                f"Conversation {cid!r} has an unfinished turn ({', '.join(running)}); wait for it "
                "(`beamfilter durable show`), decide it, or cancel it before starting the next."
            )
            raise DurableError(msg)
        return f"{prefix}{len(earlier) + 1}"

    async def _submit(
        self, input: Any, context: Mapping[str, Any] | None, turn_id: str | None, *, here: bool = False
    ) -> str:
        turn = await self.turn_id_for(context, turn_id)
        payload = {
            "config": self.reference,
            "input": [converter.unstructure(m) for m in _as_messages(input)],
            "context": dict(context or {}),
            "stream": here,  # a streamed turn publishes its events: any process can attach()
        }
        if self.folder is not None:  # where a worker without this config imports the kernel from
            payload["folder"] = self.folder
        self.last_turn_id = turn
        if here:  # streamed: this process runs the turn, even with a queue
            await self.runtime.backend.submit(turn, payload, here=True)
        else:
            await self.backend.submit(turn, payload)
        return turn

    async def submit(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> TurnHandle:
        """Start one turn durably and return at once, once the engine has recorded it: a
        worker runs it (this process when it is a worker and there is no queue). Submitting
        an existing ``turn_id`` starts nothing and returns its handle.

        Raises:
            DurableError: ``turn_id`` is invalid, or the conversation has an unfinished turn.
        """
        return TurnHandle(self, await self._submit(input, context, turn_id))

    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> TurnResult:
        """Run one turn durably; returns when it completes or pauses (see :meth:`decide`)."""
        handle = await self.submit(input, context=context, turn_id=turn_id)
        return await handle.result()

    async def result(self, turn_id: str, *, decided: str | None = None) -> TurnResult:
        """Wait for the turn ``turn_id``: its result once it completes, or a ``paused``
        result while it waits for a decision. ``decided`` is a pause id whose decision was
        sent: that pause is not reported again while the turn takes its decision.

        The wait is woken by the turn itself (its state stream: LISTEN/NOTIFY on
        PostgreSQL, DBOS's notification poller on SQLite), not by polling its status."""
        if not self.worker:
            kind, value = await self.backend.outcome(turn_id, pause_key=PAUSE_KEY, decided=decided)
            return converter.structure(value["result"] if kind == "paused" else value, TurnResult)
        rt = self.runtime
        loop = asyncio.get_running_loop()
        paused: asyncio.Future[Any] = loop.create_future()

        def settle(record: Any) -> None:
            if not paused.done() and record.get("pause_id") != decided:
                paused.set_result(record)

        def on_pause(record: Any) -> None:
            loop.call_soon_threadsafe(settle, record)

        rt.pause_watchers[turn_id] = on_pause
        earlier = rt.paused.get(turn_id)
        if earlier is not None:  # it paused here before this wait began (and was not cancelled since)
            info = await rt.backend.info(turn_id)
            if info is not None and info.status not in FINISHED:
                settle(earlier)
        # the pause watcher above reports a pause of a turn this process runs
        done = asyncio.ensure_future(
            rt.backend.outcome(turn_id, pause_key=PAUSE_KEY, decided=decided, pauses_seen=True)
        )
        try:
            await asyncio.wait({done, paused}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            rt.pause_watchers.pop(turn_id, None)
        if paused.done():
            # a pause is reported again when a cancelled turn is replayed: only a turn still
            # running waits on it; for one that ended since, its end is the answer
            info = await rt.backend.info(turn_id)
            if info is None or info.status not in FINISHED:
                done.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await done
                return converter.structure(paused.result()["result"], TurnResult)
        kind, value = await done
        if kind == "paused":
            return converter.structure(value["result"], TurnResult)
        return converter.structure(value, TurnResult)

    def run_stream(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        turn_id: str | None = None,
    ) -> AsyncIterator[Event]:
        """:meth:`run`, streaming the events of the steps this process runs (a completed
        step that is replayed streams nothing; its text reaches the result)."""
        return self._stream(input, context, turn_id)

    async def _stream(self, input: Any, context: Mapping[str, Any] | None, turn_id: str | None) -> AsyncIterator[Event]:
        rt = self.runtime
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[Event] = asyncio.Queue()
        turn = await self.turn_id_for(context, turn_id)

        def sink(event: Event) -> None:
            loop.call_soon_threadsafe(events.put_nowait, event)

        rt.sinks[turn] = sink
        texts = 0
        try:
            await self._submit(input, context, turn, here=True)
            finished = asyncio.ensure_future(self.result(turn))
            while True:
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, finished}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    event = getter.result()
                    texts += isinstance(event, TextDelta)
                    yield event
                    continue
                getter.cancel()
                break
            await asyncio.sleep(0)  # events scheduled from the engine's thread land first
            while not events.empty():
                event = events.get_nowait()
                texts += isinstance(event, TextDelta)
                yield event
            result = finished.result()
            if not texts and result.status == "completed" and result.text:
                yield TextDelta(result.text)  # replayed from the record: streamed == returned
            yield RunFinished(result)
        finally:
            rt.sinks.pop(turn, None)

    async def attach(self, turn_id: str) -> AsyncIterator[Event]:
        """The events of the turn ``turn_id`` from its start, from any process, whichever
        worker runs it (its first, or one that recovered it after a crash), then
        :class:`RunFinished` when it completes or pauses. Each event comes once: a worker
        that replays the turn publishes only what goes beyond what was published. A turn
        started with :meth:`run` (not streamed) publishes nothing: its text comes as one
        event at the end.

        Raises:
            DurableError: no turn ``turn_id`` exists.
        """
        backend = self.backend
        if await backend.info(turn_id) is None:
            msg = f"No durable turn {turn_id!r} exists; `beamfilter durable list` shows the turns."
            raise DurableError(msg)
        texts = 0
        async for value in backend.follow(turn_id, EVENTS_KEY):
            event = decode(value)
            if isinstance(event, str):  # a pause mark: the end, unless that pause is decided
                current = await self.pause_of(turn_id)
                if current is not None and current[0] == event:
                    yield RunFinished(current[1])
                    return
                continue
            texts += isinstance(event, TextDelta)
            yield event
        result = await self.result(turn_id)
        if not texts and result.status == "completed" and result.text:
            yield TextDelta(result.text)
        yield RunFinished(result)

    # -- deciding --------------------------------------------------------------------------

    async def pause_of(self, turn_id: str) -> tuple[str, TurnResult] | None:
        """``(pause_id, paused result)`` of the turn's current pause, or None when it waits for nothing."""
        record = await self.backend.read(turn_id, PAUSE_KEY)
        if not isinstance(record, Mapping) or record.get("decided"):
            return None
        return record["pause_id"], converter.structure(record["result"], TurnResult)

    async def decide(self, turn_id: str, decisions: Mapping[str, Decision | str]) -> str:
        """Send the decisions for the turn's current pause (one per awaited call); returns
        the pause id. The turn receives them exactly once: a second decision for the same
        pause is dropped by the engine.

        Raises:
            DurableError: the turn does not exist, is finished, or is not paused; or the
                decisions do not match the awaited calls.
        """
        backend = self.backend
        info = await backend.info(turn_id)
        if info is None:
            msg = f"No durable turn {turn_id!r} exists; `beamfilter durable list` shows the turns."
            raise DurableError(msg)
        if info.status in FINISHED:
            msg = f"The durable turn {turn_id!r} is {info.status}; only a paused turn takes decisions."
            raise DurableError(msg)
        current = await self.pause_of(turn_id)
        if current is None:
            msg = f"The durable turn {turn_id!r} is not waiting for a decision (it runs, or its pause was decided)."
            raise DurableError(msg)
        pause_id, paused = current
        assert paused.pause is not None
        awaiting = set(paused.pause.awaiting)
        checked = {call_id: _decision(value, call_id) for call_id, value in decisions.items()}
        if set(checked) != awaiting:
            msg = (
                f"The durable turn {turn_id!r} awaits decisions on {', '.join(sorted(awaiting))}; "
                f"got {', '.join(sorted(checked)) or 'none'}."
            )
            raise DurableError(msg)
        message = {"pause_id": pause_id, "decisions": {k: converter.unstructure(v) for k, v in checked.items()}}
        await backend.send(turn_id, DECISION_TOPIC, message, idempotency_key=pause_id)
        return pause_id

    async def resume(self, turn_id: str, decisions: Mapping[str, Decision | str]) -> TurnResult:
        """:meth:`decide`, then wait for the turn (see :meth:`result`)."""
        pause_id = await self.decide(turn_id, decisions)
        return await self.result(turn_id, decided=pause_id)

    # -- inspecting ------------------------------------------------------------------------

    async def info(self, turn_id: str) -> TurnInfo | None:
        """The turn's status and steps, or None."""
        found = await self.backend.info(turn_id)
        if found is None:
            return None
        current = await self.pause_of(turn_id) if found.status not in FINISHED else None
        if current is not None and current[1].pause is not None:
            import attrs

            found = attrs.evolve(found, paused_on=tuple(current[1].pause.awaiting))
        return found

    async def turns(
        self, *, prefix: str | None = None, status: str | None = None, limit: int = 100
    ) -> Sequence[TurnInfo]:
        """Turns, newest first."""
        return await self.backend.turns(prefix=prefix, status=status, limit=limit)

    async def cancel(self, turn_id: str) -> None:
        """Cancel the turn: it runs no further step, here or after any restart."""
        if await self.backend.info(turn_id) is None:
            msg = f"No durable turn {turn_id!r} exists; `beamfilter durable list` shows the turns."
            raise DurableError(msg)
        await self.backend.cancel(turn_id)

    async def aclose(self) -> None:
        """Close what this process's durable kernels hold open (stores, model connections)."""
        if self._client is not None:
            self._client.close()
            self._client = None
        if self.worker:
            await self.runtime.aclose()
