"""The application the durable tests run in real worker processes (imported by name).

A deterministic model (a ScriptedModel whose one item reads the request) asks for the tool
batches the prompt names, e.g. ``"turn t1: 2+1"`` = a parallel batch of two ``effect``
calls, then one more, then the answer. Each ``effect`` call writes its side effect to a
ledger database keyed by the call's idempotency key (``BF_LEDGER``), and counts every
entry, so the tests can prove each effect happened once and see which calls were re-run.
``BF_PHASE_DIR`` makes each process note what it is doing, for the kill reports.
"""

from __future__ import annotations

import asyncio
import os
import re
import sqlite3
import threading
import time
from typing import Any

from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_durable import idempotency_key

_PROMPT = re.compile(r"^turn (?P<turn>\S+): (?P<plan>pay|hold|\d(?:\+\d)*)$")
TOOL_SECONDS = float(os.environ.get("BF_TOOL_SECONDS", "0.05"))
LLM_SECONDS = float(os.environ.get("BF_LLM_SECONDS", "0.03"))


def _phase(what: str) -> None:
    folder = os.environ.get("BF_PHASE_DIR")
    if folder:
        # written aside and renamed: the killer never reads a half-written phase
        path = os.path.join(folder, str(os.getpid()))
        with open(f"{path}.{threading.get_ident()}", "w") as out:
            out.write(what)
        os.replace(f"{path}.{threading.get_ident()}", path)


# -- the ledger: effects keyed by idempotency key, and every entry ------------------------

LEDGER_TABLES = (
    "CREATE TABLE IF NOT EXISTS effects (key TEXT PRIMARY KEY, turn TEXT NOT NULL, amount INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS entries (key TEXT NOT NULL, pid INTEGER NOT NULL, finished INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS counter (name TEXT PRIMARY KEY, total INTEGER NOT NULL)",
    # how many `hold` calls run now, across all processes, and the most that ever ran at once
    "CREATE TABLE IF NOT EXISTS gauge (name TEXT PRIMARY KEY, running INTEGER NOT NULL, peak INTEGER NOT NULL)",
)


def _connect(url: str) -> Any:
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"), timeout=30, isolation_level=None)
        conn.execute("PRAGMA busy_timeout=30000")
        return conn
    import psycopg

    return psycopg.connect(url, autocommit=True)


def _sql(url: str, text: str) -> str:
    return text if url.startswith("sqlite") else text.replace("?", "%s")


def create_ledger(url: str) -> None:
    conn = _connect(url)
    try:
        for statement in LEDGER_TABLES:
            conn.execute(statement)
        conn.execute(_sql(url, "INSERT INTO counter VALUES (?, 0) ON CONFLICT DO NOTHING"), ("effects",))
        conn.execute(_sql(url, "INSERT INTO gauge VALUES (?, 0, 0) ON CONFLICT DO NOTHING"), ("hold",))
    finally:
        conn.close()


def read_ledger(url: str) -> dict[str, Any]:
    conn = _connect(url)
    try:
        effects = conn.execute("SELECT key, turn, amount FROM effects").fetchall()
        entries = conn.execute("SELECT key, pid, finished FROM entries").fetchall()
        total = conn.execute("SELECT total FROM counter WHERE name = 'effects'").fetchone()[0]
    finally:
        conn.close()
    return {"effects": effects, "entries": entries, "total": total}


def _apply(url: str, key: str, turn: str, amount: int) -> None:
    """The side effect, once per key: the effect row and the counter in one transaction."""
    conn = _connect(url)
    try:
        conn.execute("BEGIN")
        inserted = conn.execute(
            _sql(url, "INSERT INTO effects VALUES (?, ?, ?) ON CONFLICT DO NOTHING"), (key, turn, amount)
        ).rowcount
        if inserted:
            conn.execute(_sql(url, "UPDATE counter SET total = total + ? WHERE name = 'effects'"), (amount,))
        conn.execute("COMMIT")
    finally:
        conn.close()


def _note_entry(url: str, key: str, finished: int) -> None:
    conn = _connect(url)
    try:
        conn.execute(_sql(url, "INSERT INTO entries VALUES (?, ?, ?)"), (key, os.getpid(), finished))
    finally:
        conn.close()


@tool
def effect(turn: str, amount: int, context: dict[str, Any]) -> str:
    """Apply an effect of ``amount`` for ``turn``."""
    key = idempotency_key(context)
    url = os.environ.get("BF_LEDGER")
    if url and key:
        _phase(f"tool {key}")
        _note_entry(url, key, 0)
        time.sleep(TOOL_SECONDS)  # a kill lands here: inside the tool, before its effect
        _apply(url, key, turn, amount)
        _note_entry(url, key, 1)
        _phase(f"after tool {key}")
    return f"applied {amount} for {turn}"


def read_gauge(url: str) -> tuple[int, int]:
    """``(running, peak)`` of the ``hold`` calls."""
    conn = _connect(url)
    try:
        running, peak = conn.execute("SELECT running, peak FROM gauge WHERE name = 'hold'").fetchone()
    finally:
        conn.close()
    return int(running), int(peak)


