"""A worker process for the crash tests: ``python _crash_worker.py MODE STORE_URL PREFIX CID BASE_URL``.

It runs a Kernel with the memory filter against llmock (a real HTTP server).

Modes:
- ``stream``: turn 1 completes; turn 2 streams an answer that stalls, ``mid-stream`` is
  printed at its first token, and the test SIGKILLs the process there.
- ``tool``: turn 1 completes; turn 2's tool hangs, ``mid-tool`` is printed inside it,
  and the test SIGKILLs the process there.
- ``continue``: one more turn ("third question"), printed as ``done: <answer>``.
"""

from __future__ import annotations

import asyncio
import sys

from beamfilter_core import Kernel, OpenAIChatModel, TextDelta, tool
from beamfilter_memory import memory_filter, open_store


@tool
async def lookup(city: str) -> str:
    """Weather of a city (hangs: the process is killed in here)."""
    print("mid-tool", flush=True)
    await asyncio.sleep(3600)
    return "unreachable"


async def main(mode: str, url: str, prefix: str, cid: str, base_url: str) -> None:
    store = open_store(url, prefix=prefix) if prefix else open_store(url)
    model = OpenAIChatModel("gpt-4o-mini", base_url=base_url, api_key="llmock-key", timeout=120)
    # Without tools llmock answers in text (with tools, its default answer calls one).
    kernel = Kernel(model, tools=[lookup] if mode == "tool" else [], filters=[memory_filter(store)])
    context = {"conversation_id": cid}
    try:
        if mode == "continue":
            result = await kernel.run("third question", context=context)
            print(f"done: {result.text}", flush=True)
            return
        await kernel.run("first question", context=context)
        print("turn 1 stored", flush=True)
        if mode == "stream":
            async for event in kernel.run_stream("second question", context=context):
                if isinstance(event, TextDelta):
                    print("mid-stream", flush=True)
        else:
            await kernel.run("second question", context=context)
        print("turn 2 finished: the test should have killed this process", flush=True)
    finally:
        await model.aclose()
        await store.aclose()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:6]))
