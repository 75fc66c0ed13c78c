"""``compaction``: keep the prompt under a token budget by summarising or dropping old messages.

Before each LLM call the prompt size is estimated (characters / ``chars_per_token``,
plus ``message_overhead`` tokens per message, system prompt included, or a
``count_tokens`` callable). Above ``max_tokens`` the oldest messages are removed, in
whole units so an assistant message with tool calls always keeps its tool results, until
the rest fits ``target_tokens``. System messages are never removed (the kernel's system
prompt travels apart and is never touched), and the last unit and the last user message
(the question at hand) always stay.

``strategy="summary"`` (default) replaces the removed messages by one ``user`` message
holding a summary made by the kernel's model (or ``model``); summaries are cached for
the run and extended incrementally when more messages must go. The summary's text comes
on top of ``target_tokens``, so keep a margin below ``max_tokens`` (the default target is
3/4 of it). ``strategy="window"``
just drops them. Only ``ChatRequest.messages`` changes; ``delta`` (what memory stores)
is left alone.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from beamfilter_core import BuildContext, ChatRequest, ChatResponse, Filter, FilterSpec, Message, options_schema
from beamfilter_core.errors import ConfigError

from ._callables import resolve_callable
from ._options import IMPORT_PATH

__all__ = ["DEFAULT_SUMMARY_PROMPT", "SPEC", "compaction_filter", "estimate_tokens", "split_units"]

_log = logging.getLogger("beamfilter.compaction")

#: The instruction given to the summary model.
DEFAULT_SUMMARY_PROMPT = (
    "Summarise the conversation below for the assistant that continues it. Keep facts, names, numbers, "
    "decisions, tool results that matter and open questions; drop chit-chat. Answer with the summary only."
)
SUMMARY_HEADER = "[Summary of the earlier conversation]\n"


def estimate_tokens(messages: Sequence[Message], system: str | None, chars_per_token: float, overhead: int) -> int:
    """A provider-independent estimate of a prompt's tokens."""
    chars = (len(system) if system else 0) + sum(map(_chars, messages))
    count = len(messages) + (1 if system else 0)
    return int(chars / chars_per_token) + overhead * count


def _chars(message: Message) -> int:
    chars = len(message.text)
    for call in message.tool_calls:
        chars += len(call.name) + len(call.arguments_json)
    return chars


def split_units(messages: Sequence[Message]) -> list[tuple[Message, ...]]:
    """Group messages into units that must stay together: an assistant message with
    tool calls and the tool results that follow it; any other message alone."""
    units: list[tuple[Message, ...]] = []
    current: list[Message] = []
    for message in messages:
        if message.role == "tool" and current:
            current.append(message)
            continue
        if current:
            units.append(tuple(current))
            current = []
        if message.tool_calls:
            current = [message]
        else:
            units.append((message,))
    if current:
        units.append(tuple(current))
    return units


