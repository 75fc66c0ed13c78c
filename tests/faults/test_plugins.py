"""Plugin faults, end to end through ``Kernel.from_config``: a plugin that cannot be
imported, a hookimpl that raises, an invalid spec, two plugins with the same name, a
filter factory that raises and a filter that returns the wrong type.

A broken plugin never takes the others down (it is recorded with a hint); a config that
names what it would have provided gets a typed error that says so.
"""

from __future__ import annotations

from typing import Any

import pytest
from core.plugins._doubles import Misspelt

from beamfilter_core import Filter, FilterSpec, Kernel, Registry, StaticEntryPoint, hookimpl
from beamfilter_core.errors import (
    AmbiguousFilterError,
    ConfigError,
    FilterError,
    PluginLoadError,
)

pytestmark = pytest.mark.anyio

CONFIG = {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "upper"}]}


def _upper() -> Filter:
    async def around_chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        response = await call_next(request)
        return response.replace(message=response.message.replace(content=response.text.upper()))

    return Filter("upper", around_chat=around_chat)


class Good:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec("upper", _upper, scopes=("chat",))]


class RaisingHook:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        raise RuntimeError("cannot read my settings")


class InvalidSpec:
    @hookimpl
    def beamfilter_register_filters(self) -> list[Any]:
        return [FilterSpec("fine", _upper), "not a spec"]


class FactoryRaises:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        def factory() -> Filter:
            raise OSError("model file missing")

        return [FilterSpec("upper", factory)]


def ep(name: str, target: Any = None, value: str | None = None) -> StaticEntryPoint:
    return StaticEntryPoint(name, value or f"faults_{name}", f"beamfilter-{name}", "1.0", target=target)


def test_a_plugin_that_cannot_be_imported_is_isolated() -> None:
    registry = Registry(entry_points=[ep("gone", value="beamfilter_faults_no_such_module"), ep("good", Good())])
    kernel = Kernel.from_config(CONFIG, registry=registry)
    assert kernel.run_sync("hi").text == "OK"
    (failure,) = registry.failures
    assert isinstance(failure, PluginLoadError)
    assert (failure.plugin, failure.distribution, failure.version) == ("gone", "beamfilter-gone", "1.0")
    assert str(failure).startswith(
        "beamfilter plugin 'gone' from beamfilter-gone 1.0 failed to load with beamfilter-core "
    )
    assert "ModuleNotFoundError: No module named 'beamfilter_faults_no_such_module'" in str(failure)
    assert failure.hint is not None
    assert failure.hint.startswith(
        "the module 'beamfilter_faults_no_such_module' is not installed; reinstall beamfilter-gone"
    )
    assert {p.name: p.status for p in registry.plugins()}["gone"] == "failed"


def test_strict_mode_raises_the_import_error_as_plugin_load_error() -> None:
    registry = Registry(entry_points=[ep("gone", value="beamfilter_faults_no_such_module")], strict=True)
    with pytest.raises(PluginLoadError, match=r"^beamfilter plugin 'gone' from beamfilter-gone 1.0") as caught:
        registry.load()
    assert isinstance(caught.value.__cause__, ModuleNotFoundError)
    # Through a config, the same failure is one problem of the ConfigError, at the first name looked up.
    strict = Registry(entry_points=[ep("gone", value="beamfilter_faults_no_such_module")], strict=True)
    with pytest.raises(ConfigError) as config_error:
        Kernel.from_config({"model": {"use": "scripted", "script": ["ok"]}}, registry=strict)
    (problem,) = config_error.value.problems
    assert problem.startswith("model.use: beamfilter plugin 'gone' from beamfilter-gone 1.0 failed to load")


@pytest.mark.parametrize(
    ("plugin", "error"),
    [
        (RaisingHook(), "RuntimeError: cannot read my settings"),
        (InvalidSpec(), "ConfigError: beamfilter_register_filters()[1] is 'not a spec'; return FilterSpec records."),
        (Misspelt(), "PluginValidationError: unknown hook 'beamfilter_register_filterz'"),
    ],
)
def test_a_broken_hookimpl_or_spec_is_recorded_and_nothing_of_it_registered(plugin: Any, error: str) -> None:
    registry = Registry(entry_points=[ep("bad", plugin), ep("good", Good())])
    assert Kernel.from_config(CONFIG, registry=registry).run_sync("hi").text == "OK"
    (info,) = [p for p in registry.plugins() if p.name == "bad"]
    assert info.status == "failed"
    assert info.error is not None
    assert info.error.startswith(error)
    assert info.filters == ()
    assert [f.qualified for f in registry.filters()] == ["good:upper"]


