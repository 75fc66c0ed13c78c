"""The built-ins that cannot be built without options say so in their schemas: a config
table without them gets one clear problem, and ``beamfilter plugins check`` passes."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import Kernel
from beamfilter_core._cli import main
from beamfilter_core.errors import ConfigError


def problems(section: str, table: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config({"model": {"use": "scripted", "script": ["ok"]}, section: [table]})
    return list(caught.value.problems)


def test_call_limits_without_a_limit_is_refused_by_its_schema() -> None:
    assert problems("filters", {"use": "call_limits", "on_limit": "finish"}) == [
        "filters[0]: the filter 'builtins:call_limits' needs at least one of the options max_model_calls, "
        "max_tool_calls or max_calls_per_tool; none is given."
    ]


def test_call_limits_with_one_limit_builds() -> None:
    kernel = Kernel.from_config(
        {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "call_limits", "max_tool_calls": 2}]}
    )
    assert [f.name for f in kernel.filters] == ["call_limits"]


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            {"timeout": 5},
            "tools[0]: the toolset 'builtins:mcp' needs one of the options command or url; none is given. "
            'Give the MCP server as command = ["program", "arg", ...] (stdio) or url = "http://..." (HTTP).',
        ),
        (
            {"command": ["server"], "url": "http://127.0.0.1:1/mcp"},
            "tools[0]: the toolset 'builtins:mcp' takes only one of the options command or url; "
            "command and url are given: keep one.",
        ),
    ],
    ids=["neither", "both"],
)
def test_mcp_needs_exactly_one_server(options: dict[str, Any], problem: str) -> None:
    assert problems("tools", {"use": "mcp", **options}) == [problem]


def test_plugins_check_passes_on_the_builtins(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins", "check", "beamfilter-builtins"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert out.startswith("beamfilter-builtins 0.1.0: ok (plugin 'builtins': ")
    assert "filter 'call_limits'" in out
    assert "toolset 'mcp'" in out
