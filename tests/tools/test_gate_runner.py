"""tools/gate.py, the gate's runner: real nox runs of a small noxfile whose sessions meet
through files (so overlap is shown by what they saw, never by timing), one log per
session, the tail of a failed one, the summary table, exit status, and Ctrl-C/SIGTERM."""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("gate_under_test", ROOT / "tools" / "gate.py")
assert _spec is not None
assert _spec.loader is not None
gate = importlib.util.module_from_spec(_spec)
sys.modules["gate_under_test"] = gate  # dataclasses look their module up
_spec.loader.exec_module(gate)

pytestmark = pytest.mark.slow

# Sessions meet through marker files in $GATE_EVENTS: `waits` waits (up to 120 s) for
# `quick` to have started, so it sees `quick` only when both run at once.
NOXFILE = """
import os, pathlib, time
import nox

nox.options.sessions = {sessions!r}
nox.options.error_on_missing_interpreters = False
EVENTS = pathlib.Path(os.environ["GATE_EVENTS"])


def mark(name):
    (EVENTS / name).touch()
    with open(EVENTS / "order", "a") as out:
        out.write(name + "\\n")


def saw(name, seconds):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if (EVENTS / name).exists():
            return True
        time.sleep(0.05)
    return False


@nox.session(venv_backend="none")
def waits(session):
    mark("waits-start")
    seen = saw("quick-start", float(os.environ.get("GATE_WAIT", "120")))
    mark("waits-saw-quick" if seen else "waits-alone")
    mark("waits-end")


@nox.session(venv_backend="none")
def quick(session):
    mark("quick-start")
    print("quick says hello")
    mark("quick-end")


@nox.session(venv_backend="none")
def broken(session):
    mark("broken-start")
    for n in range(200):
        print(f"broken line {{n}}")
    session.error("broken on purpose")


@nox.session(venv_backend="none")
def sleeper(session):
    (EVENTS / "sleeper.pid").write_text(str(os.getpid()))
    mark("sleeper-start")
    time.sleep(600)


@nox.session(python="2.1")
def ancient(session):
    pass


@nox.session(venv_backend="none")
def coverage(session):
    mark("coverage-start")
"""


def write_noxfile(folder: Path, sessions: list[str]) -> Path:
    noxfile = folder / "noxfile.py"
    noxfile.write_text(textwrap.dedent(NOXFILE.format(sessions=sessions)))
    (folder / "events").mkdir()
    return noxfile


def run_gate(
    folder: Path, sessions: list[str], *args: str, wait: float = 120
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    noxfile = write_noxfile(folder, sessions)
    env = {**os.environ, "GATE_EVENTS": str(folder / "events"), "GATE_WAIT": str(wait)}
    env.pop("CI", None)
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gate.py"), "--noxfile", str(noxfile), "--logs", str(folder / "logs"),
         *args],
        capture_output=True, text=True, env=env, timeout=600, check=False,
    )  # fmt: skip
    order = (folder / "events" / "order").read_text().split() if (folder / "events" / "order").exists() else []
    return done, order


def test_two_sessions_run_at_once_each_to_its_own_log(tmp_path: Path) -> None:
    done, order = run_gate(tmp_path, ["waits", "quick", "coverage"])
    assert done.returncode == 0, done.stderr
    assert "waits-saw-quick" in order  # `waits` was still running when `quick` started
    assert order[-1] == "coverage-start"  # coverage runs after every other session
    assert order.index("coverage-start") > max(order.index("waits-end"), order.index("quick-end"))
    assert "quick says hello" in (tmp_path / "logs" / "quick.log").read_text()
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["coverage.log", "quick.log", "waits.log"]
    lines = done.stderr.splitlines()
    assert lines[0] == "[gate] 3 sessions, 2 at a time: waits, quick, coverage"
    table = lines[lines.index(next(line for line in lines if line.startswith("[gate] session "))) :]
    assert [line.split()[1:3] for line in table[1:4]] == [["waits", "passed"], ["quick", "passed"],
                                                          ["coverage", "passed"]]  # fmt: skip
    assert table[4].startswith("[gate] all sessions passed; ")


def test_one_job_runs_one_session_at_a_time(tmp_path: Path) -> None:
    done, order = run_gate(tmp_path, ["waits", "quick"], "--jobs", "1", wait=2)
    assert done.returncode == 0, done.stderr
    # the longest expected first (both unknown: the noxfile's order), and never side by side
    assert order == ["waits-start", "waits-alone", "waits-end", "quick-start", "quick-end"]


