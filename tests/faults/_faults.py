"""Helpers of the fault suite: a scripted HTTP transport and a kernel with a real SQLite store."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
from peers._peer import Peer

from beamfilter_core import Kernel, OpenAIChatModel, RunFinished, TurnResult
from beamfilter_core.testing import collect_stream
from beamfilter_memory import SQLiteStore, memory_filter

CID = "conv-1"

Answer = httpx.Response | Exception | Callable[[httpx.Request], httpx.Response]


class Transport:
    """Answers requests in order (the last answer repeats) and counts them."""

    def __init__(self, answers: Sequence[Answer]) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer) and not isinstance(answer, httpx.Response):
            return answer(request)
        return answer

    def model(self, **options: Any) -> OpenAIChatModel:
        options.setdefault("api_key", "sk-test")
        return OpenAIChatModel(
            "test-model", base_url="http://mock.test/v1", transport=httpx.MockTransport(self.handle), **options
        )


def peer_model(peer: Peer, **options: Any) -> OpenAIChatModel:
    """A model talking to a running peer (llmock or aimock)."""
    key = peer.headers.get("Authorization", "Bearer llmock-key").removeprefix("Bearer ")
    return OpenAIChatModel("gpt-4o-mini", base_url=peer.base_url, api_key=key, **options)


def sqlite_store(tmp_path: Path) -> SQLiteStore:
    return SQLiteStore(f"sqlite:///{tmp_path / 'faults.db'}")


def kernel(model: Any, store: SQLiteStore, **options: Any) -> Kernel:
    """A kernel whose only filter is the memory filter on ``store``."""
    return Kernel(model, filters=[memory_filter(store)], **options)


async def run_turn(k: Kernel, text: str, *, stream: bool) -> tuple[str, TurnResult]:
    """One turn of conversation :data:`CID`, streamed or not: (streamed text, TurnResult)."""
    context = {"conversation_id": CID}
    if stream:
        streamed, events = await collect_stream(k.run_stream(text, context=context))
        last = events[-1]
        assert isinstance(last, RunFinished)
        return streamed, last.result
    result = await k.run(text, context=context)
    return "", result


def scenario(peer: Peer, *behaviors: dict[str, Any]) -> None:
    """Queue llmock behaviours, answered in order (one per request unless ``times`` says more)."""
    peer.post("/_llmock/scenario", {"behaviors": list(behaviors)})
