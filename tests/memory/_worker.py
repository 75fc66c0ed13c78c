"""A separate process for the crash and multi-process tests: ``python _worker.py MODE KIND URL CID``.

Modes:
- ``append``: append batches of 10 messages forever, printing ``ready`` after the first;
  the test SIGKILLs it at some moment (often in the middle of a transaction).
- ``turn``: complete one turn, then start a second one that hangs inside its second LLM
  call (after a tool round trip), printing ``mid-turn``; the test SIGKILLs it there.
- ``pause``: run a turn that pauses on a sensitive tool, print ``paused`` and hang.
- ``writer``: append 40 batches of 5 messages to CID, then exit (several run at once).
- ``take``: connect, print ``ready``, wait for a line on stdin, then ``take_pause(CID,
  "p-race")`` once and print ``took`` or ``none`` (several race for one pause).
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any

from _tools import PAUSE_KEY, pause_gate, transfer, weather  # this folder: the worker runs as a script

from beamfilter_core import ChatResponse, Kernel, Message, ScriptedModel, ToolCall
from beamfilter_memory import ChatStore, memory_filter, open_store

BATCH = 10


def _open(kind: str, url: str, prefix: str) -> ChatStore:
    if kind in ("postgres", "redis"):
        return open_store(url, prefix=prefix)
    return open_store(url)


async def _hang(request: object) -> ChatResponse:
    print("mid-turn", flush=True)
    await asyncio.sleep(3600)
    raise AssertionError("unreachable")


async def main(mode: str, kind: str, url: str, cid: str, prefix: str) -> None:
    store = _open(kind, url, prefix)
    try:
        if mode == "append":
            batch = 0
            while True:
                payload = "x" * 2000
                await store.append(cid, [Message.user(f"{batch}:{index}:{payload}") for index in range(BATCH)])
                if batch == 0:
                    print("ready", flush=True)
                batch += 1
        elif mode == "writer":
            for batch in range(40):
                await store.append(cid, [Message.user(f"{os.getpid()}:{batch}:{index}") for index in range(5)])
        elif mode == "take":
            await store.load_pause(cid)  # connected before the race starts
            print("ready", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
            taken = await store.take_pause(cid, "p-race")
            print("took" if taken is not None else "none", flush=True)
        elif mode == "turn":
            script: list[Any] = [
                "first answer",
                ChatResponse.tool_calls(ToolCall("weather", {"city": "Oslo"}, "call_1")),
                _hang,
            ]
            kernel = Kernel(ScriptedModel(script), tools=[weather], filters=[memory_filter(store)])
            await kernel.run("first question", context={"conversation_id": cid})
            await kernel.run("second question", context={"conversation_id": cid})
        elif mode == "pause":
            script = [ChatResponse.tool_calls(ToolCall("transfer", {"amount": 5}, "call_t"))]
            kernel = Kernel(
                ScriptedModel(script),
                tools=[transfer],
                filters=[memory_filter(store)],
                gate=pause_gate,
                pause_key=PAUSE_KEY,
            )
            result = await kernel.run("pay 5", context={"conversation_id": cid})
            print(result.status, flush=True)
            await asyncio.sleep(3600)
    finally:
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
