"""The crash scenario: worker processes on one system database, turns on a queue, SIGKILL
at random moments, restarts, and everything a correct recovery must leave behind."""

from __future__ import annotations

import asyncio
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import attrs
from durable._helpers import APP, app_env
from durable.durable_app import create_ledger, effect, gate, plan_of, read_ledger, reply, transfer

from beamfilter_core import Kernel, ScriptedModel, TurnResult
from beamfilter_durable import DurableOptions, DurableRunner, QueueOptions

#: tool plans of 2-4 calls: "2+1" is a parallel batch of two, then one more call
PLANS = ("2+1", "1+2", "2+2", "3+1", "1+1+1", "4", "2", "1+1", "3", "2+1+1")


@attrs.define
class Worker:
    executor: str
    proc: subprocess.Popen[str]
    log: Path


@attrs.define
class Kill:
    executor: str
    pid: int
    phase: str
    at: float


def write_config(
    folder: Path,
    database: str,
    *,
    kernel: str = APP,
    queue: str = "turns",
    concurrency: int = 4,
    name: str = "crash.toml",
) -> Path:
    """A config whose workers run ``kernel`` from ``queue`` on ``database`` (bench_durable's too)."""
    path = folder / name
    path.write_text(
        '[model]\nuse = "scripted"\nscript = ["unused"]\n\n'
        f'[durable]\nuse = "dbos"\ndatabase = "{database}"\nkernel = "{kernel}"\n'
        f'queue = {{ name = "{queue}", worker_concurrency = {concurrency} }}\n'
    )
    return path


class Cluster:
    """Worker processes (``beamfilter durable worker``) that the test kills and restarts."""

    def __init__(self, config: Path, env: dict[str, str], folder: Path) -> None:
        self.config, self.env, self.folder = config, env, folder
        self.workers: dict[str, Worker] = {}
        self.killed_pids: set[int] = set()
        self.kills: list[Kill] = []

    def start_all(self, executors: tuple[str, ...]) -> None:
        """Start the workers at once (each takes seconds to import and launch)."""
        threads = [threading.Thread(target=self.start, args=(e,)) for e in executors]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        missing = sorted(set(executors) - set(self.workers))
        assert not missing, f"workers {missing} did not start; see {self.folder}"

    def start(self, executor: str, recover: str | None = None, *, named: bool = True) -> Worker:
        """Start a worker; with ``recover``, it also takes over that dead worker's turns.
        ``named=False`` starts it without ``--executor-id`` (``executor`` must be "local")."""
        log = self.folder / f"{executor}-{len(self.kills)}.log"
        extra = ["--recover", recover] if recover else []
        if named:
            extra = ["--executor-id", executor, *extra]
        with log.open("w") as err:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "beamfilter_core",
                    "durable",
                    "worker",
                    str(self.config),
                    *extra,
                ],
                stdout=subprocess.PIPE,
                stderr=err,
                text=True,
                env=self.env,
                cwd=self.folder,
            )
        assert proc.stdout is not None
        line = proc.stdout.readline().strip()
        if line != f"worker {executor} ready":
            proc.kill()
            proc.communicate(timeout=10)
            raise AssertionError(f"worker {executor} printed {line!r}:\n{log.read_text()[-3000:]}")
        worker = self.workers[executor] = Worker(executor, proc, log)
        return worker

    def kill(self, executor: str) -> Kill:
        worker = self.workers[executor]
        phase_file = Path(self.env["BF_PHASE_DIR"]) / str(worker.proc.pid)
        phase = phase_file.read_text() if phase_file.exists() else "idle"
        worker.proc.send_signal(signal.SIGKILL)
        worker.proc.communicate(timeout=10)
        self.killed_pids.add(worker.proc.pid)
        kill = Kill(executor, worker.proc.pid, phase, time.monotonic())
        self.kills.append(kill)
        return kill

    def stop(self) -> None:
        for worker in self.workers.values():
            if worker.proc.poll() is None:
                worker.proc.send_signal(signal.SIGTERM)
        for worker in self.workers.values():
            try:
                worker.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                worker.proc.kill()
                worker.proc.communicate(timeout=10)


def busy_workers(cluster: Cluster, within: float = 1.0) -> list[str]:
    """Workers that noted a phase (a model call, a tool call) in the last ``within`` seconds."""
    now = time.time()
    busy = []
    for executor, worker in list(cluster.workers.items()):
        marker = Path(cluster.env["BF_PHASE_DIR"]) / str(worker.proc.pid)
        if worker.proc.poll() is None and marker.exists() and now - marker.stat().st_mtime < within:
            busy.append(executor)
    return sorted(busy)


