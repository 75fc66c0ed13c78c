"""A durable turn that kills its own process in the middle, and a second process that
finishes it: the first tool call is not repeated, the one that was running is.

    python examples/durable_crash.py            # uses a temporary folder
    python examples/durable_crash.py --dir DIR  # keep the databases in DIR

The turn books a trip in two tool calls. The first process runs ``book_flight``, then dies
(SIGKILL) inside ``book_hotel``. The second process starts the same turn id: the engine
recovers it, replays the model call and ``book_flight`` from the record, runs
``book_hotel`` again (it was killed while running) and the final model call.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_durable import DurableOptions, DurableRunner, idempotency_key, shutdown

HERE = Path(__file__).resolve().parent
TURN = "trip-42"


def _log(line: str) -> None:
    with open(os.path.join(os.environ["TRIP_DIR"], "tools.log"), "a") as out:
        out.write(f"{os.getpid()} {line}\n")


@tool
def book_flight(city: str, context: dict[str, Any]) -> str:
    """Book a flight to ``city``."""
    _log(f"book_flight {city} key={idempotency_key(context)}")
    return f"flight to {city} booked"


@tool
def book_hotel(city: str, context: dict[str, Any]) -> str:
    """Book a hotel in ``city``."""
    _log(f"book_hotel {city} key={idempotency_key(context)}")
    marker = Path(os.environ["TRIP_DIR"]) / "crashed-once"
    if not marker.exists():
        marker.write_text("the first process died here")
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies inside this tool call
    return f"hotel in {city} booked"


def plan(request: ChatRequest) -> ChatResponse:
    done = [m.text for m in request.messages if m.role == "tool"]
    if not done:
        return ChatResponse.tool_calls(ToolCall("book_flight", {"city": "Lisbon"}, id="flight"))
    if len(done) == 1:
        return ChatResponse.tool_calls(ToolCall("book_hotel", {"city": "Lisbon"}, id="hotel"))
    return ChatResponse.from_text("Your trip is booked: " + " and ".join(done) + ".")


def kernel() -> Kernel:
    """The kernel every process rebuilds by name (``durable_crash:kernel``)."""
    return Kernel(ScriptedModel([plan], repeat=True), tools=[book_flight, book_hotel])


def run_turn(folder: Path) -> None:
    """Run (or recover) the turn and print its answer."""
    sys.path.insert(0, str(HERE))
    runner = DurableRunner("durable_crash:kernel", DurableOptions(database=f"sqlite:///{folder / 'turns.db'}"))

    async def main() -> None:
        result = await runner.run("Book me a trip to Lisbon", turn_id=TURN)
        print(f"{result.status}: {result.text}")
        await runner.aclose()

    try:
        asyncio.run(main())
    finally:
        shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", help="folder for the databases (default: a temporary one)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run_turn(Path(os.environ["TRIP_DIR"]))
        return 0
    folder = Path(args.dir or tempfile.mkdtemp(prefix="durable-crash-"))
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TRIP_DIR": str(folder)}
    command = [sys.executable, __file__, "--child"]
    first = subprocess.run(command, env=env, capture_output=True, text=True)
    print(f"first process: exit {first.returncode} (killed by SIGKILL: {first.returncode == -signal.SIGKILL})")
    second = subprocess.run(command, env=env, capture_output=True, text=True)
    print(f"second process: {second.stdout.strip()}")
    print("tool calls, by process:")
    pids: dict[str, str] = {}
    for line in (folder / "tools.log").read_text().splitlines():
        pid, rest = line.split(" ", 1)
        name = pids.setdefault(pid, "first" if not pids else "second")
        print(f"  {name}: {rest}")
    return 0 if second.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
