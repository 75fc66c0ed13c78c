"""Options have one source of truth: the spec's JSON schema checks config tables (in the
core) and Python calls (through ``@options_schema``), and a config's options reach the
factory once checked, not twice."""

from __future__ import annotations

import re
from typing import Any

import fastjsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core import Filter, FilterSpec, Kernel, Registry, ToolsetSpec, hookimpl, options_schema
from beamfilter_core._options import declared_schema, unwrap_factory
from beamfilter_core.errors import ConfigError

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "times": {"type": "integer", "minimum": 1},
        "ratio": {"type": "number", "exclusiveMinimum": 0},
        "mode": {"enum": ["fast", "slow"]},
        "loud": {"type": "boolean"},
        "tools": {"type": "array", "items": {"type": "string"}, "x-hint": "a list of tool names"},
        "limits": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "words": {"type": "array", "items": {"type": "string", "x-hint": "a word"}},
        "label": {"type": "string", "minLength": 1, "x-style": "colon"},
        "rules": {"type": "array", "items": {"type": "object"}, "x-parsed-by": "a parser"},
        "size": {"type": "integer", "minimum": 1},
    },
    "additionalProperties": False,
}
CALLS: list[dict[str, Any]] = []


@options_schema(SCHEMA)
def make(
    times: int = 1,
    *,
    ratio: float = 1.0,
    mode: str = "fast",
    loud: bool = False,
    tools: list[str] | None = None,
    limits: dict[str, int] | None = None,
    words: list[str] = [],  # noqa: B006  # never mutated
    label: str = "x",
    rules: Any = (),
    size: Any = 3,
    name: str = "made",
) -> Filter:
    CALLS.append({"times": times, "ratio": ratio, "mode": mode, "size": size})
    return Filter(name)


def problem(**options: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        make(**options)
    return str(caught.value)


def test_python_calls_are_checked_against_the_schema() -> None:
    assert problem(times=0) == "make(times=0) is invalid; give an integer >= 1."
    assert problem(ratio=0) == "make(ratio=0) is invalid; give a number > 0."
    assert problem(mode="medium") == "make(mode='medium') is invalid; give one of 'fast', 'slow'."
    assert problem(loud="yes") == "make(loud='yes') is invalid; give true or false."
    assert problem(tools="search") == "make(tools='search') is invalid; give a list of tool names."
    # the nearest x-hint on the way to the failure speaks for the whole value
    assert problem(tools=["a", 3]) == "make(tools=['a', 3]) is invalid; give a list of tool names."
    # an entry of a mapping, an item of a list
    assert problem(limits={"x": -1}) == "make(limits['x']=-1) is invalid; give an integer >= 0."
    assert problem(words=["a", 3]) == "make: words[1] is 3; give a word."
    assert problem(label="") == "make(label=''): give a non-empty string."


def test_positional_arguments_none_and_objects() -> None:
    with pytest.raises(ConfigError, match=re.escape("make(times=0) is invalid")):
        make(0)
    # None where the Python parameter takes it; Python objects are the factory's to resolve
    assert make(tools=None, limits=None).name == "made"
    assert make(size=object()).name == "made"
    # a parameter that takes None is told so
    assert problem(tools=3) == "make(tools=3) is invalid; give a list of tool names."
    with pytest.raises(ConfigError) as caught:
        make(limits=3)
    assert str(caught.value) == "make(limits=3) is invalid; give a mapping or None."


def test_every_bad_option_of_a_call_is_reported_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        make(times=0, mode="x")
    assert list(caught.value.problems) == [
        "make(times=0) is invalid; give an integer >= 1.",
        "make(mode='x') is invalid; give one of 'fast', 'slow'.",
    ]


def test_a_float_is_not_an_integer_for_python_callers() -> None:
    # JSON schema takes 5.0 as an integer; a Python int parameter does not
    assert problem(times=2.0) == "make(times=2.0) is invalid; give an integer >= 1."
    assert problem(limits={"x": 1.0}) == "make(limits['x']=1.0) is invalid; give an integer >= 0."


def test_an_option_a_parser_reads_is_left_to_it() -> None:
    assert make(rules="not checked here").name == "made"


def test_the_spec_takes_the_schema_the_factory_declares() -> None:
    spec = FilterSpec("made", make)
    assert spec.options_schema is SCHEMA
    assert declared_schema(make) is SCHEMA
    assert FilterSpec("made", make, dict(SCHEMA)).options_schema == SCHEMA
    assert ToolsetSpec("made", make).options_schema is SCHEMA
    with pytest.raises(ConfigError, match=r"FilterSpec\('made'\)\.options_schema differs from the schema its factory"):
        FilterSpec("made", make, {"type": "object"})
    assert FilterSpec("plain", lambda: Filter("plain")).options_schema == {"type": "object"}


class Plugin:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec("made", make)]


def test_config_options_reach_the_factory_checked_once() -> None:
    registry = Registry(autoload=False)
    registry.register(Plugin(), "maker")
    config = {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "made", "times": 2, "mode": "slow"}]}
    CALLS.clear()
    kernel = Kernel.from_config(config, registry=registry)
    assert [f.name for f in kernel.filters] == ["made"]
    assert CALLS == [{"times": 2, "ratio": 1.0, "mode": "slow", "size": 3}]
    assert unwrap_factory(make) is make.__wrapped__  # type: ignore[attr-defined]
    config["filters"] = [{"use": "made", "times": 0, "mode": "x", "tmes": 1}]
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config, registry=registry)
    assert list(caught.value.problems) == [
        "filters[0].tmes: unknown option for the filter 'maker:made'. Did you mean 'times'? Known options: "
        "label, limits, loud, mode, ratio, rules, size, times, tools, words.",
        "filters[0].times: must be >= 1, got 0",
        "filters[0].mode: must be one of 'fast', 'slow', got 'x'",
    ]


_VALIDATE = fastjsonschema.compile(SCHEMA)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-2, 2, allow_nan=False) | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner, max_size=3),
    max_leaves=6,
)


@settings(max_examples=300, deadline=None)
@given(key=st.sampled_from(["times", "ratio", "mode", "loud", "tools", "limits", "words", "label"]), value=_JSON)
def test_a_python_call_fails_exactly_when_the_schema_refuses(key: str, value: Any) -> None:
    refused = False
    try:
        _VALIDATE({key: value})
    except fastjsonschema.JsonSchemaValueException:
        refused = True
    loose_int = key == "times" and isinstance(value, float)  # Python callers give ints
    loose_int = loose_int or (
        key == "limits" and isinstance(value, dict) and any(isinstance(v, float) for v in value.values())
    )
    takes_none = key in ("tools", "limits") and value is None
    message = None
    try:
        make(**{key: value})
    except ConfigError as exc:
        message = str(exc)
    assert (message is not None) == ((refused or loose_int) and not takes_none), message
    assert message is None or message.startswith(("make(", "make: ")), message
