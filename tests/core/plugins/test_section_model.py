"""A plugin section that stands in the file's model (``SectionSpec.model``): a config whose
section names the kernel its turns run on needs no ``[model]``."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import Registry, ScriptedModel, SectionSpec, build_config, hookimpl
from beamfilter_core.errors import ConfigError

SCHEMA = {
    "type": "object",
    "properties": {"use": {"const": "elsewhere"}, "kernel": {"type": "string"}},
    "required": ["use"],
    "additionalProperties": False,
}
STAND_IN = ScriptedModel(["the stand-in"])


def stand_in(table: Any) -> Any:
    return STAND_IN if "kernel" in table else None


class Plugin:
    @hookimpl
    def beamfilter_register_sections(self) -> list[SectionSpec]:
        return [
            SectionSpec("elsewhere", lambda use, kernel=None: (use, kernel), SCHEMA, model=stand_in),
            SectionSpec("plain", lambda use="x": use, {"type": "object", "properties": {"use": {"type": "string"}}}),
        ]


@pytest.fixture
def registry() -> Registry:
    return Registry.from_plugins({"standing": Plugin()})


def test_a_section_naming_the_kernel_stands_in_the_missing_model(registry: Registry) -> None:
    built = build_config({"elsewhere": {"use": "elsewhere", "kernel": "app:kernel"}, "plain": {}}, registry=registry)
    assert built.kernel.model is STAND_IN
    assert built.sections["elsewhere"] == ("elsewhere", "app:kernel")


def test_without_a_stand_in_the_model_is_still_required(registry: Registry) -> None:
    for config in ({"elsewhere": {"use": "elsewhere"}}, {"plain": {"use": "x"}}, {}):
        with pytest.raises(ConfigError) as caught:
            build_config(config, registry=registry)
        assert caught.value.problems == (
            'model: missing; add a [model] table, e.g. [model] use = "openai" model = "gpt-4o-mini".',
        ), config


def test_a_model_table_wins_over_the_stand_in(registry: Registry) -> None:
    built = build_config(
        {"model": {"use": "scripted", "script": ["own"]}, "elsewhere": {"use": "elsewhere", "kernel": "a:b"}},
        registry=registry,
    )
    assert built.kernel.model is not STAND_IN
    assert built.model == "core:scripted"
