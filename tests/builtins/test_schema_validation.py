"""schema_validation: JSON answers checked against a schema; paths and allowed values in feedback."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import schema_validation_filter, schema_validator
from beamfilter_builtins._schema_validation import SPEC as SCHEMA_SPEC
from beamfilter_core import (
    Kernel,
    Message,
    ScriptedModel,
    TurnResult,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "genre": {"enum": ["drama", "comedy"]},
        "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
        "kind": {"const": "film"},
        "films": {
            "type": "array",
            "items": {"type": "object", "properties": {"year": {"type": "integer"}}, "required": ["year"]},
        },
    },
    "required": ["title", "genre"],
}


def check(text: str, **options: Any) -> str | None:
    return schema_validator(SCHEMA, **options)(TurnResult("completed", Message.assistant(text)))


def test_schema_messages() -> None:
    assert check("") == "answer has no text"
    assert check("```json\n   \n```") == "answer has no text"
    assert check("not json") == "answer is not valid JSON: Expecting value: line 1 column 1 (char 0)"
    assert check('{"title": "A", "genre": "drama"}') is None
    assert check('Here:\n```json\n{"title": "A", "genre": "comedy"}\n```\nthanks') is None
    assert check('```\n{"title": "A", "genre": "comedy"}```') is None
    assert check('```json\n{"title": "A", "genre": "comedy"}\n```', code_fence=False) == (
        "answer is not valid JSON: Expecting value: line 1 column 1 (char 0)"
    )
    bad = '{"genre": "horror", "code": "ab", "kind": "show", "films": [{"year": 1}, {"year": "2"}, {}]}'
    assert check(bad) == (
        'answer does not match the schema: root: missing required properties "title"; '
        'genre: must be one of "drama", "comedy"; code: must match the pattern ^[A-Z]{3}$; '
        'kind: must be exactly "film"; films[1].year: must be integer; '
        'films[2]: missing required properties "year"'
    )
    assert check(bad, max_errors=2) == (
        'answer does not match the schema: root: missing required properties "title"; '
        'genre: must be one of "drama", "comedy"'
    )


async def test_schema_filter_retries(stream: bool) -> None:
    model = ScriptedModel(['{"title": "A", "genre": "horror"}', '```json\n{"title": "A", "genre": "drama"}\n```'])
    kernel = Kernel(model, filters=[schema_validation_filter(SCHEMA)])
    result, _ = await run_turn(kernel, "a film as JSON", stream)
    assert result.text.startswith("```json")
    assert model.requests[1].messages[-1].text == (
        "Your last answer failed validation: answer does not match the schema: "
        'genre: must be one of "drama", "comedy". Please fix it and answer again.'
    )


def test_schema_options() -> None:
    with pytest.raises(ConfigError, match="the schema is invalid"):
        schema_validation_filter({"type": "nonsense"})
    with pytest.raises(ConfigError, match="max_errors=0"):
        schema_validation_filter(SCHEMA, max_errors=0)
    with pytest.raises(ConfigError, match="give a JSON schema"):
        schema_validation_filter("x")  # type: ignore[arg-type]
    assert SCHEMA_SPEC.name == "schema_validation"


def test_refs_resolve_against_the_root_definitions() -> None:
    schema = {
        "$defs": {"color": {"enum": ["red", "blue"]}},
        "type": "object",
        "properties": {"color": {"$ref": "#/$defs/color"}, "n": {"type": "integer"}, "p": {"$ref": "#/properties/n"}},
    }
    validate = schema_validator(schema)

    def check_text(text: str) -> str | None:
        return validate(TurnResult("completed", Message.assistant(text)))

    assert check_text('{"color": "green", "n": "x"}') == (
        'answer does not match the schema: color: must be one of "red", "blue"; n: must be integer'
    )
    # "p" refers into the root's properties: checked by the root schema only.
    assert check_text('{"color": "red", "n": 1, "p": "z"}') == "answer does not match the schema: p: must be integer"
    assert check_text('{"color": "red", "n": 1, "p": 2}') is None
