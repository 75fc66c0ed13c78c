"""`beamfilter chat` honours [durable]: each turn of the conversation is a DBOS workflow
(listed by `beamfilter durable list`), and the conversation continues from one turn to the
next through the memory filter."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from beamfilter_core import Message

pytestmark = pytest.mark.slow


def _config(folder: Path) -> Path:
    path = folder / "chat.toml"
    path.write_text(
        '[model]\nuse = "scripted"\nscript = ["Hello Ada.", "Your name is Ada."]\n\n'
        f'[[filters]]\nuse = "memory"\nstore = "sqlite:///{folder / "memory.db"}"\n\n'
        f'[durable]\nuse = "dbos"\ndatabase = "sqlite:///{folder / "dbos.db"}"\n'
    )
    return path


def _cli(folder: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamfilter_core", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=180,
        cwd=folder,
    )


def test_chat_runs_each_turn_as_a_durable_workflow_and_the_conversation_continues(tmp_path: Path) -> None:
    config = _config(tmp_path)
    chat = _cli(
        tmp_path,
        "chat",
        str(config),
        "--conversation-id",
        "ada",
        stdin="My name is Ada.\nWhat is my name?\n/exit\n",
    )
    assert chat.returncode == 0, chat.stderr
    # through a pipe, chat writes the answers only; the conversation id goes to stderr
    assert chat.stdout == "Hello Ada.\nYour name is Ada.\n", chat.stdout
    assert chat.stderr == "conversation: ada\n", chat.stderr

    listed = _cli(tmp_path, "durable", "list", str(config), "--prefix", "ada:")
    assert listed.returncode == 0, listed.stderr
    rows = [line.split()[:2] for line in listed.stdout.splitlines()]
    assert rows == [["ada:turn-2", "SUCCESS"], ["ada:turn-1", "SUCCESS"]]  # newest first

    shown = _cli(tmp_path, "durable", "show", str(config), "ada:turn-2")
    assert shown.returncode == 0, shown.stderr
    steps = [line.split()[-1] for line in shown.stdout.splitlines() if line.startswith("  step ")]
    assert steps == ["beamfilter.memory.load", "beamfilter.chat", "beamfilter.memory.append"]

    from beamfilter_memory import open_store

    async def stored() -> list[Message]:
        store = open_store(f"sqlite:///{tmp_path / 'memory.db'}")
        try:
            return await store.load("ada")
        finally:
            await store.aclose()

    # the second turn continued the first: one copy of each turn, in order
    assert [(m.role, m.text) for m in asyncio.run(stored())] == [
        ("user", "My name is Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
        ("assistant", "Your name is Ada."),
    ]
