"""The testing kit: the pytest11 fixtures and ScriptedModel's scripting and streaming."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import ChatRequest, ChatResponse, Message, ScriptedModel
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream


def test_fixtures_come_from_the_installed_pytest_plugin(request: pytest.FixtureRequest) -> None:
    plugin = request.config.pluginmanager.get_plugin("beamfilter")
    assert plugin is not None
    assert plugin.__name__ == "beamfilter_core.testing._pytest_plugin"


def test_make_kernel_wraps_a_script(make_kernel: Any) -> None:
    kernel = make_kernel(["hello"], max_iterations=2)
    assert kernel.max_iterations == 2
    assert kernel.run_sync("hi").text == "hello"


def test_scripted_model_records_requests_and_calls_callables(scripted_model: Any) -> None:
    def echo(request: ChatRequest) -> str:
        return "echo: " + request.messages[-1].text

    async def later(request: ChatRequest) -> ChatResponse:
        return ChatResponse.from_text(f"{len(request.messages)} messages")

    model = scripted_model([echo, later])
    request = ChatRequest((Message.user("ping"),))
    import asyncio

    assert asyncio.run(model.complete(request)).text == "echo: ping"
    assert asyncio.run(model.complete(request)).text == "1 messages"
    assert model.requests == [request, request]


@pytest.mark.anyio
async def test_streaming_splits_words_or_fixed_chunks(make_kernel: Any) -> None:
    words = ScriptedModel(["one two  three"])
    assert words.tokens("one two  three") == ["one", " two", "  three"]
    chunks = ScriptedModel(["abcdefg"], chunk=3)
    assert chunks.tokens("abcdefg") == ["abc", "def", "g"]
    text, events = await collect_stream(make_kernel(chunks).run_stream("go"))
    assert text == "abcdefg"
    assert len(events) == 4  # three deltas and RunFinished


def test_bad_scripts_are_rejected() -> None:
    with pytest.raises(ConfigError, match=r"ScriptedModel script\[1\] is 42; items must be a str"):
        ScriptedModel(["ok", 42])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match=r"ScriptedModel chunk=0"):
        ScriptedModel([], chunk=0)


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [False, True])
async def test_run_turn_covers_both_paths(stream: bool) -> None:
    from beamfilter_core import Kernel
    from beamfilter_core.testing import run_turn

    seen: list[Any] = []

    async def record(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        seen.append(request.context.get("user"))
        return await call_next(request)

    from beamfilter_core import Filter

    kernel = Kernel(ScriptedModel(["two words"]), filters=[Filter("record", around_turn=record)])
    result, streamed = await run_turn(kernel, "hi", stream, context={"user": "ana"})
    assert result.text == "two words"
    assert streamed == ("two words" if stream else None)
    assert seen == ["ana"]


def test_scripted_calls_asks_for_one_batch_then_answers() -> None:
    from beamfilter_core import Kernel, ToolCall, tool
    from beamfilter_core.testing import scripted_calls

    @tool
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    calls = (ToolCall("add", {"a": 1, "b": 2}, "c1"), ToolCall("add", {"a": 3, "b": 4}, "c2"))
    model = scripted_calls(*calls)
    assert model.script == [ChatResponse.tool_calls(*calls), "done"]
    result = Kernel(model, tools=[add]).run_sync("go")
    assert [(m.role, m.text) for m in result.messages] == [
        ("user", "go"),
        ("assistant", ""),
        ("tool", "3"),
        ("tool", "7"),
        ("assistant", "done"),
    ]
    assert len(model.requests) == 2
    assert scripted_calls(calls[0], answer="sum: 3").script == [ChatResponse.tool_calls(calls[0]), "sum: 3"]
    assert scripted_calls(calls[0], answer=None).script == [ChatResponse.tool_calls(calls[0])]
    chunked = scripted_calls(calls[0], chunk=2, repeat=True)
    assert (chunked.chunk, chunked.repeat) == (2, True)


def test_scripted_calls_names_what_is_wrong() -> None:
    from beamfilter_core import ToolCall
    from beamfilter_core.testing import scripted_calls

    with pytest.raises(ConfigError) as none:
        scripted_calls()
    assert str(none.value) == "scripted_calls() got no tool calls; give at least one ToolCall(name, arguments, id)."
    with pytest.raises(ConfigError) as wrong:
        scripted_calls(ToolCall("add", {}, "c1"), ("add", {}, "c2"))  # type: ignore[arg-type]
    assert str(wrong.value) == (
        "scripted_calls() calls[1] is ('add', {}, 'c2'); give ToolCall(name, arguments, id) objects."
    )
    with pytest.raises(ConfigError, match=r"^ScriptedModel script\[1\] is 42; items must be a str"):
        scripted_calls(ToolCall("add", {}, "c1"), answer=42)  # type: ignore[arg-type]


def _held_until_space() -> Any:
    from beamfilter_core import TokenTransform

    def step(token: str, held: str) -> tuple[list[str], str]:
        text = held + token
        cut = text.rfind(" ") + 1
        return ([text[:cut]] if cut else []), text[cut:]

    return TokenTransform(step, init="", flush=lambda held: [held] if held else [])


def test_feed_tokens_steps_without_the_flush_and_returns_the_state() -> None:
    from beamfilter_core import Filter
    from beamfilter_core.testing import feed_tokens

    transform = _held_until_space()
    assert feed_tokens(transform, ["ab", "c d", "e"]) == (["abc "], "de")
    assert feed_tokens(Filter("words", token=transform), ["f g"], state="de") == (["def "], "g")
    assert feed_tokens(transform, []) == ([], "")


def test_stream_tokens_ends_with_the_flush() -> None:
    from beamfilter_core import Filter, TokenTransform
    from beamfilter_core.testing import stream_tokens

    transform = _held_until_space()
    assert stream_tokens(transform, ["ab", "c d", "e"]) == ["abc ", "de"]
    assert stream_tokens(Filter("words", token=transform), ["x "]) == ["x "]
    upper = TokenTransform(lambda token, state: ((token.upper(),), state))  # no flush
    assert stream_tokens(upper, iter(["a", "b"])) == ["A", "B"]


def test_token_helpers_name_what_has_no_transform() -> None:
    from beamfilter_core import Filter
    from beamfilter_core.testing import feed_tokens, stream_tokens

    with pytest.raises(ConfigError) as plain:
        stream_tokens(Filter("plain"), ["x"])
    assert str(plain.value) == (
        "stream_tokens() got the filter 'plain', which has no token transform; "
        "give a TokenTransform or a Filter made with token=TokenTransform(...)."
    )
    with pytest.raises(ConfigError) as other:
        feed_tokens("upper", ["x"])  # type: ignore[arg-type]
    assert str(other.value) == (
        "feed_tokens() got 'upper'; give a TokenTransform or a Filter made with token=TokenTransform(...)."
    )
