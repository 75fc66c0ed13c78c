"""Instruction counts of ways to bind a filter layer for a run (issue 14 §5).

A script, not a timed test: each design builds 20 pass-through layers (and their states)
per simulated run and passes through them once, as a no-tool turn does; it runs itself
under ``valgrind --tool=callgrind`` with 20 layers and with none and prints the
difference per layer and run, next to the floor (20 plain nested async closures, built
once). Instruction counts do not depend on the machine's load.

- ``defaults``: one ``async def`` per layer and run, hook, state, inner call, name and
  return check as default values (the binding `_chain` uses);
- (keyword-only defaults, ``*,`` before ``hook`` in ``defaults``, were measured by editing
  that one line: bench/RESULTS.md;)
- ``plain``: a plain ``call_next`` returning the hook's coroutine, no attribution at all
  (a bound on what dropping the attribution wrapper could give);
- ``link``: layer functions made once per kernel, bound per run as methods of one list
  (tried in the kernel and not kept: bench/RESULTS.md, "Layers bound as methods").

Run it with::

    .venv/bin/python bench/bench_layer_designs.py
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Coroutine
from itertools import repeat
from types import MethodType
from typing import Any

from bench_instructions import TURNS as RUNS
from bench_instructions import _floor

LAYERS = 20
Go = Callable[[], Coroutine[Any, Any, None]]


async def passthrough(request: Any, state: Any, call_next: Any) -> Any:
    return await call_next(request)


def own(exc: BaseException, name: str) -> None:
    """Stands for ``_chain._own``: called only when a hook raises."""


async def terminal(request: Any) -> Any:
    return request


def floor(n: int) -> Go:
    return lambda: _floor(n)  # bench_instructions' floor: RUNS passes through n closures


def defaults(n: int) -> Go:
    hooks = [(i, passthrough, f"l{i}") for i in range(n)][::-1]

    async def go() -> None:
        for _ in range(RUNS):
            states: list[dict[str, Any]] = [{} for _ in range(n)]
            call: Any = terminal
            checked = None
            for index, hook, name in hooks:

                async def layer(
                    request: Any, hook: Any = hook, state: Any = states[index], call_next: Any = call,
                    name: str = name, checked: Any = checked,
                ) -> Any:  # fmt: skip
                    try:
                        result = await hook(request, state, call_next)
                    except Exception as exc:
                        own(exc, name)
                        raise
                    if checked is not None and type(result) is not checked.returns:
                        raise TypeError(name)
                    return result

                call = layer
            await call(None)

    return go


def plain(n: int) -> Go:
    hooks = [(i, passthrough) for i in range(n)][::-1]

    async def go() -> None:
        for _ in range(RUNS):
            states: list[dict[str, Any]] = [{} for _ in range(n)]
            call: Any = terminal
            for index, hook in hooks:

                def layer(request: Any, hook: Any = hook, state: Any = states[index], call_next: Any = call) -> Any:
                    return hook(request, state, call_next)

                call = layer
            await call(None)

    return go


def link(n: int) -> Go:
    def make(hook: Any, name: str, position: int) -> Any:
        state_at, inner_at, checked = n + 1 + position, position + 1, None

        async def layer(link: list[Any], request: Any) -> Any:
            try:
                result = await hook(request, link[state_at], link[inner_at])
            except Exception as exc:
                own(exc, name)
                raise
            if checked is not None and type(result) is not checked.returns:
                raise TypeError(name)
            return result

        return layer

    functions = [make(passthrough, f"l{i}", i) for i in range(n)]
    indexes = tuple(range(n))

    async def go() -> None:
        for _ in range(RUNS):
            states: list[dict[str, Any]] = [{} for _ in range(n)]
            bound: list[Any] = []
            bound += map(MethodType, functions, repeat(bound))
            bound.append(terminal)
            bound += map(states.__getitem__, indexes)
            await bound[0](None)
            bound.clear()

    return go


DESIGNS: dict[str, Callable[[int], Go]] = {
    "floor": floor,
    "defaults": defaults,
    "plain": plain,
    "link": link,
}


def _count(design: str, n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, __file__, design, str(n)]
        out = subprocess.run(
            ["valgrind", "--tool=callgrind", f"--callgrind-out-file={tmp}/out", *command],
            capture_output=True,
            text=True,
            check=True,
        ).stderr
    return int(re.search(r"Collected : (\d+)", out).group(1))  # type: ignore[union-attr]


def main() -> None:
    if len(sys.argv) == 3:
        asyncio.run(DESIGNS[sys.argv[1]](int(sys.argv[2]))())
        return
    per = {d: (_count(d, LAYERS) - _count(d, 0)) / (LAYERS * RUNS) for d in DESIGNS}
    for design, cost in per.items():
        print(f"{design:9} {cost:7,.0f} instructions per layer and run  {cost / per['floor']:.2f}x the floor")


if __name__ == "__main__":
    main()
