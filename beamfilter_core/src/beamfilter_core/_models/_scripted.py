"""ScriptedModel: replays scripted answers and records every request (tests, docs, demos)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from .._lazy import lazy_module
from .._records import ChatRequest, ChatResponse
from ..errors import ConfigError, ScriptExhaustedError
from ._base import TokenSink

if TYPE_CHECKING:
    import asyncio
else:
    # asyncio is the one heavy module beamfilter_core can import late (see bench/RESULTS.md)
    asyncio = lazy_module("asyncio", globals())

ScriptItem = str | ChatResponse | Callable[[ChatRequest], Any]

_WORDS = re.compile(r"\s*\S+|\s+")


class ScriptedModel:
    """A chat model that answers from a script, in order.

    Items are a ``str`` (a text answer), a :class:`ChatResponse`, or a callable
    ``(ChatRequest) -> ChatResponse | str`` (sync or async). Every request is recorded in
    :attr:`requests`. Streaming splits text into word tokens (or ``chunk`` characters)
    and can wait ``token_delay`` seconds between tokens.

    Example::

        model = ScriptedModel(["Hello!", ChatResponse.tool_calls(ToolCall("add", {"a": 1}))])
    """

    def __init__(
        self,
        script: Iterable[ScriptItem],
        *,
        chunk: int | None = None,
        token_delay: float = 0.0,
        repeat: bool = False,
    ) -> None:
        self.script: list[ScriptItem] = list(script)
        for index, item in enumerate(self.script):
            if not (isinstance(item, str | ChatResponse) or callable(item)):
                msg = (
                    f"ScriptedModel script[{index}] is {item!r}; items must be a str, "
                    "a ChatResponse or a callable (ChatRequest) -> ChatResponse."
                )
                raise ConfigError(msg)
        if chunk is not None and chunk < 1:
            msg = f"ScriptedModel chunk={chunk!r}; give a positive number of characters or None."
            raise ConfigError(msg)
        self.chunk = chunk
        self.token_delay = token_delay
        self.repeat = repeat
        #: Every request received, in order.
        self.requests: list[ChatRequest] = []

    def __repr__(self) -> str:
        return f"ScriptedModel({len(self.script)} items, {len(self.requests)} calls)"

    async def _next(self, request: ChatRequest) -> ChatResponse:
        position = len(self.requests)
        self.requests.append(request)
        if position >= len(self.script):
            if not (self.repeat and self.script):
                msg = (
                    f"ScriptedModel got call {position + 1} but has only {len(self.script)} "
                    "scripted responses; add items to the script (or pass repeat=True)."
                )
                raise ScriptExhaustedError(msg)
            position %= len(self.script)
        item = self.script[position]
        if callable(item) and not isinstance(item, str | ChatResponse):
            item = item(request)
            if inspect.isawaitable(item):
                item = await item
        if isinstance(item, str):
            return ChatResponse.from_text(item)
        if not isinstance(item, ChatResponse):
            msg = f"ScriptedModel script[{position}] returned {item!r}; return a ChatResponse or a str."
            raise ConfigError(msg)
        return item

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Return the next scripted answer."""
        return await self._next(request)

    def tokens(self, text: str) -> list[str]:
        """Split ``text`` the way :meth:`stream` delivers it."""
        if self.chunk is None:
            return _WORDS.findall(text)
        size = self.chunk
        return [text[i : i + size] for i in range(0, len(text), size)]

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Deliver the next scripted answer's text token by token, then return it."""
        response = await self._next(request)
        text = response.message.text
        if text:
            delay = self.token_delay
            for token in self.tokens(text):
                if delay:
                    await asyncio.sleep(delay)
                on_token(token)
        return response
