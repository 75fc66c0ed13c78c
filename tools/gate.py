"""The gate's runner: the default nox sessions, several at a time, each to its own log.

    python tools/gate.py [--jobs N] [--logs DIR] [--noxfile FILE] [SESSION ...]

``./run test`` runs it with no arguments: every default session of ``noxfile.py``. The
sessions wait in one queue, longest first (``EXPECTED_SECONDS``), and ``--jobs`` workers
(default 2) take the next one when theirs ends, so the long ``cross`` and ``unit``
sessions start at once and the short ones fill the gaps. ``coverage`` runs after all the
others: it combines their data. Each session writes ``DIR/<session>.log`` (default
``.gate/logs``); a session that fails has its log's last lines printed when it ends (the
whole log when ``CI`` is set, where the folder is gone with the machine). The end is a
table of each session's result and time; the exit status is 1 when one failed.

Sessions running at once share nothing they write: each has its own venv under .nox/,
its own coverage data file (``parallel = true``), pytest's own numbered temp folders, and
the servers the tests start (PostgreSQL, Redis, the peers, the gateway) take a free port
and a temp folder each. ``--jobs 1`` runs one session at a time through the same runner;
``./run test --serial`` runs plain ``nox`` instead, without this runner.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: Run after every other session, one at a time, in this order.
LAST = ("coverage",)

#: About how long each session takes on an idle two-core machine: only the queue's order
#: depends on it (a session not listed counts as a minute). Measured on the fresh-clone gate
#: of 1196120 (each log's first and last write), less the 30 s that
#: test_memory_migrate_failure_masks_the_password spent waiting on a pool before f02f3be.
#: With ``durable`` queued second, as these figures put it, two workers end within 10 s of
#: each other; queued last, as the old figures put it, they ended 2 min 15 s apart.
EXPECTED_SECONDS: dict[str, float] = {
    "lint": 1,
    "typecheck": 14,
    "cross": 253,
    "tests(package='beamfilter_core')": 70,
    "tests(package='beamfilter_builtins')": 129,
    "tests(package='beamfilter_memory')": 108,
    "tests(package='beamfilter_durable')": 229,
    "alone(distribution='beamfilter_server')": 19,
    "alone(distribution='beamfilter')": 26,
    "unit-3.12": 133,
    "unit-3.13": 137,
}
_UNKNOWN_SECONDS = 60


@dataclass
class Outcome:
    """How one session ended."""

    session: str
    result: str  # "passed", "failed", "skipped" or "not run"
    seconds: float
    log: Path | None
    note: str = ""


def log_name(session: str) -> str:
    """The log file of a session: ``tests(package='beamfilter_core')`` -> ``tests-beamfilter_core.log``."""
    inner = re.sub(r"^[^(]*\(|\)$", "", session) if "(" in session else ""
    values = [value for _key, value in re.findall(r"(\w+)='?([^',]*)'?", inner)]
    stem = session.split("(", 1)[0]
    name = "-".join([stem, *values]) if values else stem
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name) + ".log"


def queue_order(
    sessions: Sequence[str], expected: Mapping[str, float] = EXPECTED_SECONDS
) -> tuple[list[str], list[str]]:
    """(the sessions the workers share, longest first; the ones run after them, in ``LAST``'s order)."""
    last = [name for name in LAST if name in sessions]
    rest = [name for name in sessions if name not in LAST]
    # a stable sort: sessions expected to take as long keep the noxfile's order
    rest.sort(key=lambda name: -expected.get(name, _UNKNOWN_SECONDS))
    return rest, last


def duration(seconds: float) -> str:
    """``42 s``, ``6 min 07 s``."""
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    return f"{whole // 60} min {whole % 60:02d} s"


def summary(outcomes: Sequence[Outcome], wall: float) -> list[str]:
    """The table printed at the end: each session's result and time, then the totals."""
    width = max([len("session"), *(len(o.session) for o in outcomes)])
    lines = [f"{'session':<{width}}  {'result':<7}  {'time':>11}  log"]
    for o in outcomes:
        where = str(o.log.relative_to(ROOT) if o.log and o.log.is_relative_to(ROOT) else o.log or "-")
        note = f"  ({o.note})" if o.note else ""
        lines.append(f"{o.session:<{width}}  {o.result:<7}  {duration(o.seconds):>11}  {where}{note}")
    failed = [o.session for o in outcomes if o.result in ("failed", "not run")]
    verdict = f"FAILED: {', '.join(failed)}" if failed else "all sessions passed"
    total = sum(o.seconds for o in outcomes)
    lines.append(f"{verdict}; {duration(wall)} in all (the sessions' own times add up to {duration(total)})")
    return lines


def default_sessions(noxfile: Path, python: str = sys.executable) -> list[str]:
    """The sessions ``nox`` runs with no ``-s`` (the noxfile's ``nox.options.sessions``), expanded."""
    listed = subprocess.run(
        [python, "-m", "nox", "-f", str(noxfile), "--list", "--json"],
        capture_output=True,
        text=True,
        check=True,
        cwd=noxfile.parent,
    )
    # --list --json names the selected sessions only, "session" with its parameters
    return [entry["session"] for entry in json.loads(listed.stdout)]


def _tail(path: Path, lines: int) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:] if lines else text)


