"""Exactly-once approval across a crash: paused turns whose worker is SIGKILLed, decided
before the crash (the worker killed just after the turn took its stored pause, or inside
the approved call), after it, twice, and with a made-up pause id; a heir worker recovers
them. The pause a turn resumes after recovery is the very pause it made and stored before
the crash (same id, same signature), and the memory store takes a pause by its id only."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest
from durable._crash import Cluster, write_config
from durable._helpers import APP, Local, app_env
from durable.durable_app import create_ledger, read_ledger

from beamfilter_core import PauseState, TurnResult, converter
from beamfilter_core.errors import AlreadyResumedError
from beamfilter_durable import DurableOptions, DurableRunner, QueueOptions
from beamfilter_durable._runtime import DECISION_TOPIC

pytestmark = pytest.mark.slow

TURNS = ("after", "before", "twice")


def approve(turn: str) -> dict[str, Any]:
    return {f"{turn}-pay": {"kind": "approve", "message": None, "arguments": None}}


async def send(client: DurableRunner, turn: str, pause_id: str, decisions: dict[str, Any], key: str) -> None:
    """A decision message as ``decide`` sends it, without its checks (as a second process would)."""
    await client.backend.send(turn, DECISION_TOPIC, {"pause_id": pause_id, "decisions": decisions}, idempotency_key=key)


async def stored_pause(memory: str, conversation: str) -> PauseState | None:
    from beamfilter_memory import open_store

    store = open_store(memory)
    try:
        return await store.load_pause(conversation)
    finally:
        await store.aclose()


def wait_for(condition: Any, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def wait_for_entries(ledger: str, pid: int, turns: tuple[str, ...], timeout: float = 120) -> None:
    """Until the worker ``pid`` has entered the transfer of each of ``turns``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        entries = read_ledger(ledger)["entries"]
        entered = {key.split(":")[0] for key, by, finished in entries if by == pid and not finished}
        if entered >= set(turns):
            return
        time.sleep(0.05)
    raise AssertionError(f"worker {pid} never entered the transfers of {turns}")


async def recorded_pause(client: DurableRunner, turn: str) -> PauseState:
    """The pause of the turn's ``beamfilter.pause`` step, as the engine recorded it."""
    steps = await client.backend.api.list_workflow_steps_async(turn)  # type: ignore[union-attr]
    (step,) = [s for s in steps if s["function_name"] == "beamfilter.pause"]
    result = converter.structure(step["output"], TurnResult)
    assert result.pause is not None
    return result.pause


