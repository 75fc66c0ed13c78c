"""Durable-turn helpers and fixtures: a DBOS runtime in this process on one SQLite file (DBOS holds one
system database per process), worker processes, and a PostgreSQL server for the crash tests."""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
from durable.durable_app import create_ledger

from beamfilter_durable import DurableOptions, DurableRunner, shutdown

T = TypeVar("T")
APP = "durable.durable_app:kernel"
TESTS = Path(__file__).resolve().parents[1]


@attrs.frozen
class Local:
    """The in-process durable runtime shared by this session's tests."""

    runner: DurableRunner
    folder: Path
    ledger: str
    memory: str
    database: str
    loop: asyncio.AbstractEventLoop

    def call(self, work: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``work`` on the runtime's event loop (one loop for the whole session)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result(timeout)

    def config(self, name: str = "beamfilter.toml", **extra: str) -> Path:
        """A beamfilter.toml whose [durable] section names this runtime's database."""
        lines = [f'database = "{self.database}"', f'kernel = "{APP}"', *(f'{k} = "{v}"' for k, v in extra.items())]
        path = self.folder / name
        path.write_text(
            '[model]\nuse = "scripted"\nscript = ["unused"]\n\n[durable]\nuse = "dbos"\n' + "\n".join(lines)
        )
        return path


def app_env(ledger: str, memory: str | None = None) -> dict[str, str]:
    """The environment of a process running the test application."""
    env = {**os.environ, "BF_LEDGER": ledger, "PYTHONPATH": str(TESTS)}
    if memory is not None:
        env["BF_MEMORY"] = memory
    return env


# module scope: the engine's background threads (which draw from the global random module)
# stop when the module's tests are done, not at the end of the whole session
@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Local]:
    folder = tmp_path_factory.mktemp("durable")
    ledger = f"sqlite:///{folder / 'ledger.db'}"
    memory = f"sqlite:///{folder / 'memory.db'}"
    database = f"sqlite:///{folder / 'dbos.db'}"
    create_ledger(ledger)
    saved = {key: os.environ.get(key) for key in ("BF_LEDGER", "BF_MEMORY")}
    os.environ.update(BF_LEDGER=ledger, BF_MEMORY=memory)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="durable-tests-loop", daemon=True)
    thread.start()
    runner = DurableRunner(APP, DurableOptions(database=database, executor_id="pytest"))
    try:
        yield Local(runner, folder, ledger, memory, database, loop)
    finally:
        try:
            asyncio.run_coroutine_threadsafe(runner.aclose(), loop).result(30)
            # turns still waiting here (a cancelled turn's workflow sits in its wait for a
            # decision) end now, not when the collector finds them during a later test
            asyncio.run_coroutine_threadsafe(_end_tasks(), loop).result(30)
        finally:
            shutdown()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
            loop.close()  # its self-pipe sockets, before the garbage collector finds them
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


async def _end_tasks() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
