"""The DBOS Transact backend: a turn is a workflow, a step is a DBOS step, a decision a message.

DBOS is one object per process (``DBOS(config=...)``), so this backend is too: every
durable runner and worker of a process shares it, and it refuses a second database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Any, TypeVar

from dbos import (
    DBOS,
    DBOSClient,
    DBOSConfig,
    EnqueueOptions,
    SetWorkflowID,
    WorkflowSerializationFormat,
    WorkflowStatus,
)
from dbos._context import get_local_dbos_context
from dbos._core import WorkflowHandleAsyncTask
from dbos._error import DBOSAwaitedWorkflowCancelledError

from beamfilter_core.errors import DurableError

from ._backend import FINISHED, STATE_KEY, TurnInfo
from ._options import DurableOptions

__all__ = [
    "TURN_WORKFLOW",
    "DbosBackend",
    "DbosClientBackend",
    "TurnBody",
    "app_version",
    "info_of",
    "same_database",
    "sqlite_engine",
    "waiting",
]

T = TypeVar("T")

#: The registered name of the turn workflow: workers find its code by this name.
TURN_WORKFLOW = "beamfilter.turn"
_NO_RETRIES: Any = {"retries_allowed": False}

#: What a turn's workflow runs: (this process's backend, the workflow input) -> the result.
TurnBody = Callable[["DbosBackend", dict[str, Any]], Awaitable[dict[str, Any]]]
_bound: tuple[DbosBackend, TurnBody] | None = None


@DBOS.workflow(name=TURN_WORKFLOW)
async def _turn_workflow(payload: dict[str, Any]) -> dict[str, Any]:
    # The body lives in _runtime.py (engine-neutral); it is bound before DBOS launches.
    if _bound is None:  # pragma: no cover - the backend binds it before DBOS launches
        msg = "beamfilter-durable's turn workflow ran before its backend started"
        raise DurableError(msg)
    backend, body = _bound
    if not backend.ready.is_set():
        # launching recovers this executor's turns at once, before the launch has finished
        await asyncio.to_thread(backend.ready.wait)
    return await body(backend, payload)


#: The workflow (one per system database) that draws the secret its workers sign pauses with.
PAUSE_SECRET_WORKFLOW = "beamfilter.pause-secret"


@DBOS.step(name="beamfilter.pause-secret.draw")
def _draw_pause_secret() -> str:
    import secrets

    return secrets.token_hex(32)


@DBOS.workflow(name=PAUSE_SECRET_WORKFLOW)
def _pause_secret_workflow() -> str:
    # a step: of workers launching at once, the engine records one draw and all read it
    return _draw_pause_secret()


def _sys_db() -> Any:
    from dbos._dbos import _get_dbos_instance

    return _get_dbos_instance()._sys_db


def _read_all(turn: str, key: str, batch: int = 500) -> list[Any]:
    """Every value written to the stream ``key`` of ``turn`` so far (without waiting for more)."""
    from dbos._serialization import deserialize_value

    sys_db = _sys_db()
    values: list[Any] = []
    while True:
        _status, rows = sys_db.read_stream_values(turn, key, len(values), batch)
        values.extend(deserialize_value(value, serialization, sys_db.serializer) for value, serialization in rows)
        if len(rows) < batch:
            return values


def waiting(record: Any, decided: str | None) -> bool:
    """Whether a pause record is a pause still waiting (not the one the caller just decided)."""
    return isinstance(record, Mapping) and not record.get("decided") and record.get("pause_id") != decided


#: How often a waiter checks a turn's status when no milestone wakes it (a safety net).
_SAFETY_POLL = 5.0
#: How often a waiter looks for the result of a turn that wrote its end (committed at once),
#: and how long: an end mark without a result after that is an earlier attempt's.
_END_POLL = 0.02
_END_WAIT = 1.0


async def _result(waiting: Any, turn_id: str, poll: float | None = None) -> Any:
    """The result of a handle (with ``poll``) or of a task waiting for one."""
    try:
        return await (waiting.get_result(polling_interval_sec=poll) if poll is not None else waiting)
    except DBOSAwaitedWorkflowCancelledError:
        msg = f"The durable turn {turn_id!r} was cancelled; `beamfilter durable resume` runs it on."
        raise DurableError(msg) from None


def _shown(url: str) -> str:
    """``url`` without its password (error messages reach logs)."""
    import sqlalchemy as sa

    try:
        return str(sa.make_url(url).render_as_string(hide_password=True))
    except Exception:  # noqa: BLE001  # not a URL SQLAlchemy parses: show it as given
        return url


def _first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


async def _restart_wait(waiting: asyncio.Future[Any], handle: Any) -> asyncio.Future[Any]:
    """A wait for ``handle``'s result that looks at once, for a turn known to have ended
    (``waiting`` polls seldom)."""
    await _cancelled(waiting)
    result: asyncio.Future[Any] = asyncio.ensure_future(handle.get_result(polling_interval_sec=_END_POLL))
    return result


async def _cancelled(task: asyncio.Future[Any]) -> None:
    if not task.done():
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


def _poll(options: DurableOptions) -> float:
    # SQLite serialises every transaction of every process (DBOS takes its write lock even
    # to read): polling less often leaves the lock to the turns. PostgreSQL polls cheaply.
    return 0.25 if options.database.startswith("sqlite") else 0.05


def _reread(options: DurableOptions) -> float:
    # How often a stream reader reads again when nothing woke it: PostgreSQL notifies
    # readers of each write (a dropped notification is the only reason to read again);
    # SQLite has no notifications, DBOS polls it (in a worker, one thread for all readers).
    return _poll(options) if options.database.startswith("sqlite") else 1.0


def app_version(options: DurableOptions) -> str:
    """The application version turns are started with; a worker recovers only its own."""
    from . import __version__

    return options.app_version or f"beamfilter-durable-{__version__}"


def same_database(current: DurableOptions, wanted: DurableOptions) -> None:
    """Refuse a second system database in this process (DBOS holds one per process)."""
    if current.database != wanted.database:
        msg = (
            f"This process already runs durable turns on {current.database!r}; "
            f"DBOS holds one system database per process, so {wanted.database!r} needs its own process."
        )
        raise DurableError(msg)


class _Slot:
    """A DBOS step id drawn now (``DBOS.reserve_step``), run later."""

    __slots__ = ("_reservation",)

    def __init__(self) -> None:
        self._reservation = DBOS.reserve_step()

    @property
    def step_id(self) -> int:
        return self._reservation.step_id

    async def run(self, name: str, fn: Callable[[], Awaitable[T]]) -> T:
        options: Any = {**_NO_RETRIES, "name": name}
        run: Any = self._reservation.run_async
        result: T = await run(options, fn)
        return result


def _ms(value: int | None) -> float | None:
    return value / 1000 if value is not None else None


def info_of(status: WorkflowStatus, steps: Sequence[Any] = ()) -> TurnInfo:
    """A DBOS workflow status (and its steps) as a :class:`TurnInfo`."""
    shown = [
        {
            "step": step["function_id"],
            "name": step["function_name"],
            "error": None if step.get("error") is None else str(step["error"]),
        }
        for step in steps
    ]
    error = status.error
    return TurnInfo(
        status.workflow_id,
        status.status,
        _ms(status.created_at),
        _ms(status.updated_at),
        status.executor_id,
        status.queue_name,
        tuple(shown),
        f"{type(error).__name__}: {error}" if error is not None else None,
    )


def _private_jitter() -> None:
    """DBOS's polling threads draw their jitter from the global ``random`` module, which
    would move the application's own (seeded) random sequence from a background thread;
    give those modules a generator of their own."""
    import importlib
    import random

    for name in ("dbos._queue", "dbos._scheduler", "dbos._sys_db", "dbos._workflow_commands"):
        module = importlib.import_module(name)
        if getattr(module, "random", None) is random:
            module.random = random.Random()  # type: ignore[attr-defined]


def sqlite_engine(url: str) -> Any:
    """DBOS's SQLite engine settings plus WAL with synchronous=NORMAL: a commit costs no
    fsync of its own, and stays durable when a process is killed (a power cut may lose the
    last commits; docs/durable.md)."""
    import sqlalchemy as sa

    engine = sa.create_engine(url)

    @sa.event.listens_for(engine, "connect")
    def _configure(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = "IMMEDIATE"  # serialise writers, as DBOS does
        dbapi_conn.execute("PRAGMA busy_timeout=30000")
        dbapi_conn.execute("PRAGMA foreign_keys=ON")
        _use_wal(dbapi_conn)
        dbapi_conn.execute("PRAGMA synchronous=NORMAL")

    return engine


def _use_wal(dbapi_conn: Any, patience: float = 30.0) -> None:
    """Switch the file to WAL (a persistent setting) unless it is already.

    Workers started at once on a new file race for this switch, and SQLite answers the
    losers "database is locked" without waiting for busy_timeout: retry until ``patience``
    seconds have passed.
    """
    import sqlite3
    import time

    deadline = time.monotonic() + patience
    pause = 0.02
    while True:
        try:
            mode = dbapi_conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                dbapi_conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() >= deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


class _Callers:
    """The caller side of durable turns over DBOS's API: ``DBOS`` itself in a process that
    runs turns, a ``DBOSClient`` in one that only submits them (the two have the same calls)."""

    name = "dbos"

    def __init__(self, options: DurableOptions, api: Any) -> None:
        self.options = options
        self.api = api

    async def _handle(self, turn_id: str) -> Any:
        found = await self.api.list_workflows_async(workflow_ids=[turn_id], load_input=False, load_output=False)
        if not found:
            msg = f"No durable turn {turn_id!r} exists."
            raise DurableError(msg)
        return await self.api.retrieve_workflow_async(turn_id)

    async def outcome(
        self, turn_id: str, *, pause_key: str, decided: str | None = None, pauses_seen: bool = False
    ) -> tuple[str, Any]:
        handle = await self._handle(turn_id)
        if pauses_seen and isinstance(handle, WorkflowHandleAsyncTask):
            # this process runs the turn and its caller sees its pauses as they happen: its
            # task is the whole wait (no stream read, no status read)
            return "done", await _result(handle, turn_id, _SAFETY_POLL)
        # A turn run by this process: its task is awaited directly. Any other: the safety
        # net polls seldom (a turn that writes no milestones, e.g. one cancelled mid-step);
        # the turn's state stream wakes the wait (LISTEN/NOTIFY on PostgreSQL).
        finished = asyncio.ensure_future(handle.get_result(polling_interval_sec=_SAFETY_POLL))
        offset = 0
        try:
            while True:
                watched = asyncio.ensure_future(self._watch(turn_id, pause_key, decided, offset))
                try:
                    await asyncio.wait({finished, watched}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    await _cancelled(watched)
                if finished.done():
                    break
                kind, value, offset = watched.result()
                if kind == "paused":
                    # the stream of a turn cancelled while paused still ends with that pause
                    info = await self.info(turn_id)
                    if info is None or info.status not in FINISHED:
                        return "paused", value
                    finished = await _restart_wait(finished, handle)
                    break
                # the turn wrote its end (or stopped): its result commits a moment later;
                # an end that stays without one is an earlier attempt's (the turn was restarted)
                ended = asyncio.ensure_future(handle.get_result(polling_interval_sec=_END_POLL))
                await asyncio.wait({finished, ended}, timeout=_END_WAIT, return_when=asyncio.FIRST_COMPLETED)
                if ended.done():
                    await _cancelled(finished)
                    finished = ended
                    break
                await _cancelled(ended)
                if kind == "gone":  # the turn's workflow is not active, yet has no result yet
                    continue
            return "done", await _result(finished, turn_id)
        finally:
            await _cancelled(finished)

    async def _watch(self, turn_id: str, pause_key: str, decided: str | None, offset: int) -> tuple[str, Any, int]:
        """Follow the turn's state stream from ``offset``: ``("paused", record, next offset)``
        once it waits for a decision other than ``decided``, ``("end", None, next offset)``
        at its end mark, ``("gone", None, offset)`` when its workflow is no longer active."""
        async for value in self.follow(turn_id, STATE_KEY, offset=offset):
            offset += 1
            if not isinstance(value, Mapping) or value.get("end"):
                return "end", None, offset
            pause_id = value.get("paused")
            if pause_id is None or pause_id == decided:
                continue
            record = await self.read(turn_id, pause_key)
            if waiting(record, decided) and record.get("pause_id") == pause_id:
                return "paused", record, offset
        return "gone", None, offset

    async def read(self, turn_id: str, key: str) -> Any:
        return await self.api.get_event_async(turn_id, key, timeout_seconds=0)

    async def follow(self, turn_id: str, key: str, *, offset: int = 0) -> AsyncIterator[Any]:
        values = self.api.read_stream_async(turn_id, key, offset=offset, polling_interval_sec=_reread(self.options))
        try:
            async for value in values:
                yield value
        finally:
            await values.aclose()

    async def send(self, turn_id: str, topic: str, message: Any, *, idempotency_key: str) -> None:
        await self.api.send_async(turn_id, message, topic, idempotency_key=idempotency_key)

    async def info(self, turn_id: str) -> TurnInfo | None:
        found = await self.api.list_workflows_async(workflow_ids=[turn_id], load_input=False, load_output=False)
        if not found:
            return None
        steps = await self.api.list_workflow_steps_async(turn_id, load_output=False)
        return info_of(found[0], steps)

    async def turns(
        self, *, prefix: str | None = None, status: str | None = None, limit: int = 100
    ) -> Sequence[TurnInfo]:
        found = await self.api.list_workflows_async(
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
        await self.api.cancel_workflow_async(turn_id)

    async def restart(self, turn_id: str) -> None:
        await self.api.resume_workflow_async(turn_id)


class DbosBackend(_Callers):
    """Durable turns on DBOS Transact (SQLite or PostgreSQL system database)."""

    _lock = threading.Lock()
    _shared: DbosBackend | None = None

    def __init__(self, options: DurableOptions) -> None:
        super().__init__(options, DBOS)
        self.launched = False
        #: set once launched and the pause secret is drawn: recovered turns wait for it
        self.ready = threading.Event()
        self.queue: Any = None
        self._handles: dict[str, Any] = {}
        self.launch_error: BaseException | None = None
        #: signs the pauses of kernels without a pause_key, the same in every worker
        self.pause_secret = ""

    @classmethod
    def shared(cls, options: DurableOptions, body: TurnBody) -> DbosBackend:
        """This process's backend for ``options.database`` (created and launched once)."""
        global _bound
        with cls._lock:
            current = cls._shared
            if current is not None:
                same_database(current.options, options)
                return current
            backend = cls(options)
            _bound = (backend, body)
            # DBOS's setup calls refuse to run on a thread whose event loop is running
            launcher = threading.Thread(target=backend._launch_reporting, name="beamfilter-durable-launch")
            launcher.start()
            launcher.join()
            if backend.launch_error is not None:
                raise backend.launch_error
            cls._shared = backend
            return backend

    @classmethod
    def shutdown(cls) -> None:
        """Stop this process's DBOS (tests and short-lived commands)."""
        with cls._lock:
            if cls._shared is not None:
                DBOS.destroy(destroy_registry=False)
                cls._shared = None

    def _launch_reporting(self) -> None:
        try:
            self._launch()
        except BaseException as exc:  # noqa: BLE001  # re-raised on the caller's thread
            self.launch_error = exc
        finally:
            self.ready.set()

    def _launch(self) -> None:
        _private_jitter()
        options = self.options
        config: DBOSConfig = {
            "name": "beamfilter",
            "system_database_url": options.database,
            "application_version": app_version(options),
            "log_level": "WARNING",
            "notification_listener_polling_interval_sec": _poll(options),
        }
        if options.executor_id is not None:
            config["executor_id"] = options.executor_id
        if options.database.startswith("sqlite"):
            config["system_database_engine"] = sqlite_engine(options.database)
        logging.getLogger("dbos").setLevel(logging.WARNING)
        DBOS(config=config)
        DBOS.launch()
        with SetWorkflowID(PAUSE_SECRET_WORKFLOW):
            self.pause_secret = DBOS.start_workflow(_pause_secret_workflow).get_result()
        queue = options.queue
        if queue is not None:  # stored in the system database: registered once launched
            self.queue = DBOS.register_queue(
                queue.name,
                global_concurrency=queue.concurrency,
                worker_concurrency=queue.worker_concurrency,
                polling_interval_sec=_poll(options),
            )
        self.launched = True

    @property
    def executor_id(self) -> str:
        return DBOS.executor_id

    # -- inside a turn's workflow ----------------------------------------------------------

    def current_turn(self) -> str | None:
        ctx = get_local_dbos_context()
        if ctx is None or not ctx.is_workflow():  # outside a workflow, or inside a step
            return None
        return ctx.workflow_id

    def take_step(self) -> _Slot:
        return _Slot()

    async def publish(self, key: str, value: Any) -> None:
        await DBOS.set_event_async(key, value)

    async def receive(self, topic: str, wait_seconds: float) -> Any:
        return await DBOS.recv_async(topic, timeout_seconds=wait_seconds)

    async def append(self, key: str, value: Any) -> None:
        # Not a step: how many values a turn writes depends on how its tokens came, and a
        # replayed workflow must take the same step ids. The turn's publisher avoids repeats.
        turn = self.current_turn()
        assert turn is not None  # called from a turn's workflow
        sys_db = _sys_db()
        await asyncio.to_thread(
            sys_db.write_stream_from_step, turn, 0, key, value, serialization_type=WorkflowSerializationFormat.DEFAULT
        )

    async def published(self, key: str) -> list[Any]:
        turn = self.current_turn()
        assert turn is not None  # called from a turn's workflow
        return await asyncio.to_thread(_read_all, turn, key)

    # -- callers ---------------------------------------------------------------------------

    async def submit(self, turn_id: str, payload: Mapping[str, Any], *, here: bool = False) -> None:
        with SetWorkflowID(turn_id):
            if self.queue is not None and not here:
                handle = await self.queue.enqueue_async(_turn_workflow, dict(payload))
            else:
                handle = await DBOS.start_workflow_async(_turn_workflow, dict(payload))
        self._handles[turn_id] = handle

    async def _handle(self, turn_id: str) -> Any:
        # a turn started here is awaited directly; others are looked up
        handle = self._handles.pop(turn_id, None)
        return handle if handle is not None else await super()._handle(turn_id)

    def recover(self, executor_ids: Sequence[str]) -> int:
        """Take over the unfinished turns of dead workers (by executor id); returns how many."""
        return len(DBOS._recover_pending_workflows(list(executor_ids)))


