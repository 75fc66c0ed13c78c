"""Instruction counts of a filter layer and of the turns that never pause (issue 14 §5, issue 11).

A script, not a timed test: it runs itself under ``valgrind --tool=callgrind`` (which
counts instructions, whatever the machine's load) with two workloads that differ only in
what is measured, and prints the difference per unit:

- per layer: ``TURNS`` no-tool turns with 20 pass-through ``around_chat`` filters minus
  the same with none, per layer and turn; the floor is 20 plain nested async closures
  (built once) minus none, per layer and pass;
- per turn: bench_approvals' no-tool turn and one tool round (three pass-through chat and
  tool filters), 1,200 turns minus 200, per turn; ``--core DIR`` measures another tree's
  ``beamfilter_core`` (e.g. ``git archive 499cee3 beamfilter_core/src | tar -x -C /tmp/b``,
  then ``--core /tmp/b/beamfilter_core/src``).

Run it with::

    .venv/bin/python bench/bench_instructions.py [--core DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
from typing import Any

TURNS = 2000


async def _passthrough(request: Any, state: Any, call_next: Any) -> Any:
    return await call_next(request)


async def _layers(n: int) -> None:
    from beamfilter_core import ChatResponse, Filter, Kernel

    answer = ChatResponse.from_text("The answer is 3.")

    class Model:
        async def complete(self, request: Any) -> Any:
            return answer

        async def stream(self, request: Any, on_token: Any) -> Any:
            return answer

    kernel = Kernel(Model(), filters=[Filter(f"l{i}", around_chat=_passthrough) for i in range(n)])
    for _ in range(TURNS):
        await kernel.run("hi")


async def _floor(n: int) -> None:
    async def terminal(request: Any) -> Any:
        return request

    call: Any = terminal
    for _ in range(n):

        def wrap(inner: Any) -> Any:
            async def layer(request: Any) -> Any:
                return await inner(request)

            return layer

        call = wrap(call)
    for _ in range(TURNS):
        await call(None)


async def _turns(scenario: str, turns: int) -> None:
    import beamfilter_core as core

    @core.tool
    async def lookup(city: str) -> str:
        """Weather."""
        return "sunny"

    filters = [core.Filter(f"f{i}", around_chat=_passthrough, around_tool=_passthrough) for i in range(3)]
    call = core.ToolCall("lookup", {"city": "Oslo"}, "c1")
    script: list[Any] = ["Hi."] if scenario == "notool" else [core.ChatResponse.tool_calls(call), "Sunny."]
    kernel = core.Kernel(core.ScriptedModel(script * turns), tools=[lookup], filters=filters)
    for _ in range(turns):
        await kernel.run("weather in Oslo?")


def _count(args: list[str], core: str | None) -> int:
    env = dict(os.environ)
    if core:
        env["PYTHONPATH"] = core
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", sys.executable, __file__, *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))  # type: ignore[union-attr]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--core", help="a beamfilter_core source folder to measure instead of the installed one")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        kind, value = options.child[0], options.child[1:]
        if kind == "layers":
            asyncio.run(_layers(int(value[0])))
        elif kind == "floor":
            asyncio.run(_floor(int(value[0])))
        else:
            asyncio.run(_turns(value[0], int(value[1])))
        return
    core = options.core
    per_layer = (_count(["--child", "layers", "20"], core) - _count(["--child", "layers", "0"], core)) / (20 * TURNS)
    floor = (_count(["--child", "floor", "20"], None) - _count(["--child", "floor", "0"], None)) / (20 * TURNS)
    print(
        f"a filter added to a no-tool turn: {per_layer:,.0f} instructions; floor {floor:,.0f}; {per_layer / floor:.2f}x"
    )
    for scenario, label in (("notool", "no-tool turn"), ("tool", "one tool round")):
        cost = (
            _count(["--child", "turns", scenario, "1200"], core) - _count(["--child", "turns", scenario, "200"], core)
        ) / 1000
        print(f"{label} (3 chat + tool filters): {cost:,.0f} instructions per turn")


if __name__ == "__main__":
    main()
