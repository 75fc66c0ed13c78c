"""Kernel.from_config: TOML files and dicts, options validated against the specs' schemas,
every problem reported at once with its path, $env secrets, BuildContext, [plugins]."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from beamfilter_core import (
    BuildContext,
    FilterSpec,
    Kernel,
    ModelSpec,
    Registry,
    ScriptedModel,
    StaticEntryPoint,
    hookimpl,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import trace_filter

LOG: list[str] = []
SEEN: dict[str, Any] = {}


def trace(*, label: str, max_retries: int = 0) -> Any:
    SEEN.setdefault("trace", []).append((label, max_retries))
    return trace_filter(label, LOG, scopes=("turn", "chat"))


def needs_build(*, build: BuildContext) -> Any:
    SEEN["build"] = build
    return trace_filter("needs_build", LOG, scopes=("chat",))


def loose(**options: Any) -> Any:
    SEEN["loose"] = options
    return trace_filter("loose", LOG, scopes=("chat",))


def picky(level: int = 1) -> Any:
    return trace_filter(f"picky{level}", LOG, scopes=("chat",))


def refuses(*, mode: str = "a") -> Any:
    msg = f"mode {mode!r} needs a store; set store = ..."
    raise ConfigError(msg)


@attrs.frozen
class Window:
    size: int
    labels: tuple[str, ...] = ()


def windowed(options: Window) -> Any:
    SEEN["window"] = options
    return trace_filter(f"window{options.size}", LOG, scopes=("chat",))


class TestPlugin:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        trace_schema = {
            "type": "object",
            "properties": {"label": {"type": "string"}, "max_retries": {"type": "integer", "minimum": 0}},
            "required": ["label"],
            "additionalProperties": False,
        }
        return [
            FilterSpec("trace", trace, trace_schema),
            FilterSpec("needs_build", needs_build),
            FilterSpec("loose", loose),
            FilterSpec("picky", picky),
            FilterSpec("refuses", refuses),
            FilterSpec("window", windowed, options_type=Window),
        ]

    @hookimpl
    def beamfilter_register_models(self) -> list[ModelSpec]:
        return [
            ModelSpec("echo", lambda *, prefix="": ScriptedModel([lambda r: prefix + r.messages[-1].text], repeat=True))
        ]


class OtherPlugin:
    @hookimpl
    def beamfilter_register_filters(self) -> list[FilterSpec]:
        return [FilterSpec("trace", trace)]


@pytest.fixture(autouse=True)
def _clean() -> None:
    LOG.clear()
    SEEN.clear()


@pytest.fixture
def registry() -> Registry:
    return Registry(entry_points=[StaticEntryPoint("testing", "x", "beamfilter-testing", "1.0", target=TestPlugin())])


def test_a_toml_file_builds_the_kernel_in_config_order(tmp_path: Path, registry: Registry) -> None:
    path = tmp_path / "beamfilter.toml"
    path.write_text(
        """
[model]
use = "scripted"
script = ["Hello!"]

[kernel]
max_iterations = 3
tool_timeout = 2.5
system_prompt = "Be brief."

[[filters]]
use = "trace"
label = "second_registered_first_in_chain"

