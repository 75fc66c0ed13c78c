"""``title``: a short title for each conversation, made after its first completed turn."""

from __future__ import annotations

import logging
import re
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    Filter,
    FilterSpec,
    Message,
    TurnRequest,
    TurnResult,
    options_schema,
)
from beamfilter_core.errors import ConfigError

from ._callables import call_maybe_async

__all__ = [
    "DEFAULT_TITLE_PROMPT",
    "SPEC",
    "ChatStoreTitles",
    "InMemoryTitleStore",
    "TitleStore",
    "heuristic_title",
    "title_filter",
]

log = logging.getLogger("beamfilter")

#: ``{question}`` and ``{answer}`` are replaced.
DEFAULT_TITLE_PROMPT = (
    "Write a short title (at most 6 words) for a conversation that starts like this. "
    "Reply with the title only, without quotes.\n\nUser: {question}\n\nAssistant: {answer}"
)

_SPACE = re.compile(r"\s+")
_EDGES = "\"'`*#\u201c\u201d\u2018\u2019\u00ab\u00bb \t"  # ASCII and typographic quotes


@runtime_checkable
class TitleStore(Protocol):
    """Where titles live: ``get_title(conversation_id)`` and ``set_title(conversation_id,
    title)``, sync or async."""

    def get_title(self, conversation_id: str) -> Any:
        """The stored title, or None."""

    def set_title(self, conversation_id: str, title: str) -> Any:
        """Store the title."""


class InMemoryTitleStore:
    """Titles in a dict (the default; lost when the process ends)."""

    def __init__(self) -> None:
        self.titles: dict[str, str] = {}

    def get_title(self, conversation_id: str) -> str | None:
        """The stored title, or None."""
        return self.titles.get(conversation_id)

    def set_title(self, conversation_id: str, title: str) -> None:
        """Store the title."""
        self.titles[conversation_id] = title


class ChatStoreTitles:
    """Keep titles in a beamfilter-memory ``ChatStore`` (SQLite, Redis, Postgres...).

    The title is one system message of the conversation ``conversation_id + suffix``, so
    any store of the memory package works unchanged.
    """

    def __init__(self, store: Any, *, suffix: str = "#title") -> None:
        if not (callable(getattr(store, "load", None)) and callable(getattr(store, "append", None))):
            msg = f"ChatStoreTitles(store={store!r}) needs a ChatStore with async load() and append()."
            raise ConfigError(msg)
        self.store = store
        self.suffix = suffix

    async def get_title(self, conversation_id: str) -> str | None:
        """The last stored title, or None."""
        messages = await self.store.load(conversation_id + self.suffix)
        return messages[-1].text if messages else None

    async def set_title(self, conversation_id: str, title: str) -> None:
        """Store the title (replacing an older one)."""
        key = conversation_id + self.suffix
        await self.store.clear(key)
        await self.store.append(key, [Message.system(title)])


def _clean(text: str, max_chars: int) -> str:
    line = next((part for part in text.strip().splitlines() if part.strip()), "")
    line = _SPACE.sub(" ", line).strip(_EDGES)
    if line.lower().startswith("title:"):
        line = line[len("title:") :].strip(_EDGES)
    line = line.rstrip(".!?:;,").strip()
    if len(line) > max_chars:
        cut = line[: max_chars - 1].rsplit(" ", 1)[0] if " " in line[: max_chars - 1] else line[: max_chars - 1]
        line = cut.rstrip(" ,;:-") + "…"
    return line


def heuristic_title(text: str, *, max_words: int = 6, max_chars: int = 60) -> str:
    """A title from the first line of ``text``: its first ``max_words`` words, first
    letter upper-cased, end punctuation removed, at most ``max_chars`` characters."""
    words = _clean(text, 10_000).split(" ")
    title = " ".join(words[:max_words])
    title = title.rstrip(".!?:;,")
    if title:
        title = title[0].upper() + title[1:]
    return _clean(title, max_chars)


