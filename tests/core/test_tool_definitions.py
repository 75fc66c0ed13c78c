"""The JSON schema ``@tool`` derives from each kind of annotation, and the typed error, with
its exact text, for each function it cannot make a tool of."""

from __future__ import annotations

import typing
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import pytest

from beamfilter_core import tool
from beamfilter_core.errors import ToolDefinitionError


def test_each_supported_annotation_has_its_schema() -> None:
    def shape(  # type: ignore[no-untyped-def]  # one parameter is left unannotated on purpose
        anything: Any,
        text: str,
        count: int,
        ratio: float,
        flag: bool,
        nothing: None,
        mode: Literal["a", "b"],
        maybe: int | None,
        names: list[str],
        pair: tuple,  # type: ignore[type-arg]
        ids: Sequence[int],
        old_ids: typing.Sequence[int],
        seq: Sequence,  # type: ignore[type-arg]
        table: dict[str, int],
        mapping: Mapping[str, Any],
        bare: dict,  # type: ignore[type-arg]
        untyped,
        context: Any = None,
        limit: int = 5,
    ) -> str:
        """Every kind of parameter."""
        return ""

    made = tool(shape)
    assert made.parameters == {
        "type": "object",
        "properties": {
            "anything": {},
            "text": {"type": "string"},
            "count": {"type": "integer"},
            "ratio": {"type": "number"},
            "flag": {"type": "boolean"},
            "nothing": {"type": "null"},
            "mode": {"enum": ["a", "b"]},
            "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "names": {"type": "array", "items": {"type": "string"}},
            "pair": {"type": "array", "items": {}},
            "ids": {"type": "array", "items": {"type": "integer"}},
            "old_ids": {"type": "array", "items": {"type": "integer"}},
            "seq": {"type": "array", "items": {}},
            "table": {"type": "object"},
            "mapping": {"type": "object"},
            "bare": {"type": "object"},
            "untyped": {},
            "limit": {"type": "integer"},
        },
        "additionalProperties": False,
        "required": [
            "anything", "text", "count", "ratio", "flag", "nothing", "mode", "maybe", "names", "pair", "ids",
            "old_ids", "seq", "table", "mapping", "bare", "untyped",
        ],
    }  # fmt: skip
    assert (made.name, made.description) == ("shape", "Every kind of parameter.")


def test_a_string_annotation_resolves_in_the_functions_module() -> None:
    def typed(limit: typing.Optional[int]) -> str:  # noqa: UP045  # the typing spelling resolves too
        """Typed."""
        return ""

    assert tool(typed).parameters["properties"] == {"limit": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}


def test_each_function_a_tool_cannot_be_made_of_is_refused_with_its_reason() -> None:
    def when(at: complex) -> str:
        """When."""
        return ""

    def later(order: Order) -> str:  # type: ignore[name-defined]  # noqa: F821
        """Later."""
        return ""

    def spread(*orders: int) -> str:
        """Spread."""
        return ""

    def options(**extra: int) -> str:
        """Options."""
        return ""

    refusals = []
    for make in (
        lambda: tool(when),
        lambda: tool(later),
        lambda: tool(spread),
        lambda: tool(options),
        lambda: tool(name="look up")(spread),
        lambda: tool(42),  # type: ignore[call-overload]
    ):
        with pytest.raises(ToolDefinitionError) as refused:
            make()
        refusals.append(str(refused.value))
    assert refusals == [
        "Cannot derive a JSON schema for parameter 'at' of tool 'when' annotated <class 'complex'>; "
        "use str, int, float, bool, Literal, list, dict or a union of them, or pass parameters= explicitly.",
        "Cannot resolve the annotation 'Order' of parameter 'order' of tool 'later': name 'Order' is not defined. "
        "Import the type at module level.",
        "Tool 'spread' takes *orders; tools need named parameters only.",
        "Tool 'options' takes *extra; tools need named parameters only.",
        "Tool name 'look up' is invalid; use 1-64 letters, digits, '_' or '-'.",
        "Cannot make a tool from 42: it is not callable.",
    ]


def test_an_explicit_schema_that_is_not_valid_json_schema_is_refused() -> None:
    def lookup(order: int) -> str:
        """Lookup."""
        return ""

    with pytest.raises(ToolDefinitionError) as refused:
        tool(parameters={"type": "object", "properties": {"order": {"type": 7}}})(lookup)
    assert str(refused.value).startswith("Tool 'lookup' has an invalid parameters schema: ")
    assert str(refused.value).endswith(". Fix the schema.")