[[filters]]
use = "testing:trace"
label = "inner"
max_retries = 2
""",
        encoding="utf-8",
    )
    kernel = Kernel.from_config(path, registry=registry)
    assert (kernel.max_iterations, kernel.tool_timeout, kernel.system_prompt) == (3, 2.5, "Be brief.")
    assert [f.name for f in kernel.filters] == ["second_registered_first_in_chain", "inner"]
    assert SEEN["trace"] == [("second_registered_first_in_chain", 0), ("inner", 2)]
    assert kernel.run_sync("hi").text == "Hello!"
    assert LOG == [
        "second_registered_first_in_chain.before turn",
        "inner.before turn",
        "second_registered_first_in_chain.before chat",
        "inner.before chat",
        "inner.after chat",
        "second_registered_first_in_chain.after chat",
        "inner.after turn",
        "second_registered_first_in_chain.after turn",
    ]
    assert kernel.model.requests[0].system == "Be brief."


def test_every_problem_is_reported_at_once_with_its_path(registry: Registry) -> None:
    config = {
        "model": {"use": "scripted", "script": []},
        "kernel": {"max_iterations": 0, "timeout": 3},
        "filters": [
            {"use": "trace", "label": "ok"},
            {"use": "trace", "label": "x", "max_retries": -1},
            {"use": "trace", "labl": "x"},
            {"use": "traec"},
            {"label": "no use"},
            {"use": "picky", "levle": 2},
            {"use": "refuses", "mode": "b"},
            {"use": "window", "size": "big"},
        ],
        "filter": [],
    }
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(config, registry=registry)
    assert list(info.value.problems) == [
        "filter: unknown section. Did you mean 'filters'? "
        "Known sections: filters, kernel, model, models, plugins, tools.",
        "kernel.timeout: unknown option for the section 'core:kernel'. Did you mean 'tool_timeout'? Known "
        "options: max_iterations, options, pause_key, system_prompt, tool_timeout, transient_context, "
        "unsafe_unsigned_pauses.",
        "kernel.max_iterations: must be >= 1, got 0",
        "model.script: must contain at least 1 items",
        "filters[1].max_retries: must be >= 0, got -1",
        "filters[2].labl: unknown option for the filter 'testing:trace'. "
        "Did you mean 'label'? Known options: label, max_retries.",
        "filters[2].label: required option of the filter 'testing:trace' is missing.",
        "filters[3].use: No installed plugin provides a filter named 'traec'. "
        "Did you mean 'trace'? Run `beamfilter plugins` to list the installed filters.",
        'filters[4].use: missing; name what to enable, e.g. use = "name" (got None).',
        "filters[5].levle: unknown option for the filter 'testing:picky'. Did you mean 'level'? Known options: level.",
        "filters[6]: mode 'b' needs a store; set store = ...",
        "filters[7].size: invalid value for type, expected int",
    ]
    assert str(info.value).startswith("config has 12 problems:\n  - filter: unknown section.")


def test_env_secrets_are_resolved_and_missing_ones_reported(
    registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BF_TEST_LABEL", "from-env")
    monkeypatch.delenv("BF_TEST_MISSING", raising=False)
    kernel = Kernel.from_config(
        {
            "model": {"use": "scripted", "script": ["ok"]},
            "filters": [
                {"use": "trace", "label": {"$env": "BF_TEST_LABEL"}},
                {
                    "use": "loose",
                    "key": {"$env": "BF_TEST_MISSING", "default": "fallback"},
                    "nested": [{"$env": "BF_TEST_LABEL"}],
                },
            ],
        },
        registry=registry,
    )
    assert kernel.filters[0].name == "from-env"
    assert SEEN["loose"] == {"key": "fallback", "nested": ["from-env"]}
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(
            {
                "model": {"use": "openai", "model": "m", "api_key": {"$env": "BF_TEST_MISSING"}},
                "filters": [{"use": "trace", "label": {"$env": 3}}],
            },
            registry=registry,
        )
    assert list(info.value.problems) == [
        "model.api_key: the environment variable BF_TEST_MISSING is not set.",
        'filters[0].label: write secrets as { "$env" = "NAME" } (optionally with default = ...).',
    ]


def test_build_context_and_extra_models(tmp_path: Path, registry: Registry) -> None:
    path = tmp_path / "conf" / "beamfilter.toml"
    path.parent.mkdir()
    path.write_text(
        '[model]\nuse = "scripted"\nscript = ["main"]\n\n'
        '[models.fallback]\nuse = "echo"\nprefix = "echo: "\n\n'
        '[[filters]]\nuse = "needs_build"\n',
        encoding="utf-8",
    )
    kernel = Kernel.from_config(path, registry=registry)
    build = SEEN["build"]
    assert build.model is kernel.model
    assert build.registry is registry
    assert build.config_dir == str(path.parent.resolve())
    assert list(build.models) == ["fallback"]
    fallback = build.models["fallback"]
    from beamfilter_core import ChatRequest, Message

    response = kernel_run(fallback.complete(ChatRequest((Message("user", "ping"),))))
    assert response.message.text == "echo: ping"


def kernel_run(awaitable: Any) -> Any:
    import asyncio

    return asyncio.run(awaitable)


def test_overrides_win_over_the_config(registry: Registry) -> None:
    model = ScriptedModel(["from override"])
    kernel = Kernel.from_config({"kernel": {"max_iterations": 4}}, registry=registry, model=model, max_iterations=7)
    assert kernel.model is model
    assert kernel.max_iterations == 7
    assert kernel.run_sync("x").text == "from override"


def test_tools_are_passed_through(registry: Registry) -> None:
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    kernel = Kernel.from_config({"model": {"use": "scripted", "script": ["ok"]}}, registry=registry, tools=[add])
    assert [t.name for t in kernel.tools] == ["add"]


def test_missing_model_and_wrong_shapes(registry: Registry) -> None:
    with pytest.raises(ConfigError) as info:
        Kernel.from_config({"filters": {"use": "trace"}, "plugins": {"disable": "x", "stict": True}}, registry=registry)
    assert list(info.value.problems) == [
        "plugins.stict: unknown key. Did you mean 'strict'? Known keys: disable, only, strict.",
        "plugins.disable: must be a list of plugin names, got 'x'.",
        'model: missing; add a [model] table, e.g. [model] use = "openai" model = "gpt-4o-mini".',
        "filters: must be an array of tables ([[filters]] use = ...), got {'use': 'trace'}.",
    ]


def test_file_errors(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    with pytest.raises(ConfigError, match=r"^The config file '.*nope\.toml' does not exist\.$"):
        Kernel.from_config(missing)
    bad = tmp_path / "bad.toml"
    bad.write_text('[model]\nuse = "scripted\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"bad\.toml is not valid TOML: .*line 2"):
        Kernel.from_config(bad)
    with pytest.raises(ConfigError, match=r"^A config is a path to a TOML file or a dict; got 42 \(a int\)\.$"):
        Kernel.from_config(42)


def test_ambiguous_names_in_config_suggest_qualified_names() -> None:
    registry = Registry(
        entry_points=[
            StaticEntryPoint("testing", "x", target=TestPlugin()),
            StaticEntryPoint("other", "y", target=OtherPlugin()),
        ]
    )
    config = {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "trace", "label": "a"}]}
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(config, registry=registry)
    assert list(info.value.problems) == [
        "filters[0].use: The filter name 'trace' is provided by several plugins: other:trace, testing:trace. "
        "Use a qualified name, e.g. use = 'other:trace'."
    ]
    config["filters"] = [{"use": "other:trace", "label": "b"}]
    assert [f.name for f in Kernel.from_config(config, registry=registry).filters] == ["b"]


def test_options_type_is_structured_with_cattrs(registry: Registry) -> None:
    config = {
        "model": {"use": "scripted", "script": ["ok"]},
        "filters": [{"use": "window", "size": 3, "labels": ["a", "b"]}],
    }
    Kernel.from_config(config, registry=registry)
    assert SEEN["window"] == Window(3, ("a", "b"))


def test_plugins_disable_in_config_blocks_before_import(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "beamfilter_cfg_blocked.py").write_text("raise RuntimeError('must not be imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    source = [
        StaticEntryPoint("blocked", "beamfilter_cfg_blocked", "beamfilter-blocked", "1.0"),
        StaticEntryPoint("testing", "x", target=TestPlugin()),
    ]
    config = {
        "model": {"use": "scripted", "script": ["ok"]},
        "plugins": {"disable": ["blocked"]},
        "filters": [{"use": "picky"}],
    }
    registry = Registry(entry_points=source)
    kernel = Kernel.from_config(config, registry=registry)
    assert [f.name for f in kernel.filters] == ["picky1"]
    assert "beamfilter_cfg_blocked" not in sys.modules
    assert {p.name: p.status for p in registry.plugins()} == {
        "core": "loaded",
        "blocked": "blocked",
        "testing": "loaded",
    }


def test_plugins_only_in_config_hides_other_plugins() -> None:
    source = [
        StaticEntryPoint("testing", "x", target=TestPlugin()),
        StaticEntryPoint("other", "y", target=OtherPlugin()),
    ]
    config = {
        "model": {"use": "scripted", "script": ["ok"]},
        "plugins": {"only": ["other"]},
        "filters": [{"use": "trace", "label": "z"}],
    }
    kernel = Kernel.from_config(config, registry=Registry(entry_points=source))
    assert SEEN["trace"] == [("z", 0)]
    assert [f.name for f in kernel.filters] == ["z"]


def test_the_scripted_model_provider_validates_its_options() -> None:
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": ["a"], "chunk": 0, "delay": 1}}, registry=Registry(autoload=False)
        )
    # every problem of the table at once: the unknown key and the bad value
    assert list(info.value.problems) == [
        "model.delay: unknown option for the model 'core:scripted'. Did you mean 'token_delay'? "
        "Known options: chunk, repeat, script, token_delay.",
        "model.chunk: must be >= 1, got 0",
    ]
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": ["a"], "chunk": 0}}, registry=Registry(autoload=False)
        )
    assert list(info.value.problems) == ["model.chunk: must be >= 1, got 0"]


def test_every_bad_value_of_one_options_table_is_reported() -> None:
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": [], "chunk": "big", "token_delay": -1, "repeat": "yes"}},
            registry=Registry(autoload=False),
        )
    assert list(info.value.problems) == [
        "model.script: must contain at least 1 items",
        "model.chunk: must be of type integer, got 'big'",
        "model.token_delay: must be >= 0, got -1",
        "model.repeat: must be of type boolean, got 'yes'",
    ]
