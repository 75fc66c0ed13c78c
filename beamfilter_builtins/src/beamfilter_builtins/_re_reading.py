"""``re_reading`` (RE2): ask the model to read each question twice."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import Filter, FilterSpec, TurnRequest, TurnResult, options_schema
from beamfilter_core.errors import ConfigError

__all__ = ["DEFAULT_TEMPLATE", "SPEC", "re_reading_filter"]

#: ``{question}`` is replaced by the user's text.
DEFAULT_TEMPLATE = "{question}\nRead the question again: {question}"


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "template": {
            "type": "string",
            "pattern": "\\{question\\}",
            "x-hint": "a string with the placeholder '{question}' or a function",
        },
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def re_reading_filter(template: str | Callable[[str], str] = DEFAULT_TEMPLATE, *, name: str = "re_reading") -> Filter:
    """A turn filter that rewrites each plain-text user entry message with ``template``.

    Only this turn's entry messages change (not the history), only ``user`` messages
    whose content is a string; multimodal content is left alone. Skipped on resume.

    Args:
        template: a string with ``{question}`` placeholders, or a function
            ``question -> text``. Default: ``"<q>\\nRead the question again: <q>"``.
        name: the filter's name.
    """
    if isinstance(template, str):
        pattern = template

        def render_text(question: str) -> str:
            return pattern.replace("{question}", question)

        render: Callable[[str], str] = render_text
    elif callable(template):
        render = template
    else:
        msg = f"re_reading_filter(template={template!r}): give a string with '{{question}}' or a function."
        raise ConfigError(msg)

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        if request.resume or not request.messages:
            return await call_next(request)
        rewritten = tuple(
            message.replace(content=render(message.content))
            if message.role == "user" and isinstance(message.content, str)
            else message
            for message in request.messages
        )
        return await call_next(request.replace(messages=rewritten))

    return Filter(name, around_turn=around_turn)


SPEC = FilterSpec(
    "re_reading",
    re_reading_filter,
    OPTIONS,
    "Re-reading (RE2): repeats each user question with 'Read the question again:'.",
    ("turn",),
)
