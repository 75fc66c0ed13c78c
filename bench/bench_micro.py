"""The core's micro-optimisations, each against this tree without it (issue 14 §5).

A script, not a timed test. Each variant is this tree's ``beamfilter_core`` copied to a
temporary folder with one optimisation undone, imported side by side with the real one
(or run in child processes for import time), and timed in interleaved rounds; the ratio
is variant / this tree, so a ratio above 1 is what the optimisation saves.

- the slot descriptor: ``TextDelta`` sets its slot directly instead of attrs' frozen
  ``__init__``;
- the inlined push: ``Channel.push_text`` does what ``push`` does instead of calling it;
- the lazy ``asyncio``: the five modules that use asyncio bind a stand-in that imports it
  on first use (measured: ``import beamfilter_core`` with asyncio imported eagerly).

Run it with::

    .venv/bin/python bench/bench_micro.py
"""

from __future__ import annotations

import importlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import beamfilter_core._streaming as current

SOURCE = Path(current.__file__).resolve().parent
TOKENS = [f"t{i % 10} " for i in range(10_000)]

SLOT = (
    '''@attrs.frozen(slots=True, init=False)
class TextDelta:
    """A piece of the answer's text, after token transforms."""

    text: str

    def __init__(self, text: str) -> None:
        # One per streamed token: set the slot directly instead of attrs' frozen
        # __init__, which builds a bound object.__setattr__ for every instance.
        _set_text(self, text)


_set_text = TextDelta.__dict__["text"].__set__  # the slot's member descriptor
''',
    '''@attrs.frozen(slots=True)
class TextDelta:
    """A piece of the answer's text, after token transforms."""

    text: str
''',
)
INLINE = (
    """        # push() inlined: this runs once per streamed token.
        self.items.append(TextDelta(text))
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
""",
    """        self.push(TextDelta(text))
""",
)
LAZY = re.compile(r'(?m)^    asyncio = lazy_module\("asyncio", globals\(\)\)$')


def variant(into: Path, name: str, edit: Callable[[Path], None]) -> Path:
    """A copy of this tree's core as the package ``beamfilter_core_<name>``, edited."""
    package = into / name / f"beamfilter_core_{name}"
    shutil.copytree(SOURCE, package, ignore=shutil.ignore_patterns("__pycache__"))
    edit(package)
    return package


def replace_in(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    if old not in text:
        msg = f"{path}: the code this variant undoes has changed; update bench_micro.py"
        raise RuntimeError(msg)
    path.write_text(text.replace(old, new))


def eager_asyncio(package: Path) -> None:
    for path in package.rglob("*.py"):
        text = path.read_text()
        if LAZY.search(text):
            path.write_text(LAZY.sub("    import asyncio", text))


def push_tokens(module: Any) -> Callable[[], None]:
    def run() -> None:
        channel = module.Channel()
        push = channel.push_text
        for token in TOKENS:
            push(token)

    return run


def per_token_ns(bodies: dict[str, Callable[[], None]], rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {name: [] for name in bodies}
    for _ in range(rounds):
        for name, body in bodies.items():
            started = time.process_time()
            body()
            samples[name].append((time.process_time() - started) / len(TOKENS) * 1e9)
    return {name: statistics.median(values) for name, values in samples.items()}


def import_ms(path: str, module: str, runs: int) -> list[float]:
    samples = []
    env = dict(os.environ, PYTHONPATH=path)
    for _ in range(runs):
        before = os.times()
        subprocess.run([sys.executable, "-c", f"import {module}"], check=True, env=env)
        after = os.times()
        samples.append(after.children_user + after.children_system - before.children_user - before.children_system)
    return samples


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="beamfilter-micro-") as tmp:
        root = Path(tmp)
        noslot = variant(root, "noslot", lambda p: replace_in(p / "_streaming.py", *SLOT))
        noinline = variant(root, "noinline", lambda p: replace_in(p / "_streaming.py", *INLINE))
        eager = variant(root, "eager", eager_asyncio)
        sys.path[:0] = [str(noslot.parent), str(noinline.parent)]
        bodies = {
            "this tree": push_tokens(current),
            "without the slot descriptor": push_tokens(importlib.import_module("beamfilter_core_noslot._streaming")),
            "without the inlined push": push_tokens(importlib.import_module("beamfilter_core_noinline._streaming")),
        }
        for body in bodies.values():
            body()  # warm up
        figures = per_token_ns(bodies, 31)
        base = figures["this tree"]
        print("Channel.push_text for 10,000 tokens, CPU ns per token, median of 31 interleaved rounds")
        for name, value in figures.items():
            print(f"  {name:<30} {value:8.1f} ns  {value / base:5.2f}x")
        print("import beamfilter_core in a child process, CPU ms, median of interleaved runs")
        source = str(SOURCE.parent)
        ours: list[float] = []
        theirs: list[float] = []
        for _ in range(15):
            ours += import_ms(source, "beamfilter_core", 1)
            theirs += import_ms(str(eager.parent), "beamfilter_core_eager", 1)
        lazy_ms, eager_ms = statistics.median(ours) * 1000, statistics.median(theirs) * 1000
        print(f"  {'this tree (asyncio lazy)':<30} {lazy_ms:8.1f} ms")
        print(f"  {'asyncio imported eagerly':<30} {eager_ms:8.1f} ms  {eager_ms / lazy_ms:5.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
