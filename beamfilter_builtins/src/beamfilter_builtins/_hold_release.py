"""``hold_release``: buffer the whole stream, check it at the end, release it or replace it."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Literal

from beamfilter_core import Filter, FilterSpec, TokenTransform, options_schema
from beamfilter_core.errors import ConfigError

from ._callables import resolve_callable

__all__ = ["SPEC", "hold_release_filter"]

_NOTHING: tuple[str, ...] = ()


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "check": {
            "type": "string",
            "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$",
            "x-hint": "a function or an import path like 'package.module:function'",
            "x-style": "colon",
        },
        "applies_to": {"enum": ["stream", "answer"]},
        "name": {"type": "string", "minLength": 1},
    },
    "required": ["check"],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def hold_release_filter(
    check: Callable[[str], str | None] | str,
    *,
    applies_to: Literal["stream", "answer"] = "stream",
    name: str = "hold_release",
) -> Filter:
    """A token filter that holds every token until the LLM stream ends normally.

    At the end ``check(full_text)`` runs (synchronously): ``None`` releases the held
    tokens in their original order; a string is emitted as the one replacement token.
    When the stream fails, nothing is released. An empty stream (a round that only
    calls tools) is not checked. The cost is latency: the consumer sees nothing until
    the model has finished.

    Args:
        check: ``check(text) -> None | str``, or an import path ``"package.module:function"``.
        applies_to: ``"stream"`` (default) changes only what the consumer sees;
            ``"answer"`` also makes the replacement the answer (``TurnResult.text``, memory).
        name: the filter's name.

    Example::

        def no_shouting(text):
            return "[withheld]" if text.isupper() else None

        kernel = Kernel(model, filters=[hold_release_filter(no_shouting)])
    """
    checker = resolve_callable(check, option="check", owner="hold_release_filter")
    if inspect.iscoroutinefunction(checker):
        msg = (
            f"hold_release_filter(check={check!r}) is async; token transforms run synchronously, "
            "so give a plain function (or use a turn filter such as validation for async checks)."
        )
        raise ConfigError(msg)
    if applies_to not in ("stream", "answer"):
        msg = f"hold_release_filter(applies_to={applies_to!r}): give 'stream' or 'answer'."
        raise ConfigError(msg)

    def step(token: str, held: list[str]) -> tuple[Sequence[str], list[str]]:
        held.append(token)
        return _NOTHING, held

    def flush(held: list[str]) -> Sequence[str]:
        if not held:
            return _NOTHING
        verdict: Any = checker("".join(held))
        if verdict is None:
            return held
        if not isinstance(verdict, str):
            msg = f"hold_release check {checker!r} returned {verdict!r}; return None (release) or a replacement str."
            raise ConfigError(msg)
        return (verdict,)

    return Filter(name, token=TokenTransform(step, list, flush, applies_to))


SPEC = FilterSpec(
    "hold_release",
    hold_release_filter,
    OPTIONS,
    "Holds the streamed answer until it ends, then releases it or one replacement after check(text).",
    ("token",),
)
