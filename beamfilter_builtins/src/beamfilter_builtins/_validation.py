"""``validation``: check the final answer; on a problem, re-enter the loop with feedback."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import Filter, FilterSpec, Message, TurnRequest, TurnResult, options_schema
from beamfilter_core.errors import ConfigError

from ._callables import call_maybe_async, resolve_callable
from ._options import IMPORT_PATH

__all__ = ["DEFAULT_FEEDBACK", "SPEC", "validation_filter", "validation_hook"]

#: ``{problem}`` is what ``validate`` returned.
DEFAULT_FEEDBACK = "Your last answer failed validation: {problem}. Please fix it and answer again."

Validate = Callable[[TurnResult], Awaitable[str | None]]


#: The options the validation filters share.
RETRIES: dict[str, Any] = {"type": "integer", "minimum": 0}
FEEDBACK: dict[str, Any] = {
    "type": "string",
    "pattern": "\\{problem\\}",
    "x-hint": "a string containing '{problem}'",
}


def validation_hook(
    validate: Validate, max_retries: int, feedback: str
) -> Callable[[TurnRequest, dict[str, Any], Callable[[TurnRequest], Awaitable[TurnResult]]], Awaitable[TurnResult]]:
    """The around_turn hook shared by ``validation`` and ``schema_validation``."""

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        result = await call_next(request)
        retries = 0
        while result.status == "completed" and result.blocked_by is None:
            problem = await validate(result)
            if problem is None or retries >= max_retries:
                break
            retries += 1
            state["retries"] = retries
            note = Message.user(feedback.replace("{problem}", problem))
            result = await call_next(request.followup(result, note))
        return result

    return around_turn


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "validate": {**IMPORT_PATH, "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$", "x-style": "colon"},
        "max_retries": RETRIES,
        "feedback": FEEDBACK,
        "name": {"type": "string", "minLength": 1},
    },
    "required": ["validate"],
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def validation_filter(
    validate: Callable[[TurnResult], Any] | str,
    *,
    max_retries: int = 2,
    feedback: str = DEFAULT_FEEDBACK,
    name: str = "validation",
) -> Filter:
    """A turn filter that validates the final result and asks the model to fix it.

    ``validate(result)`` (sync or async) returns ``None`` when the result is fine, or a
    string naming the problem. On a problem the filter re-enters the loop with the
    previous transcript plus a user message built from ``feedback`` (so the original
    question is in the prompt even without memory), at most ``max_retries`` times;
    then the last result is returned as it is, with no exception. Results that are not
    ``completed`` (paused, cancelled) or were blocked (``blocked_by``) pass through
    untouched and are never retried. A re-entry clears ``resume``.

    In a streaming run the consumer sees every attempt's tokens, one after the other.

    Args:
        validate: the check, or an import path ``"package.module:function"``.
        max_retries: how many times to re-enter (default 2).
        feedback: the feedback message, with a ``{problem}`` placeholder.
        name: the filter's name.
    """
    check = resolve_callable(validate, option="validate", owner="validation_filter")
    retries, template = max_retries, feedback

    async def run_check(result: TurnResult) -> str | None:
        problem = await call_maybe_async(check, result)
        if problem is None or isinstance(problem, str):
            return problem
        msg = f"validation_filter: validate returned {problem!r}; return None (valid) or a str naming the problem."
        raise ConfigError(msg)

    return Filter(name, around_turn=validation_hook(run_check, retries, template))


SPEC = FilterSpec(
    "validation",
    validation_filter,
    OPTIONS,
    "Validates the final answer with validate(result) and re-enters with feedback (max_retries=2).",
    ("turn",),
)
