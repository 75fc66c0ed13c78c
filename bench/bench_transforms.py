"""Token-transform benchmarks: ``redact`` and ``hold_release``, in µs per token.

A script, not a timed test. It streams a realistic answer (word tokens drawn with a
Zipf distribution from a 2,000-word vocabulary, with a few secrets in it) and prints, for
each transform, the cost per token on top of the bare stream measured in the same run:

- *pipeline*: the token-transform pipeline alone (what the chat terminal pushes each
  token through), against a pipeline with no transform;
- *end to end*: ``kernel.run_stream`` with a fake in-process model, consumer included,
  against the same kernel with no filter.

``redact (cold)`` disables the scan cache (``cache_size=0``), so every token is scanned: the worst case of
a stream whose tokens never repeat. Figures are the best of ``--rounds`` rounds, in CPU
time of the process (the least disturbed by other load).

Run it with::

    .venv/bin/python bench/bench_transforms.py            # about 30 s
    .venv/bin/python bench/bench_transforms.py --quick    # a short smoke run

On a loaded machine, count instructions instead (repeatable whatever the load): ``--only
NAME --passes N`` builds one candidate, warms it up and streams the tokens N more times
through the pipeline, printing nothing; the difference between ``--passes 3`` and
``--passes 1`` under ``valgrind --tool=callgrind``, divided by twice the token count, is
the instructions per token of a warm pass::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python bench/bench_transforms.py --only "redact (default patterns)" --passes 3 --tokens 20000
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from collections.abc import Callable, Sequence
from typing import Any

from beamfilter_builtins import hold_release_filter, redact_filter
from beamfilter_core import ChatRequest, ChatResponse, Filter, Kernel, TextDelta, TokenTransform
from beamfilter_core._streaming import pipeline  # the transform pipeline, measured alone

TARGET_US = 0.5
SECRETS = ("sk-abcdefghijklmnopqrstuvwx", "AKIAABCDEFGHIJKLMNOP", "Bearer abcdefghijkl0123")


def make_tokens(count: int, seed: int = 7) -> list[str]:
    """Word tokens (``" word"``, punctuation) with a Zipf distribution, plus a few secrets."""
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz"
    common = (  # noqa: SIM905  # a word list is easier to read as text
        "the of and to in is that it for as with was on be by this are or from at an but "
        "not have has can will which their its more one all also been were would model "
        "filter stream token answer tool call result kernel secret key value"
    ).split()
    vocabulary = common + ["".join(rng.choice(letters) for _ in range(rng.randint(3, 10))) for _ in range(2000)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    words = rng.choices(vocabulary, weights, k=count)
    tokens: list[str] = []
    for index, word in enumerate(words):
        if index and index % 997 == 0:
            # A secret, cut into 3-character tokens as a provider would split it.
            secret = " " + SECRETS[index % len(SECRETS)]
            tokens.extend(secret[i : i + 3] for i in range(0, len(secret), 3))
        tokens.append(" " + word)
        if rng.random() < 0.08:
            tokens.append(rng.choice([".", ",", ";", "!"]))
    return tokens[:count]


class FakeModel:
    """Streams prebuilt tokens; the answer text is their concatenation."""

    def __init__(self, tokens: Sequence[str]) -> None:
        self.tokens = tuple(tokens)
        self.response = ChatResponse.from_text("".join(tokens))

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return self.response

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        for token in self.tokens:
            on_token(token)
        return self.response


def identity(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
    return (token,), state


def candidates() -> list[tuple[str, Callable[[], Filter | None]]]:
    return [
        ("bare (no transform)", lambda: None),
        ("identity transform", lambda: Filter("identity", token=TokenTransform(identity))),
        # redact rewrites the answer too: this is the floor of any applies_to="answer" transform.
        (
            "identity, applies_to=answer",
            lambda: Filter("identity", token=TokenTransform(identity, None, None, "answer")),
        ),
        ("redact (default patterns)", redact_filter),
        ("redact (cold: cache_size=0)", lambda: redact_filter(cache_size=0)),
        ("redact (emails=True)", lambda: redact_filter(emails=True)),
        ("hold_release", lambda: hold_release_filter(lambda text: None)),
    ]


def best_time(body: Callable[[], None], rounds: int) -> float:
    """The fastest of ``rounds`` runs, in CPU seconds of this process.

    CPU time (not wall time) and the best round keep other load on the machine out of
    the figures as far as possible.
    """
    times = []
    for _ in range(rounds):
        started = time.process_time()
        body()
        times.append(time.process_time() - started)
    return min(times)


def bench_pipeline(tokens: list[str], rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    for name, make in candidates():
        flt = make()
        transforms = [flt.token] if flt is not None and flt.token is not None else []
        out: list[str] = []
        sink = out.append

        def body(
            transforms: list[TokenTransform] = transforms, out: list[str] = out, sink: Callable[[str], None] = sink
        ) -> None:
            out.clear()
            push, flush = pipeline(transforms, sink)
            for token in tokens:
                push(token)
            if flush is not None:
                flush()

        body()  # warm-up (fills the redact scan cache as a long stream would)
        text = "".join(out)
        if name.startswith("redact") and any(secret in text for secret in SECRETS):
            raise RuntimeError(f"{name}: a secret reached the consumer")
        results[name] = best_time(body, rounds) * 1e6 / len(tokens)
    return results


def passes(tokens: list[str], name: str, count: int) -> None:
    """Warm up ``name``'s transform, then stream ``tokens`` ``count`` more times (untimed)."""
    flt = dict(candidates())[name]()
    transforms = [flt.token] if flt is not None and flt.token is not None else []
    out: list[str] = []
    for _ in range(1 + count):
        out.clear()
        push, flush = pipeline(transforms, out.append)
        for token in tokens:
            push(token)
        if flush is not None:
            flush()


