"""beamfilter-shout: an example third-party beamfilter plugin.

The ``beamfilter`` entry point names this module; beamfilter calls its ``@hookimpl``
functions to learn which filters it provides. Users enable them by name in config.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from beamfilter_core import (
    Filter,
    FilterSpec,
    FilterState,
    Message,
    TokenTransform,
    TurnNext,
    TurnRequest,
    TurnResult,
    hookimpl,
    options_schema,
)

__all__ = ["SHOUT_OPTIONS", "SIGN_OFF_OPTIONS", "beamfilter_register_filters", "shout", "sign_off"]

__version__ = "0.1.0"

DEFAULT_SIGN_OFF = "-- sent with beamfilter-shout"


def _upper(token: str, state: None) -> tuple[Sequence[str], None]:
    return (token.upper(),), state


#: Each filter's options are described once, by a JSON schema: the core checks a config's
#: options against it, and ``@options_schema`` checks Python calls against the same schema
#: (``shout(applies_to="x")`` raises ConfigError), so the factories check nothing by hand.
SHOUT_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {"applies_to": {"enum": ["stream", "answer"]}},
    "additionalProperties": False,
}
SIGN_OFF_OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "minLength": 1, "x-hint": "the line to append"}},
    "additionalProperties": False,
}


@options_schema(SHOUT_OPTIONS)
def shout(*, applies_to: Literal["stream", "answer"] = "answer") -> Filter:
    """A filter that upper-cases the streamed text (and, with ``"answer"``, the answer)."""
    return Filter("shout", token=TokenTransform(_upper, applies_to=applies_to))


@options_schema(SIGN_OFF_OPTIONS)
def sign_off(*, text: str = DEFAULT_SIGN_OFF) -> Filter:
    """A turn filter that appends ``text`` on its own line to every completed answer."""

    async def around_turn(request: TurnRequest, state: FilterState, call_next: TurnNext) -> TurnResult:
        result = await call_next(request)
        if result.status != "completed" or result.message is None:
            return result  # paused and cancelled results pass through unchanged
        signed = Message("assistant", f"{result.message.text}\n{text}")
        state["signed"] = state.get("signed", 0) + 1
        return result.replace(message=signed, messages=(*result.messages[:-1], signed))

    return Filter("sign_off", around_turn=around_turn)


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    """The filters of this plugin."""
    return [
        FilterSpec("shout", shout, SHOUT_OPTIONS, "upper-cases the answer (or only the stream)", ("token",)),
        FilterSpec(
            "sign_off", sign_off, SIGN_OFF_OPTIONS, "appends a sign-off line to every completed answer", ("turn",)
        ),
    ]
