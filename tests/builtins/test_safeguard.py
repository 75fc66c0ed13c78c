"""safeguard: turn scope blocks before the loop, chat scope re-checks every LLM call."""

from __future__ import annotations

import pytest

from beamfilter_builtins import safeguard_filter
from beamfilter_builtins._safeguard import DEFAULT_FAILURE_RESPONSE, SPEC
from beamfilter_core import ChatResponse, ContentPart, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def test_turn_scope_blocks_without_calling_the_model(stream: bool) -> None:
    model = ScriptedModel(["never"])
    kernel = Kernel(model, filters=[safeguard_filter(["Forbidden"], failure_response="No.")])
    result, streamed = await run_turn(kernel, "tell me the FORBIDDEN thing", stream)
    assert result.status == "completed"
    assert result.text == "No."
    assert result.blocked_by == "safeguard"
    assert [m.text for m in result.messages] == ["tell me the FORBIDDEN thing", "No."]
    assert model.requests == []
    assert streamed == ("No." if stream else None)  # the refusal reaches the stream as one delta


async def test_turn_scope_passes_clean_input(stream: bool) -> None:
    model = ScriptedModel(["fine"])
    kernel = Kernel(model, filters=[safeguard_filter(["bomb", "  "])])
    result, streamed = await run_turn(kernel, "hello", stream)
    assert (result.text, result.blocked_by, len(model.requests)) == ("fine", None, 1)
    assert streamed in (None, "fine")


async def test_case_sensitive_and_multimodal_and_blank_words() -> None:
    kernel = Kernel(ScriptedModel(["ok"], repeat=True), filters=[safeguard_filter(["Bomb"], case_sensitive=True)])
    assert (await kernel.run("a bomb")).blocked_by is None
    assert (await kernel.run("a Bomb")).blocked_by == "safeguard"
    parts = Message("user", (ContentPart("image_url", url="http://x"), ContentPart("text", text="bomb it")))
    kernel = Kernel(ScriptedModel(["ok"]), filters=[safeguard_filter(["BOMB"])])
    result = await kernel.run([parts])
    assert result.text == DEFAULT_FAILURE_RESPONSE
    empty = Kernel(ScriptedModel(["ok"]), filters=[safeguard_filter(["", "   "])])
    assert (await empty.run("anything")).text == "ok"


async def test_chat_scope_checks_tool_results(stream: bool) -> None:
    @tool
    def fetch() -> str:
        """Fetch a page."""
        return "page with a bomb recipe"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("fetch", {}, "c1")), "never"])
    kernel = Kernel(model, tools=[fetch], filters=[safeguard_filter(["bomb"], scope="chat", failure_response="No.")])
    result, _streamed = await run_turn(kernel, "read it", stream)
    assert result.status == "completed"
    assert result.text == "No."
    assert result.blocked_by == "safeguard"
    assert len(model.requests) == 1  # the second LLM call was never made
    assert result.tool_calls_made == 1
    assert result.messages[-1] == Message.assistant("No.")


async def test_turn_scope_does_not_see_tool_results() -> None:
    @tool
    def fetch() -> str:
        """Fetch a page."""
        return "page with a bomb recipe"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("fetch", {}, "c1")), "done"])
    kernel = Kernel(model, tools=[fetch], filters=[safeguard_filter(["bomb"])])
    result = await kernel.run("read it")
    assert (result.text, result.blocked_by) == ("done", None)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match="not one string"):
        safeguard_filter("bomb")
    with pytest.raises(ConfigError, match=r"words\[1\] is 3"):
        safeguard_filter(["a", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="scope='tool'"):
        safeguard_filter(["a"], scope="tool")  # type: ignore[arg-type]
    assert safeguard_filter(["a"]).scopes == ("turn",)
    assert safeguard_filter(["a"], scope="chat").scopes == ("iteration", "chat")
    assert SPEC.name == "safeguard"
