"""Lone surrogates (text read with ``errors="surrogateescape"``) follow one rule everywhere:
they become U+FFFD where text leaves the process, in the model request and in every store.
Nothing crashes with UnicodeEncodeError; clean text is passed through unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from core.models._mock import Server

from beamfilter_core import ChatResponse, Kernel, Message, ScriptedModel, ToolCall, tool, utf8_safe
from beamfilter_core.errors import ConfigError
from beamfilter_memory import ChatStore, memory_filter

pytestmark = pytest.mark.anyio

RAW = b"caf\xe9 \xff ok".decode("utf-8", "surrogateescape")  # 'caf\udce9 \udcff ok'
SAFE = "caf\ufffd \ufffd ok"


def test_utf8_safe_replaces_lone_surrogates_and_keeps_clean_text() -> None:
    assert utf8_safe(RAW) == SAFE
    clean = "naïve ☕ 🎉"
    assert utf8_safe(clean) is clean


@tool
def read_file() -> str:
    """A file read with surrogateescape."""
    return RAW


async def test_a_tool_result_with_surrogates_reaches_the_model_as_utf8() -> None:
    answer = {"choices": [{"index": 0, "message": {"content": "done"}, "finish_reason": "stop"}]}
    calls = {
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"tool_calls": [{"id": "c1", "function": {"name": "read_file", "arguments": "{}"}}]},
            }
        ]
    }
    server = Server([httpx.Response(200, json=calls), httpx.Response(200, json=answer)])
    async with server.model() as model:
        result = await Kernel(model, tools=[read_file]).run("read it")
    assert result.text == "done"
    sent = json.loads(server.requests[1].content.decode("utf-8"))
    assert sent["messages"][-1] == {"role": "tool", "content": SAFE, "tool_call_id": "c1"}


async def _round_trip(store: object) -> list[Message]:
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("read_file", {}, "c1")), f"you said {RAW}"])
    kernel = Kernel(model, tools=[read_file], filters=[memory_filter(store)])
    await kernel.run(f"hi {RAW}", context={"conversation_id": "c1"})
    loaded = list(await store.load("c1"))  # type: ignore[attr-defined]
    await store.aclose()  # type: ignore[attr-defined]
    return loaded


def _expected() -> list[tuple[str, str]]:
    return [("user", f"hi {SAFE}"), ("assistant", ""), ("tool", SAFE), ("assistant", f"you said {SAFE}")]


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "redis"])
async def test_every_store_keeps_surrogates_as_replacement_characters(
    kind: str, make_store: Callable[..., ChatStore]
) -> None:
    loaded = await _round_trip(make_store(kind))
    assert [(m.role, m.text) for m in loaded] == _expected()


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
async def test_an_id_with_surrogates_is_refused_not_merged(kind: str, make_store: Callable[..., ChatStore]) -> None:
    # replacing would make 'c\udcff' and 'c\udcfe' one conversation: ids are refused instead
    store = make_store(kind)
    with pytest.raises(ConfigError) as caught:
        await store.append("c\udcff", [Message.user("x")])
    await store.aclose()
    assert str(caught.value) == (
        "conversation_id 'c\\udcff' holds lone surrogates (undecodable bytes) and cannot be stored; "
        "decode it properly or encode it (e.g. as hex)."
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres", "redis"])
async def test_every_store_keeps_surrogates_in_facts_as_replacement_characters(
    kind: str, make_store: Callable[..., ChatStore]
) -> None:
    from beamfilter_memory import Fact

    store: Any = make_store(kind)
    try:
        await store.save_facts("u1", [Fact(f"file {RAW}", f"read {RAW}"), Fact("plain", "kept as is")])
        assert await store.load_facts("u1") == [Fact(f"file {SAFE}", f"read {SAFE}"), Fact("plain", "kept as is")]
    finally:
        await store.aclose()