class DbosClientBackend(_Callers):
    """The caller side alone (a ``DBOSClient``): submits turns to ``options.queue`` and
    reads them, runs none, launches nothing in this process (a web front end, a test driver)."""

    def __init__(self, options: DurableOptions) -> None:
        try:
            if options.database.startswith("sqlite"):
                client = DBOSClient(system_database_engine=sqlite_engine(options.database))
            else:
                # woken by PostgreSQL's LISTEN/NOTIFY when a turn writes its state stream
                client = DBOSClient(system_database_url=options.database, use_listen_notify=True)
        except Exception as exc:  # the driver's error for a database that cannot be reached
            msg = (
                f"The durable database {_shown(options.database)!r} cannot be reached: {_first_line(exc)}; "
                "check [durable] database."
            )
            raise DurableError(msg) from exc
        try:
            # a client never creates the engine's tables: a database no worker ran on has none
            client._sys_db.list_workflows(limit=1, load_input=False, load_output=False)
        except Exception as exc:  # the driver's error for a missing table
            client.destroy()
            msg = (
                f"The durable database {_shown(options.database)!r} holds no durable turns: no worker has run on it "
                f"({_first_line(exc)}). Start one (beamfilter durable worker CONFIG); it creates the engine's tables."
            )
            raise DurableError(msg) from exc
        super().__init__(options, client)

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
        await self.api.enqueue_async(enqueue, dict(payload))

    def close(self) -> None:
        self.api.destroy()
