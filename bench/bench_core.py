"""Core benchmarks (issue 2): chain layers, turns, a tool round, streaming and import time.

A script, not a timed test: it prints each figure next to the pure-Python floor measured
in the same process run, and the issue's target. Every figure is the median of
``--rounds`` rounds (default 7); a round times a loop of calls sized to take about
``--round-seconds``. The model is a minimal in-process fake (:class:`FakeModel`), so what
is measured is beamfilter's own overhead.

Run it with::

    .venv/bin/python bench/bench_core.py            # full run, about a minute
    .venv/bin/python bench/bench_core.py --quick    # 5 short rounds, for a smoke check
    .venv/bin/python bench/bench_core.py --baseline 43d8597 --only turn --only tool --only stream
        # this tree against another commit's beamfilter_core, loaded side by side in this
        # process and timed round by round (the ratio column is this tree / the baseline)
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib
import io
import os
import platform
import re
import resource
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Filter,
    Kernel,
    Message,
    RunFinished,
    TokenTransform,
    ToolCall,
    tool,
)
from beamfilter_core._run import _Run  # the bound chat chain, measured without the tool loop
from beamfilter_core._streaming import pipeline  # the token-transform pipeline, measured alone

LAYERS = (0, 1, 5, 10, 20)
TOKENS = 10_000
TRANSFORM_LAYERS = (1, 5)

# Targets from issue 2 (microseconds unless the name says otherwise).
TARGET_PER_LAYER_US = 0.15
TARGET_TURN_US = 20.0
TARGET_TOOL_ROUND_US = 40.0
TARGET_STREAM_MS = 5.0
TARGET_TOKEN_LAYER_US = 0.5
TARGET_IMPORT_MS = 100.0
REFERENCE_FLOOR_US = 0.06  # issue 2: "pure-Python nested async closures are about 0.06 µs here"

Body = Callable[[int], Awaitable[None]]


# -- the fake model and the workloads ---------------------------------------------------


class FakeModel:
    """A minimal in-process ChatModel: cycles through prebuilt responses.

    ``stream`` hands every prebuilt token to ``on_token`` and returns the next response.
    Nothing is recorded, so long loops allocate nothing in the model itself.
    """

    def __init__(self, responses: Sequence[ChatResponse], tokens: Sequence[str] = ()) -> None:
        self._responses = tuple(responses)
        self._next = 0
        self.tokens = tuple(tokens)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        index = self._next
        self._next = (index + 1) % len(self._responses)
        return self._responses[index]

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        for token in self.tokens:
            on_token(token)
        return await self.complete(request)


async def passthrough(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """The around hook under test: does nothing but call the inner layers."""
    return await call_next(request)


def chat_filters(n: int) -> list[Filter]:
    return [Filter(f"layer{i}", around_chat=passthrough) for i in range(n)]


def identity_step(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
    return (token,), state


def identity_filters(n: int) -> list[Filter]:
    return [Filter(f"identity{i}", token=TokenTransform(identity_step)) for i in range(n)]


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ANSWER = ChatResponse.from_text("The answer is 3.")
CALL = ChatResponse.tool_calls(ToolCall("add", {"a": 1, "b": 2}, "call_1"))


# -- the pure-Python floors -------------------------------------------------------------


def nested_closures(n: int, terminal: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
    """``n`` plain async closures around ``terminal``: the floor of an ``n``-layer onion."""
    call = terminal
    for _ in range(n):

        def wrap(inner: Callable[[Any], Awaitable[Any]]) -> Callable[[Any], Awaitable[Any]]:
            async def layer(request: Any) -> Any:
                return await inner(request)

            return layer

        call = wrap(call)
    return call


async def hand_loop(model: FakeModel, tools: dict[str, Callable[..., Awaitable[Any]]], text: str) -> str:
    """A hand-written tool loop (dict messages, direct awaits): the floor of a turn."""
    messages: list[Any] = [{"role": "user", "content": text}]
    while True:
        response = await model.complete(messages)  # type: ignore[arg-type]
        message = response.message
        if not message.tool_calls:
            return message.text
        messages.append(message)
        for call in message.tool_calls:
            value = await tools[call.name](**call.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": str(value)})


def nested_sinks(n: int, sink: Callable[[str], None]) -> Callable[[str], None]:
    """``n`` plain function closures in front of ``sink``: the floor of ``n`` token layers."""
    push = sink
    for _ in range(n):

        def wrap(down: Callable[[str], None]) -> Callable[[str], None]:
            def stage(token: str) -> None:
                down(token)

            return stage

        push = wrap(push)
    return push


async def drain_queue(items: deque[str], done: list[bool]) -> AsyncIterator[str]:
    while items or not done:
        while items:
            yield items.popleft()
        await asyncio.sleep(0)


# -- timing -----------------------------------------------------------------------------


class Timer:
    """Times async loop bodies: calibrated loop sizes, median of rounds, in microseconds.

    :meth:`compare` interleaves its bodies round by round, so a figure and its floor see
    the same machine load (this matters on a shared, busy machine).
    """

    def __init__(self, rounds: int, round_seconds: float, clock: Callable[[], float]) -> None:
        self.rounds = rounds
        self.round_seconds = round_seconds
        self.clock = clock

    async def _once(self, body: Body, loops: int) -> float:
        gc.collect()
        clock = self.clock
        started = clock()
        await body(loops)
        return clock() - started

    async def _calibrate(self, body: Body) -> int:
        loops = 1
        while True:  # grow until one run takes a tenth of a round
            elapsed = await self._once(body, loops)
            if elapsed >= self.round_seconds / 10 or loops >= 10_000_000:
                break
            loops *= 4
        return max(1, int(loops * self.round_seconds / max(elapsed, 1e-9)))

    async def compare(self, *bodies: Body) -> list[float]:
        """Median microseconds per loop iteration of each body, rounds interleaved."""
        sizes = [await self._calibrate(body) for body in bodies]
        samples: list[list[float]] = [[] for _ in bodies]
        for _ in range(self.rounds):
            for body, loops, out in zip(bodies, sizes, samples, strict=True):
                out.append(await self._once(body, loops) / loops)
        return [statistics.median(out) * 1e6 for out in samples]

    async def per_call(self, body: Body) -> float:
        """Median microseconds per loop iteration of ``body``."""
        return (await self.compare(body))[0]


def call_loop(call: Callable[[Any], Awaitable[Any]], request: Any) -> Body:
    async def body(loops: int) -> None:
        for _ in range(loops):
            await call(request)

    return body


def run_loop(kernel: Kernel, text: str) -> Body:
    async def body(loops: int) -> None:
        run = kernel.run
        for _ in range(loops):
            await run(text)

    return body


def slope(xs: Sequence[int], ys: Sequence[float]) -> float:
    """Least-squares slope of ``ys`` over ``xs``."""
    mean_x = statistics.fmean(xs)
    mean_y = statistics.fmean(ys)
    num = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    den = sum((x - mean_x) ** 2 for x in xs)
    return num / den


# -- report -----------------------------------------------------------------------------


class Report:
    """Prints one line per figure: value, floor, ratio, target, verdict."""

    def __init__(self) -> None:
        self.misses: list[str] = []
        print(f"{'figure':<52} {'beamfilter':>12} {'floor':>12} {'ratio':>6}  {'target':>9}")

    def line(self, name: str, value: float, floor: float | None, unit: str, target: float | None = None) -> None:
        floor_text = f"{floor:10.3f} {unit}" if floor is not None else f"{'-':>12}"
        ratio = f"{value / floor:5.1f}x" if floor else f"{'-':>6}"
        verdict = ""
        if target is not None:
            ok = value <= target
            verdict = f"<= {target:g} {unit}  {'ok' if ok else 'MISS'}"
            if not ok:
                self.misses.append(name)
        print(f"{name:<52} {value:10.3f} {unit} {floor_text} {ratio}  {verdict}", flush=True)

    @staticmethod
    def section(title: str) -> None:
        print(f"\n## {title}", flush=True)


# -- the benchmarks ---------------------------------------------------------------------


async def bench_chat_chain(timer: Timer, report: Report) -> None:
    report.section("chat chain: N pass-through around_chat filters, one bound chain call")
    request = ChatRequest((Message("user", "What is 1 + 2?"),))
    ours: list[float] = []
    floors: list[float] = []
    for n in LAYERS:
        model = FakeModel([ANSWER])
        kernel = Kernel(model=model, filters=chat_filters(n))
        chat = _Run(kernel._plan, None).chat
        response = await chat(request)
        if response is not ANSWER:
            raise RuntimeError(f"chat chain returned {response!r}")

        async def terminal(request: Any, model: FakeModel = model) -> Any:
            return await model.complete(request)

        ours_us, floor_us = await timer.compare(
            call_loop(chat, request), call_loop(nested_closures(n, terminal), request)
        )
        ours.append(ours_us)
        floors.append(floor_us)
        report.line(f"chat chain call, N={n}", ours[-1], floors[-1], "us")
    report.line("per added layer (slope over N)", slope(LAYERS, ours), slope(LAYERS, floors), "us", TARGET_PER_LAYER_US)
    report.line("per added layer ((N20 - N0) / 20)", (ours[-1] - ours[0]) / 20, (floors[-1] - floors[0]) / 20, "us")
    print(
        f"  machine speed: one plain nested async closure costs {slope(LAYERS, floors):.3f} us here "
        f"(issue 2 quotes about {REFERENCE_FLOOR_US} us on its reference machine); the ratio column is the "
        "figure to compare across machines and load"
    )


async def bench_turns(timer: Timer, report: Report) -> None:
    report.section("no-tool turn: await kernel.run(text) in a running loop, N around_chat filters")
    ours: list[float] = []
    floors: list[float] = []
    for n in LAYERS:
        model = FakeModel([ANSWER])
        kernel = Kernel(model=model, filters=chat_filters(n))
        result = await kernel.run("What is 1 + 2?")
        if result.text != ANSWER.text or result.status != "completed":
            raise RuntimeError(f"turn returned {result!r}")

        def floor_body(n: int = n, model: FakeModel = model) -> Body:
            async def terminal(messages: Any) -> Any:
                return await model.complete(messages)

            floor_model = FakeModel([ANSWER])
            floor_model.complete = nested_closures(n, terminal)  # type: ignore[method-assign,assignment]

            async def body(loops: int) -> None:
                for _ in range(loops):
                    await hand_loop(floor_model, {}, "What is 1 + 2?")

            return body

        ours_us, floor_us = await timer.compare(run_loop(kernel, "What is 1 + 2?"), floor_body())
        ours.append(ours_us)
        floors.append(floor_us)
        report.line(f"turn, N={n}", ours[-1], floors[-1], "us", TARGET_TURN_US if n == 0 else None)
    report.line("per added layer in a turn (slope over N)", slope(LAYERS, ours), slope(LAYERS, floors), "us")


async def bench_tool_round(timer: Timer, report: Report) -> None:
    report.section("one tool round: the model asks for one async tool call, then answers")
    model = FakeModel([CALL, ANSWER])
    kernel = Kernel(model=model, tools=[add])
    result = await kernel.run("What is 1 + 2?")
    if result.text != ANSWER.text or result.tool_calls_made != 1 or result.messages[2].content != "3":
        raise RuntimeError(f"tool round returned {result!r}")
    floor_model = FakeModel([CALL, ANSWER])
    fn = add.fn
    if fn is None:
        raise RuntimeError("the add tool has no function")
    tools = {"add": fn}

    async def floor(loops: int) -> None:
        for _ in range(loops):
            await hand_loop(floor_model, tools, "What is 1 + 2?")

    ours, floor_us = await timer.compare(run_loop(kernel, "What is 1 + 2?"), floor)
    report.line("turn with one tool round (2 LLM calls, 1 tool)", ours, floor_us, "us", TARGET_TOOL_ROUND_US)


async def consume(kernel: Kernel, text: str) -> int:
    """Drain ``run_stream``; return the number of text events."""
    count = 0
    async for event in kernel.run_stream(text):
        if isinstance(event, RunFinished):
            if event.result.status != "completed":
                raise RuntimeError(f"stream ended with {event.result!r}")
        else:
            count += 1
    return count


async def bench_stream(timer: Timer, report: Report) -> None:
    report.section(f"streaming: {TOKENS:,} tokens through kernel.run_stream (consumer included)")
    tokens = [f"t{i % 10} " for i in range(TOKENS)]
    answer = ChatResponse.from_text("".join(tokens))
    request = ChatRequest((Message("user", "stream"),))

    def stream_body(kernel: Kernel) -> Body:
        async def body(loops: int) -> None:
            for _ in range(loops):
                await consume(kernel, "stream")

        return body

    floor_model = FakeModel([answer], tokens)

    async def floor(loops: int) -> None:
        for _ in range(loops):
            items: deque[str] = deque()
            done: list[bool] = []
            await floor_model.stream(request, items.append)
            done.append(True)
            async for _token in drain_queue(items, done):
                pass

    kernels = [Kernel(model=FakeModel([answer], tokens), filters=identity_filters(n)) for n in (0, *TRANSFORM_LAYERS)]
    for kernel in kernels:
        if await consume(kernel, "stream") != TOKENS:
            raise RuntimeError(f"{kernel!r} did not stream every token")
    timings = await timer.compare(floor, *(stream_body(kernel) for kernel in kernels))
    floor_ms, bare, *with_layers = (value / 1000 for value in timings)
    report.line(f"{TOKENS:,} tokens, bare stream", bare, floor_ms, "ms", TARGET_STREAM_MS)
    for n, total in zip(TRANSFORM_LAYERS, with_layers, strict=True):
        report.line(f"{TOKENS:,} tokens, {n} identity transform(s)", total, None, "ms")
        report.line(
            f"  per token per layer, end to end ({n} layer(s))",
            (total - bare) * 1000 / TOKENS / n,
            None,
            "us",
            TARGET_TOKEN_LAYER_US,
        )

    # The transform pipeline alone (what the chat terminal pushes each token through),
    # against n plain function closures: precise per-layer figures, free of stream noise.
    def push_body(push: Callable[[str], None]) -> Body:
        async def body(loops: int) -> None:
            for _ in range(loops):
                for token in tokens:
                    push(token)

        return body

    def sink(token: str) -> None:
        pass

    layers = (0, *TRANSFORM_LAYERS)
    pushes = [pipeline([TokenTransform(identity_step) for _ in range(n)], sink)[0] for n in layers]
    floors = [nested_sinks(n, sink) for n in layers]
    timings = await timer.compare(*(push_body(p) for p in pushes), *(push_body(p) for p in floors))
    ours, floor_us = timings[: len(layers)], timings[len(layers) :]
    for i, n in enumerate(TRANSFORM_LAYERS, start=1):
        report.line(
            f"  per token per layer, pipeline only ({n} layer(s))",
            (ours[i] - ours[0]) / TOKENS / n,
            (floor_us[i] - floor_us[0]) / TOKENS / n,
            "us",
            TARGET_TOKEN_LAYER_US,
        )


# -- import time ------------------------------------------------------------------------

_IMPORTTIME = re.compile(r"import time:\s+(\d+)\s+\|\s+(\d+)\s+\| ( *)(\S+)")


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _wall(code: str, runs: int, env: dict[str, str], cpu: bool) -> float:
    """Median milliseconds of ``python -c code``: CPU time of the child, or wall time."""
    samples = []
    for _ in range(runs):
        started = _children_cpu() if cpu else time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, env=env)
        samples.append((_children_cpu() if cpu else time.perf_counter()) - started)
    return statistics.median(samples) * 1000


def _import_envs(cache_dir: str) -> list[tuple[str, dict[str, str]]]:
    """The environments to time: with a bytecode cache (a normal install) and without."""
    cached = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    cached["PYTHONPYCACHEPREFIX"] = cache_dir  # keeps .pyc files out of the source tree
    uncached = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    uncached.pop("PYTHONPYCACHEPREFIX", None)
    return [("bytecode cached", cached), ("no bytecode cache, sources compiled", uncached)]


def bench_import(report: Report, runs: int, cpu: bool) -> None:
    clock = "CPU time of the child" if cpu else "wall time"
    report.section(f'import time: python -c "import beamfilter_core" minus python -c "pass" (subprocess, {clock})')
    with tempfile.TemporaryDirectory(prefix="beamfilter-bench-pyc-") as cache_dir:
        envs = _import_envs(cache_dir)
        for label, env in envs:
            _wall("import beamfilter_core", 2, env, cpu)  # fill the file and bytecode caches
            baseline = _wall("pass", runs, env, cpu)
            imported = _wall("import beamfilter_core", runs, env, cpu)
            report.line(
                f"import added, {label} (median of {runs})", imported - baseline, baseline, "ms", TARGET_IMPORT_MS
            )
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import beamfilter_core"],
            check=True,
            capture_output=True,
            text=True,
            env=envs[0][1],
        )
    rows = []
    for line in done.stderr.splitlines():
        found = _IMPORTTIME.match(line)
        if found:
            rows.append((int(found[1]), int(found[2]), len(found[3]) // 2, found[4]))
    print("  -X importtime, bytecode cached, one run (inflated by the instrumentation):")
    print("  top self times:")
    for self_us, cumulative_us, _depth, name in sorted(rows, reverse=True)[:10]:
        print(f"    {self_us / 1000:7.2f} ms self {cumulative_us / 1000:7.2f} ms cumulative  {name}")
    print("  largest subtrees imported by beamfilter_core (cumulative):")
    # Children are printed before their parent: the subtree is the run of deeper rows
    # right before the top-level ``beamfilter_core`` row.
    end = next(i for i, row in enumerate(rows) if row[3] == "beamfilter_core" and row[2] == 0)
    start = end
    while start > 0 and rows[start - 1][2] > 0:
        start -= 1
    inner = [row for row in rows[start : end + 1] if row[2] <= 2]
    for _self_us, cumulative_us, depth, name in sorted(inner, key=lambda row: row[1], reverse=True)[:12]:
        print(f"    {cumulative_us / 1000:7.2f} ms  {'  ' * depth}{name}")
    eager = sorted({row[3].split(".")[0] for row in rows} & {"asyncio", "httpx", "pluggy", "cattrs", "fastjsonschema"})
    print(f"  dependencies imported eagerly (of asyncio, httpx, pluggy, cattrs, fastjsonschema): {', '.join(eager)}")


# -- against a baseline commit ------------------------------------------------------------


def load_baseline(rev: str, into: Path) -> ModuleType:
    """``rev``'s ``beamfilter_core`` imported as ``beamfilter_core_baseline`` (its modules
    import each other relatively, so both versions live side by side in this process)."""
    root = Path(__file__).resolve().parents[1]
    archive = subprocess.run(
        ["git", "archive", rev, "beamfilter_core/src/beamfilter_core"], cwd=root, capture_output=True, check=True
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    (into / "beamfilter_core" / "src" / "beamfilter_core").rename(into / "beamfilter_core_baseline")
    sys.path.insert(0, str(into))
    try:
        return importlib.import_module("beamfilter_core_baseline")
    finally:
        sys.path.remove(str(into))


def ab_workloads(core: Any) -> dict[str, tuple[Callable[[], Any], str, int]]:
    """Kernels of one version of the core: (make the kernel, input, layers)."""

    @core.tool
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    answer = core.ChatResponse.from_text("The answer is 3.")
    call = core.ChatResponse.tool_calls(core.ToolCall("add", {"a": 1, "b": 2}, "call_1"))
    layers = [core.Filter(f"layer{i}", around_chat=passthrough) for i in range(20)]
    tokens = [f"t{i % 10} " for i in range(TOKENS)]
    streamed = core.ChatResponse.from_text("".join(tokens))
    return {
        "turn, N=0": (lambda: core.Kernel(FakeModel([answer])), "run", 0),
        "turn, N=20": (lambda: core.Kernel(FakeModel([answer]), filters=layers), "run", 20),
        "turn with one tool round": (lambda: core.Kernel(FakeModel([call, answer]), tools=[add]), "run", 0),
        f"{TOKENS:,}-token stream": (lambda: core.Kernel(FakeModel([streamed], tokens)), "stream", 0),
    }


def ab_body(kernel: Any, how: str, finished: type) -> Body:
    async def body(loops: int) -> None:
        for _ in range(loops):
            if how == "run":
                await kernel.run("What is 1 + 2?")
            else:
                async for event in kernel.run_stream("stream"):
                    if type(event) is finished and event.result.status != "completed":
                        raise RuntimeError(f"stream ended with {event.result!r}")

    return body


async def bench_baseline(timer: Timer, report: Report, base: Any, rev: str, only: set[str]) -> None:
    import beamfilter_core

    report.section(f"this tree against {rev}, side by side in this process (floor column: {rev})")
    ours, theirs = ab_workloads(beamfilter_core), ab_workloads(base)
    wanted = {"turn": ("turn, N=0", "turn, N=20"), "tool": ("turn with one tool round",), "stream": ()}
    names = [name for name in ours if not only or any(name in wanted[o] for o in only if o in wanted)]
    if not only or "stream" in only:
        names += [name for name in ours if name.endswith("stream")]
    results: dict[str, tuple[float, float]] = {}
    for name in dict.fromkeys(names):
        make, how, layers = ours[name]
        mine, old = await timer.compare(
            ab_body(make(), how, RunFinished), ab_body(theirs[name][0](), how, base.RunFinished)
        )
        results[name] = (mine, old)
        report.line(name, mine, old, "us")
        zero = results.get("turn, N=0")
        if layers and zero is not None:
            report.line("  per added layer in a turn", (mine - zero[0]) / layers, (old - zero[1]) / layers, "us")


# -- main -------------------------------------------------------------------------------


async def run_all(timer: Timer, report: Report, only: set[str]) -> None:
    benches = {
        "chain": bench_chat_chain,
        "turn": bench_turns,
        "tool": bench_tool_round,
        "stream": bench_stream,
    }
    for name, bench in benches.items():
        if not only or name in only:
            await bench(timer, report)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="rounds per figure; the median is shown (>= 5)")
    parser.add_argument("--round-seconds", type=float, default=0.2, help="target duration of one round")
    parser.add_argument("--quick", action="store_true", help="5 rounds of 0.03 s: a fast smoke run")
    parser.add_argument(
        "--clock",
        choices=["cpu", "wall"],
        default="cpu",
        help="cpu: process CPU time (robust on a shared, busy machine; the default); wall: elapsed time",
    )
    parser.add_argument("--import-runs", type=int, default=15, help="subprocess runs for the import figure")
    parser.add_argument("--baseline", help="a commit: time this tree against its beamfilter_core instead")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        choices=["chain", "turn", "tool", "stream", "import"],
        help="run only these (repeatable)",
    )
    args = parser.parse_args(argv)
    if args.rounds < 5:
        parser.error(f"--rounds={args.rounds}: the figures are medians of at least 5 rounds; give 5 or more.")
    rounds, seconds = (5, 0.03) if args.quick else (args.rounds, args.round_seconds)
    cpu = args.clock == "cpu"
    print(
        f"beamfilter core bench  python {platform.python_version()} ({platform.python_implementation()})  "
        f"nproc {os.cpu_count()}  {platform.machine()}  load average {os.getloadavg()[0]:.2f}\n"
        f"clock: {'process CPU time' if cpu else 'wall time'}  rounds {rounds} x ~{seconds:g} s, median shown"
    )
    report = Report()
    only = set(args.only)
    timer = Timer(rounds, seconds, time.process_time if cpu else time.perf_counter)
    if args.baseline:
        with tempfile.TemporaryDirectory(prefix="beamfilter-baseline-") as tmp:
            base = load_baseline(args.baseline, Path(tmp))
            asyncio.run(bench_baseline(timer, report, base, args.baseline, only))
        return 0
    asyncio.run(run_all(timer, report, only))
    if not only or "import" in only:
        bench_import(report, 5 if args.quick else args.import_runs, cpu)
    print(f"\nload average at the end {os.getloadavg()[0]:.2f}")
    print(f"targets missed: {', '.join(report.misses) if report.misses else 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
