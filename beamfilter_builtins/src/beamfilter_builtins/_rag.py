"""``rag``: retrieve documents for the user's question and put them after it, once per turn."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import attrs

from beamfilter_core import Filter, FilterSpec, TurnRequest, TurnResult, options_schema
from beamfilter_core.errors import ConfigError
from beamfilter_core.text import BM25Index

from ._callables import call_maybe_async, resolve_object

__all__ = ["DEFAULT_TEMPLATE", "SPEC", "Document", "InMemoryRetriever", "Retriever", "rag_filter"]

#: ``{question}`` and ``{context}`` are replaced.
DEFAULT_TEMPLATE = (
    "{question}\n\n"
    "Context:\n---------------------\n{context}\n---------------------\n"
    "Answer the question using the context above. If the context does not contain the answer, say so."
)


@attrs.frozen(slots=True)
class Document:
    """A retrieved piece of text with optional metadata."""

    text: str
    metadata: Mapping[str, Any] = attrs.field(factory=dict)


@runtime_checkable
class Retriever(Protocol):
    """``retrieve(query, top_k)`` (sync or async) returns documents, best first.

    Items may be :class:`Document`, ``str`` or mappings with a ``"text"`` key.
    """

    def retrieve(self, query: str, top_k: int) -> Any:
        """The best ``top_k`` documents for ``query``."""


class InMemoryRetriever:
    """BM25 keyword retrieval over documents held in memory (works out of the box).

    Example::

        retriever = InMemoryRetriever(["Paris is the capital of France.", "Rome is in Italy."])
    """

    def __init__(self, documents: Iterable[str | Document]) -> None:
        self.documents: list[Document] = []
        for position, item in enumerate(documents):
            if isinstance(item, str):
                item = Document(item)
            if not isinstance(item, Document):
                msg = f"InMemoryRetriever: documents[{position}] is {item!r}; give str or Document."
                raise ConfigError(msg)
            self.documents.append(item)
        # Keys of one width: equal scores keep the documents' order (ties are sorted by key).
        self._index = BM25Index((f"{i:012d}", ((d.text, 1),)) for i, d in enumerate(self.documents))

    def retrieve(self, query: str, top_k: int) -> list[Document]:
        """The ``top_k`` best-scoring documents (none score zero)."""
        return [self.documents[int(key)] for key in self._index.search(query, top_k)]


def _text_of(item: Any) -> str:
    if isinstance(item, Document):
        return item.text
    if isinstance(item, str):
        return item
    if isinstance(item, Mapping) and isinstance(item.get("text"), str):
        return str(item["text"])
    msg = f"rag_filter: the retriever returned {item!r}; return Document, str or {{'text': ...}} items."
    raise ConfigError(msg)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "retriever": {"type": "string", "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$"},
        "documents": {"type": "array", "items": {"type": "string", "x-hint": "str or Document"}},
        "top_k": {"type": "integer", "minimum": 1, "x-hint": "a positive integer"},
        "template": {
            "type": "string",
            "allOf": [{"pattern": "\\{question\\}"}, {"pattern": "\\{context\\}"}],
            "x-hint": "a string with '{question}' and '{context}'",
        },
        "inject_when_empty": {"type": "boolean"},
        "name": {"type": "string", "minLength": 1},
    },
    "oneOf": [{"required": ["retriever"]}, {"required": ["documents"]}],
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def rag_filter(
    retriever: Retriever | str | None = None,
    *,
    documents: Sequence[str] | None = None,
    top_k: int = 4,
    template: str = DEFAULT_TEMPLATE,
    inject_when_empty: bool = False,
    name: str = "rag",
) -> Filter:
    """A turn filter that adds retrieved context to the last plain-text user entry message.

    Retrieval runs once per turn, with that message's text as the query; the context
    goes after the question with a grounding instruction (``template``). Nothing is
    injected when nothing (or only blank text) is retrieved, unless
    ``inject_when_empty=True`` (the strict mode: the model is told the context is
    empty). Skipped on resume, without a plain-text user message, and for multimodal
    content.

    Args:
        retriever: a :class:`Retriever`, or an import path ``"package.module:object"``.
        documents: texts for an :class:`InMemoryRetriever` (instead of ``retriever``).
        top_k: how many documents to ask for (default 4).
        template: the new message text, with ``{question}`` and ``{context}``.
        inject_when_empty: inject even when nothing was retrieved.
        name: the filter's name.
    """
    if (retriever is None) == (documents is None):
        msg = "rag_filter: give exactly one of retriever= (a Retriever) or documents= (a list of texts)."
        raise ConfigError(msg)
    source: Any = (
        InMemoryRetriever(documents)
        if documents is not None
        else resolve_object(retriever, option="retriever", owner="rag_filter")
    )
    if not callable(getattr(source, "retrieve", None)):
        msg = f"rag_filter(retriever={retriever!r}): it has no retrieve(query, top_k) method."
        raise ConfigError(msg)

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        if request.resume:
            return await call_next(request)
        messages = request.messages
        position = next(
            (i for i in range(len(messages) - 1, -1, -1) if messages[i].role == "user"),
            None,
        )
        if position is None or not isinstance(messages[position].content, str):
            return await call_next(request)
        question = messages[position].content
        assert isinstance(question, str)  # checked just above
        found = await call_maybe_async(source.retrieve, question, top_k)
        texts = [text for text in (_text_of(item) for item in found or ()) if text.strip()]
        state["retrieved"] = texts
        if not texts and not inject_when_empty:
            return await call_next(request)
        context = "\n\n".join(texts)
        text = template.replace("{context}", context).replace("{question}", question)
        rewritten = (*messages[:position], messages[position].replace(content=text), *messages[position + 1 :])
        return await call_next(request.replace(messages=rewritten))

    return Filter(name, around_turn=around_turn, extras={"retriever": source})


SPEC = FilterSpec(
    "rag",
    rag_filter,
    OPTIONS,
    "Retrieval-augmented answers: adds retrieved context after the user's question, once per turn.",
    ("turn",),
)
