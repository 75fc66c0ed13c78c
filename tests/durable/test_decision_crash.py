"""A decision sent while no worker runs its turn.

A worker is SIGKILLed while its turn waits for a decision. `beamfilter durable resume
... --approve ID` records the decision in the engine's database and waits; it runs nothing
itself. A new worker started with ``--recover`` takes the turn and consumes the decision,
whether it was recorded before the recovery or after it. Ten kills per order and database,
each turn on a new worker (the heir of one round is the victim of the next).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from durable._crash import Cluster, write_config
from durable._helpers import app_env
from durable.durable_app import create_ledger, read_ledger

from beamfilter_durable import DurableRunner
from beamfilter_durable._backend import STATE_KEY

pytestmark = pytest.mark.slow

ROUNDS = 10
ORDERS = ("decision-first", "recovery-first")


def executor_of(index: int) -> str:
    """The executor id of the worker that runs round ``index``'s turn."""
    return "local" if index % 2 == 0 else f"w{index}"


def resume_command(config: Path, turn: str) -> list[str]:
    return [sys.executable, "-m", "beamfilter_core", "durable", "resume", str(config), turn, "--approve", f"{turn}-pay"]


async def state_values(client: DurableRunner, turn: str, count: int) -> list[Any]:
    """The first ``count`` values of the turn's state stream, waiting for them."""
    api: Any = client.backend.api  # type: ignore[union-attr]
    return [await api.read_stream_offset_async(turn, STATE_KEY, offset, timeout_seconds=60) for offset in range(count)]


def run_rounds(folder: Path, database: str, order: str, rounds: int) -> dict[str, Any]:
    ledger = f"sqlite:///{folder / 'ledger.db'}"
    memory = f"sqlite:///{folder / 'memory.db'}"
    create_ledger(ledger)
    phases = folder / "phases"
    phases.mkdir()
    env = {**app_env(ledger, memory), "BF_PHASE_DIR": str(phases)}
    config = write_config(folder, database)
    cluster = Cluster(config, env, folder)
    client = DurableRunner.from_config(config, worker=False)
    outputs: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    try:
        # workers started without --executor-id are "local", as a `resume` process that
        # launched the engine would be: every other round's victim, every other round's heir
        current = cluster.start("local", named=False)
        for index in range(rounds):
            turn = f"{order}-{index}"
            heir = executor_of(index + 1)

            async def pause(turn: str = turn) -> Any:
                handle = await client.submit(f"turn {turn}: pay", context={"conversation_id": turn}, turn_id=turn)
                return await handle.result()

            paused = asyncio.run(pause())
            assert paused.status == "paused", (turn, paused)
            assert paused.pause is not None
            assert paused.pause.awaiting == (f"{turn}-pay",)
            cluster.kill(current.executor)
            del cluster.workers[current.executor]
            if order == "decision-first":
                # recorded while no worker runs the turn; `resume` waits for whoever recovers it
                resume = subprocess.Popen(
                    resume_command(config, turn),
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    text=True,
                    env=env,
                    cwd=folder,
                )
                assert resume.stderr is not None
                lines = [resume.stderr.readline(), resume.stderr.readline()]
                # a second, contrary decision for the same pause: the engine keeps the first
                contrary = asyncio.run(client.decide(turn, {f"{turn}-pay": "reject"}))
                assert contrary == f"{turn}:pause-1"
                current = cluster.start(heir, recover=current.executor, named=heir != "local")
                out, rest = resume.communicate(timeout=120)
                err = "".join(lines) + rest
                code = resume.returncode
            else:
                current = cluster.start(heir, recover=current.executor, named=heir != "local")
                # the heir has replayed the turn up to its pause (and waits for the decision)
                asyncio.run(state_values(client, turn, 2))
                done = subprocess.run(
                    resume_command(config, turn), capture_output=True, text=True, env=env, cwd=folder, timeout=120
                )
                out, err, code = done.stdout, done.stderr, done.returncode
            assert code == 0, (turn, err)
            # the turn's executor when `resume` looked: the dead worker's, or the heir's
            executor = executor_of(index) if order == "decision-first" else heir
            sent = f"{turn}: decisions sent for {turn}:pause-1\n"
            hint = (
                f"{turn}: waiting for a worker to finish it (if executor {executor} is gone: "
                f"beamfilter durable worker {config} --recover {executor})\n"
            )
            # a live heir may finish the turn before `resume` looks: then it waits for nothing
            assert err == sent + hint if order == "decision-first" else err in (sent, sent + hint), (turn, err)
            outputs[turn] = json.loads(out)

        async def finished() -> dict[str, Any]:
            try:
                return {turn: await client.info(turn) for turn in outputs}
            finally:
                await client.aclose()

        infos = asyncio.run(finished())
    finally:
        cluster.stop()
    elapsed = time.monotonic() - started

    for index, (turn, output) in enumerate(outputs.items()):
        assert output["status"] == "completed", (turn, output)
        assert output["messages"][-1]["content"] == f"Turn {turn} is done after 1 tool calls: transferred 5 for {turn}."
        info = infos[turn]
        assert info is not None
        # finished by the heir that recovered it, never by the `resume` command's process
        assert (info.status, info.executor_id) == ("SUCCESS", executor_of(index + 1)), turn
    found = read_ledger(ledger)
    # each approved transfer ran once, in the heir, never in the killed worker
    assert sorted((turn, amount) for _key, turn, amount in found["effects"]) == [(turn, 5) for turn in sorted(outputs)]
    starts = sorted(key.split(":")[0] for key, _pid, finished in found["entries"] if not finished)
    assert starts == sorted(outputs)
    return {"rounds": rounds, "seconds": round(elapsed, 1)}


@pytest.mark.parametrize("order", ORDERS)
def test_sqlite_a_decision_sent_while_no_worker_runs_the_turn_is_used_by_the_heir(tmp_path: Path, order: str) -> None:
    report = run_rounds(tmp_path, f"sqlite:///{tmp_path / 'dbos.db'}", order, ROUNDS)
    print("sqlite", order, report)


@pytest.mark.services
@pytest.mark.parametrize("order", ORDERS)
def test_postgres_a_decision_sent_while_no_worker_runs_the_turn_is_used_by_the_heir(
    tmp_path: Path, postgres_url: str, order: str
) -> None:
    import psycopg

    name = f"decide_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    report = run_rounds(tmp_path, url, order, ROUNDS)
    print("postgres", order, report)
