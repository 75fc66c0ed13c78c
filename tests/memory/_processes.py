"""Worker processes of the crash tests: start ``_worker.py``, wait for its signal line, SIGKILL it."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from beamfilter_memory import ChatStore

WORKER = Path(__file__).with_name("_worker.py")


def spawn(mode: str, kind: str, store: ChatStore, cid: str) -> subprocess.Popen[str]:
    """Start a worker in ``mode`` on the same store (URL and table prefix) as ``store``."""
    url, prefix = store.url, getattr(store, "prefix", "")  # type: ignore[attr-defined]
    return subprocess.Popen(
        [sys.executable, str(WORKER), mode, kind, url, cid, prefix],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=str(WORKER.parent),
    )


def wait_line(proc: subprocess.Popen[str], expected: str) -> None:
    """Block until the worker prints ``expected``; fail with its stderr if it prints anything else."""
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if line != expected:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise AssertionError(f"worker printed {line!r}, expected {expected!r}; stderr:\n{err}")


def kill(proc: subprocess.Popen[str]) -> None:
    """SIGKILL the worker and reap it."""
    proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def wait_then_kill(proc: subprocess.Popen[str], expected: str) -> None:
    """Wait for ``expected``, then SIGKILL the worker right there."""
    wait_line(proc, expected)
    kill(proc)
