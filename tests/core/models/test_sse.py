"""The SSE decoder of the native providers (``_http.sse_data``), on bodies cut anywhere."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from core.models._mock import response

from beamfilter_core._models import _http
from beamfilter_core.errors import ResponseTooLargeError

pytestmark = pytest.mark.anyio

BODY = (
    ": a comment\n\n"
    'event: message_start\ndata: {"a": 1}\n\n'
    "data: one\ndata: two\n\n"
    "data:no space\n\n"
    "id: 7\nevent: ping\n\n"
    "data\ndata: after an empty line\n\n"
    "retry: 100\ndata: x\nevent: y\n\n\n\n"
    "data: Ünïcode ✓\n\n"
    "data: unfinished at the end"
)
EXPECTED = ['{"a": 1}', "one\ntwo", "no space", "\nafter an empty line", "x", "Ünïcode ✓"]


async def events(body: bytes, chunk: int | None, limit: int = 1000) -> list[str]:
    return [data async for batch in _http.sse_data(response(200, body, chunk=chunk), limit) for data in batch]


@pytest.mark.parametrize("ending", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("chunk", [None, 1, 2, 3, 7])
async def test_every_field_and_line_ending_cut_anywhere(ending: str, chunk: int | None) -> None:
    assert await events(BODY.replace("\n", ending).encode(), chunk) == EXPECTED


async def test_a_byte_order_mark_opening_the_body_is_dropped() -> None:
    assert await events("\ufeffdata: first\n\ndata: \ufeffkept\n\n".encode(), 2) == ["first", "\ufeffkept"]


async def test_a_body_without_an_event_boundary_is_capped() -> None:
    with pytest.raises(ResponseTooLargeError, match="max_event_chars=10 characters without completing an event"):
        await events(b"data: " + b"x" * 20, 4, limit=10)
    assert await events(b"data: 12345\n\n" * 5, 3, limit=20) == ["12345"] * 5


async def test_drain_stops_at_its_deadline_or_at_a_broken_body(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_http, "_DRAIN_SECONDS", 0.05)

    async def endless() -> object:
        while True:
            await asyncio.sleep(0.01)
            yield ["more"]

    await _http._drain(endless())  # type: ignore[arg-type]

    async def broken() -> object:
        yield ["a"]
        raise httpx.ReadError("reset")

    await _http._drain(broken())  # type: ignore[arg-type]


async def test_empty_reads_change_nothing() -> None:
    class Reads:  # what sse_data reads: aiter_text, here with empty pieces around the BOM
        async def aiter_text(self) -> object:
            for text in ("", "\ufeff", "", "data: a\n", "", "\n"):
                yield text

    assert [d async for batch in _http.sse_data(Reads(), 100) for d in batch] == ["a"]  # type: ignore[arg-type]


async def test_a_large_event_in_one_byte_reads() -> None:
    big = "x" * 20_000
    body = f"data: {big}\n\ndata: after\n\n".encode()
    assert await events(body, 1, limit=30_000) == [big, "after"]
