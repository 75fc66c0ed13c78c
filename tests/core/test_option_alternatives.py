"""A schema that asks for one of several options (top-level ``anyOf`` / ``oneOf`` of
``required`` branches): a config table giving none, or two of a ``oneOf``, gets one clear
problem naming the table, the filter and the options, before the factory runs."""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest

from beamfilter_core import FilterSpec, Kernel, Registry, hookimpl
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import trace_filter

BUILT: list[dict[str, Any]] = []

LIMITS = {
    "type": "object",
    "properties": {"calls": {"type": "integer", "minimum": 1}, "tools": {"type": "integer"}, "per": {"type": "object"}},
    "additionalProperties": False,
    "anyOf": [{"required": ["calls"]}, {"required": ["tools"]}, {"required": ["per"]}],
}
SERVER = {
    "type": "object",
    "properties": {"command": {"type": "array"}, "url": {"type": "string"}, "timeout": {"type": "number"}},
    "additionalProperties": False,
    "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
    "x-hint": 'the server as command = ["program"] or url = "http://..."',
}
# branches that are not one required option each: left to the schema's own message
MIXED = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "anyOf": [{"required": ["a", "b"]}, {"properties": {"a": {"minimum": 5}}}],
}


def made(**options: Any) -> Any:
    BUILT.append(options)
    return trace_filter("made", [], scopes=("turn",))


class Plugin:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        specs = {"limits": LIMITS, "server": SERVER, "mixed": MIXED}
        return [FilterSpec(name, made, schema) for name, schema in specs.items()]


@pytest.fixture
def registry() -> Registry:
    BUILT.clear()
    plugins = Registry(autoload=False)
    plugins.register(Plugin(), "alt")
    return plugins


def problems(registry: Registry, table: dict[str, Any]) -> list[str]:
    config = {"model": {"use": "scripted", "script": ["ok"]}, "filters": [table]}
    try:
        Kernel.from_config(config, registry=registry)
    except ConfigError as exc:
        return list(exc.problems)
    return []


VALUES = {"calls": 2, "tools": 1, "per": {"search": 1}, "command": ["x"], "url": "http://x"}


def subsets(names: tuple[str, ...]) -> list[tuple[str, ...]]:
    return [chosen for size in range(len(names) + 1) for chosen in combinations(names, size)]


@pytest.mark.parametrize("given", subsets(("calls", "tools", "per")), ids=lambda g: "+".join(g) or "none")
def test_any_of_needs_at_least_one(registry: Registry, given: tuple[str, ...]) -> None:
    found = problems(registry, {"use": "limits", **{name: VALUES[name] for name in given}})
    if given:
        assert found == []
        assert [{name: VALUES[name] for name in given}] == BUILT
    else:
        assert found == [
            "filters[0]: the filter 'alt:limits' needs at least one of the options calls, tools or per; none is given."
        ]
        assert BUILT == []  # the factory never ran


@pytest.mark.parametrize("given", subsets(("command", "url")), ids=lambda g: "+".join(g) or "none")
def test_one_of_needs_exactly_one(registry: Registry, given: tuple[str, ...]) -> None:
    found = problems(registry, {"use": "server", "timeout": 3, **{name: VALUES[name] for name in given}})
    expected = {
        0: [
            "filters[0]: the filter 'alt:server' needs one of the options command or url; none is given. "
            'Give the server as command = ["program"] or url = "http://...".'
        ],
        1: [],
        2: [
            "filters[0]: the filter 'alt:server' takes only one of the options command or url; "
            "command and url are given: keep one."
        ],
    }[len(given)]
    assert found == expected
    assert len(BUILT) == (1 if len(given) == 1 else 0)


def test_the_problem_comes_with_the_tables_other_problems(registry: Registry) -> None:
    assert problems(registry, {"use": "limits", "cals": 2}) == [
        "filters[0].cals: unknown option for the filter 'alt:limits'. Did you mean 'calls'? "
        "Known options: calls, per, tools.",
        "filters[0]: the filter 'alt:limits' needs at least one of the options calls, tools or per; none is given.",
    ]


def test_a_bad_value_of_a_given_alternative_is_reported_as_such(registry: Registry) -> None:
    assert problems(registry, {"use": "limits", "calls": 0}) == ["filters[0].calls: must be >= 1, got 0"]


def test_other_branches_keep_the_schemas_own_message(registry: Registry) -> None:
    assert problems(registry, {"use": "mixed", "a": 1}) == ["filters[0]: cannot be validated by any definition"]
    assert problems(registry, {"use": "mixed", "a": 6}) == []