def test_a_config_naming_a_filter_of_a_failed_plugin_is_a_config_error() -> None:
    registry = Registry(entry_points=[ep("bad", RaisingHook())])
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(CONFIG, registry=registry)
    (problem,) = caught.value.problems
    assert problem.startswith("filters[0].use: No installed plugin provides a filter named 'upper'.")


def test_two_distributions_with_one_plugin_name_keep_the_first() -> None:
    first = ep("twin", Good())
    second = StaticEntryPoint("twin", "faults_twin2", "beamfilter-twin-fork", "2.0", target=Good())
    registry = Registry(entry_points=[first, second])
    assert Kernel.from_config(CONFIG, registry=registry).run_sync("hi").text == "OK"
    (failure,) = registry.failures
    assert "another distribution (beamfilter-twin) already provides a plugin named 'twin'" in str(failure)
    assert failure.distribution == "beamfilter-twin-fork"


def test_two_plugins_providing_one_filter_name_need_a_qualified_name() -> None:
    registry = Registry(entry_points=[ep("a", Good()), ep("b", Good())])
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(CONFIG, registry=registry)
    (problem,) = caught.value.problems
    assert problem == (
        "filters[0].use: The filter name 'upper' is provided by several plugins: a:upper, b:upper. "
        "Use a qualified name, e.g. use = 'a:upper'."
    )
    with pytest.raises(AmbiguousFilterError):
        registry.get_filter("upper")
    qualified = {**CONFIG, "filters": [{"use": "b:upper"}]}
    assert Kernel.from_config(qualified, registry=registry).run_sync("hi").text == "OK"


def test_a_filter_factory_raising_a_value_error_is_reported_with_its_place() -> None:
    class ValueErrorFactory:
        @hookimpl
        def beamfilter_register_filters(self) -> list[FilterSpec]:
            def factory() -> Filter:
                raise ValueError("threshold must be positive")

            return [FilterSpec("upper", factory)]

    registry = Registry(entry_points=[ep("boom", ValueErrorFactory())])
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(CONFIG, registry=registry)
    assert list(caught.value.problems) == [
        "filters[0]: 'boom:upper' could not be built: ValueError: threshold must be positive"
    ]


def test_a_filter_factory_raising_any_error_is_reported_with_its_place() -> None:
    registry = Registry(entry_points=[ep("boom", FactoryRaises())])
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(CONFIG, registry=registry)
    assert list(caught.value.problems) == ["filters[0]: 'boom:upper' could not be built: OSError: model file missing"]


async def _returns_text(request: Any, state: dict[str, Any], call_next: Any) -> Any:
    await call_next(request)
    return "not a ChatResponse"


async def test_a_filter_returning_the_wrong_type_is_a_typed_error_naming_it() -> None:
    from beamfilter_core import ScriptedModel

    kernel = Kernel(ScriptedModel(["hi"]), filters=[Filter("sloppy", around_chat=_returns_text)])
    with pytest.raises(ConfigError) as caught:
        await kernel.run("x")
    assert str(caught.value) == (
        "the chat chain (filters, outermost first: sloppy) returned 'not a ChatResponse' (a str); "
        "around_chat hooks must return a ChatResponse."
    )


async def test_a_wrong_type_from_an_inner_filter_is_named_with_check_returns() -> None:
    from beamfilter_core import ScriptedModel

    async def outer(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        response = await call_next(request)
        return response.replace(message=response.message)

    filters = [Filter("outer", around_chat=outer), Filter("sloppy", around_chat=_returns_text)]
    # by default only the chain's outer end is checked (no per-layer cost): the outer filter trips first
    with pytest.raises(FilterError, match=r"Filter 'outer' raised AttributeError"):
        await Kernel(ScriptedModel(["hi"]), filters=filters).run("x")
    # check_returns=True checks every layer and names the filter that returned the wrong value
    with pytest.raises(ConfigError) as caught:
        await Kernel(ScriptedModel(["hi"]), filters=filters, check_returns=True).run("x")
    assert str(caught.value) == (
        "Filter 'sloppy' returned 'not a ChatResponse' (a str) from around_chat; "
        "around_chat hooks must return a ChatResponse."
    )
    assert caught.value.filter_name == "sloppy"