async def _consume(kernel: Kernel) -> int:
    count = 0
    async for event in kernel.run_stream("go"):
        if type(event) is TextDelta:
            count += 1
    return count


def bench_kernel(tokens: list[str], rounds: int) -> dict[str, float]:
    results: dict[str, float] = {}
    model = FakeModel(tokens)
    for name, make in candidates():
        flt = make()
        kernel = Kernel(model, filters=[flt] if flt is not None else [])

        def body(kernel: Kernel = kernel) -> None:
            asyncio.run(_consume(kernel))

        body()
        results[name] = best_time(body, rounds) * 1e6 / len(tokens)
    return results


def report(title: str, results: dict[str, float]) -> None:
    bare = results["bare (no transform)"]
    print(f"\n{title}")
    print(f"  {'':32} {'µs/token':>9} {'added µs/token':>15}   target ≤ {TARGET_US} µs/token/transform")
    for name, value in results.items():
        added = value - bare
        mark = "" if name.startswith("bare") else ("  ok" if added <= TARGET_US else "  over target")
        shown = "" if name.startswith("bare") else f"{added:15.3f}"
        print(f"  {name:32} {value:9.3f} {shown:>15}{mark}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer tokens and rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--tokens", type=int, default=None)
    parser.add_argument("--only", help="with --passes: the candidate to run, e.g. 'redact (default patterns)'")
    parser.add_argument("--passes", type=int, default=None, help="untimed warm passes of --only (for callgrind)")
    args = parser.parse_args()
    count = args.tokens or (5_000 if args.quick else 50_000)
    if args.passes is not None:
        passes(make_tokens(count), args.only or "redact (default patterns)", args.passes)
        return
    rounds = args.rounds or (3 if args.quick else 9)
    tokens = make_tokens(count)
    print(f"{len(tokens):,} tokens ({len(set(tokens)):,} distinct), best of {rounds} rounds")
    report("pipeline only (transform stage + sink)", bench_pipeline(tokens, rounds))
    report("end to end (kernel.run_stream, consumer included)", bench_kernel(tokens, rounds))


if __name__ == "__main__":
    main()
