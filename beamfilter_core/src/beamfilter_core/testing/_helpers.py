"""Helpers for tests of filters and kernels."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any

from .._filter import HOOK_NAMES, SCOPES, Filter, TokenTransform
from .._kernel import Kernel
from .._messages import ToolCall
from .._models._scripted import ScriptedModel, ScriptItem
from .._records import ChatResponse, TurnResult
from .._streaming import Event, RunFinished, TextDelta
from ..errors import ConfigError


async def passthrough(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """An around hook of any scope that only calls the next layer: a filter that is there
    (to be named, counted or stood between others) but changes nothing."""
    return await call_next(request)


def trace_filter(name: str, log: list[str], scopes: tuple[str, ...] = SCOPES) -> Filter:
    """A pass-through filter that appends ``"<name>.before <scope>"`` and
    ``"<name>.after <scope>"`` to ``log`` around each scope it is given."""

    def make(scope: str) -> Callable[[Any, dict[str, Any], Callable[[Any], Awaitable[Any]]], Awaitable[Any]]:
        async def hook(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
            log.append(f"{name}.before {scope}")
            response = await call_next(request)
            log.append(f"{name}.after {scope}")
            return response

        return hook

    hooks: dict[str, Any] = {hook: make(scope) for scope, hook in HOOK_NAMES.items() if scope in scopes}
    return Filter(name, **hooks)


def scripted_calls(*calls: ToolCall, answer: ScriptItem | None = "done", **options: Any) -> ScriptedModel:
    """A :class:`ScriptedModel` that first asks for ``calls`` (one batch), then gives
    ``answer`` (``None``: nothing more, for a run that pauses or ends at the tools).

    ``options`` go to ``ScriptedModel`` (``chunk``, ``token_delay``, ``repeat``).
    """
    if not calls:
        msg = "scripted_calls() got no tool calls; give at least one ToolCall(name, arguments, id)."
        raise ConfigError(msg)
    for index, call in enumerate(calls):
        if not isinstance(call, ToolCall):
            msg = f"scripted_calls() calls[{index}] is {call!r}; give ToolCall(name, arguments, id) objects."
            raise ConfigError(msg)
    first = ChatResponse.tool_calls(*calls)
    return ScriptedModel([first] if answer is None else [first, answer], **options)


async def collect_stream(events: AsyncIterator[Event]) -> tuple[str, list[Event]]:
    """Drain a ``run_stream`` iterator: return the streamed text and every event."""
    seen: list[Event] = []
    text: list[str] = []
    async for event in events:
        seen.append(event)
        if type(event) is TextDelta:
            text.append(event.text)
    if not seen or type(seen[-1]) is not RunFinished:
        msg = "the stream ended without a RunFinished event"
        raise AssertionError(msg)
    return "".join(text), seen


async def run_turn(
    kernel: Kernel, input: Any, stream: bool = False, *, context: Mapping[str, Any] | None = None
) -> tuple[TurnResult, str | None]:
    """Run one turn with ``run`` or, when ``stream`` is true, with ``run_stream``.

    Returns the result and the streamed text (``None`` for a non-streaming run), so one
    test can check both paths; parametrise ``stream`` over ``(False, True)``.
    """
    if not stream:
        return await kernel.run(input, context=context), None
    text, events = await collect_stream(kernel.run_stream(input, context=context))
    final = events[-1]
    assert isinstance(final, RunFinished)  # collect_stream checked it
    return final.result, text


def _transform_of(transform: Filter | TokenTransform, helper: str) -> TokenTransform:
    if isinstance(transform, TokenTransform):
        return transform
    if isinstance(transform, Filter) and transform.token is not None:
        return transform.token
    what = (
        f"the filter {transform.name!r}, which has no token transform"
        if isinstance(transform, Filter)
        else repr(transform)
    )
    msg = f"{helper}() got {what}; give a TokenTransform or a Filter made with token=TokenTransform(...)."
    raise ConfigError(msg)


def feed_tokens(transform: Filter | TokenTransform, tokens: Iterable[str], state: Any = None) -> tuple[list[str], Any]:
    """Step ``tokens`` through a token transform (a ``TokenTransform`` or a filter's
    ``token``), starting from ``state`` (a fresh one by default), without the final flush.

    Returns every token it emitted and the state it ends in, to check what it holds back.
    """
    step = _transform_of(transform, "feed_tokens")
    current = step.new_state() if state is None else state
    emitted: list[str] = []
    for token in tokens:
        out, current = step.step(token, current)
        emitted.extend(out)
    return emitted, current


def stream_tokens(transform: Filter | TokenTransform, tokens: Iterable[str]) -> list[str]:
    """Run ``tokens`` through a token transform as one whole stream: every token it
    emits from a fresh state, then what its ``flush`` emits at the end (as a normal end of
    the stream does in a kernel)."""
    step = _transform_of(transform, "stream_tokens")
    emitted, state = feed_tokens(step, tokens)
    if step.flush is not None:
        emitted.extend(step.flush(state))
    return emitted
