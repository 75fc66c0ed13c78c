"""``schema_validation``: the answer must be JSON matching a JSON schema, else retry."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

import fastjsonschema

from beamfilter_core import Filter, FilterSpec, TurnResult, options_schema
from beamfilter_core.errors import ConfigError

from ._text import format_path, format_schema_error
from ._validation import DEFAULT_FEEDBACK, FEEDBACK, RETRIES, validation_hook

__all__ = ["SPEC", "schema_validation_filter", "schema_validator"]

_FENCE = re.compile(r"```[ \t]*(?:json|JSON)?[ \t]*\n?(.*?)```", re.DOTALL)
_OWNER = "schema_validation_filter"


class _Node:
    """A compiled schema plus compiled sub-schemas, to report more than the first error."""

    __slots__ = ("blind", "items", "properties", "required", "validate")

    def __init__(self, schema: Mapping[str, Any], validate: Callable[[Any], Any], shared: Mapping[str, Any]) -> None:
        self.validate = validate
        self.properties: dict[str, _Node] = {}
        self.items: _Node | None = None
        # Properties whose sub-schema cannot be compiled alone: only the parent checks them.
        self.blind: set[str] = set()
        self.required: tuple[str, ...] = tuple(r for r in schema.get("required", ()) if isinstance(r, str))
        for key, sub in (schema.get("properties") or {}).items():
            node = _child(sub, shared)
            if node is None:
                self.blind.add(key)
            else:
                self.properties[key] = node
        items = schema.get("items")
        if isinstance(items, Mapping):
            self.items = _child(items, shared)

    def collect(self, value: Any, path: list[Any], out: list[str], limit: int) -> None:
        try:
            self.validate(value)
        except fastjsonschema.JsonSchemaValueException as exc:
            before = len(out)
            unseen = False
            if isinstance(value, dict):
                missing = [name for name in self.required if name not in value]
                if missing:
                    where = format_path(path)
                    out.append(f"{where}: missing required properties {', '.join(json.dumps(m) for m in missing)}")
                for key, node in self.properties.items():
                    if len(out) >= limit:
                        return
                    if key in value:
                        node.collect(value[key], [*path, key], out, limit)
                unseen = any(key in value for key in self.blind)
            elif isinstance(value, list) and self.items is not None:
                for index, item in enumerate(value):
                    if len(out) >= limit:
                        return
                    self.items.collect(item, [*path, index], out, limit)
            if (len(out) == before or unseen) and len(out) < limit:
                first = format_schema_error(exc, path)
                if first not in out:
                    out.append(first)


def _child(schema: Any, shared: Mapping[str, Any]) -> _Node | None:
    if not isinstance(schema, Mapping):
        return None
    # A sub-schema's "$ref": "#/definitions/..." resolves against the root's definitions.
    standalone = {**shared, **schema}
    try:
        return _Node(schema, fastjsonschema.compile(standalone), shared)
    except Exception:  # noqa: BLE001  # e.g. a $ref into another part of the root: the parent reports it
        return None


def schema_validator(
    schema: Mapping[str, Any],
    *,
    code_fence: bool = True,
    max_errors: int | None = None,
) -> Callable[[TurnResult], str | None]:
    """``validate(result) -> None | problem`` for a JSON ``schema`` (compiled once).

    The answer text is stripped of its first ```json fence (``code_fence=True``),
    decoded as JSON and validated with fastjsonschema. Problems name the path
    (``films[1].title``) and, for enum, const and pattern, the allowed values;
    ``max_errors`` caps how many are reported (None: all found).
    """
    if not isinstance(schema, Mapping):
        msg = f"{_OWNER}(schema={schema!r}): give a JSON schema (a dict)."
        raise ConfigError(msg)
    if max_errors is not None and (isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 1):
        msg = f"{_OWNER}(max_errors={max_errors!r}): give a positive integer or None (report every error)."
        raise ConfigError(msg)
    try:
        shared = {key: schema[key] for key in ("definitions", "$defs") if key in schema}
        root = _Node(schema, fastjsonschema.compile(dict(schema)), shared)
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        msg = f"{_OWNER}(schema=...): the schema is invalid: {exc}. Fix the schema."
        raise ConfigError(msg) from None
    limit = max_errors if max_errors is not None else 1_000_000

    def validate(result: TurnResult) -> str | None:
        text = result.text
        if code_fence:
            fenced = _FENCE.search(text)
            if fenced is not None:
                text = fenced.group(1)
        if not text.strip():
            return "answer has no text"
        try:
            value = json.loads(text)
        except ValueError as exc:
            return f"answer is not valid JSON: {exc}"
        problems: list[str] = []
        root.collect(value, [], problems, limit)
        if not problems:
            return None
        return "answer does not match the schema: " + "; ".join(problems)

    return validate


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "schema": {"type": "object", "x-hint": "a JSON schema (a dict)"},
        "max_retries": RETRIES,
        "code_fence": {"type": "boolean"},
        "max_errors": {"type": "integer", "minimum": 1, "x-hint": "a positive integer or None (report every error)"},
        "feedback": FEEDBACK,
        "name": {"type": "string", "minLength": 1},
    },
    "required": ["schema"],
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def schema_validation_filter(
    schema: Mapping[str, Any],
    *,
    max_retries: int = 2,
    code_fence: bool = True,
    max_errors: int | None = None,
    feedback: str = DEFAULT_FEEDBACK,
    name: str = "schema_validation",
) -> Filter:
    """A turn filter that requires a JSON answer matching ``schema``.

    Works like :func:`validation_filter` with :func:`schema_validator` as the check:
    on a problem it re-enters with the transcript and a feedback message (at most
    ``max_retries`` times), then returns the last result unchanged.

    Args:
        schema: the JSON schema of the answer.
        max_retries: how many times to re-enter (default 2).
        code_fence: take the first fenced code block (```json ... ```) when there is one.
        max_errors: report at most this many schema errors (None: all found).
        feedback: the feedback message, with a ``{problem}`` placeholder.
        name: the filter's name.
    """
    check = schema_validator(schema, code_fence=code_fence, max_errors=max_errors)
    retries, template = max_retries, feedback

    async def run_check(result: TurnResult) -> str | None:
        return check(result)

    return Filter(name, around_turn=validation_hook(run_check, retries, template))


SPEC = FilterSpec(
    "schema_validation",
    schema_validation_filter,
    OPTIONS,
    "Requires a JSON answer matching a JSON schema; re-enters with the errors (max_retries=2).",
    ("turn",),
)
