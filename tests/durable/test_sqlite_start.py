"""Workers started at once on a new SQLite file all get a WAL connection (no "database is
locked" from the journal-mode switch, which SQLite does not retry on its own)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("beamfilter_durable")

_WORKER = """
import sys, time
from beamfilter_durable._dbos import sqlite_engine
start = float(sys.argv[2])
time.sleep(max(0.0, start - time.time()))
engine = sqlite_engine(sys.argv[1])
with engine.connect() as conn:
    print(conn.exec_driver_sql("PRAGMA journal_mode").scalar())
engine.dispose()
"""


def test_six_workers_opening_a_new_file_at_once_all_use_wal(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'dbos.db'}"
    start = time.time() + 3.0  # every process is imported and waiting before this moment
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, url, str(start)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for _ in range(6)
    ]
    results = [worker.communicate(timeout=120) for worker in workers]
    assert [(worker.returncode, out) for worker, (out, _err) in zip(workers, results, strict=True)] == [
        (0, "wal\n")
    ] * 6, [err[-500:] for _out, err in results]
