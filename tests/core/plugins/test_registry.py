"""The plugin registry, with entry points injected (no install): isolation of broken
plugins, strict mode, qualified names and ambiguity, blocking before import, lazy loading."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from core.plugins._doubles import Misspelt

from beamfilter_core import (
    CommandSpec,
    Filter,
    FilterSpec,
    ModelSpec,
    Registry,
    StaticEntryPoint,
    StoreSpec,
    hookimpl,
)
from beamfilter_core._registry import core_version
from beamfilter_core.errors import AmbiguousFilterError, ConfigError, PluginLoadError, UnknownNameError

CORE = core_version()


def _noop() -> Filter:
    async def around_chat(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        return await call_next(request)

    return Filter("noop", around_chat=around_chat)


class FiltersPlugin:
    """An in-test plugin providing the given filter names."""

    def __init__(self, *names: str) -> None:
        self.names = names

    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec(name, lambda: _noop(), summary=f"{name} summary", scopes=("chat",)) for name in self.names]


class StoresPlugin:
    @hookimpl
    def beamfilter_register_stores(self) -> list[StoreSpec]:
        return [
            StoreSpec("sqlite", lambda url: url, schemes=("sqlite",)),
            StoreSpec("redis", lambda url: url, schemes=("redis", "rediss")),
        ]


def ep(name: str, target: Any, dist: str | None = None, version: str = "1.0") -> StaticEntryPoint:
    return StaticEntryPoint(name, f"tests_{name}", dist or f"beamfilter-{name}", version, target=target)


class Raising:
    """An entry point whose load() fails like a plugin with a missing dependency."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.value = f"beamfilter_{name}"
        self.distribution = f"beamfilter-{name}"
        self.version = "0.3"
        self.loads = 0

    def load(self) -> Any:
        self.loads += 1
        raise ModuleNotFoundError("No module named 'numpyy'", name="numpyy")


def test_core_plugin_is_always_there_and_provides_the_models() -> None:
    registry = Registry(autoload=False)
    assert [m.qualified for m in registry.models()] == [
        "core:anthropic",
        "core:azure_openai",
        "core:bedrock",
        "core:gemini",
        "core:local",
        "core:openai",
        "core:scripted",
    ]
    (core,) = registry.plugins()
    assert (core.name, core.distribution, core.status, core.models) == (
        "core",
        "beamfilter-core",
        "loaded",
        ("openai", "anthropic", "gemini", "azure_openai", "bedrock", "local", "scripted"),
    )


def test_a_broken_plugin_is_recorded_and_the_others_keep_working(caplog: pytest.LogCaptureFixture) -> None:
    broken = Raising("broken")
    registry = Registry(entry_points=[ep("alpha", FiltersPlugin("retry")), broken, ep("omega", FiltersPlugin("cache"))])
    with caplog.at_level(logging.WARNING, logger="beamfilter_core.plugins"):
        statuses = {p.name: p.status for p in registry.plugins()}
    assert statuses == {"core": "loaded", "alpha": "loaded", "broken": "failed", "omega": "loaded"}
    assert registry.get_filter("retry").qualified == "alpha:retry"
    assert registry.get_filter("cache").qualified == "omega:cache"
    (info,) = [p for p in registry.plugins() if p.name == "broken"]
    assert (info.distribution, info.version, info.core_version) == ("beamfilter-broken", "0.3", CORE)
    assert info.error == "ModuleNotFoundError: No module named 'numpyy'"
    assert info.hint is not None
    assert info.hint.startswith(
        "the module 'numpyy' is not installed; reinstall beamfilter-broken or `pip install numpyy`"
    )
    (failure,) = registry.failures
    assert (failure.plugin, failure.distribution, failure.version) == ("broken", "beamfilter-broken", "0.3")
    assert isinstance(failure.__cause__, ModuleNotFoundError)
    # one warning line, naming plugin, distribution, versions and error
    (record,) = caplog.records
    assert record.getMessage().startswith(
        f"beamfilter plugin 'broken' from beamfilter-broken 0.3 failed to load with beamfilter-core {CORE}: "
        "ModuleNotFoundError: No module named 'numpyy'. Hint: "
    )
    assert broken.loads == 1


