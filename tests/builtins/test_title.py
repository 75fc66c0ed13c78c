"""title: one title per conversation after its first completed turn (model, heuristic, stores)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from beamfilter_builtins import ChatStoreTitles, InMemoryTitleStore, heuristic_title, title_filter
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, TurnResult
from beamfilter_core.errors import ConfigError, ProviderError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def run(kernel: Kernel, text: str, stream: bool, conversation: str | None) -> TurnResult:
    context = {"conversation_id": conversation} if conversation else None
    return (await run_turn(kernel, text, stream, context=context))[0]


async def test_model_title_once_per_conversation(stream: bool) -> None:
    titler = ScriptedModel(['"Title: Trip to Lisbon."\nextra line', "Other Chat"])
    store = InMemoryTitleStore()
    kernel = Kernel(ScriptedModel(["Go in May.", "Yes.", "Hi!"]), filters=[title_filter(store=store, model=titler)])
    first = await run(kernel, "When should I visit Lisbon?", stream, "c1")
    await run(kernel, "Is it warm then?", stream, "c1")
    await run(kernel, "hello", stream, "c2")
    assert first.text == "Go in May."
    assert store.titles == {"c1": "Trip to Lisbon", "c2": "Other Chat"}
    assert len(titler.requests) == 2
    assert titler.requests[0].messages[0].text == (
        "Write a short title (at most 6 words) for a conversation that starts like this. "
        "Reply with the title only, without quotes.\n\nUser: When should I visit Lisbon?\n\nAssistant: Go in May."
    )


async def test_heuristic_and_no_conversation_id(stream: bool) -> None:
    flt = title_filter()
    kernel = Kernel(ScriptedModel(["a", "b"]), filters=[flt])
    await run(kernel, "how do i reset my router password quickly please?", stream, "c1")
    await run(kernel, "no id", stream, None)
    assert flt.extras["store"].titles == {"c1": "How do i reset my router"}
    assert await flt.extras["title"]("c1") == "How do i reset my router"
    assert await flt.extras["title"]("missing") is None


def test_heuristic_title_rules() -> None:
    assert heuristic_title("  **what's the   weather?**\nsecond line") == "What's the weather"
    assert heuristic_title("one two three four five six seven", max_words=3) == "One two three"
    assert heuristic_title("a" * 30 + " " + "b" * 30 + " c", max_chars=40) == "A" + "a" * 29 + "…"


async def test_failing_model_falls_back_to_heuristic(caplog: pytest.LogCaptureFixture) -> None:
    def boom(request: ChatRequest) -> ChatResponse:
        msg = "down"
        raise ProviderError(msg)

    store = InMemoryTitleStore()
    kernel = Kernel(ScriptedModel(["ok"]), filters=[title_filter(store=store, model=ScriptedModel([boom]))])
    with caplog.at_level(logging.WARNING, logger="beamfilter"):
        result = await kernel.run("Plan a birthday party", context={"conversation_id": "x"})
    assert result.text == "ok"
    assert store.titles == {"x": "Plan a birthday party"}
    assert [r.getMessage() for r in caplog.records] == ["title: the title model failed; using the heuristic title"]


async def test_paused_or_cancelled_turns_are_not_titled() -> None:
    from beamfilter_core import Filter, TurnResult

    async def cancel(request: Any, state: dict[str, Any], call_next: Any) -> TurnResult:
        return TurnResult("cancelled")

    store = InMemoryTitleStore()
    kernel = Kernel(ScriptedModel([]), filters=[title_filter(store=store), Filter("stop", around_turn=cancel)])
    await kernel.run("hi", context={"conversation_id": "c"})
    assert store.titles == {}


@pytest.mark.packages  # uses beamfilter-memory
async def test_memory_chat_store_holds_titles(tmp_path: Path) -> None:
    from beamfilter_memory import open_store

    store = open_store(f"sqlite:///{tmp_path / 'chats.db'}")
    titles = ChatStoreTitles(store)
    kernel = Kernel(ScriptedModel(["Sure.", "Done."]), filters=[title_filter(store=titles)])
    await kernel.run("Book a table for two", context={"conversation_id": "c1"})
    await kernel.run("At eight", context={"conversation_id": "c1"})
    assert await titles.get_title("c1") == "Book a table for two"
    assert [m.text for m in await store.load("c1#title")] == ["Book a table for two"]
    await store.aclose()


async def test_from_config_uses_kernel_model_or_named_model() -> None:
    kernel = Kernel.from_config(
        {
            "model": {"use": "scripted", "script": ["Answer.", "Kernel Titled"]},
            "models": {"small": {"use": "scripted", "script": ["Small Titled"]}},
            "filters": [{"use": "title"}, {"use": "title", "name": "title2", "model": "small"}],
        }
    )
    await kernel.run("hello there", context={"conversation_id": "k"})
    first, second = kernel.filters
    assert await first.extras["title"]("k") == "Kernel Titled"
    assert await second.extras["title"]("k") == "Small Titled"


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"generator='model'\) needs a model"):
        title_filter(generator="model")
    with pytest.raises(ConfigError, match=r"store=1\) has no get_title\(\)/set_title\(\) methods"):
        title_filter(store=1)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"model='big'\): no such model in \[models\]; known: none"):
        title_filter(model="big")
