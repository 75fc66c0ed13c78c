"""What the provider decode rows share: the recorded captures, the repeated words, the
16 KiB reads of one ``httpx.MockTransport``, the timing, and beamfilter's side of a row
(a model streaming the body over that transport). It holds no row itself."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from beamfilter_core import ChatRequest, Message

CAPTURES = Path(__file__).resolve().parents[1] / "tests" / "core" / "models" / "provider_captures"
TOKENS = 10_000
READ = 16_384
WORDS = [" the", " sea", " is", " wide", ",", " and", " deep", ".", " Ünï", " ✓"]
REQUEST = ChatRequest((Message.user("hi"),))
ROWS: list[tuple[str, Callable[..., tuple[float, float]]]] = []  # rows live in the provider modules


def word(n: int) -> str:
    """The ``n``-th token of every repeated stream."""
    return WORDS[n % len(WORDS)]


def expected(tokens: int) -> str:
    """The text of a stream of ``tokens`` repeated words."""
    return "".join(word(n) for n in range(tokens))


def capture_body(name: str) -> str:
    """The body of the ``.http`` capture ``name``."""
    return (CAPTURES / name).read_bytes().partition(b"\n\n")[2].decode()


def reads(data: bytes) -> Iterator[bytes]:
    """``data`` in the 16 KiB reads of a socket."""
    for start in range(0, len(data), READ):
        yield data[start : start + READ]


def transport(body: bytes, http: Any = httpx, content_type: str = "text/event-stream") -> Any:
    """A mock transport of ``http`` (httpx, or the httpx2 fork the anthropic SDK uses)
    answering every request with the stream ``body`` in :func:`reads`."""

    async def content() -> Any:
        for part in reads(body):
            yield part

    def handle(_: Any) -> Any:
        return http.Response(200, headers={"content-type": content_type}, content=content())

    return http.MockTransport(handle)


def best(rounds: int, run: Callable[[], Any], clock: Callable[[], float] = time.process_time) -> float:
    """The shortest of ``rounds`` runs, in seconds of ``clock``."""
    shortest = float("inf")
    for _ in range(rounds):
        start = clock()
        run()
        shortest = min(shortest, clock() - start)
    return shortest


def model_stream(make: Callable[[Any], Any], body: bytes, tokens: int) -> Callable[[], None]:
    """beamfilter's side of a row: the model ``make(transport)`` streams ``body``; the
    tokens it delivers and its answer must be the whole text."""
    text = expected(tokens)

    async def run() -> None:
        async with make(transport(body)) as model:
            pieces: list[str] = []
            result = await model.stream(REQUEST, pieces.append)
        assert result.text == "".join(pieces) == text

    return lambda: asyncio.run(run())