def test_strict_mode_re_raises() -> None:
    registry = Registry(entry_points=[Raising("broken")], strict=True)
    with pytest.raises(PluginLoadError, match=r"^beamfilter plugin 'broken' from beamfilter-broken 0.3 failed") as info:
        registry.filters()
    assert isinstance(info.value.__cause__, ModuleNotFoundError)
    assert info.value.hint is not None


def test_strict_mode_from_the_environment() -> None:
    registry = Registry(entry_points=[Raising("broken")], environ={"BEAMFILTER_STRICT_PLUGINS": "1"})
    assert registry.strict is True
    with pytest.raises(PluginLoadError):
        registry.load()


class HalfValid:
    """Returns one valid spec, then a wrong record: nothing of it may stay registered."""

    @hookimpl
    def beamfilter_register_filters(self) -> list[Any]:
        return [FilterSpec("good", lambda: _noop()), {"name": "bad"}]


class BadSchema:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec("odd", lambda: _noop(), {"type": "object", "properties": {"n": {"minimum": "x"}}})]


class Twice:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec("same", lambda: _noop()), FilterSpec("same", lambda: _noop())]


@pytest.mark.parametrize(
    ("plugin", "error"),
    [
        (HalfValid(), "ConfigError: beamfilter_register_filters()[1] is {'name': 'bad'}; return FilterSpec records."),
        (Misspelt(), "PluginValidationError: unknown hook 'beamfilter_register_filterz' in plugin "),
        (
            Twice(),
            "ConfigError: beamfilter_register_filters()[1]: the filter 'same' is registered twice by this plugin.",
        ),
    ],
)
def test_an_invalid_plugin_is_rolled_back(plugin: Any, error: str) -> None:
    registry = Registry(entry_points=[ep("bad", plugin), ep("fine", FiltersPlugin("ok"))])
    (info,) = [p for p in registry.plugins() if p.name == "bad"]
    assert info.status == "failed"
    assert info.error is not None
    assert info.error.startswith(error)
    assert [f.qualified for f in registry.filters()] == ["fine:ok"]
    assert registry._pm.get_plugin("bad") is None  # unregistered: nothing half-registered
    with pytest.raises(UnknownNameError):
        registry.get_filter("good")


