"""This process's durable runtime: the backend, the kernels it rebuilt, and the turn body.

The turn body is the workflow code of every durable turn, whichever worker runs it:
rebuild the kernel from the payload's config reference, run the turn, and while it is
paused, publish the pause and wait for its decision (delivered once by the engine), then
resume it in the same workflow.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Mapping
from typing import Any

from beamfilter_core import Decision, Event, Kernel, Message, RunFinished, TurnResult, converter
from beamfilter_core.errors import DurableError

from ._backend import STATE_KEY
from ._dbos import DbosBackend, same_database
from ._kernels import durable_kernel, kernel_from_reference
from ._options import DurableOptions
from ._publish import EVENTS_KEY, Publisher
from ._store import DurableStore

__all__ = ["DECISION_TOPIC", "PAUSE_KEY", "Runtime", "runtime"]

#: The event a paused turn publishes ({"pause_id", "result"}; {"pause_id", "decided": True} once used).
PAUSE_KEY = "beamfilter.pause"
#: The topic decisions are sent on ({"pause_id", "decisions"}).
DECISION_TOPIC = "beamfilter.decision"

_lock = threading.Lock()
_runtime: Runtime | None = None


class Runtime:
    """The backend of this process and the kernels its turns run on."""

    def __init__(self, options: DurableOptions, folders: Mapping[str, str] | None = None) -> None:
        self.options = options
        #: config reference -> the folder its kernel module is imported from (the config's)
        self.folders: dict[str, str] = dict(folders or {})
        self._kernels: dict[str, Kernel] = {}
        self._kernel_lock = threading.Lock()
        #: turn id -> where this process streams that turn's events (only while a caller waits)
        self.sinks: dict[str, Callable[[Event], None]] = {}
        #: turn id -> called with the pause record when that turn pauses in this process
        self.pause_watchers: dict[str, Callable[[Any], None]] = {}
        #: turn id -> the pause record of a turn this process runs, while it waits for its decision
        self.paused: dict[str, Any] = {}
        self.backend = DbosBackend.shared(options, self.turn_body)

    def kernel(self, reference: str) -> Kernel:
        """The durable kernel of ``reference``, built once per process."""
        return self._kernel(reference, self.backend)

    def _kernel(self, reference: str, backend: DbosBackend, folder: str | None = None) -> Kernel:
        kernel = self._kernels.get(reference)
        if kernel is None:
            with self._kernel_lock:
                kernel = self._kernels.get(reference)
                if kernel is None:
                    # this process's config folder first, else the submitter's
                    where = self.folders.get(reference, folder)
                    plain = kernel_from_reference(reference, where)
                    kernel = self._kernels[reference] = durable_kernel(plain, backend)
        return kernel

    async def aclose(self) -> None:
        for kernel in self._kernels.values():
            await kernel.aclose()
        self._kernels.clear()

    # -- the workflow ----------------------------------------------------------------------

    async def turn_body(self, backend: DbosBackend, payload: dict[str, Any]) -> dict[str, Any]:
        # ``backend``, not self.backend: turns recovered at launch run before __init__ returns
        turn = backend.current_turn()
        assert turn is not None  # the engine runs this as the turn's workflow
        kernel = self._kernel(payload["config"], backend, payload.get("folder"))
        context: dict[str, Any] = dict(payload.get("context") or {})
        messages = [converter.structure(item, Message) for item in payload["input"]]
        publisher: Publisher | None = None
        if payload.get("stream"):  # started streamed: any process may attach to its events
            published = await backend.published(EVENTS_KEY)
            publisher = Publisher(published, lambda value: backend.append(EVENTS_KEY, value))
        try:
            result = await self._run(kernel, turn, messages, context, publisher)
            index = 0
            while result.status == "paused" and result.pause is not None:
                index += 1
                pause_id = f"{turn}:pause-{index}"
                result = await self._recorded(backend, result)
                record = {"pause_id": pause_id, "result": converter.unstructure(result)}
                await backend.publish(PAUSE_KEY, record)
                if publisher is not None:  # after the pause record: a reader of the mark finds it
                    await publisher.pause(pause_id)
                await backend.append(STATE_KEY, {"paused": pause_id})  # wakes whoever waits
                self.paused[turn] = record
                watcher = self.pause_watchers.get(turn)
                if watcher is not None:
                    watcher(record)
                try:
                    decisions = await self._decision(backend, turn, pause_id)
                finally:
                    self.paused.pop(turn, None)
                await backend.publish(PAUSE_KEY, {"pause_id": pause_id, "decided": True})
                result = await self._resume(kernel, turn, result, decisions, context, publisher)
            if publisher is not None:
                await publisher.finish(result.text if result.status == "completed" else None)
        except Exception:
            with contextlib.suppress(Exception):  # the turn's own error is what its waiters get
                await backend.append(STATE_KEY, {"end": True})  # it fails: waiters wake
            raise
        else:
            await backend.append(STATE_KEY, {"end": True})  # its result is committed next
        finally:
            for flt in kernel.filters:
                if flt.memory is not None and isinstance(flt.memory.store, DurableStore):
                    flt.memory.store.forget(turn)
        return converter.unstructure(result)  # type: ignore[no-any-return]

    async def _recorded(self, backend: DbosBackend, paused: TurnResult) -> TurnResult:
        """The paused result as this turn's first attempt recorded it. A recovering worker
        re-creates the pause with a fresh id (and signature); resuming the recorded one
        instead makes the pause the store holds, the one published and the one resumed the
        same pause, across any number of crashes."""

        async def record() -> dict[str, Any]:
            return converter.unstructure(paused)  # type: ignore[no-any-return]

        recorded = await backend.take_step().run("beamfilter.pause", record)
        return converter.structure(recorded, TurnResult)

    async def _run(
        self,
        kernel: Kernel,
        turn: str,
        messages: list[Message],
        context: dict[str, Any],
        publisher: Publisher | None,
    ) -> TurnResult:
        sink = self.sinks.get(turn)
        if sink is None and publisher is None:
            return await kernel.run(messages, context=context)
        return await _drain(kernel.run_stream(messages, context=context), sink, publisher)

    async def _resume(
        self,
        kernel: Kernel,
        turn: str,
        paused: TurnResult,
        decisions: Mapping[str, Decision],
        context: dict[str, Any],
        publisher: Publisher | None,
    ) -> TurnResult:
        sink = self.sinks.get(turn)
        if sink is None and publisher is None:
            return await kernel.resume(paused.pause, decisions, context=context)
        return await _drain(kernel.resume_stream(paused.pause, decisions, context=context), sink, publisher)

    async def _decision(self, backend: DbosBackend, turn: str, pause_id: str) -> dict[str, Decision]:
        timeout = self.options.decision_timeout
        while True:
            message = await backend.receive(DECISION_TOPIC, timeout)
            if message is None:
                msg = f"The durable turn {turn!r} got no decision for {pause_id!r} within {timeout:g} s."
                raise DurableError(msg)
            if isinstance(message, Mapping) and message.get("pause_id") == pause_id:
                return {key: converter.structure(value, Decision) for key, value in message["decisions"].items()}
            # a decision meant for an earlier pause of this turn: that pause is decided already


async def _drain(events: Any, sink: Callable[[Event], None] | None, publisher: Publisher | None) -> TurnResult:
    result: TurnResult | None = None
    async for event in events:
        if isinstance(event, RunFinished):
            result = event.result
            continue
        if sink is not None:
            sink(event)
        if publisher is not None:
            await publisher.event(event)
    assert result is not None  # a run stream always ends with RunFinished
    return result


def runtime(options: DurableOptions, folders: Mapping[str, str] | None = None) -> Runtime:
    """This process's runtime (created, and its engine launched, on first use); ``folders``
    maps config references to the folders their kernel modules are imported from."""
    global _runtime
    with _lock:
        if _runtime is None:
            _runtime = Runtime(options, folders)
        else:
            same_database(_runtime.options, options)
            for reference, folder in (folders or {}).items():
                _runtime.folders.setdefault(reference, folder)
        return _runtime


def shutdown() -> None:
    """Stop this process's runtime and its engine (tests, short-lived commands)."""
    global _runtime
    with _lock:
        _runtime = None
    DbosBackend.shutdown()