def test_a_failed_session_shows_its_tail_fails_the_gate_and_coverage_is_not_run(tmp_path: Path) -> None:
    done, order = run_gate(tmp_path, ["broken", "quick", "coverage"], "--tail", "3")
    assert done.returncode == 1
    assert "coverage-start" not in order
    err = done.stderr
    log = tmp_path / "logs" / "broken.log"
    assert f"[gate] broken: the last 3 lines of {log}:\n" in err
    tail = log.read_text().splitlines()[-3:]
    assert tail[-1].endswith("Session broken aborted: broken on purpose.")
    assert "\n".join(tail) + "\n[gate] end of broken's log" in err
    assert "broken line 199" in log.read_text()
    assert "broken line 150" not in err  # only the tail is printed
    assert "[gate] coverage not run: broken failed" in err
    assert "[gate] FAILED: broken, coverage; " in err
    assert "(broken failed)" in err.splitlines()[-2]  # coverage's row says why


def test_ci_prints_the_whole_log_of_a_failed_session(tmp_path: Path) -> None:
    done, _ = run_gate(tmp_path, ["broken"], "--tail", "0")
    assert done.returncode == 1
    assert done.stderr.startswith("[gate] 1 session, 2 at a time: broken\n")
    assert "the whole log" in done.stderr
    assert "broken line 0\n" in done.stderr
    assert "broken line 199\n" in done.stderr


def test_a_session_skipped_for_a_missing_python_is_reported_and_does_not_fail(tmp_path: Path) -> None:
    done, _ = run_gate(tmp_path, ["ancient", "quick"])
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("[gate] 2 sessions, 2 at a time: quick, ancient\n")
    assert "[gate] ancient skipped in " in done.stderr
    assert "[gate] all sessions passed; " in done.stderr


def test_sigterm_stops_the_running_sessions_and_their_processes(tmp_path: Path) -> None:
    noxfile = write_noxfile(tmp_path, ["sleeper", "quick"])
    env = {**os.environ, "GATE_EVENTS": str(tmp_path / "events")}
    runner = subprocess.Popen(
        [sys.executable, str(ROOT / "tools" / "gate.py"), "--noxfile", str(noxfile), "--logs", str(tmp_path / "logs"),
         "--jobs", "1", "sleeper", "quick"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    pid_file = tmp_path / "events" / "sleeper.pid"
    deadline = time.monotonic() + 120
    while not pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert pid_file.exists(), runner.communicate(timeout=30)
    nox_pid = int(pid_file.read_text())
    runner.send_signal(signal.SIGTERM)
    _, err = runner.communicate(timeout=120)
    assert runner.returncode == 130
    assert "[gate] stopping the running sessions" in err
    with pytest.raises(ProcessLookupError):
        os.kill(nox_pid, 0)
    assert "quick-start" not in (tmp_path / "events" / "order").read_text()  # nothing started after


def test_log_names_and_the_queue_order() -> None:
    assert gate.log_name("tests(package='beamfilter_core')") == "tests-beamfilter_core.log"
    assert gate.log_name("unit-3.12") == "unit-3.12.log"
    assert gate.log_name("a(x=1, y='b c')") == "a-1-b_c.log"
    queue, last = gate.queue_order(["lint", "coverage", "cross", "new", "unit-3.12"])
    assert (queue, last) == (["cross", "unit-3.12", "new", "lint"], ["coverage"])


def test_every_default_session_has_an_expected_time() -> None:
    sessions = gate.default_sessions(ROOT / "noxfile.py")
    assert [name for name in sessions if name not in gate.LAST] == list(gate.EXPECTED_SECONDS)
    assert sessions[-1] == "coverage"


def test_the_summary_table() -> None:
    outcomes = [
        gate.Outcome("cross", "passed", 367.4, ROOT / ".gate" / "logs" / "cross.log"),
        gate.Outcome("unit-3.12", "failed", 59.6, ROOT / ".gate" / "logs" / "unit-3.12.log"),
        gate.Outcome("coverage", "not run", 0.0, None, "unit-3.12 failed"),
    ]
    assert gate.summary(outcomes, 400.2) == [
        "session    result          time  log",
        "cross      passed    6 min 07 s  .gate/logs/cross.log",
        "unit-3.12  failed    1 min 00 s  .gate/logs/unit-3.12.log",
        "coverage   not run          0 s  -  (unit-3.12 failed)",
        "FAILED: unit-3.12, coverage; 6 min 40 s in all (the sessions' own times add up to 7 min 07 s)",
    ]


def test_nox_reports_are_read_for_the_result(tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"sessions": [{"result": "success"}]}))
    assert gate._result(report, 0) == "passed"
    assert gate._result(report, 1) == "failed"
    report.write_text(json.dumps({"sessions": [{"result": "skipped"}]}))
    assert gate._result(report, 0) == "skipped"
    report.write_text(json.dumps({"sessions": [{"result": "failed"}]}))
    assert gate._result(report, 0) == "failed"
    assert gate._result(tmp_path / "missing.json", 0) == "failed"  # nox died before its report
