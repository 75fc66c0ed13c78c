"""``beamfilter durable list|show|attach|resume|cancel|worker``: inspect and drive durable turns.

Each command reads the ``[durable]`` section of CONFIG for the engine and its database.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

import attrs

from beamfilter_core import Decision, converter
from beamfilter_core.errors import DurableError

if TYPE_CHECKING:
    # DBOS and SQLAlchemy load with the runner: `beamfilter --help` lists this command
    # through configure() and must not pay for them (docs/performance.md, cold start)
    from ._runner import DurableRunner

__all__ = ["configure", "run"]

T = TypeVar("T")
OK, FAILED = 0, 1


def configure(parser: argparse.ArgumentParser) -> None:
    """Add the ``durable`` sub-commands to ``parser``."""
    sub = parser.add_subparsers(dest="durable_action", metavar="ACTION", required=True)

    listing = sub.add_parser("list", help="list durable turns, newest first")
    listing.add_argument("config", help="a beamfilter.toml with a [durable] section")
    listing.add_argument("--status", help="only turns in this state (PENDING, ENQUEUED, SUCCESS, ERROR, CANCELLED)")
    listing.add_argument("--prefix", help="only turn ids starting with this (e.g. a conversation id)")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50)")
    listing.add_argument("--json", action="store_true", help="print JSON")

    show = sub.add_parser("show", help="one turn: status, steps, what it waits for")
    show.add_argument("config")
    show.add_argument("turn_id")
    show.add_argument("--json", action="store_true", help="print JSON")

    resume = sub.add_parser(
        "resume",
        help="decide a paused turn, or run a cancelled or failed turn on; waits for its result",
        description="With --approve/--reject, send the decisions of a paused turn (delivered once). "
        "Without them, run a cancelled or failed turn on from its last completed step.",
    )
    resume.add_argument("config")
    resume.add_argument("turn_id")
    resume.add_argument("--approve", action="append", default=[], metavar="CALL_ID", help="approve this tool call")
    resume.add_argument(
        "--reject", action="append", default=[], metavar="CALL_ID[=REASON]", help="reject this tool call"
    )
    resume.add_argument("--no-wait", action="store_true", help="send the decisions and return")

    attach = sub.add_parser(
        "attach",
        help="stream a turn's text from any process, whichever worker runs it, until it completes or pauses",
        description="Print the turn's text from its start as workers produce it (tool calls on stderr), "
        "including a turn another worker recovered after a crash; each piece of text once.",
    )
    attach.add_argument("config")
    attach.add_argument("turn_id")

    cancel = sub.add_parser("cancel", help="cancel a turn: it runs no further step")
    cancel.add_argument("config")
    cancel.add_argument("turn_id")

    worker = sub.add_parser(
        "worker",
        help="run durable turns until stopped: queued ones, and those this executor id left unfinished",
    )
    worker.add_argument("config")
    worker.add_argument("--executor-id", help="this worker's id (a restarted worker recovers its turns)")
    worker.add_argument(
        "--recover", action="append", default=[], metavar="EXECUTOR_ID", help="take over a dead worker's turns"
    )


def _runner(config: str, executor_id: str | None = None, *, worker: bool = True) -> DurableRunner:
    from ._runner import DurableRunner

    return DurableRunner.from_config(config, worker=worker, executor_id=executor_id)


def _when(value: float | None) -> str:
    if value is None:
        return "-"
    return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")


def _run_async(work: Callable[[], Awaitable[T]]) -> T:
    from ._runtime import shutdown

    try:
        return asyncio.run(work())  # type: ignore[arg-type]
    finally:
        shutdown()


def run(args: argparse.Namespace) -> int:
    """Run ``beamfilter durable ACTION``."""
    action = args.durable_action
    if action == "worker":
        return _worker(args)
    # Only `worker` runs turns. The others read and write the engine's database: `resume`
    # records a decision (or restarts a turn) for whichever worker runs or recovers the turn.
    runner = _runner(args.config, worker=False)
    actions: dict[str, Callable[[DurableRunner, argparse.Namespace], Awaitable[int]]] = {
        "list": _list,
        "show": _show,
        "cancel": _cancel,
        "resume": _resume,
        "attach": _attach,
    }

    async def act() -> int:
        try:
            return await actions[action](runner, args)
        finally:
            await runner.aclose()

    try:
        # nothing to shut down: these actions launch no engine in this process
        return asyncio.run(act())
    except DurableError as exc:
        print(f"beamfilter durable {action}: {exc}", file=sys.stderr)
        return FAILED


async def _attach(runner: DurableRunner, args: argparse.Namespace) -> int:
    from beamfilter_core import RunFinished, TextDelta, ToolCallFinished, ToolCallStarted

    async for event in runner.attach(args.turn_id):
        if isinstance(event, TextDelta):
            sys.stdout.write(event.text)
            sys.stdout.flush()
        elif isinstance(event, ToolCallStarted):
            print(f"[tool {event.call.name}]", file=sys.stderr, flush=True)
        elif isinstance(event, ToolCallFinished):
            print(f"[tool {event.call.name} done]", file=sys.stderr, flush=True)
        elif isinstance(event, RunFinished):
            print()
            result = event.result
            if result.status == "paused" and result.pause is not None:
                print(f"paused: awaiting a decision on {', '.join(result.pause.awaiting)}", file=sys.stderr)
    return OK


async def _cancel(runner: DurableRunner, args: argparse.Namespace) -> int:
    await runner.cancel(args.turn_id)
    print(f"{args.turn_id}: cancelled")
    return OK


async def _list(runner: DurableRunner, args: argparse.Namespace) -> int:
    turns = await runner.turns(prefix=args.prefix, status=args.status, limit=args.limit)
    if args.json:
        print(json.dumps([attrs.asdict(t) for t in turns], indent=2))
        return OK
    for turn in turns:
        print(f"{turn.turn_id}  {turn.status:<9} {_when(turn.created_at)}  executor {turn.executor_id or '-'}")
    if not turns:
        print("(no durable turns)")
    return OK


async def _show(runner: DurableRunner, args: argparse.Namespace) -> int:
    info = await runner.info(args.turn_id)
    if info is None:
        msg = f"No durable turn {args.turn_id!r} exists; `beamfilter durable list` shows the turns."
        raise DurableError(msg)
    if args.json:
        print(json.dumps(attrs.asdict(info), indent=2, default=str))
        return OK
    print(f"turn      {info.turn_id}")
    print(f"status    {info.status}" + (f" (paused on {', '.join(info.paused_on)})" if info.paused_on else ""))
    print(f"created   {_when(info.created_at)}   updated {_when(info.updated_at)}")
    print(f"executor  {info.executor_id or '-'}" + (f"   queue {info.queue}" if info.queue else ""))
    if info.error:
        print(f"error     {info.error}")
    for step in info.steps:
        failed = f"  failed: {step['error']}" if step.get("error") else ""
        print(f"  step {step['step']:>3}  {step['name']}{failed}")
    return OK


def _decisions(args: argparse.Namespace) -> dict[str, Decision]:
    decided: dict[str, Decision] = {call_id: Decision("approve") for call_id in args.approve}
    for item in args.reject:
        call_id, _, reason = item.partition("=")
        decided[call_id] = Decision.reject(reason) if reason else Decision("reject")
    return decided


async def _resume(runner: DurableRunner, args: argparse.Namespace) -> int:
    decisions = _decisions(args)
    pause_id: str | None = None
    if decisions:
        pause_id = await runner.decide(args.turn_id, decisions)
        print(f"{args.turn_id}: decisions sent for {pause_id}", file=sys.stderr)
    else:
        info = await runner.backend.info(args.turn_id)
        if info is None:
            msg = f"No durable turn {args.turn_id!r} exists; `beamfilter durable list` shows the turns."
            raise DurableError(msg)
        if info.status in ("CANCELLED", "ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
            await runner.backend.restart(args.turn_id)
            print(f"{args.turn_id}: restarted; a worker runs it on", file=sys.stderr)
        elif await runner.pause_of(args.turn_id) is not None:
            msg = f"The durable turn {args.turn_id!r} is paused; give --approve CALL_ID or --reject CALL_ID."
            raise DurableError(msg)
    if args.no_wait:
        return OK
    from ._runner import FINISHED

    info = await runner.backend.info(args.turn_id)
    if info is not None and info.status not in FINISHED:
        # this command runs nothing: a worker (alive, or started with --recover) finishes the turn
        executor = info.executor_id or "local"
        print(
            f"{args.turn_id}: waiting for a worker to finish it (if executor {executor} is gone: "
            f"beamfilter durable worker {args.config} --recover {executor})",
            file=sys.stderr,
        )
    result = await runner.result(args.turn_id, decided=pause_id)
    print(json.dumps(converter.unstructure(result), indent=2, ensure_ascii=False))
    return OK


def _worker(args: argparse.Namespace) -> int:
    runner = _runner(args.config, args.executor_id)

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        rt = runner.runtime  # launching the engine recovers this executor's unfinished turns
        rt.kernel(runner.reference)  # fail now, not on the first turn, if the config is broken
        if args.recover:
            taken = rt.backend.recover(args.recover)
            print(f"recovering {taken} turns of {', '.join(args.recover)}", file=sys.stderr)
        print(f"worker {rt.backend.executor_id} ready", flush=True)
        await stop.wait()
        await runner.aclose()

    _run_async(serve)
    return OK
