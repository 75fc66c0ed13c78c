"""``beamfilter durable`` in this process (the command runs nothing and launches no engine
here, so it shares the process with the test's own worker): resume records decisions and
waits, restarts a cancelled turn, refuses what it cannot do; list, show, cancel."""

from __future__ import annotations

import contextlib
import io
import json

import pytest
from durable._helpers import Local

from beamfilter_core._cli import main
from beamfilter_durable._dbos import DbosBackend

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def engine(local: Local) -> None:
    """This process's engine is launched (it creates the system database's tables)."""
    assert local.runner.runtime.backend.launched


def durable(*args: str) -> tuple[int, str, str]:
    # redirected only while the command runs (not capsys): the engine this process launched
    # keeps writing its log to the stream it found, which must outlive the test
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["durable", *args])
    return code, out.getvalue(), err.getvalue()


def test_resume_records_the_decision_and_waits_for_the_worker(local: Local) -> None:
    config = str(local.config("commands.toml"))
    paused = local.call(local.runner.run("turn cmd1: pay", turn_id="cmd1"))
    assert paused.status == "paused"
    engine = DbosBackend._shared
    code, out, err = durable("resume", config, "cmd1", "--approve", "cmd1-pay")
    assert code == 0, err
    assert err == (
        "cmd1: decisions sent for cmd1:pause-1\n"
        "cmd1: waiting for a worker to finish it (if executor pytest is gone: "
        f"beamfilter durable worker {config} --recover pytest)\n"
    )
    result = json.loads(out)
    assert result["status"] == "completed"
    assert result["messages"][-1]["content"] == "Turn cmd1 is done after 1 tool calls: transferred 5 for cmd1."
    # the command launched no engine and left this process's engine running
    assert DbosBackend._shared is engine is not None

    code, out, err = durable("resume", config, "cmd1")  # finished: prints its result
    assert (code, json.loads(out)["status"], err) == (0, "completed", "")

    code, out, _err = durable("list", config, "--prefix", "cmd1")
    assert code == 0
    assert out.split()[:2] == ["cmd1", "SUCCESS"]
    code, out, _err = durable("list", config, "--prefix", "no-such-turn")
    assert (code, out) == (0, "(no durable turns)\n")


def test_resume_without_decisions_restarts_a_failed_turn(local: Local, monkeypatch: pytest.MonkeyPatch) -> None:
    import logging

    # the engine logs the turn's failure from its own threads: not this command's output
    monkeypatch.setattr(logging.getLogger("dbos"), "disabled", True)
    config = str(local.config("commands.toml"))
    paused = local.call(local.runner.run("turn cmd2: pay", turn_id="cmd2"))
    assert paused.status == "paused"
    code, out, err = durable("resume", config, "cmd2")
    assert (code, out) == (1, "")
    assert err == (
        "beamfilter durable resume: The durable turn 'cmd2' is paused; give --approve CALL_ID or --reject CALL_ID.\n"
    )
    # a turn whose model call fails (the scripted model refuses the prompt) ends in ERROR
    with pytest.raises(ValueError, match=r"^prompt 'no plan' is not 'turn ID: N\+M' or 'turn ID: pay'$"):
        local.call(local.runner.run("no plan", turn_id="cmd-failed"))
    first = local.call(local.runner.info("cmd-failed"))
    assert first is not None
    assert first.status == "ERROR"
    code, out, err = durable("resume", config, "cmd-failed", "--no-wait")
    assert (code, out, err) == (0, "", "cmd-failed: restarted; a worker runs it on\n")
    # waiting: this process's worker runs it again from its last completed step (the failed
    # model call, whose recorded error is raised again), and the waiter gets that error
    with pytest.raises(ValueError, match=r"^prompt 'no plan' is not"):
        local.call(local.runner.result("cmd-failed"))
    code, out, err = durable("resume", config, "cmd-failed")
    assert (code, out) == (1, "")
    restarted = "cmd-failed: restarted; a worker runs it on\n"
    hint = (
        "cmd-failed: waiting for a worker to finish it (if executor pytest is gone: "
        f"beamfilter durable worker {config} --recover pytest)\n"
    )
    failed = (
        "beamfilter durable: the run failed: ValueError: prompt 'no plan' is not 'turn ID: N+M' or "
        "'turn ID: pay' (--debug or BEAMFILTER_DEBUG=1 shows the traceback)\n"
    )
    # the hint only when the worker had not failed the turn again before `resume` looked
    assert err in (restarted + failed, restarted + hint + failed), err


def test_resume_of_an_unknown_turn_is_refused(local: Local) -> None:
    config = str(local.config("commands.toml"))
    code, out, err = durable("resume", config, "nobody")
    assert (code, out) == (1, "")
    assert err == (
        "beamfilter durable resume: No durable turn 'nobody' exists; `beamfilter durable list` shows the turns.\n"
    )
    code, out, err = durable("resume", config, "nobody", "--approve", "x")
    assert (code, out) == (1, "")
    assert err == (
        "beamfilter durable resume: No durable turn 'nobody' exists; `beamfilter durable list` shows the turns.\n"
    )


def test_a_database_no_worker_ran_on_is_refused_with_what_to_do(local: Local) -> None:
    fresh = local.folder / "fresh.toml"
    database = f"sqlite:///{local.folder / 'fresh.db'}"
    fresh.write_text(f'[durable]\nuse = "dbos"\ndatabase = "{database}"\nkernel = "app:kernel"\n')
    code, out, err = durable("list", str(fresh))
    assert (code, out) == (1, "")
    assert err == (
        f"beamfilter durable list: The durable database {database!r} holds no durable turns: no worker has run on it "
        "(OperationalError: no such table: main.workflow_status). Start one (beamfilter durable worker CONFIG); "
        "it creates the engine's tables.\n"
    )
