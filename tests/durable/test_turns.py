"""Durable turns in this process and from other processes: steps, idempotent submit,
streaming, memory, pauses decided elsewhere, decisions sent twice, cancellation, the CLI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from durable._helpers import APP, Local, app_env
from durable.durable_app import read_ledger

from beamfilter_core import Decision, Kernel, Message, RunFinished, TextDelta, TurnResult
from beamfilter_core.errors import ConfigError, DurableError
from beamfilter_durable import DurableOptions, DurableRunner
from beamfilter_durable._runtime import DECISION_TOPIC

pytestmark = pytest.mark.slow


def kernel_of(local: Local) -> Kernel:
    return local.runner.runtime.kernel(local.runner.reference)


def effects_of(local: Local, turn: str) -> list[tuple[str, str, int]]:
    return sorted(row for row in read_ledger(local.ledger)["effects"] if row[1] == turn)


def entries_of(local: Local, turn: str) -> list[str]:
    return sorted(
        key
        for key, _pid, finished in read_ledger(local.ledger)["entries"]
        if key.startswith(f"{turn}:") and finished == 0
    )


def tool_keys(local: Local, turn: str) -> list[str]:
    """The idempotency keys of the turn's tool steps, from the engine's record of its steps."""
    info = local.call(local.runner.info(turn))
    assert info is not None
    return [f"{turn}:{step['step']}" for step in info.steps if step["name"].startswith("beamfilter.tool:")]


def cli(local: Local, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamfilter_core", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=app_env(local.ledger, local.memory),
        cwd=local.folder,
    )


def test_each_llm_call_tool_call_and_memory_operation_is_a_step(local: Local) -> None:
    result = local.call(local.runner.run("turn basic: 2+1", turn_id="basic", context={"conversation_id": "basic"}))
    assert result.status == "completed"
    assert result.text == (
        "Turn basic is done after 3 tool calls: applied 1 for basic; applied 2 for basic; applied 11 for basic."
    )
    info = local.call(local.runner.info("basic"))
    assert info is not None
    assert info.status == "SUCCESS"
    assert [step["name"] for step in info.steps] == [
        "beamfilter.memory.load",
        "beamfilter.chat",
        "beamfilter.tool:effect",
        "beamfilter.tool:effect",
        "beamfilter.chat",
        "beamfilter.tool:effect",
        "beamfilter.chat",
        "beamfilter.memory.append",
    ]
    # each tool call's idempotency key is its step: "<turn id>:<step id>"
    assert effects_of(local, "basic") == [("basic:3", "basic", 1), ("basic:4", "basic", 2), ("basic:6", "basic", 11)]


def test_submitting_a_completed_turn_again_returns_its_record_without_model_or_tools(local: Local) -> None:
    kernel = kernel_of(local)
    first = local.call(local.runner.run("turn idem: 1+2", turn_id="idem-1"))
    requests = len(kernel.model.requests)  # type: ignore[attr-defined]
    entries = entries_of(local, "idem-1")
    assert len(entries) == 3
    again = local.call(local.runner.run("turn idem: 1+2", turn_id="idem-1"))
    assert again == first
    assert len(kernel.model.requests) == requests  # type: ignore[attr-defined]
    assert entries_of(local, "idem-1") == entries
    assert len(effects_of(local, "idem")) == 3


def test_streaming_delivers_the_answer_and_a_replayed_turn_streams_it_once(local: Local) -> None:
    async def collect(turn_id: str) -> tuple[list[Any], TurnResult]:
        events = [e async for e in local.runner.run_stream("turn streamed: 1", turn_id=turn_id)]
        finished = events[-1]
        assert isinstance(finished, RunFinished)
        return events[:-1], finished.result

    events, result = local.call(collect("streamed"))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == result.text == "Turn streamed is done after 1 tool calls: applied 1 for streamed."
    assert len([e for e in events if isinstance(e, TextDelta)]) > 5  # token by token (chunk=4)
    assert [type(e).__name__ for e in events if not isinstance(e, TextDelta)] == ["ToolCallStarted", "ToolCallFinished"]
    events, again = local.call(collect("streamed"))
    assert again == result
    assert events == [TextDelta(result.text or "")]


def test_conversation_turns_get_numbered_ids_and_memory_holds_each_turn_once(local: Local) -> None:
    from beamfilter_memory import open_store

    context = {"conversation_id": "conv-a"}
    one = local.call(local.runner.run("turn a1: 1", context=context))
    assert local.runner.last_turn_id == "conv-a:turn-1"
    two = local.call(local.runner.run("turn a2: 2", context=context))
    assert local.runner.last_turn_id == "conv-a:turn-2"
    # an explicit resubmit of turn 1 is idempotent and adds nothing to the conversation
    assert local.call(local.runner.run("turn a1: 1", context=context, turn_id="conv-a:turn-1")) == one

    async def stored() -> list[Message]:
        store = open_store(local.memory)
        try:
            return await store.load("conv-a")
        finally:
            await store.aclose()

    messages = local.call(stored())
    assert messages == [*one.messages, *two.messages]
    assert [m.role for m in messages].count("user") == 2


def test_a_pause_decided_from_another_process_completes_once(local: Local) -> None:
    config = local.config()
    paused = local.call(local.runner.run("turn pay1: pay", turn_id="pay1"))
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause.awaiting == ("pay1-pay",)
    shown = cli(local, "durable", "show", str(config), "pay1")
    assert shown.returncode == 0, shown.stderr
    assert "status    PENDING (paused on pay1-pay)" in shown.stdout
    done = cli(local, "durable", "resume", str(config), "pay1", "--approve", "pay1-pay", "--no-wait")
    assert done.returncode == 0, done.stderr
    assert done.stderr == "pay1: decisions sent for pay1:pause-1\n"
    result = local.call(local.runner.result("pay1", decided="pay1:pause-1"))
    assert result.status == "completed"
    assert result.text == "Turn pay1 is done after 1 tool calls: transferred 5 for pay1."
    (key,) = tool_keys(local, "pay1")
    assert effects_of(local, "pay1") == [(key, "pay1", 5)]
    again = cli(local, "durable", "resume", str(config), "pay1", "--approve", "pay1-pay")
    assert again.returncode == 1
    assert (
        again.stderr
        == "beamfilter durable resume: The durable turn 'pay1' is SUCCESS; only a paused turn takes decisions.\n"
    )


def test_a_decision_sent_twice_is_used_once_and_a_stale_one_is_dropped(local: Local) -> None:
    runner = local.runner
    paused = local.call(runner.run("turn pay2: pay", turn_id="pay2"))
    assert paused.status == "paused"
    backend = runner.backend
    approve = {"pay2-pay": {"kind": "approve", "message": None, "arguments": None}}
    wrong = {"pay2-pay": {"kind": "reject", "message": "stale", "arguments": None}}
    # a decision for a pause id this turn never had, then the same decision twice (as two
    # processes that both passed the "is it paused?" check would send it)
    local.call(
        backend.send("pay2", DECISION_TOPIC, {"pause_id": "pay2:pause-9", "decisions": wrong}, idempotency_key="x")
    )
    for _ in range(2):
        local.call(
            backend.send(
                "pay2",
                DECISION_TOPIC,
                {"pause_id": "pay2:pause-1", "decisions": approve},
                idempotency_key="pay2:pause-1",
            )
        )
    result = local.call(runner.result("pay2", decided="pay2:pause-1"))
    assert result.text == "Turn pay2 is done after 1 tool calls: transferred 5 for pay2."
    (key,) = tool_keys(local, "pay2")
    assert effects_of(local, "pay2") == [(key, "pay2", 5)]
    assert entries_of(local, "pay2") == [key]
    with pytest.raises(
        DurableError, match=r"^The durable turn 'pay2' is SUCCESS; only a paused turn takes decisions\.$"
    ):
        local.call(runner.decide("pay2", {"pay2-pay": "approve"}))


def test_decisions_must_name_the_awaited_calls(local: Local) -> None:
    runner = local.runner
    assert local.call(runner.run("turn pay3: pay", turn_id="pay3")).status == "paused"
    with pytest.raises(DurableError, match=r"^The durable turn 'pay3' awaits decisions on pay3-pay; got other\.$"):
        local.call(runner.decide("pay3", {"other": "approve"}))
    with pytest.raises(DurableError, match=r"decisions\['pay3-pay'\] is 'maybe'; give a Decision"):
        local.call(runner.decide("pay3", {"pay3-pay": "maybe"}))
    with pytest.raises(DurableError, match=r"^No durable turn 'nope' exists"):
        local.call(runner.decide("nope", {"x": "approve"}))
    result = local.call(runner.resume("pay3", {"pay3-pay": Decision.reject("not today")}))
    assert result.status == "completed"
    assert result.messages[-2].text == "The call to 'transfer' was rejected: not today"
    assert effects_of(local, "pay3") == []


def cancelled_while_paused(local: Local, turn: str) -> Path:
    """Run the turn ``turn`` (a payment) to its pause, cancel it with ``beamfilter durable
    cancel``; returns the config the command was given."""
    config = local.config()
    assert local.call(local.runner.run(f"turn {turn}: pay", turn_id=turn)).status == "paused"
    done = cli(local, "durable", "cancel", str(config), turn)
    assert (done.returncode, done.stdout) == (0, f"{turn}: cancelled\n"), done.stderr
    return config


def test_a_cancelled_turn_runs_no_further_step(local: Local) -> None:
    config = cancelled_while_paused(local, "pay4")
    runner = local.runner
    with pytest.raises(
        DurableError, match=r"^The durable turn 'pay4' is CANCELLED; only a paused turn takes decisions\.$"
    ):
        local.call(runner.decide("pay4", {"pay4-pay": "approve"}))
    with pytest.raises(
        DurableError, match=r"^The durable turn 'pay4' was cancelled; `beamfilter durable resume` runs it on\.$"
    ):
        local.call(runner.run("turn pay4: pay", turn_id="pay4"))
    listed = cli(local, "durable", "list", str(config), "--prefix", "pay4")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("pay4  CANCELLED ")
    assert effects_of(local, "pay4") == []
    with pytest.raises(DurableError, match=r"^No durable turn 'nope' exists"):
        local.call(runner.cancel("nope"))


def test_beamfilter_run_honours_the_durable_section(local: Local) -> None:
    config = local.config("run.toml")
    done = cli(local, "run", str(config), "turn cli1: 1", "--conversation-id", "cli-conv")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "Turn cli1 is done after 1 tool calls: applied 1 for cli1.\n"
    listed = cli(local, "durable", "list", str(config), "--prefix", "cli-conv")
    assert listed.stdout.startswith("cli-conv:turn-1  SUCCESS "), listed.stderr
    # the same turn id again: the recorded answer, no new effect
    assert len(effects_of(local, "cli1")) == 1


def test_the_durable_section_is_validated_with_its_place(local: Local) -> None:
    bad = local.folder / "bad.toml"
    bad.write_text('[model]\nuse = "scripted"\nscript = ["x"]\n\n[durable]\nuse = "temporal"\ndatabase = "mysql://x"\n')
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(bad)
    assert caught.value.problems == (
        "durable.use: must be one of 'dbos', got 'temporal'",
        "durable.database: must match pattern ^(sqlite|postgresql|postgres)(\\+[a-z0-9]+)?://",
    )
    with pytest.raises(ConfigError, match=r"^A durable turn needs a config a worker can rebuild by name"):
        DurableRunner({"model": {"use": "scripted"}}, DurableOptions())
    assert APP.endswith(":kernel")


def kill_mid_stream(local: Local, config: Path, name: str) -> None:
    """`beamfilter run` the turn ``name`` (one tool call), SIGKILLed once the answer's first
    tokens have reached the caller (its tool step is recorded, its last LLM step is not)."""
    import signal

    # slow tokens: the kill lands mid-stream even when this process is descheduled for seconds
    env = {**app_env(local.ledger, local.memory), "BF_TOKEN_SECONDS": "2"}
    streaming = subprocess.Popen(
        [sys.executable, "-m", "beamfilter_core", "run", str(config), f"turn {name}: 1", "--conversation-id", name],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=local.folder,
    )
    assert streaming.stdout is not None
    shown = streaming.stdout.read(8)
    streaming.send_signal(signal.SIGKILL)
    streaming.communicate(timeout=30)
    assert shown == b"Turn mid"
    info = local.call(local.runner.backend.info(f"{name}:turn-1"))
    assert info is not None
    assert info.status == "PENDING"  # killed before its last step was recorded


def test_a_turn_killed_mid_stream_is_finished_by_another_process(local: Local) -> None:
    from durable._crash import Cluster

    config = local.config("stream.toml")
    kill_mid_stream(local, config, "mid")
    # `resume` runs nothing itself: it waits while a worker recovers the dead process's turn
    # (`beamfilter run` without an executor id runs as "local")
    waiting = subprocess.Popen(
        [sys.executable, "-m", "beamfilter_core", "durable", "resume", str(config), "mid:turn-1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=app_env(local.ledger, local.memory),
        cwd=local.folder,
    )
    assert waiting.stderr is not None
    hint = waiting.stderr.readline()
    assert hint == (
        "mid:turn-1: waiting for a worker to finish it (if executor local is gone: "
        f"beamfilter durable worker {config} --recover local)\n"
    )
    workers = Cluster(config, app_env(local.ledger, local.memory), local.folder)
    try:
        workers.start("heir", recover="local")
        out, err = waiting.communicate(timeout=120)
    finally:
        workers.stop()
    assert waiting.returncode == 0, err
    assert '"content": "Turn mid is done after 1 tool calls: applied 1 for mid."' in out  # the result's JSON
    result = local.call(local.runner.result("mid:turn-1"))
    assert result.text == "Turn mid is done after 1 tool calls: applied 1 for mid."
    # the tool step completed before the kill: replayed, never run again; the LLM step that
    # was streaming was run again by the recovering process
    assert len(effects_of(local, "mid")) == 1
    assert len(entries_of(local, "mid:turn-1")) == 1
    names = [step["name"] for step in local.call(local.runner.info("mid:turn-1")).steps]  # type: ignore[union-attr]
    assert names.count("beamfilter.chat") == 2
    assert local.call(stored(local, "mid")) == list(result.messages)  # the memory store holds the turn once


async def stored(local: Local, conversation: str) -> list[Message]:
    from beamfilter_memory import open_store

    store = open_store(local.memory)
    try:
        return await store.load(conversation)
    finally:
        await store.aclose()


def test_a_cancelled_turn_is_never_reported_as_waiting_on_its_last_pause(local: Local) -> None:
    # The stream of a turn cancelled while paused still ends with that pause: whichever of
    # the status and the stream answers first, a wait on the turn says it was cancelled.
    config = cancelled_while_paused(local, "pay7")
    runner = local.runner
    client = DurableRunner.from_config(config, worker=False)  # reads the turn's stream and status
    outcomes = []
    try:
        for _ in range(10):
            waits = (runner.result("pay7"), runner.run("turn pay7: pay", turn_id="pay7"), client.result("pay7"))
            for wait in waits:
                try:
                    outcomes.append(local.call(wait).status)
                except DurableError as exc:
                    outcomes.append(str(exc))
    finally:
        local.call(client.aclose())
    assert outcomes == ["The durable turn 'pay7' was cancelled; `beamfilter durable resume` runs it on."] * 30
    assert effects_of(local, "pay7") == []
