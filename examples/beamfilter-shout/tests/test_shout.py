"""Tests of beamfilter-shout, using beamfilter-core's pytest fixtures (scripted_model, make_kernel)."""

from __future__ import annotations

from typing import Any

import pytest
from beamfilter_shout import DEFAULT_SIGN_OFF, shout, sign_off

from beamfilter_core import ChatResponse, Kernel, Registry, ToolCall, tool
from beamfilter_core.testing import collect_stream


def test_plugin_is_installed() -> None:
    # only=: other installed plugins (even broken ones) cannot affect this check
    registry = Registry(only=["shout"], strict=True)
    found = registry.get_filter("shout")
    assert (found.qualified, found.distribution, found.version) == ("shout:shout", "beamfilter-shout", "0.1.0")
    assert registry.get_filter("sign_off").qualified == "shout:sign_off"


def test_config_enables_the_filters_by_name() -> None:
    config = {
        "model": {"use": "scripted", "script": ["hello there"]},
        "filters": [{"use": "sign_off", "text": "-- bye"}, {"use": "shout"}],
    }
    kernel = Kernel.from_config(config)
    assert [f.name for f in kernel.filters] == ["sign_off", "shout"]
    assert kernel.run_sync("hi").text == "HELLO THERE\n-- bye"


def test_shout_upper_cases_the_answer(make_kernel: Any) -> None:
    kernel = make_kernel(["hello world"], filters=[shout()])
    assert kernel.run_sync("hi").text == "HELLO WORLD"


@pytest.mark.anyio
async def test_shout_stream_only_keeps_the_answer(scripted_model: Any) -> None:
    kernel = Kernel(scripted_model(["hello world"]), filters=[shout(applies_to="stream")])
    streamed, events = await collect_stream(kernel.run_stream("hi"))
    assert streamed == "HELLO WORLD"
    assert events[-1].result.text == "hello world"


def test_sign_off_appends_its_line_once(make_kernel: Any) -> None:
    kernel = make_kernel(["first", "second"], filters=[sign_off()])
    assert kernel.run_sync("a").text == f"first\n{DEFAULT_SIGN_OFF}"
    assert kernel.run_sync("b").text == f"second\n{DEFAULT_SIGN_OFF}"


def test_sign_off_leaves_a_paused_run_unchanged(make_kernel: Any) -> None:
    @tool(sensitive=True)
    def lookup(city: str) -> str:
        """Look a city up."""
        return city

    call = ToolCall("lookup", {"city": "Oslo"}, "call_1")
    kernel = make_kernel([ChatResponse.tool_calls(call)], tools=[lookup], filters=[sign_off()], gate=lambda *_: "pause")
    result = kernel.run_sync("where?")
    assert result.status == "paused"
    assert result.message is None
    assert result.pause is not None
    assert result.pause.awaiting == ("call_1",)
