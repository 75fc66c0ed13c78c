"""Presets: registered by plugins, expanded in place in the filters list, shown by `beamfilter chain`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from beamfilter_core import Registry, hookimpl
from beamfilter_core._config import build_config
from beamfilter_core._specs import PresetSpec
from beamfilter_core.errors import AmbiguousFilterError, ConfigError, PluginLoadError, UnknownNameError

# the built-in presets come from beamfilter-builtins
pytestmark = pytest.mark.packages

MODEL = {"use": "scripted", "script": ["ok"]}
PRODUCTION = [
    "tool_errors",
    "heal_dangling",
    "pii",
    "tool_policy",
    "loop_guard",
    "call_limits",
    "tool_retry",
    "model_retry",
    "tracing",
]


def test_builtin_presets_are_registered() -> None:
    registry = Registry()
    production = registry.get_preset("preset:production")
    assert production.qualified == "builtins:production"
    assert production.spec.version == "1"
    assert [f["use"] for f in production.spec.filters] == PRODUCTION
    assert [f["use"] for f in registry.get_preset("builtins:development").spec.filters] == ["logging", "trajectory"]
    assert "production" in next(i for i in registry.plugins() if i.name == "builtins").presets


def test_production_preset_expands_in_place(tmp_path: Path) -> None:
    built = build_config(
        {"model": MODEL, "filters": [{"use": "re_reading"}, {"use": "preset:production"}, {"use": "redact"}]}
    )
    assert [b.qualified.partition(":")[2] for b in built.filters] == ["re_reading", *PRODUCTION, "redact"]
    assert [b.preset for b in built.filters] == [None, *["preset:production"] * 9, None]
    assert [b.index for b in built.filters] == [0, *[1] * 9, 2]
    assert [f.name for f in built.kernel.filters][1:4] == ["tool_errors", "heal_dangling", "pii"]


def test_overrides_and_exclude(tmp_path: Path) -> None:
    built = build_config(
        {
            "model": MODEL,
            "filters": [
                {
                    "use": "preset:builtins:development",
                    "trajectory": {"path": str(tmp_path / "t.jsonl"), "max_chars": 100},
                    "exclude": ["logging"],
                }
            ],
        }
    )
    assert [(b.use, b.preset) for b in built.filters] == [("trajectory", "preset:builtins:development")]
    built.kernel.run_sync("hi")
    assert (tmp_path / "t.jsonl").read_text().count("\n") == 3


def problems_of(config: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as info:
        build_config(config)
    return list(info.value.problems)


def test_problems_inside_a_preset_name_their_path() -> None:
    problems = problems_of(
        {
            "model": MODEL,
            "filters": [{"use": "logging"}, {"use": "preset:production", "loop_guard": {"max_repeats": 0}}],
        }
    )
    assert len(problems) == 1
    assert problems[0].startswith("filters[1](preset:production)[4].max_repeats: must be >= 2, got 0")


def test_unknown_override_key_and_bad_exclude() -> None:
    problems = problems_of(
        {"model": MODEL, "filters": [{"use": "preset:development", "loging": {"level": "INFO"}, "exclude": "logging"}]}
    )
    assert problems == [
        "filters[0].exclude: must be a list of filter names of 'preset:development', got 'logging'.",
        "filters[0].loging: the preset 'preset:development' has no filter named 'loging'. Did you mean 'logging'? "
        "Its filters: logging, trajectory; override one with logging = { option = value } "
        "or leave it out with exclude = [...].",
    ]


def test_unknown_preset_suggests() -> None:
    problems = problems_of({"model": MODEL, "filters": [{"use": "preset:prodution"}]})
    assert problems[0].startswith(
        "filters[0].use: No installed plugin provides a preset named 'prodution'. Did you mean 'production'?"
    )


class _Plugin:
    def __init__(self, *presets: PresetSpec) -> None:
        self.presets = list(presets)

    @hookimpl
    def beamfilter_register_presets(self) -> list[PresetSpec]:
        return self.presets


def test_collisions_need_the_qualified_name() -> None:
    one = _Plugin(PresetSpec("safe", "1", [{"use": "logging"}]))
    two = _Plugin(PresetSpec("safe", "2", [{"use": "loop_guard"}]))
    registry = Registry.from_plugins({"one": one, "two": two})
    with pytest.raises(AmbiguousFilterError) as info:
        registry.get_preset("preset:safe")
    assert str(info.value) == (
        "The preset name 'safe' is provided by several plugins: one:safe, two:safe. "
        "Use a qualified name, e.g. use = 'preset:one:safe'."
    )
    assert registry.get_preset("preset:two:safe").spec.version == "2"
    with pytest.raises(UnknownNameError, match=r"No installed plugin provides a preset named 'three:safe'"):
        registry.get_preset("preset:three:safe")


def test_invalid_preset_records() -> None:
    with pytest.raises(ConfigError, match=r"PresetSpec.filters\[0\] uses 'preset:x'; presets cannot contain presets"):
        PresetSpec("p", "1", [{"use": "preset:x"}])
    with pytest.raises(ConfigError, match=r"PresetSpec.filters is empty; give a non-empty list"):
        PresetSpec("p", "1", [])
    with pytest.raises(ConfigError, match=r"PresetSpec.filters\[1\] is 'pii'; each entry is a mapping"):
        PresetSpec("p", "1", [{"use": "a"}, "pii"])

    class Wrong:
        @hookimpl
        def beamfilter_register_presets(self) -> list[Any]:
            return ["production"]

    with pytest.raises(
        PluginLoadError, match=r"beamfilter_register_presets\(\)\[0\] is 'production'; return PresetSpec"
    ):
        Registry.from_plugins({"wrong": Wrong()})


def test_chain_marks_filters_from_a_preset(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beamfilter_core._cli import main

    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n[[filters]]\nuse = "re_reading"\n\n'
        '[[filters]]\nuse = "preset:development"\ntrajectory = { path = "t.jsonl" }\n'
    )
    assert main(["chain", str(config)]) == 0
    out = capsys.readouterr().out
    assert "filters[1] preset:development expands to: builtins:logging, builtins:trajectory\n" in out
    assert (
        "turn\n  └─ re_reading (builtins:re_reading)\n     └─ logging (builtins:logging) ← preset:development\n"
        "        └─ trajectory (builtins:trajectory) ← preset:development\n"
    ) in out


def test_plugins_listing_shows_presets(capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from beamfilter_core._cli import main

    assert main(["plugins", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)["plugins"]}
    assert listed["builtins"]["presets"] == ["production", "development"]  # registration order
    development = next(e for e in listed["builtins"]["provides"] if e["qualified"] == "builtins:development")
    assert development == {
        "kind": "preset",
        "name": "development",
        "qualified": "builtins:development",
        "summary": "Logs every call and records each turn to trajectory.jsonl.",
        "version": "1",
        "filters": ["logging", "trajectory"],
    }
