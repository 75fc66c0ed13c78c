"""The content and control built-ins enabled by name from config, options schema-checked."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import ChatResponse, Kernel, RunFinished, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream

pytestmark = pytest.mark.anyio


def config(script: list[Any], *filters: dict[str, Any]) -> dict[str, Any]:
    return {"model": {"use": "scripted", "script": script}, "filters": list(filters)}


async def test_every_content_filter_is_registered_and_builds() -> None:
    kernel = Kernel.from_config(
        config(
            ["x"],
            {"use": "logging", "preview": 50, "scopes": ["chat"]},
            {"use": "safeguard", "words": ["falcon"], "failure_response": "No."},
            {"use": "approval", "approve": "operator:eq"},
            {"use": "validation", "validate": "builtins:print", "max_retries": 1},
            {"use": "schema_validation", "schema": {"type": "string"}, "max_errors": 3},
            {"use": "redact", "emails": True},
            {"use": "hold_release", "check": "builtins:str.upper"},
            {"use": "tool_search", "max_results": 3, "backend": "regex"},
            {"use": "re_reading"},
            {"use": "rag", "documents": ["doc"]},
        )
    )
    names = [f.name for f in kernel.filters]
    assert names == [
        "logging", "safeguard", "approval", "validation", "schema_validation",
        "redact", "hold_release", "tool_search", "re_reading", "rag",
    ]  # fmt: skip


async def test_callables_from_import_paths() -> None:
    @tool(sensitive=True)
    def wipe() -> str:
        """Wipe."""
        raise AssertionError("never runs")

    built = Kernel.from_config(
        config(
            ["unused"],
            {"use": "approval", "approve": "operator:eq"},  # eq(name, arguments) is False: reject
            {"use": "hold_release", "check": "builtins:str.upper"},  # the replacement is the upper-cased text
        )
    )
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("wipe", {}, "c1")), "shout it"])
    kernel = Kernel(model, tools=[wipe], filters=built.filters)
    streamed, events = await collect_stream(kernel.run_stream("go"))
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert streamed == "SHOUT IT"
    assert last.result.messages[2].text == "The user rejected this call to the sensitive tool 'wipe'. Do not retry it."


def test_options_are_validated_before_the_factory() -> None:
    with pytest.raises(ConfigError) as info:
        Kernel.from_config(
            config(
                ["x"],
                {"use": "safeguard"},
                {"use": "redact", "applies_to": "both"},
                {"use": "validation", "validate": "not a path"},
                {"use": "rag", "documents": ["a"], "top_k": 0},
                {"use": "approval", "approve": "no_such_module:fn"},
            )
        )
    assert info.value.problems == (
        "filters[0].words: required option of the filter 'builtins:safeguard' is missing.",
        "filters[1].applies_to: must be one of 'stream', 'answer', got 'both'",
        "filters[2].validate: must match pattern ^[A-Za-z_][\\w.]*:[\\w.]+$",
        "filters[3].top_k: must be >= 1, got 0",
        "filters[4]: approval_filter(approve='no_such_module:fn'): cannot import module 'no_such_module' "
        "(No module named 'no_such_module'); check the path.",
    )