class Runner:
    """Runs sessions with ``jobs`` workers; prints a line as each one starts and ends."""

    def __init__(
        self,
        noxfile: Path,
        logs: Path,
        *,
        jobs: int,
        tail: int,
        say: Callable[[str], None] | None = None,
    ) -> None:
        self.noxfile = noxfile
        self.logs = logs
        self.jobs = jobs
        self.tail = tail
        self.say = say or (lambda line: print(f"[gate] {line}", file=sys.stderr, flush=True))
        self._lock = threading.Lock()
        self._running: dict[str, subprocess.Popen[bytes]] = {}
        self._stopping = False

    def run(self, sessions: Sequence[str]) -> list[Outcome]:
        """Every session (the shared queue, then ``LAST``); outcomes in the order given."""
        self.logs.mkdir(parents=True, exist_ok=True)
        queue, last = queue_order(sessions)
        outcomes: dict[str, Outcome] = {}
        pending = list(queue)

        def worker() -> None:
            while True:
                with self._lock:
                    if not pending or self._stopping:
                        return
                    name = pending.pop(0)
                outcomes[name] = self.one(name)

        workers = [threading.Thread(target=worker, name=f"gate-{i}", daemon=True) for i in range(self.jobs)]
        for thread in workers:
            thread.start()
        for thread in workers:
            while thread.is_alive():
                thread.join(0.2)  # a short join keeps Ctrl-C working
        for name in last:
            failed = [o.session for o in outcomes.values() if o.result in ("failed", "not run")]
            if failed or self._stopping:
                why = "stopped" if self._stopping else f"{', '.join(failed)} failed"
                outcomes[name] = Outcome(name, "not run", 0.0, None, why)
                self.say(f"{name} not run: {why}")
            else:
                outcomes[name] = self.one(name)
        for name in sessions:
            if name not in outcomes:
                outcomes[name] = Outcome(name, "not run", 0.0, None, "stopped")
        return [outcomes[name] for name in sessions]

    def one(self, session: str) -> Outcome:
        """Run one session to its log; print its end (and the log's tail when it failed)."""
        log = self.logs / log_name(session)
        with tempfile.TemporaryDirectory(prefix="beamfilter-gate-") as folder:
            report = Path(folder) / "report.json"
            argv = [sys.executable, "-m", "nox", "-f", str(self.noxfile), "-s", session, "--report", str(report)]
            argv += ["--reuse-venv", "yes"]  # as ./run always ran nox: a venv is made once, then updated
            start = time.monotonic()
            with open(log, "wb") as out, self._lock:
                if self._stopping:
                    return Outcome(session, "not run", 0.0, None, "stopped")
                self.say(f"{session} started (log: {log})")
                # a session of its own: stop() ends nox and everything its tests started
                process = subprocess.Popen(
                    argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.noxfile.parent, start_new_session=True
                )
                self._running[session] = process
            code = process.wait()
            with self._lock:
                self._running.pop(session, None)
            seconds = time.monotonic() - start
            result = _result(report, code)
        outcome = Outcome(session, result, seconds, log)
        self.say(f"{session} {result} in {duration(seconds)}")
        if result == "failed":
            shown = "the whole log" if not self.tail else f"the last {self.tail} lines of {log}"
            self.say(f"{session}: {shown}:\n{_tail(log, self.tail)}\n[gate] end of {session}'s log")
        return outcome

    def stop(self) -> None:
        """Stop the running sessions (their whole process groups) and start no more."""
        with self._lock:
            self._stopping = True
            running = list(self._running.values())
        for process in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in running:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)


def _result(report: Path, code: int) -> str:
    """passed / skipped / failed, from nox's JSON report (a session skipped for a missing
    Python exits 0 too) and its exit status."""
    try:
        sessions = json.loads(report.read_text(encoding="utf-8"))["sessions"]
    except (OSError, ValueError, KeyError):
        return "failed"  # nox stopped before writing its report
    results = {entry.get("result") for entry in sessions}
    if code != 0 or not results or results - {"success", "skipped"}:
        return "failed"
    return "passed" if "success" in results else "skipped"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools/gate.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("sessions", nargs="*", help="nox sessions to run (default: the noxfile's default sessions)")
    parser.add_argument(
        "--jobs", type=int, default=int(os.environ.get("BEAMFILTER_GATE_JOBS", "2")), help="sessions at once"
    )
    parser.add_argument("--logs", type=Path, default=ROOT / ".gate" / "logs", help="the folder of the logs")
    parser.add_argument("--noxfile", type=Path, default=ROOT / "noxfile.py")
    parser.add_argument(
        "--tail", type=int, default=0 if os.environ.get("CI") else 80, help="log lines shown on failure (0: all)"
    )
    args = parser.parse_args(argv)
    if args.jobs < 1:
        parser.error(f"--jobs is {args.jobs}; give 1 or more")
    noxfile = args.noxfile.resolve()
    sessions = args.sessions or default_sessions(noxfile)
    if args.logs.exists():
        shutil.rmtree(args.logs)  # no log of an earlier run is mistaken for this one's
    runner = Runner(noxfile, args.logs.resolve(), jobs=args.jobs, tail=args.tail)
    count = f"{len(sessions)} session{'' if len(sessions) == 1 else 's'}"
    runner.say(f"{count}, {args.jobs} at a time: {', '.join(sessions)}")
    if "coverage" in sessions:
        shutil.rmtree(noxfile.parent / ".coverage-data", ignore_errors=True)  # only this run's data is combined
    start = time.monotonic()

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_signal)
    try:
        outcomes = runner.run(sessions)
    except KeyboardInterrupt:
        runner.say("stopping the running sessions")
        runner.stop()
        return 130
    for line in summary(outcomes, time.monotonic() - start):
        runner.say(line)
    return 1 if any(o.result in ("failed", "not run") for o in outcomes) else 0


if __name__ == "__main__":
    sys.exit(main())
