"""Queue concurrency across workers: 3 worker processes on one PostgreSQL database and
``queue = { name = "turns", concurrency = 2 }``. Each turn holds one tool call that counts
itself in the database while it runs: never more than 2 run at once across all workers,
2 do run at once, more than one worker takes turns, and every turn completes."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from pathlib import Path

import pytest
from durable._crash import Cluster
from durable._helpers import APP, app_env
from durable.durable_app import create_ledger, read_gauge, read_ledger

from beamfilter_durable import DurableOptions, DurableRunner, QueueOptions

pytestmark = [pytest.mark.slow, pytest.mark.services]

TURNS = 8


def test_queue_concurrency_holds_across_three_workers_on_postgres(tmp_path: Path, postgres_url: str) -> None:
    import psycopg

    name = f"queue_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    create_ledger(url)
    config = tmp_path / "queue.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["unused"]\n\n'
        f'[durable]\nuse = "dbos"\ndatabase = "{url}"\nkernel = "{APP}"\n'
        'queue = { name = "turns", concurrency = 2 }\n'
    )
    phases = tmp_path / "phases"
    phases.mkdir()
    env = {**app_env(url), "BF_PHASE_DIR": str(phases), "BF_HOLD_SECONDS": "1.0"}
    cluster = Cluster(config, env, tmp_path)
    client = DurableRunner(
        config, DurableOptions(database=url, queue=QueueOptions("turns", concurrency=2), kernel=APP), worker=False
    )
    turns = [f"q{index}" for index in range(TURNS)]
    try:
        cluster.start_all(("w0", "w1", "w2"))

        async def submit_and_wait() -> list[str | None]:
            for turn in turns:
                await client._submit(f"turn {turn}: hold", None, turn)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(turn) for turn in turns)), 600)
            infos = [await client.backend.info(turn) for turn in turns]
            await client.aclose()
            assert [r.text for r in results] == [f"Turn {t} is done after 1 tool calls: held {t}." for t in turns]
            return [info.executor_id if info is not None else None for info in infos]

        executors = asyncio.run(submit_and_wait())
    finally:
        cluster.stop()
    assert read_gauge(url) == (0, 2)  # never more than 2 at once, and 2 did run together
    entries = read_ledger(url)["entries"]
    assert Counter(finished for _key, _pid, finished in entries) == {0: TURNS, 1: TURNS}  # each held once
    assert set(executors) <= {"w0", "w1", "w2"}
    assert len(set(executors)) >= 2, executors  # the limit held across workers, not inside one
