"""Plugin-registered config sections ([name] tables) and `beamfilter NAME` commands."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import CommandSpec, Kernel, Registry, SectionSpec, hookimpl
from beamfilter_core._cli import main
from beamfilter_core._config import build_config
from beamfilter_core.errors import ConfigError

MODEL = {"use": "scripted", "script": ["Hi there."], "repeat": True}
SCHEMA = {
    "type": "object",
    "properties": {"use": {"enum": ["fast", "slow"]}, "level": {"type": "integer", "minimum": 1}},
    "required": ["use"],
    "additionalProperties": False,
}


class Wrapped:
    """What a section's runner returns: runs turns through the kernel and notes each."""

    def __init__(self, kernel: Kernel, seen: list[str]) -> None:
        self.kernel = kernel
        self.seen = seen

    async def run(self, prompt: Any, *, context: Any = None) -> Any:
        self.seen.append(f"run {prompt}")
        return await self.kernel.run(prompt, context=context)

    def run_stream(self, prompt: Any, *, context: Any = None) -> Any:
        self.seen.append(f"stream {prompt}")
        return self.kernel.run_stream(prompt, context=context)

    async def aclose(self) -> None:
        self.seen.append("closed")
        await self.kernel.aclose()


class Section:
    def __init__(self, use: str, level: int = 1, *, seen: list[str]) -> None:
        self.use, self.level, self.seen = use, level, seen

    def runner(self, built: Any) -> Wrapped:
        return Wrapped(built.kernel, self.seen)


class Plugin:
    def __init__(self) -> None:
        self.seen: list[str] = []
        self.commands_run: list[Any] = []

    @hookimpl
    def beamfilter_register_sections(self) -> list[SectionSpec]:
        return [SectionSpec("speed", lambda use, level=1: Section(use, level, seen=self.seen), SCHEMA, "how fast")]

    @hookimpl
    def beamfilter_register_commands(self) -> list[CommandSpec]:
        def configure(parser: Any) -> None:
            parser.add_argument("target")
            parser.add_argument("--loud", action="store_true")

        def run(args: Any) -> int:
            self.commands_run.append((args.target, args.loud))
            if args.target == "bad":
                raise ConfigError("bad target 'bad'")
            return 3

        # "run" is a built-in command: a plugin cannot take it
        return [CommandSpec("poke", configure, run, "poke something"), CommandSpec("run", configure, run)]


@pytest.fixture
def plugin() -> Plugin:
    return Plugin()


@pytest.fixture
def registry(plugin: Plugin) -> Registry:
    return Registry.from_plugins({"speedy": plugin})


def test_a_registered_section_is_validated_and_built(registry: Registry, plugin: Plugin) -> None:
    built = build_config({"model": MODEL, "speed": {"use": "fast", "level": 3}}, registry=registry)
    section = built.sections["speed"]
    assert (section.use, section.level) == ("fast", 3)
    runner = built.runner()
    assert isinstance(runner, Wrapped)
    assert runner.kernel is built.kernel
    assert registry.get_section("speed").qualified == "speedy:speed"
    assert [p.sections for p in registry.plugins() if p.name == "speedy"] == [("speed",)]


def test_without_the_section_the_kernel_runs_the_turns(registry: Registry) -> None:
    built = build_config({"model": MODEL}, registry=registry)
    assert built.sections == {}
    assert built.runner() is built.kernel


def test_every_problem_of_a_section_is_reported_with_its_place(registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config({"model": MODEL, "speed": {"use": "warp", "level": 0, "colour": "red"}}, registry=registry)
    problems = caught.value.problems
    assert "speed.colour: unknown option for the section 'speedy:speed'. Known options: level, use." in problems
    assert problems[1:] == ("speed.use: must be one of 'fast', 'slow', got 'warp'", "speed.level: must be >= 1, got 0")


def test_unknown_sections_stay_errors_and_name_the_registered_ones(registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config({"model": MODEL, "sped": {"use": "fast"}, "$env": "X"}, registry=registry)
    known = "filters, kernel, model, models, plugins, speed, tools"
    assert caught.value.problems == (
        f"sped: unknown section. Did you mean 'speed'? Known sections: {known}.",
        f"$env: unknown section. Known sections: {known}.",
    )
    with pytest.raises(ConfigError, match=r"speed: unknown section\. Known sections: filters, kernel, model"):
        build_config({"model": MODEL, "speed": {"use": "fast"}}, registry=Registry(autoload=False))


def test_a_section_that_is_not_a_table_is_reported(registry: Registry) -> None:
    with pytest.raises(ConfigError) as caught:
        build_config({"model": MODEL, "speed": "fast"}, registry=registry)
    assert caught.value.problems == ("speed: must be a table ([speed]), got 'fast'.",)


def test_two_sections_that_both_run_turns_are_refused(plugin: Plugin) -> None:
    class Other:
        @hookimpl
        def beamfilter_register_sections(self) -> list[SectionSpec]:
            return [SectionSpec("slowness", lambda use: Section(use, seen=[]), SCHEMA)]

    registry = Registry.from_plugins({"speedy": plugin, "other": Other()})
    built = build_config({"model": MODEL, "speed": {"use": "fast"}, "slowness": {"use": "slow"}}, registry=registry)
    with pytest.raises(ConfigError, match=r"^config: the sections \[speed\], \[slowness\] each run the turns"):
        built.runner()


def test_a_plugin_command_is_dispatched_with_its_arguments(
    registry: Registry, plugin: Plugin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["poke", "door", "--loud"], registry=registry) == 3
    assert plugin.commands_run == [("door", True)]
    assert main(["poke", "bad"], registry=registry) == 2
    assert capsys.readouterr().err == "beamfilter poke: bad target 'bad'\n"


def test_plugin_commands_are_listed_and_builtin_names_cannot_be_taken(
    registry: Registry, plugin: Plugin, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--help"], registry=registry) == 0
    out = capsys.readouterr().out
    assert "    poke      poke something\n" in out
    assert main(["poke", "--help"], registry=registry) == 0
    assert capsys.readouterr().out.startswith("usage: beamfilter poke [-h] [--loud] target")
    # `beamfilter run` stays the built-in command: its usage, not the plugin's
    assert main(["run", "door"], registry=registry) == 2
    assert "usage: beamfilter run [-h] [--json]" in capsys.readouterr().err
    assert plugin.commands_run == []


def test_builtin_commands_never_load_plugins(capsys: pytest.CaptureFixture[str]) -> None:
    class Exploding:
        def commands(self) -> Any:
            raise AssertionError("plugins were loaded for a built-in command")

    assert main(["chain", "--help"], registry=Exploding()) == 0
    assert capsys.readouterr().out.startswith("usage: beamfilter chain")
