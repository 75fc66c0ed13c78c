"""compaction: summarise or drop the oldest messages past max_tokens; tool rounds stay whole."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import compaction_filter
from beamfilter_builtins._compaction import SPEC, SUMMARY_HEADER, estimate_tokens, split_units
from beamfilter_core import BuildContext, ChatResponse, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


CALL = ToolCall("search", {"q": "x"}, "c1")
# 40 chars per text: 10 tokens + 1 overhead each (chars_per_token=4, message_overhead=1).
TEXT = "x" * 40
HISTORY = (
    Message.system("S" * 40),
    Message.user("u1" + TEXT[2:]),
    Message.assistant("a1" + TEXT[2:]),
    Message.user("u2" + TEXT[2:]),
    Message.assistant(None, (CALL,)),
    Message.tool("c1", "t1" + TEXT[2:], "search"),
    Message.assistant("a2" + TEXT[2:]),
    Message.user("u3" + TEXT[2:]),
)


def heads(messages: Any) -> list[str]:
    return [m.text[:2] if m.text else f"{m.role}:calls" for m in messages]


def test_estimate_and_units() -> None:
    assert estimate_tokens([Message.user("abcd" * 10)], "sys!", 4.0, 4) == 11 + 8
    units = split_units(HISTORY)
    assert [len(u) for u in units] == [1, 1, 1, 1, 2, 1, 1]


async def test_window_drops_oldest_units_but_keeps_system_and_tool_rounds_whole(stream: bool) -> None:
    model = ScriptedModel(["ok"])
    flt = compaction_filter(max_tokens=60, target_tokens=45, strategy="window", message_overhead=1)
    result, streamed = await run_turn(Kernel(model, filters=[flt]), HISTORY, stream)
    sent = model.requests[0].messages
    # 296 chars / 4 + 8 messages = 82 tokens; without u1, a1, u2: 49 > 45; the tool round
    # (assistant call + result) goes as one unit: 33 left.
    assert heads(sent) == ["SS", "a2", "u3"]
    assert model.requests[0].delta == HISTORY  # memory still stores what is new
    assert result.text == "ok"
    if stream:
        assert streamed == "ok"


async def test_summary_replaces_removed_messages_and_is_cached(stream: bool) -> None:
    summarizer = ScriptedModel(["they talked about x"])
    model = ScriptedModel(["ok"])
    flt = compaction_filter(max_tokens=60, target_tokens=60, model=summarizer, message_overhead=1)
    await run_turn(Kernel(model, filters=[flt]), HISTORY, stream)
    sent = model.requests[0].messages
    assert sent[0].text == "S" * 40
    assert sent[1] == Message.user(SUMMARY_HEADER + "they talked about x")
    # 82 tokens + 1 for the summary message; without u1, a1, u2: 49 + 1 <= 60.
    assert heads(sent[2:]) == ["assistant:calls", "t1", "a2", "u3"]
    prompt = summarizer.requests[0].messages
    assert prompt[0].role == "system"
    assert prompt[1].text == f"user: u1{TEXT[2:]}\nassistant: a1{TEXT[2:]}\nuser: u2{TEXT[2:]}"


async def test_summary_transcript_shows_tool_calls_and_results() -> None:
    summarizer = ScriptedModel(["s"])
    flt = compaction_filter(max_tokens=40, target_tokens=30, model=summarizer, message_overhead=1)
    await Kernel(ScriptedModel(["ok"]), filters=[flt]).run(HISTORY)
    assert summarizer.requests[0].messages[1].text == (
        f"user: u1{TEXT[2:]}\nassistant: a1{TEXT[2:]}\nuser: u2{TEXT[2:]}\n"
        'assistant: \n[calls search({"q": "x"})]\n'
        f"tool result (search): t1{TEXT[2:]}\nassistant: a2{TEXT[2:]}"
    )


async def test_summary_model_defaults_to_the_kernel_model_from_build() -> None:
    kernel_model = ScriptedModel(["the summary", "final answer"])
    flt = compaction_filter(max_tokens=60, message_overhead=1, build=BuildContext(model=kernel_model))
    result = await Kernel(kernel_model, filters=[flt]).run(HISTORY)
    assert result.text == "final answer"
    assert kernel_model.requests[1].messages[1].text == SUMMARY_HEADER + "the summary"


async def test_summaries_are_reused_across_calls_of_a_run() -> None:
    summarizer = ScriptedModel(["sum 1", "sum 2"])
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("echo", {}, "e1")), "done"])

    @tool
    def echo() -> str:
        """Echo."""
        return "e"

    flt = compaction_filter(max_tokens=60, target_tokens=60, model=summarizer, message_overhead=1)
    await Kernel(model, tools=[echo], filters=[flt]).run(HISTORY)
    # The second LLM call removes the same prefix: the cached summary is used.
    assert len(summarizer.requests) == 1
    assert model.requests[1].messages[1].text == SUMMARY_HEADER + "sum 1"


async def test_the_last_user_message_is_never_removed() -> None:
    model = ScriptedModel(["ok"])
    long_tail = (Message.user("q" * 400), Message.assistant(None, (CALL,)), Message.tool("c1", "r" * 400))
    flt = compaction_filter(max_tokens=50, strategy="window")
    await Kernel(model, filters=[flt]).run(long_tail)
    assert heads(model.requests[0].messages) == ["qq", "assistant:calls", "rr"]


async def test_under_budget_nothing_changes() -> None:
    summarizer = ScriptedModel([])
    model = ScriptedModel(["ok"])
    await Kernel(model, filters=[compaction_filter(max_tokens=1000, model=summarizer)]).run(HISTORY)
    assert model.requests[0].messages == HISTORY
    assert summarizer.requests == []


def count_words(messages: Any) -> int:
    return sum(len(m.text.split()) for m in messages)


async def test_custom_token_counter_by_import_path() -> None:
    model = ScriptedModel(["ok"])
    words = tuple(Message.user(f"w{n} " * 10) for n in range(5))
    flt = compaction_filter(max_tokens=25, strategy="window", count_tokens=f"{__name__}:count_words")
    await Kernel(model, filters=[flt]).run(words)
    assert heads(model.requests[0].messages) == ["w4"]


def test_bad_options() -> None:
    with pytest.raises(ConfigError) as caught:
        compaction_filter(max_tokens=100)
    assert str(caught.value) == (
        "compaction_filter(strategy='summary') needs a model for summaries: pass model=<ChatModel>, or build the "
        "kernel with Kernel.from_config (the kernel's model is used), or use strategy='window'."
    )
    with pytest.raises(ConfigError) as caught:
        compaction_filter(max_tokens=100, target_tokens=200, strategy="window")
    assert str(caught.value) == (
        "compaction_filter(target_tokens=200) is larger than max_tokens=100; give a smaller target."
    )
    with pytest.raises(ConfigError) as caught:
        compaction_filter(max_tokens=100, model="small", build=BuildContext(models={}))
    assert str(caught.value) == (
        "compaction_filter(model='small') is not a model named in the config (known models: none)."
    )


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("compaction", ("chat",))


async def test_from_config_summarises_with_the_kernel_model() -> None:
    config = {
        "model": {"use": "scripted", "script": ["the summary", "final answer"]},
        "filters": [{"use": "compaction", "max_tokens": 60, "message_overhead": 1}],
    }
    kernel = Kernel.from_config(config)
    result = await kernel.run(HISTORY)
    assert result.text == "final answer"
    model = kernel.model
    assert isinstance(model, ScriptedModel)
    assert model.requests[1].messages[1].text == SUMMARY_HEADER + "the summary"
