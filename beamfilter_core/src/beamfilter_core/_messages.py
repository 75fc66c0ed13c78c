"""Chat messages, tool calls and token usage: the values every scope passes around."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping
from typing import Any, Literal

import attrs

Role = Literal["system", "user", "assistant", "tool"]

_SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_safe(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD; ``text`` itself when clean.

    A file read with ``errors="surrogateescape"`` yields such characters; they cannot be
    encoded as UTF-8, so every place where text leaves the process (the model request,
    the stores) applies this rule instead of failing. Clean text costs one encode.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def _check_arguments(instance: Any, attribute: Any, value: Any) -> None:
    if not isinstance(value, Mapping):
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:80] + "..."
        msg = (
            f"ToolCall(arguments={shown}) needs the decoded arguments as a mapping, "
            f"e.g. {{'a': 1}}; for the JSON text a model sent use ToolCall.from_json(name, text)."
        )
        raise TypeError(msg)


def new_call_id() -> str:
    """Return a fresh tool-call id in the ``call_<hex>`` form OpenAI uses."""
    return "call_" + uuid.uuid4().hex[:24]


@attrs.frozen(slots=True)
class ContentPart:
    """One part of a multimodal message: ``text`` or an ``image_url``."""

    type: str
    text: str | None = None
    url: str | None = None


@attrs.frozen(slots=True)
class ToolCall:
    """A tool call requested by the model.

    ``arguments`` is the decoded JSON object. When the model sent arguments that are not
    a JSON object, ``arguments`` is empty and ``raw_arguments`` keeps the text so the loop
    can report a semantic tool error instead of crashing.

    Example::

        ToolCall("add", {"a": 1, "b": 2})
    """

    name: str
    arguments: Mapping[str, Any] = attrs.field(factory=dict, validator=_check_arguments)
    id: str = attrs.field(factory=new_call_id)
    raw_arguments: str | None = None

    @classmethod
    def from_json(cls, name: str, text: str, id: str | None = None) -> ToolCall:
        """Build a call from the argument text a model sent, keeping bad text as data."""
        call_id = id or new_call_id()
        try:
            decoded = json.loads(text) if text.strip() else {}
        except (ValueError, RecursionError):  # bad JSON, or nested too deeply to decode
            return cls(name, {}, call_id, raw_arguments=text)
        if not isinstance(decoded, dict):
            return cls(name, {}, call_id, raw_arguments=text)
        return cls(name, decoded, call_id)

    @property
    def arguments_json(self) -> str:
        """The arguments as the JSON text to send back to a provider."""
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False)


@attrs.frozen(slots=True)
class Reasoning:
    """A piece of a model's reasoning, kept so that it can be sent back unchanged.

    ``provider`` names the API that produced it (only that API is sent it again), ``text``
    is its readable text (empty when the provider hides it) and ``data`` the native block
    as the provider must receive it back, e.g. an Anthropic ``thinking`` block with its
    ``signature``.
    """

    provider: str
    text: str = ""
    data: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen(slots=True)
class Message:
    """One chat message.

    ``content`` is text, a tuple of :class:`ContentPart` (multimodal) or ``None``
    (an assistant message that only calls tools). ``tool_call_id`` links a ``tool``
    message to the call it answers.
    """

    role: Role
    content: str | tuple[ContentPart, ...] | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    #: The model's reasoning that came with this (assistant) message, sent back as it came
    #: in the next call to the same provider (Anthropic thinking blocks and their signatures).
    reasoning: tuple[Reasoning, ...] = ()

    @classmethod
    def system(cls, text: str) -> Message:
        """A system message."""
        return cls("system", text)

    @classmethod
    def user(cls, text: str) -> Message:
        """A user message."""
        return cls("user", text)

    @classmethod
    def assistant(cls, text: str | None, tool_calls: tuple[ToolCall, ...] = ()) -> Message:
        """An assistant message, optionally carrying tool calls."""
        return cls("assistant", text, tuple(tool_calls))

    @classmethod
    def tool(cls, call_id: str, content: str, name: str | None = None) -> Message:
        """The result of tool call ``call_id``."""
        return cls("tool", content, (), call_id, name)

    @property
    def text(self) -> str:
        """The text of the message: the string, or the text parts joined; ``""`` if none."""
        content = self.content
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        return "".join(part.text or "" for part in content if part.type == "text")

    def replace(self, **changes: Any) -> Message:
        """Return a copy with ``changes`` applied."""
        return attrs.evolve(self, **changes)


@attrs.frozen(slots=True)
class Usage:
    """Token counts reported by the provider for one or more LLM calls.

    ``cache_read_tokens`` and ``cache_write_tokens`` are the prompt tokens served from, and
    written to, the provider's prompt cache, where its API reports them (0 otherwise).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.completion_tokens + other.completion_tokens,
            self.total_tokens + other.total_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


def as_messages(value: str | Message | Any) -> tuple[Message, ...]:
    """Normalise a run's input: a string, one message or a sequence of messages."""
    if isinstance(value, str):
        return (Message("user", value),)
    if isinstance(value, Message):
        return (value,)
    try:
        items = tuple(value)
    except TypeError:
        msg = (
            f"Cannot use {value!r} (a {type(value).__name__}) as run input; "
            "pass a str, a Message or a sequence of Message."
        )
        raise TypeError(msg) from None
    for index, item in enumerate(items):
        if not isinstance(item, Message):
            msg = (
                f"Run input item [{index}] is {item!r} (a {type(item).__name__}); "
                "every item must be a Message, e.g. Message.user('hi')."
            )
            raise TypeError(msg)
    return items
