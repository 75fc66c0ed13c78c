"""re_reading: each plain-text user entry message is asked twice; skipped on resume."""

from __future__ import annotations

import pytest

from beamfilter_builtins import re_reading_filter
from beamfilter_builtins._re_reading import SPEC
from beamfilter_core import ChatResponse, ContentPart, Decision, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def test_re_reading_rewrites_user_entry_messages(stream: bool) -> None:
    model = ScriptedModel(["4"])
    kernel = Kernel(model, filters=[re_reading_filter()])
    await run_turn(kernel, [Message.system("be brief"), Message.user("2+2?")], stream)
    assert [(m.role, m.text) for m in model.requests[0].messages] == [
        ("system", "be brief"),
        ("user", "2+2?\nRead the question again: 2+2?"),
    ]


async def test_re_reading_template_and_multimodal() -> None:
    model = ScriptedModel(["a", "b"])
    kernel = Kernel(model, filters=[re_reading_filter("Q: {question} (again: {question})")])
    await kernel.run("why?")
    assert model.requests[0].messages[0].text == "Q: why? (again: why?)"
    parts = Message("user", (ContentPart("text", text="look"),))
    await kernel.run([parts])
    assert model.requests[1].messages[0] == parts
    with pytest.raises(ConfigError, match="placeholder"):
        re_reading_filter("no placeholder")
    assert SPEC.name == "re_reading"


async def test_re_reading_skipped_on_resume() -> None:
    @tool(sensitive=True)
    def rm() -> str:
        """Remove."""
        return "removed"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("rm", {}, "c1")), "done"])
    kernel = Kernel(model, tools=[rm], filters=[re_reading_filter()], gate=lambda c, t, x: Decision.pause())
    paused = await kernel.run("remove")
    resumed = await kernel.resume(paused.pause, {"c1": "approve"})
    assert resumed.text == "done"
    assert model.requests[1].messages[0].text == "remove\nRead the question again: remove"
    assert len([m for m in model.requests[1].messages if m.role == "user"]) == 1
