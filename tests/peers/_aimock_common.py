"""What the aimock tests share: the tools of the fixtures, the request helper, a fresh
journal, and the cancelled-stream check (every provider against the same "slow story")."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from peers._peer import Peer

from beamfilter_core import ChatRequest, Message, tool

# the calls of get_weather the tool loop made, cleared by fresh()
CALLS: list[dict[str, Any]] = []
# the "slow story" answer of the fixtures: four characters every 40 ms
SLOW_STORY = (
    "Once upon a time a slow stream sent four characters at a time, forty milliseconds apart, "
    "until somebody cancelled it."
)


@tool
def get_weather(city: str, unit: str = "c") -> str:
    """Current weather for a city."""
    CALLS.append({"city": city, "unit": unit})
    return '{"temp": 18, "sky": "cloudy"}'


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return "09:00"


def ask(text: str, *, tools: bool = False) -> ChatRequest:
    return ChatRequest((Message.user(text),), tools=(get_weather, get_time) if tools else ())


def fresh(aimock: Peer) -> Peer:
    """``aimock`` with an empty journal and no tool call recorded."""
    aimock.post("/__aimock/reset/journal")
    CALLS.clear()
    return aimock


async def cancel_streams(model: Any, client: httpx.AsyncClient, rounds: int, at_once: int = 10) -> None:
    """Cancels ``rounds`` streams of the slow story at their first token, ``at_once`` open
    together (each on a connection of its own); none may leave a connection in ``client``'s
    pool."""

    async def cancel_one() -> None:
        first = asyncio.Event()
        tokens: list[str] = []

        def on_token(token: str) -> None:
            tokens.append(token)
            first.set()

        task = asyncio.create_task(model.stream(ask("slow story"), on_token))
        await first.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # the cancel lands after the first token; on a busy machine a chunk already
        # read (they are 40 ms apart) may still arrive first, never the whole story
        assert tokens[0] == "Once"
        assert SLOW_STORY.startswith("".join(tokens))
        assert "".join(tokens) != SLOW_STORY

    for start in range(0, rounds, at_once):
        await asyncio.gather(*(cancel_one() for _ in range(min(at_once, rounds - start))))
    assert client._transport._pool.connections == []  # type: ignore[attr-defined]