def _move_gauge(url: str, step: int) -> None:
    # one statement: the database serialises the updates of all processes
    conn = _connect(url)
    try:
        conn.execute(
            _sql(
                url,
                "UPDATE gauge SET running = running + ?, "
                "peak = CASE WHEN running + ? > peak THEN running + ? ELSE peak END WHERE name = 'hold'",
            ),
            (step, step, step),
        )
    finally:
        conn.close()


@tool
async def hold(turn: str, context: dict[str, Any]) -> str:
    """Occupy the turn for ``BF_HOLD_SECONDS``, counted in the ledger's gauge while it runs."""
    key = idempotency_key(context)
    url = os.environ["BF_LEDGER"]
    await asyncio.to_thread(_note_entry, url, key or turn, 0)
    await asyncio.to_thread(_move_gauge, url, 1)
    try:
        await asyncio.sleep(float(os.environ.get("BF_HOLD_SECONDS", "0.5")))
    finally:
        await asyncio.to_thread(_move_gauge, url, -1)
    await asyncio.to_thread(_note_entry, url, key or turn, 1)
    return f"held {turn}"


@tool(sensitive=True)
def transfer(turn: str, amount: int, context: dict[str, Any]) -> str:
    """Transfer ``amount`` for ``turn`` (needs a human decision)."""
    key = idempotency_key(context)
    url = os.environ.get("BF_LEDGER")
    if url and key:
        _phase(f"transfer {key}")
        _note_entry(url, key, 0)
        if turn in os.environ.get("BF_SLOW_TRANSFER", "").split(","):
            time.sleep(60)  # a kill lands here: inside the approved call
        _apply(url, key, turn, amount)
        _note_entry(url, key, 1)
    return f"transferred {amount} for {turn}"


def gate(call: ToolCall, tool: Any, context: Any) -> str:
    return "pause"


# -- the model --------------------------------------------------------------------------


def plan_of(prompt: str) -> tuple[str, list[int]]:
    """``"turn t1: 2+1"`` -> ``("t1", [2, 1])``; ``"turn t1: pay"`` -> ``("t1", [0])`` (one transfer);
    ``"turn t1: hold"`` -> ``("t1", [-1])`` (one hold)."""
    match = _PROMPT.match(prompt)
    if match is None:
        raise ValueError(f"prompt {prompt!r} is not 'turn ID: N+M' or 'turn ID: pay'")
    if match["plan"] == "pay":
        return match["turn"], [0]
    if match["plan"] == "hold":
        return match["turn"], [-1]
    return match["turn"], [int(n) for n in match["plan"].split("+")]


async def reply(request: ChatRequest) -> ChatResponse:
    users = [m for m in request.messages if m.role == "user"]
    turn, plan = plan_of(users[-1].text)
    since = [m for m in request.messages[request.messages.index(users[-1]) :] if m.role == "assistant"]
    done_rounds = len(since)
    _phase(f"llm {turn} round {done_rounds}")
    await asyncio.sleep(LLM_SECONDS)
    if done_rounds < len(plan) and plan[done_rounds] == -1:
        return ChatResponse.tool_calls(ToolCall("hold", {"turn": turn}, id=f"{turn}-hold"))
    if done_rounds < len(plan) and plan[done_rounds] == 0:
        return ChatResponse.tool_calls(ToolCall("transfer", {"turn": turn, "amount": 5}, id=f"{turn}-pay"))
    if done_rounds < len(plan):
        calls = [
            ToolCall("effect", {"turn": turn, "amount": 10 * done_rounds + i + 1}, id=f"{turn}-r{done_rounds}-c{i}")
            for i in range(plan[done_rounds])
        ]
        return ChatResponse.tool_calls(*calls)
    results = [m.text for m in request.messages if m.role == "tool"]
    return ChatResponse.from_text(f"Turn {turn} is done after {len(results)} tool calls: " + "; ".join(results) + ".")


class SlowTake:
    """A memory store that stops after taking the pause of a conversation named in
    ``BF_SLOW_TAKE``: the taking is committed, the step that took it is not recorded."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> Any:
        taken = await self.inner.take_pause(conversation_id, pause_id)
        if taken is not None and conversation_id in os.environ.get("BF_SLOW_TAKE", "").split(","):
            _phase(f"took the pause of {conversation_id}")
            await asyncio.sleep(60)  # a kill lands here
        return taken


def kernel() -> Kernel:
    """The kernel of every durable test turn (memory in ``BF_MEMORY`` when set)."""
    filters = []
    memory = os.environ.get("BF_MEMORY")
    if memory:
        from beamfilter_memory import memory_filter, open_store

        filters.append(memory_filter(SlowTake(open_store(memory))))
    model = ScriptedModel([reply], repeat=True, chunk=4, token_delay=float(os.environ.get("BF_TOKEN_SECONDS", "0")))
    return Kernel(model, tools=[effect, transfer, hold], filters=filters, gate=gate)
