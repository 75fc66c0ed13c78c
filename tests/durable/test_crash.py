"""Crash tests: 3 worker processes on one system database (SQLite file, PostgreSQL), 50
turns of 2-4 tool calls on a queue, 15 random SIGKILLs, restarts (about a minute per
database on an idle machine)."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from durable._crash import run_crash_scenario

pytestmark = pytest.mark.slow

SCALES = [pytest.param(50, 15, id="50-turns")]


@pytest.mark.parametrize(("turns", "kills"), SCALES)
def test_sqlite_workers_recover_every_turn_exactly_once(tmp_path: Path, turns: int, kills: int) -> None:
    report = run_crash_scenario(
        folder=tmp_path,
        database=f"sqlite:///{tmp_path / 'dbos.db'}",
        ledger=f"sqlite:///{tmp_path / 'ledger.db'}",
        memory=f"sqlite:///{tmp_path / 'memory.db'}",
        turns=turns,
        kills=kills,
        seed=turns * 7 + 1,
    )
    print("sqlite", report)
    assert len(report["kills"]) >= 1


@pytest.mark.services
@pytest.mark.parametrize(("turns", "kills"), SCALES)
def test_postgres_workers_recover_every_turn_exactly_once(
    tmp_path: Path, postgres_url: str, turns: int, kills: int
) -> None:
    import psycopg

    name = f"crash_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    url = postgres_url.rsplit("/", 1)[0] + f"/{name}"
    report = run_crash_scenario(
        folder=tmp_path, database=url, ledger=url, memory=url, turns=turns, kills=kills, seed=turns * 11 + 3
    )
    print("postgres", report)
    assert len(report["kills"]) >= 1
