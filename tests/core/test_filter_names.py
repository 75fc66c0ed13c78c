"""The core-managed ``name`` option: every filter, third-party ones included, can be enabled
twice under two names without its author declaring a ``name`` option."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

from beamfilter_core import Filter, FilterSpec, Kernel, Registry, hookimpl
from beamfilter_core.errors import ConfigError

CALLS: list[str] = []


def counter(*, step: int = 1) -> Filter:
    """A third-party filter whose schema is closed and has no ``name`` option."""

    async def chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        state["n"] = state.get("n", 0) + step
        CALLS.append(f"{step}:{state['n']}")
        return await call_next(request)

    return Filter("counter", around_chat=chat)


@attrs.frozen
class LikeFilter:
    """A filter-like object (not a Filter), as a plugin may return."""

    name: str = "like"

    async def around_turn(self, request: Any, state: dict[str, Any], call_next: Any) -> Any:
        CALLS.append(f"like-turn:{self.name}")
        return await call_next(request)


def named(*, name: str = "named", extra: int = 0) -> Filter:
    """A filter that declares ``name`` itself: the factory receives it."""
    CALLS.append(f"factory-name:{name}")

    async def chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        return await call_next(request)

    return Filter(name, around_chat=chat)


class Plugin:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        closed = {"type": "object", "properties": {"step": {"type": "integer"}}, "additionalProperties": False}
        named_schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "extra": {"type": "integer"}},
            "additionalProperties": False,
        }
        return [
            FilterSpec("counter", counter, closed),
            FilterSpec("like", lambda: LikeFilter()),
            FilterSpec("named", named, named_schema),
        ]


@pytest.fixture
def registry() -> Registry:
    CALLS.clear()
    return Registry.from_plugins({"third": Plugin()})


def _config(*filters: dict[str, Any]) -> dict[str, Any]:
    return {"model": {"use": "scripted", "script": ["a"]}, "filters": list(filters)}


def test_a_filter_without_a_name_option_is_enabled_twice(registry: Registry) -> None:
    config = _config({"use": "counter", "name": "outer"}, {"use": "counter", "name": "inner", "step": 10})
    kernel = Kernel.from_config(config, registry=registry)
    assert [f.name for f in kernel.filters] == ["outer", "inner"]
    assert kernel.run_sync("hi").text == "a"
    # two private states: each instance counts on its own
    assert CALLS == ["1:1", "10:10"]


def test_twice_without_names_is_the_duplicate_name_error(registry: Registry) -> None:
    with pytest.raises(ConfigError, match=r"filters\[1\] is named 'counter' like filters\[0\]"):
        Kernel.from_config(_config({"use": "counter"}, {"use": "counter"}), registry=registry)


def test_a_filter_like_object_is_renamed(registry: Registry) -> None:
    kernel = Kernel.from_config(_config({"use": "like", "name": "renamed"}), registry=registry)
    assert [f.name for f in kernel.filters] == ["renamed"]
    kernel.run_sync("hi")
    # the hooks are the object's own: it still sees its own attribute
    assert CALLS == ["like-turn:like"]


def test_a_filter_that_declares_name_gets_it_from_its_factory(registry: Registry) -> None:
    kernel = Kernel.from_config(_config({"use": "named", "name": "mine", "extra": 1}), registry=registry)
    assert [f.name for f in kernel.filters] == ["mine"]
    assert CALLS == ["factory-name:mine"]


def test_a_bad_name_is_reported_with_the_others(registry: Registry) -> None:
    config = _config({"use": "counter", "name": "1st", "step": "x"}, {"use": "like", "name": ""})
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config, registry=registry)
    assert list(caught.value.problems) == [
        "filters[0].name: must be a filter name (letters, digits, '_', '-', '.' or ':', starting with a letter), "
        "got '1st'.",
        "filters[0].step: must be of type integer, got 'x'",
        "filters[1].name: must be a filter name (letters, digits, '_', '-', '.' or ':', starting with a letter), "
        "got ''.",
    ]


@pytest.mark.packages  # enables the built-ins by name
def test_builtins_accept_name_too() -> None:
    pytest.importorskip("beamfilter_builtins")
    config = _config({"use": "logging", "name": "outer_log"}, {"use": "logging", "name": "inner_log"})
    kernel = Kernel.from_config(config)
    assert [f.name for f in kernel.filters] == ["outer_log", "inner_log"]