def killer(
    cluster: Cluster,
    rng: random.Random,
    kills: int,
    done: threading.Event,
    errors: list[BaseException],
    restarts: list[threading.Thread],
) -> None:
    """SIGKILL a random busy worker at a random moment and restart it under its executor id
    (so that it recovers what it left), ``kills`` times or until the turns are done."""
    try:
        while len(cluster.kills) < kills and not done.wait(rng.uniform(0.1, 0.6)):
            busy = busy_workers(cluster)
            if not busy:
                continue
            executor = rng.choice(busy)
            cluster.kill(executor)
            if len(cluster.kills) == kills and "-heir" not in executor:
                # the last victim stays dead: a new worker takes over its unfinished turns
                del cluster.workers[executor]
                restart = threading.Thread(target=cluster.start, args=(f"{executor}-heir", executor))
            else:
                restart = threading.Thread(target=cluster.start, args=(executor,))
            restart.start()
            restarts.append(restart)
    except BaseException as exc:  # noqa: BLE001  # reported by the test
        errors.append(exc)


def baseline(prompt: str) -> TurnResult:
    """The uninterrupted run of a turn: a plain kernel, no engine, no ledger."""
    kernel = Kernel(ScriptedModel([reply], repeat=True, chunk=4), tools=[effect, transfer], gate=gate)
    return kernel.run_sync(prompt)


def run_crash_scenario(
    *, folder: Path, database: str, ledger: str, memory: str, turns: int, kills: int, seed: int
) -> dict[str, Any]:
    """Run ``turns`` turns on 3 workers while killing ``kills`` times; check everything."""
    rng = random.Random(seed)
    create_ledger(ledger)
    phases = folder / "phases"
    phases.mkdir(exist_ok=True)
    env = {**app_env(ledger, memory), "BF_PHASE_DIR": str(phases), "BF_TOOL_SECONDS": "0.08"}
    config = write_config(folder, database)
    cluster = Cluster(config, env, folder)
    prompts = {f"t{index:03d}": f"turn t{index:03d}: {rng.choice(PLANS)}" for index in range(turns)}
    options = DurableOptions(database=database, queue=QueueOptions("turns", worker_concurrency=4), kernel=APP)
    client = DurableRunner(config, options, worker=False)
    done = threading.Event()
    errors: list[BaseException] = []
    started = time.monotonic()
    try:
        cluster.start_all(("w0", "w1", "w2"))

        async def submit_and_wait() -> dict[str, TurnResult]:
            for turn, prompt in prompts.items():
                await client._submit(prompt, {"conversation_id": turn}, turn)
            results = await asyncio.wait_for(asyncio.gather(*(client.result(t) for t in prompts)), 600)
            return dict(zip(prompts, results, strict=True))

        restarts: list[threading.Thread] = []
        thread = threading.Thread(target=killer, args=(cluster, rng, kills, done, errors, restarts), daemon=True)
        thread.start()
        try:
            results = asyncio.run(submit_and_wait())
        finally:
            done.set()
            thread.join(120)
            for restart in restarts:
                restart.join(120)
        asyncio.run(client.aclose())
    finally:
        cluster.stop()
    elapsed = time.monotonic() - started
    assert not errors, errors

    # every turn completed, with the uninterrupted run's transcript
    for turn, prompt in prompts.items():
        result = results[turn]
        assert result.status == "completed", (turn, result)
        assert result.messages == baseline(prompt).messages, turn

    # every effect exactly once, under its idempotency key
    found = read_ledger(ledger)
    expected_calls = {turn: sum(plan_of(prompt)[1]) for turn, prompt in prompts.items()}
    per_turn = Counter(turn for _key, turn, _amount in found["effects"])
    assert dict(per_turn) == expected_calls
    amounts = sum(amount for _key, _turn, amount in found["effects"])
    expected_amount = sum(
        10 * r + i + 1 for prompt in prompts.values() for r, n in enumerate(plan_of(prompt)[1]) for i in range(n)
    )
    assert found["total"] == amounts == expected_amount

    # a tool call was entered again only after its worker was killed while it ran
    entered: dict[str, list[tuple[int, int]]] = {}
    for key, pid, finished in found["entries"]:
        entered.setdefault(key, []).append((pid, finished))
    reruns = 0
    for key, marks in entered.items():
        starts = [pid for pid, finished in marks if finished == 0]
        ends = [pid for pid, finished in marks if finished == 1]
        assert len(ends) >= 1, key
        if len(starts) > 1:
            reruns += len(starts) - 1
            unfinished = [pid for pid in starts if pid not in ends]
            assert all(pid in cluster.killed_pids for pid in unfinished), (key, marks)
            assert len(unfinished) >= len(starts) - len(ends), (key, marks)
    assert set(entered) == {key for key, _turn, _amount in found["effects"]}

    # the memory store holds each turn once
    from beamfilter_memory import open_store

    async def stored() -> dict[str, Any]:
        store = open_store(memory)
        try:
            return {turn: await store.load(turn) for turn in prompts}
        finally:
            await store.aclose()

    history = asyncio.run(stored())
    for turn in prompts:
        assert history[turn] == list(results[turn].messages), turn

    return {
        "turns": turns,
        "kills": [(k.executor, k.phase) for k in cluster.kills],
        "reruns": reruns,
        "seconds": round(elapsed, 1),
    }