def test_a_paused_turn_is_approved_exactly_once_across_a_crash(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'dbos.db'}"
    ledger = f"sqlite:///{tmp_path / 'ledger.db'}"
    memory = f"sqlite:///{tmp_path / 'memory.db'}"
    create_ledger(ledger)
    phases = tmp_path / "phases"
    phases.mkdir()
    # the victim stops for good after "before" took its pause, and inside "twice"'s transfer
    slow = {"BF_SLOW_TAKE": "before", "BF_SLOW_TRANSFER": "twice"}
    env = {**app_env(ledger, memory), "BF_PHASE_DIR": str(phases), **slow}
    config = write_config(tmp_path, database)
    cluster = Cluster(config, env, tmp_path)
    options = DurableOptions(database=database, queue=QueueOptions("turns", worker_concurrency=4), kernel=APP)
    client = DurableRunner(config, options, worker=False)
    try:
        victim = cluster.start("w0")

        async def before_the_crash() -> dict[str, TurnResult]:
            for turn in TURNS:
                await client._submit(f"turn {turn}: pay", {"conversation_id": turn}, turn)
            return {turn: await client.result(turn) for turn in TURNS}

        paused = asyncio.run(before_the_crash())
        for turn, result in paused.items():
            assert result.status == "paused", turn
            assert result.pause is not None
            assert result.pause.awaiting == (f"{turn}-pay",)

        # "before" and "twice": decided while their worker lives ("twice" with the same
        # decision sent two times); the worker is killed once "before" took its pause from
        # the store and "twice" is inside its approved call
        assert asyncio.run(client.decide("before", {"before-pay": "approve"})) == "before:pause-1"
        for _ in range(2):
            asyncio.run(send(client, "twice", "twice:pause-1", approve("twice"), "twice:pause-1"))
        wait_for_entries(ledger, victim.proc.pid, ("twice",))
        wait_for(lambda: asyncio.run(stored_pause(memory, "before")) is None)
        cluster.kill("w0")

        async def after_the_crash() -> None:
            # "after": decided while no worker runs it, with the pause id seen before the crash
            assert await client.decide("after", {"after-pay": "approve"}) == "after:pause-1"
            # a decision for a pause these turns never had is ignored
            forged = {"after-pay": {"kind": "reject", "message": "forged", "arguments": None}}
            await send(client, "after", "after:pause-9", forged, "forged")
            for turn in ("twice", "before"):  # sent again after the crash: the engine drops the copy
                await send(client, turn, f"{turn}:pause-1", approve(turn), f"{turn}:pause-1")

        asyncio.run(after_the_crash())
        cluster.env = {**env, "BF_SLOW_TAKE": "", "BF_SLOW_TRANSFER": ""}
        cluster.start("w1", recover="w0")

        async def outcome() -> tuple[dict[str, TurnResult], dict[str, PauseState]]:
            done = {turn: await client.result(turn, decided=f"{turn}:pause-1") for turn in TURNS}
            pauses = {turn: await recorded_pause(client, turn) for turn in TURNS}
            await client.aclose()
            return done, pauses

        done, pauses = asyncio.run(outcome())
    finally:
        cluster.stop()

    found = read_ledger(ledger)
    for turn in TURNS:
        assert done[turn].status == "completed", (turn, done[turn])
        assert done[turn].text == f"Turn {turn} is done after 1 tool calls: transferred 5 for {turn}."
        # the pause resumed after the crash is the pause made before it
        before = paused[turn].pause
        assert before is not None
        assert (pauses[turn].pause_id, pauses[turn].signature) == (before.pause_id, before.signature)
        assert pauses[turn] == before
    # each transfer happened once; only the one killed inside its call was entered twice
    assert sorted((turn, amount) for _key, turn, amount in found["effects"]) == [(t, 5) for t in sorted(TURNS)]
    assert found["total"] == 15
    starts: dict[str, list[int]] = {}
    for key, pid, finished in found["entries"]:
        if not finished:
            starts.setdefault(key.split(":")[0], []).append(pid)
    # "before" was killed before its transfer: the heir took the pause this turn stored and ran it once
    assert {turn: len(pids) for turn, pids in starts.items()} == {"after": 1, "before": 1, "twice": 2}
    assert starts["twice"][0] == victim.proc.pid
    assert victim.proc.pid not in starts["before"]

    # the memory store holds each turn once and no pause is left pending
    from beamfilter_memory import open_store

    async def stored() -> dict[str, Any]:
        store = open_store(memory)
        try:
            return {turn: (await store.load(turn), await store.load_pause(turn)) for turn in TURNS}
        finally:
            await store.aclose()

    for turn, (messages, pending) in asyncio.run(stored()).items():
        assert messages == list(done[turn].messages), turn
        assert pending is None, turn


@pytest.mark.parametrize("change", ["swapped", "taken"])
def test_the_store_gives_a_turn_only_the_pause_it_recorded(local: Local, change: str) -> None:
    """The stored pause replaced by one with another id (a stale or forged state), or taken
    by another process's resume: the turn does not resume it (AlreadyResumedError) and the
    approved call does not run."""
    import attrs
    from durable.test_turns import effects_of

    from beamfilter_memory import open_store

    runner = local.runner
    turn = f"swap-{change}"
    paused = local.call(runner.run(f"turn {turn}: pay", turn_id=turn, context={"conversation_id": turn}))
    assert paused.status == "paused"
    assert paused.pause is not None

    async def meddle() -> None:
        store = open_store(local.memory)
        try:
            stored = await store.load_pause(turn)
            assert stored == paused.pause
            if change == "swapped":
                await store.save_pause(turn, attrs.evolve(stored, pause_id="f" * 32))
            else:
                assert await store.take_pause(turn, stored.pause_id) == stored
        finally:
            await store.aclose()

    local.call(meddle())
    local.call(runner.decide(turn, {f"{turn}-pay": "approve"}))
    shown = paused.pause.pause_id
    with pytest.raises(
        AlreadyResumedError,
        match=rf"^already resumed: pause '{shown}' of conversation '{turn}' is no longer pending \(another worker",
    ):
        local.call(runner.result(turn, decided=f"{turn}:pause-1"))
    info = local.call(runner.info(turn))
    assert info is not None
    assert info.status == "ERROR"
    assert effects_of(local, turn) == []