def _first_user_text(messages: tuple[Message, ...]) -> str:
    return next((m.text for m in messages if m.role == "user" and m.text.strip()), "")


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "generator": {"enum": ["auto", "model", "heuristic"]},
        "model": {"type": "string", "minLength": 1},
        "prompt": {
            "type": "string",
            "pattern": "\\{question\\}",
            "x-hint": "a string with '{question}' (and optionally '{answer}')",
        },
        "max_words": {"type": "integer", "minimum": 1},
        "max_chars": {"type": "integer", "minimum": 8},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def title_filter(
    *,
    store: TitleStore | None = None,
    generator: str = "auto",
    model: Any = None,
    prompt: str = DEFAULT_TITLE_PROMPT,
    max_words: int = 6,
    max_chars: int = 60,
    build: BuildContext | None = None,
    name: str = "title",
) -> Filter:
    """A turn filter that titles a conversation after its first completed turn.

    Runs only with ``context["conversation_id"]`` and only while the store has no title
    for it. The title is made by a model (``model``: a ChatModel or the name of a model in
    the config's ``[models]``; default the kernel's model, ``build.model``, when built
    from config) with ``prompt``, or by :func:`heuristic_title` from the first user
    message. A failing or blank model answer falls back to the heuristic (logged); the
    turn's result is never changed. ``extras["store"]`` is the store and
    ``extras["title"](conversation_id)`` reads a title (awaitable).

    Args:
        store: a :class:`TitleStore`; default :class:`InMemoryTitleStore`. Use
            :class:`ChatStoreTitles` for a beamfilter-memory store.
        generator: ``"model"``, ``"heuristic"`` or ``"auto"`` (a model when there is one).
        model: the model for titles (see above).
        prompt: the instruction, with ``{question}`` and ``{answer}``.
        max_words: words of a heuristic title.
        max_chars: the longest title; longer ones are cut at a word with ``…``.
        build: given by ``Kernel.from_config``.
        name: the filter's name.
    """
    where = "title_filter"
    mode, words, chars = generator, max_words, max_chars
    titles: Any = store if store is not None else InMemoryTitleStore()
    if not (callable(getattr(titles, "get_title", None)) and callable(getattr(titles, "set_title", None))):
        msg = f"{where}(store={store!r}) has no get_title()/set_title() methods; see TitleStore."
        raise ConfigError(msg)
    chosen: Any = None
    if mode != "heuristic":
        if isinstance(model, str):
            known = dict(build.models) if build is not None else {}
            chosen = known.get(model)
            if chosen is None:
                msg = (
                    f"{where}(model={model!r}): no such model in [models]; known: {', '.join(sorted(known)) or 'none'}."
                )
                raise ConfigError(msg)
        else:
            chosen = model if model is not None else (build.model if build is not None else None)
        if chosen is not None and not callable(getattr(chosen, "complete", None)):
            msg = f"{where}(model={model!r}) is not a ChatModel (it has no complete() method)."
            raise ConfigError(msg)
        if chosen is None and mode == "model":
            msg = f"{where}(generator='model') needs a model: pass model=, or build the kernel with Kernel.from_config."
            raise ConfigError(msg)

    async def make_title(result: TurnResult) -> str:
        question = _first_user_text(result.messages)
        fallback = heuristic_title(question or result.text, max_words=words, max_chars=chars)
        if chosen is None:
            return fallback
        text = prompt.replace("{question}", question).replace("{answer}", result.text)
        try:
            response = await chosen.complete(ChatRequest((Message.user(text),)))
        except Exception:  # a title is never worth failing the turn
            log.warning("title: the title model failed; using the heuristic title", exc_info=True)
            return fallback
        return _clean(response.message.text, chars) or fallback

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        result = await call_next(request)
        conversation_id = request.context.get("conversation_id")
        if result.status != "completed" or not isinstance(conversation_id, str) or not conversation_id:
            return result
        if await call_maybe_async(titles.get_title, conversation_id):
            return result
        title = await make_title(result)
        if title:
            await call_maybe_async(titles.set_title, conversation_id, title)
            state["title"] = title
        return result

    async def read(conversation_id: str) -> str | None:
        found = await call_maybe_async(titles.get_title, conversation_id)
        return found if isinstance(found, str) else None

    closable = (titles,) if callable(getattr(titles, "aclose", None)) else ()
    return Filter(name, around_turn=around_turn, resources=closable, extras={"store": titles, "title": read})


SPEC = FilterSpec(
    "title",
    title_filter,
    OPTIONS,
    "Titles each conversation after its first completed turn (a model or a heuristic) in a title store.",
    ("turn",),
)
