"""Helpers of the fault suite: a scripted HTTP transport and a kernel with a real SQLite store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from core.models._mock import Server
from peers._peer import Peer

from beamfilter_core import Kernel, OpenAIChatModel, TurnResult
from beamfilter_core.testing import run_turn as run_turn_of_kit
from beamfilter_memory import SQLiteStore, memory_filter

CID = "conv-1"


class Transport(Server):
    """The models tests' scripted transport (answers in order, the last repeats), plus a model on it."""

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
    result, streamed = await run_turn_of_kit(k, text, stream, context={"conversation_id": CID})
    return streamed or "", result


def scenario(peer: Peer, *behaviors: dict[str, Any]) -> None:
    """Queue llmock behaviours, answered in order (one per request unless ``times`` says more)."""
    peer.post("/_llmock/scenario", {"behaviors": list(behaviors)})
