"""rag: retrieved context after the question, once per turn, nothing when empty."""

from __future__ import annotations

import math
from typing import Any

import pytest

from beamfilter_builtins import Document, InMemoryRetriever, rag_filter
from beamfilter_builtins._rag import SPEC as RAG_SPEC
from beamfilter_core import ChatResponse, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


DOCS = ["Paris is the capital of France.", "Rome is the capital of Italy.", "Bananas are yellow."]


async def test_rag_injects_context_after_question(stream: bool) -> None:
    model = ScriptedModel(["Paris"])
    kernel = Kernel(model, filters=[rag_filter(documents=DOCS, top_k=1)])
    await run_turn(kernel, "What is the capital of France?", stream)
    assert model.requests[0].messages[0].text == (
        "What is the capital of France?\n\n"
        "Context:\n---------------------\nParis is the capital of France.\n---------------------\n"
        "Answer the question using the context above. If the context does not contain the answer, say so."
    )


async def test_rag_nothing_when_empty_unless_strict() -> None:
    model = ScriptedModel(["?", "?"])
    kernel = Kernel(model, filters=[rag_filter(documents=DOCS)])
    await kernel.run("quantum chromodynamics")
    assert model.requests[0].messages[0].text == "quantum chromodynamics"
    strict = Kernel(
        model, filters=[rag_filter(documents=DOCS, inject_when_empty=True, template="{question}|{context}|")]
    )
    await strict.run("quantum chromodynamics")
    assert model.requests[1].messages[0].text == "quantum chromodynamics||"


async def test_rag_custom_async_retriever_once_per_turn_last_user_message() -> None:
    queries: list[tuple[str, int]] = []

    class Retriever:
        async def retrieve(self, query: str, top_k: int) -> list[Any]:
            queries.append((query, top_k))
            return [Document("doc one"), "  ", {"text": "doc two"}]

    @tool
    def look() -> str:
        """Look."""
        return "seen"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("look", {}, "c1")), "done"])
    kernel = Kernel(model, tools=[look], filters=[rag_filter(Retriever(), template="{question}\n[{context}]")])
    result = await kernel.run([Message.user("first"), Message.user("second")])
    assert result.text == "done"
    assert queries == [("second", 4)]
    assert [m.text for m in model.requests[0].messages] == ["first", "second\n[doc one\n\ndoc two]"]


def test_in_memory_retriever_and_options() -> None:
    retriever = InMemoryRetriever(DOCS)
    assert [d.text for d in retriever.retrieve("capital Italy", 2)] == [DOCS[1], DOCS[0]]
    assert retriever.retrieve("", 3) == []
    with pytest.raises(ConfigError, match="exactly one of"):
        rag_filter()
    with pytest.raises(ConfigError, match="no retrieve"):
        rag_filter(object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="top_k=0"):
        rag_filter(documents=DOCS, top_k=0)
    with pytest.raises(ConfigError, match="documents\\[0\\] is 3"):
        InMemoryRetriever([3])  # type: ignore[list-item]
    assert RAG_SPEC.name == "rag"


async def test_outside_validation_retrieves_once_per_turn() -> None:
    from beamfilter_builtins import validation_filter

    queries: list[str] = []

    class Counting:
        def retrieve(self, query: str, top_k: int) -> list[str]:
            queries.append(query)
            return ["ctx"]

    model = ScriptedModel(["bad", "good"])
    checker = validation_filter(lambda result: None if result.text == "good" else "not good")
    kernel = Kernel(model, filters=[rag_filter(Counting(), template="{question} [{context}]"), checker])
    result = await kernel.run("q")
    assert result.text == "good"
    assert queries == ["q"]
    assert [m.text for m in model.requests[1].messages][:2] == ["q [ctx]", "bad"]


def test_in_memory_retriever_scores_are_plain_bm25_and_ties_keep_document_order() -> None:

    texts = [f"filler number {i}" for i in range(11)] + ["Paris is the capital of France.", "Paris, Texas"]
    retriever = InMemoryRetriever(texts)
    # Equal scores (every filler document) come in document order, 2 before 10.
    assert [d.text for d in retriever.retrieve("filler", 11)] == texts[:11]
    found = retriever._index.scores("paris")
    idf = math.log(1 + (13 - 2 + 0.5) / (2 + 0.5))
    average = (11 * 3 + 6 + 2) / 13  # stop words are kept: rag indexes every word
    expected = [idf * 2.2 / (1 + 1.2 * (0.25 + 0.75 * length / average)) for length in (2, 6)]
    assert [score for _, score in found] == pytest.approx(expected, rel=1e-12)
    assert [d.text for d in retriever.retrieve("Paris", 5)] == ["Paris, Texas", "Paris is the capital of France."]
