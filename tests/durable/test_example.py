"""examples/durable_crash.py: a process dies inside a tool call mid-turn; another finishes the turn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "durable_crash.py"


def test_the_example_kills_itself_mid_turn_and_recovers(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), "--dir", str(tmp_path)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "first process: exit -9 (killed by SIGKILL: True)\n"
        "second process: completed: Your trip is booked: flight to Lisbon booked and hotel in Lisbon booked.\n"
        "tool calls, by process:\n"
        # book_flight completed before the kill: recorded, never run again
        "  first: book_flight Lisbon key=trip-42:2\n"
        # book_hotel was running when the process died: run again, with the same key
        "  first: book_hotel Lisbon key=trip-42:4\n"
        "  second: book_hotel Lisbon key=trip-42:4\n"
    )