def _transcript(messages: Sequence[Message]) -> str:
    lines = []
    for message in messages:
        text = message.text
        for call in message.tool_calls:
            text += f"\n[calls {call.name}({call.arguments_json})]"
        label = message.role if message.role != "tool" else f"tool result ({message.name or message.tool_call_id})"
        lines.append(f"{label}: {text}")
    return "\n".join(lines)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_tokens": {"type": "integer", "minimum": 1},
        "target_tokens": {"type": "integer", "minimum": 1},
        "strategy": {"enum": ["summary", "window"]},
        "model": {"type": "string"},
        "summary_prompt": {"type": "string", "minLength": 1},
        "chars_per_token": {"type": "number", "minimum": 0.5},
        "message_overhead": {"type": "integer", "minimum": 0},
        "count_tokens": IMPORT_PATH,
        "name": {"type": "string"},
    },
    "required": ["max_tokens"],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def compaction_filter(
    *,
    max_tokens: int,
    target_tokens: int | None = None,
    strategy: str = "summary",
    model: Any = None,
    summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
    chars_per_token: float = 4.0,
    message_overhead: int = 4,
    count_tokens: Callable[[Sequence[Message]], int] | str | None = None,
    build: BuildContext | None = None,
    name: str = "compaction",
) -> Filter:
    """Summarise or drop the oldest messages when the prompt grows past ``max_tokens``.

    Args:
        max_tokens: Estimated prompt size that triggers compaction.
        target_tokens: Size to compact down to (default 3/4 of ``max_tokens``), so
            compaction does not run again on the very next call.
        strategy: ``"summary"`` or ``"window"`` (drop without summary).
        model: The summary model: a ChatModel, or a config model name (resolved through
            ``build.models``). Default: the kernel's model (``build.model``).
        summary_prompt: The instruction for the summary model.
        chars_per_token: Characters per token of the estimate.
        message_overhead: Tokens added per message by the estimate.
        count_tokens: ``count_tokens(messages) -> int`` replacing the estimate (or an
            import path ``"package.module:function"``).
        build: Given by ``Kernel.from_config``.
        name: The filter's name.

    Returns:
        A chat-scope filter. ``state["compactions"]`` counts the compactions of the run.
    """
    where = "compaction_filter"
    budget, target = max_tokens, target_tokens
    if target is None:
        target = max(1, budget * 3 // 4)
    if target > budget:
        msg = f"{where}(target_tokens={target_tokens!r}) is larger than max_tokens={budget}; give a smaller target."
        raise ConfigError(msg)
    mode, ratio, overhead = strategy, float(chars_per_token), message_overhead
    counter = resolve_callable(count_tokens, option="count_tokens", owner=where) if count_tokens is not None else None
    summarizer = None
    if mode == "summary":
        summarizer = _summary_model(model, build)
        if summarizer is None:
            msg = (
                f"{where}(strategy='summary') needs a model for summaries: pass model=<ChatModel>, or build the "
                "kernel with Kernel.from_config (the kernel's model is used), or use strategy='window'."
            )
            raise ConfigError(msg)

    def size(messages: Sequence[Message], system: str | None) -> int:
        if counter is not None:
            extra = (Message.system(system),) if system else ()
            return int(counter((*extra, *messages)))
        return estimate_tokens(messages, system, ratio, overhead)

    async def summarise(state: dict[str, Any], removed: tuple[Message, ...]) -> str:
        cached: tuple[tuple[Message, ...], str] | None = state.get("summary")
        if cached is not None and cached[0] == removed:
            return cached[1]
        text = _transcript(removed)
        if cached is not None and removed[: len(cached[0])] == cached[0]:
            text = f"Earlier summary:\n{cached[1]}\n\nThen:\n" + _transcript(removed[len(cached[0]) :])
        request = ChatRequest((Message.system(summary_prompt), Message.user(text)))
        response = await summarizer.complete(request)  # type: ignore[union-attr]
        summary: str = response.message.text.strip()
        state["summary"] = (removed, summary)
        return summary

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        messages = request.messages
        if size(messages, request.system) <= budget:
            return await call_next(request)
        leading = 0
        while leading < len(messages) and messages[leading].role == "system":
            leading += 1
        units = split_units(messages[leading:])
        # Never removed: the last unit, and the last user message (the question at hand).
        protected = {len(units) - 1}
        for index in range(len(units) - 1, -1, -1):
            if units[index][0].role == "user":
                protected.add(index)
                break
        pinned: list[Message] = list(messages[:leading])
        removed: list[Message] = []
        dropped: set[int] = set()
        reserve = 0 if mode == "window" else overhead  # the summary message (its text is not known yet)
        # The default estimate is additive: keep running totals instead of re-measuring.
        costs = [sum(map(_chars, unit)) for unit in units] if counter is None else []
        chars = sum(costs) + sum(map(_chars, pinned)) + (len(request.system) if request.system else 0)
        count = len(messages) + (1 if request.system else 0)
        for index in range(len(units)):
            if counter is None:
                current = int(chars / ratio) + overhead * count
            else:
                rest = [m for i, unit in enumerate(units) if i not in dropped for m in unit]
                current = size([*pinned, *rest], request.system)
            if current + reserve <= target:
                break
            if index in protected:
                continue
            dropped.add(index)
            for message in units[index]:
                if message.role == "system":
                    pinned.append(message)  # kept: still counted
                else:
                    removed.append(message)
                    count -= 1
                    chars -= _chars(message)
        if not removed:
            return await call_next(request)
        kept = [m for i, unit in enumerate(units) if i not in dropped for m in unit]
        if mode == "summary":
            summary = await summarise(state, tuple(removed))
            kept.insert(0, Message.user(SUMMARY_HEADER + summary))
        state["compactions"] = state.get("compactions", 0) + 1
        _log.info("compacted %d messages (%s)", len(removed), mode)
        return await call_next(request.replace(messages=(*pinned, *kept)))

    return Filter(name, around_chat=around_chat)


def _summary_model(model: Any, build: BuildContext | None) -> Any:
    if model is None:
        return build.model if build is not None else None
    if isinstance(model, str):
        known = dict(build.models) if build is not None else {}
        found = known.get(model)
        if found is None:
            names = ", ".join(sorted(known)) or "none"
            msg = f"compaction_filter(model={model!r}) is not a model named in the config (known models: {names})."
            raise ConfigError(msg)
        return found
    if not callable(getattr(model, "complete", None)):
        msg = f"compaction_filter(model={model!r}) is not a ChatModel (it needs an async complete(request))."
        raise ConfigError(msg)
    return model


SPEC = FilterSpec(
    "compaction",
    compaction_filter,
    OPTIONS,
    "Summarise (or drop) the oldest messages when the prompt exceeds max_tokens; tool rounds stay whole.",
    ("chat",),
)