def test_a_schema_is_compiled_when_first_used_and_an_invalid_one_is_refused_there(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import fastjsonschema

    compiled: list[Any] = []
    real_compile = fastjsonschema.compile

    def counting_compile(schema: Any, *args: Any, **kwargs: Any) -> Any:
        compiled.append(schema)
        return real_compile(schema, *args, **kwargs)

    monkeypatch.setattr(fastjsonschema, "compile", counting_compile)
    registry = Registry(entry_points=[ep("bad", BadSchema()), ep("fine", FiltersPlugin("ok"))])
    assert {p.name: p.status for p in registry.plugins()} == {"core": "loaded", "bad": "loaded", "fine": "loaded"}
    assert compiled == []  # loading and listing plugins compiles no schema
    fine = registry.get_filter("ok")
    assert fine.validator({}) == {}
    assert fine.validator({}) == {}
    assert len(compiled) == 1  # once, on first use
    with pytest.raises(ConfigError) as caught:
        registry.get_filter("odd").validator({"n": 1})
    assert str(caught.value).startswith(
        "beamfilter_register_filters()[0] (filter 'odd'): options_schema is not a valid JSON schema: "
    )


class FilterAndCommandPlugin:
    """A plugin whose filter hook records that it was called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        self.calls.append("filters")
        return [FilterSpec("heavy", lambda: _noop(), scopes=("chat",))]

    @hookimpl
    def beamfilter_register_commands(self) -> list[CommandSpec]:
        self.calls.append("commands")
        return [CommandSpec("hello", configure=lambda parser: None, run=lambda args: 0, summary="say hello")]


def test_a_registry_of_some_kinds_calls_only_their_hooks() -> None:
    plugin = FilterAndCommandPlugin()
    registry = Registry(entry_points=[ep("both", plugin)], kinds=("command",))
    assert [c.qualified for c in registry.commands()] == ["both:hello"]
    assert registry.filters() == ()
    assert plugin.calls == ["commands"]
    (info,) = [p for p in registry.plugins() if p.name == "both"]
    assert (info.status, info.commands, info.filters, info.hooks) == (
        "loaded",
        ("hello",),
        (),
        ("beamfilter_register_commands",),
    )
    everything = FilterAndCommandPlugin()
    Registry(entry_points=[ep("both", everything)]).load()
    assert sorted(everything.calls) == ["commands", "filters"]


def test_a_registry_refuses_an_unknown_kind() -> None:
    with pytest.raises(ConfigError) as caught:
        Registry(kinds=("command", "widget"))  # type: ignore[list-item]
    assert str(caught.value) == (
        "Registry(kinds=...): unknown kind 'widget'; give some of filter, store, model, preset, section, command, "
        "toolset."
    )


def test_a_duplicate_name_is_ambiguous_only_when_used_unqualified() -> None:
    registry = Registry(entry_points=[ep("alpha", FiltersPlugin("retry", "trace")), ep("beta", FiltersPlugin("retry"))])
    with pytest.raises(AmbiguousFilterError) as info:
        registry.get_filter("retry")
    assert info.value.candidates == ("alpha:retry", "beta:retry")
    assert str(info.value) == (
        "The filter name 'retry' is provided by several plugins: alpha:retry, beta:retry. "
        "Use a qualified name, e.g. use = 'alpha:retry'."
    )
    assert registry.get_filter("alpha:retry").plugin == "alpha"
    assert registry.get_filter("beta:retry").distribution == "beamfilter-beta"
    assert registry.get_filter("trace").qualified == "alpha:trace"  # unaffected


def test_unknown_names_suggest_the_closest_and_how_to_list() -> None:
    registry = Registry(entry_points=[ep("alpha", FiltersPlugin("retry")), Raising("broken")])
    with pytest.raises(UnknownNameError) as info:
        registry.get_filter("retyr")
    assert str(info.value) == (
        "No installed plugin provides a filter named 'retyr'. Did you mean 'retry'? "
        "Plugins that failed to load: broken (ModuleNotFoundError: No module named 'numpyy'). "
        "Run `beamfilter plugins` to list the installed filters."
    )
    with pytest.raises(UnknownNameError, match=r"named 'alpha:retri'\. Did you mean 'alpha:retry'\?"):
        registry.get_filter("alpha:retri")
    with pytest.raises(
        UnknownNameError, match=r"^No installed plugin provides a model named 'opnai'\. Did you mean 'openai'\?"
    ):
        registry.get_model("opnai")


def test_stores_by_url_scheme_name_or_qualified_name() -> None:
    registry = Registry(entry_points=[ep("mem", StoresPlugin())])
    assert registry.get_store("sqlite:///tmp/x.db").qualified == "mem:sqlite"
    assert registry.get_store("rediss://localhost:6380/0").qualified == "mem:redis"
    assert registry.get_store("redis").qualified == "mem:redis"
    assert registry.get_store("mem:sqlite").name == "sqlite"
    with pytest.raises(UnknownNameError, match=r"store named 'postgres'"):
        registry.get_store("postgres://db/x")


@pytest.fixture
def sneaky_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A real module that records being imported."""
    (tmp_path / "beamfilter_sneaky_plugin.py").write_text(
        "import sys\nsys.modules['builtins'].__dict__.setdefault('_sneaky_imports', []).append(1)\n"
        "from beamfilter_core import FilterSpec, hookimpl\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "beamfilter_sneaky_plugin", raising=False)
    return "beamfilter_sneaky_plugin"


def test_a_disabled_plugin_is_never_imported(sneaky_module: str) -> None:
    source = [
        StaticEntryPoint("sneaky", sneaky_module, "beamfilter-sneaky", "2.0"),
        ep("alpha", FiltersPlugin("retry")),
    ]
    registry = Registry(entry_points=source, disable=["sneaky"])
    infos = {p.name: p for p in registry.plugins()}
    assert infos["sneaky"].status == "blocked"
    assert infos["sneaky"].error == "disabled by Registry(disable=...)"
    assert sneaky_module not in sys.modules
    assert registry._pm.is_blocked("sneaky")
    assert registry.get_filter("retry").plugin == "alpha"
    # control: without blocking it is imported
    Registry(entry_points=source).load()
    assert sneaky_module in sys.modules


def test_block_after_loading_is_refused_and_before_loading_works(sneaky_module: str) -> None:
    source = [StaticEntryPoint("sneaky", sneaky_module, "beamfilter-sneaky", "2.0")]
    registry = Registry(entry_points=source)
    registry.block(["sneaky"])
    assert {p.name: p.status for p in registry.plugins()}["sneaky"] == "blocked"
    assert sneaky_module not in sys.modules
    loaded = Registry(entry_points=source).load()
    with pytest.raises(ConfigError, match=r"^plugins.disable: 'sneaky' is already loaded by the registry given; "):
        loaded.block(["sneaky"])


@pytest.mark.parametrize(
    ("allow", "loaded"),
    [("", ["core"]), ("beta", ["beta", "core"]), (" alpha , beta ", ["alpha", "beta", "core"])],
)
def test_beamfilter_plugins_allowlist(allow: str, loaded: list[str]) -> None:
    source = [ep("alpha", FiltersPlugin("a")), ep("beta", FiltersPlugin("b"))]
    registry = Registry(entry_points=source, environ={"BEAMFILTER_PLUGINS": allow})
    infos = registry.plugins()
    assert sorted(p.name for p in infos if p.status == "loaded") == loaded
    assert {p.error for p in infos if p.status == "blocked"} <= {"not listed in BEAMFILTER_PLUGINS"}


def test_only_allowlist_and_the_core_cannot_be_disabled() -> None:
    registry = Registry(entry_points=[ep("alpha", FiltersPlugin("a")), ep("beta", FiltersPlugin("b"))], only=["beta"])
    assert [(p.name, p.status, p.error) for p in registry.plugins()] == [
        ("core", "loaded", None),
        ("alpha", "blocked", "not listed in plugins.only"),
        ("beta", "loaded", None),
    ]
    with pytest.raises(
        ConfigError, match=r"^The plugin 'core' provides beamfilter's model providers and cannot be disabled\.$"
    ):
        Registry(disable=["core"])


def test_loading_is_lazy_and_happens_once() -> None:
    calls: list[str] = []

    class Counting(FiltersPlugin):
        @hookimpl
        def beamfilter_register_filters(self) -> list[FilterSpec]:
            calls.append("register")
            return super().beamfilter_register_filters()

    source_calls: list[int] = []

    def source() -> list[StaticEntryPoint]:
        source_calls.append(1)
        return [ep("alpha", Counting("retry"))]

    registry = Registry(entry_points=source)
    assert (source_calls, calls) == ([], [])
    for _ in range(3):
        registry.get_filter("retry")
        registry.filters()
    assert (len(source_calls), calls) == (1, ["register"])


def test_validator_is_compiled_once_per_spec() -> None:
    registry = Registry(autoload=False)
    scripted = registry.get_model("scripted")
    assert scripted.validator is registry.get_model("core:scripted").validator
    assert scripted.validator({"script": ["a"]}) == {"script": ["a"]}


def test_register_in_code_raises_for_an_invalid_plugin_and_duplicates() -> None:
    registry = Registry(autoload=False)
    info = registry.register(FiltersPlugin("retry"), "mine", distribution="my-dist", version="0.1")
    assert (info.status, info.filters) == ("loaded", ("retry",))
    assert registry.get_filter("retry").qualified == "mine:retry"
    with pytest.raises(PluginLoadError, match=r"^A plugin named 'mine' is already registered; give another name=\.$"):
        registry.register(FiltersPlugin("other"), "mine")
    with pytest.raises(PluginLoadError, match=r"^beamfilter plugin 'half' from \(no distribution\) failed to load"):
        registry.register(HalfValid(), "half")
    assert registry._pm.get_plugin("half") is None


def test_two_distributions_with_the_same_plugin_name() -> None:
    registry = Registry(
        entry_points=[ep("dup", FiltersPlugin("a"), "dist-one"), ep("dup", FiltersPlugin("b"), "dist-two")]
    )
    infos = {(p.name, p.distribution): p for p in registry.plugins()}
    assert infos[("dup", "dist-two")].status == "failed"
    assert infos[("dup", "dist-two")].error == "another distribution (dist-one) already provides a plugin named 'dup'"


def test_a_static_entry_point_imports_module_and_attribute() -> None:
    point = StaticEntryPoint("core", "beamfilter_core._core_plugin:beamfilter_register_models")
    models = point.load()()
    assert [m.name for m in models] == ["openai", "anthropic", "gemini", "azure_openai", "bedrock", "local", "scripted"]
    assert all(isinstance(m, ModelSpec) for m in models)


def test_list_plugins_uses_the_installed_entry_points() -> None:
    from importlib import metadata

    from beamfilter_core import list_plugins

    installed = {e.name for e in metadata.entry_points(group="beamfilter")}
    assert "core" in installed  # the core's own entry point is installed
    assert {p.name for p in list_plugins()} >= installed


def test_every_hookspec_is_documented_with_its_signature() -> None:
    import inspect

    from beamfilter_core import _hookspecs

    page = (Path(__file__).resolve().parents[3] / "docs" / "publishing.md").read_text()
    hooks = [n for n in dir(_hookspecs) if n.startswith("beamfilter_")]
    assert hooks == [
        "beamfilter_register_commands",
        "beamfilter_register_filters",
        "beamfilter_register_models",
        "beamfilter_register_presets",
        "beamfilter_register_sections",
        "beamfilter_register_stores",
        "beamfilter_register_tools",
    ]
    for name in hooks:
        returns = inspect.signature(getattr(_hookspecs, name)).return_annotation
        assert f"`{name}() -> {returns}`" in page, name


def test_from_plugins_builds_a_registry_without_entry_points() -> None:
    registry = Registry.from_plugins({"alpha": FiltersPlugin("retry"), "stores": StoresPlugin()})
    assert [p.name for p in registry.plugins()] == ["core", "alpha", "stores"]
    assert registry.get_filter("retry").qualified == "alpha:retry"
    assert registry.get_store("sqlite:///x.db").plugin == "stores"
    with pytest.raises(PluginLoadError, match=r"^beamfilter plugin 'bad' from \(no distribution\) failed to load"):
        Registry.from_plugins({"bad": Twice()})


def test_trace_plugins_prints_each_hook_call(capsys: pytest.CaptureFixture[str]) -> None:
    registry = Registry(entry_points=[ep("alpha", FiltersPlugin("retry"))], environ={"BEAMFILTER_TRACE_PLUGINS": "1"})
    registry.load()
    assert capsys.readouterr().err == (
        "beamfilter: calling core.beamfilter_register_models()\n"
        "beamfilter: calling alpha.beamfilter_register_filters()\n"
    )


def test_listing_plugins_in_process_leaves_the_registry_warnings_on(capsys: pytest.CaptureFixture[str]) -> None:
    # `beamfilter plugins` silences the warning lines while it lists the failures itself;
    # run in-process (an embedding app, a test) it must not leave them off for later registries
    from beamfilter_core._cli import main

    plugin_log = logging.getLogger("beamfilter_core.plugins")
    assert main(["plugins", "--json"]) == 0
    assert plugin_log.disabled is False
    assert main(["plugins"]) == 0
    assert plugin_log.disabled is False
    capsys.readouterr()


class NeedsAWidget:
    """A plugin whose model provider says what this machine lacks."""

    def __init__(self) -> None:
        self.checked = 0

    def missing(self) -> str | None:
        self.checked += 1
        return "the widget SDK is not installed; run: pip install widget"

    @hookimpl
    def beamfilter_register_models(self) -> list[ModelSpec]:
        return [
            ModelSpec("widget", lambda **_: None, summary="needs a widget", requirements=self.missing),
            ModelSpec("plain", lambda **_: None, summary="needs nothing", requirements=lambda: None),
        ]


def test_plugins_marks_each_model_whose_requirements_are_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from beamfilter_core import _registry
    from beamfilter_core._cli import main

    plugin = NeedsAWidget()
    monkeypatch.setattr(_registry.metadata, "entry_points", lambda group: [ep("widgets", plugin)])
    monkeypatch.setitem(sys.modules, "botocore", None)  # find_spec: not installed
    assert main(["plugins", "--json"]) == 0
    provided = {p["qualified"]: p for info in json.loads(capsys.readouterr().out)["plugins"] for p in info["provides"]}
    assert provided["widgets:widget"]["cannot_run"] == "the widget SDK is not installed; run: pip install widget"
    assert provided["core:bedrock"]["cannot_run"] == (
        "BedrockChatModel needs botocore (SigV4 signing and the AWS credential chain): "
        "pip install 'beamfilter-core[bedrock]'."
    )
    assert "cannot_run" not in provided["widgets:plain"]
    assert "cannot_run" not in provided["core:openai"]
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  model   widgets:widget "))
    assert lines[at + 1] == "          cannot run here: the widget SDK is not installed; run: pip install widget"
    assert plugin.checked == 2
