"""loop_guard: repeated calls and ping-pong cycles, feedback and stop, through a real Kernel."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import loop_guard_filter
from beamfilter_builtins._heal_dangling import heal_messages
from beamfilter_builtins._loop_guard import SPEC, call_signature, find_cycle
from beamfilter_core import ChatResponse, Filter, Kernel, Message, ScriptedModel, ToolCall, TurnRequest, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio

REPEAT_2 = (
    "loop_guard: this call was not run. You already called lookup with exactly these arguments 2 times in this "
    "turn; the results are above and calling it again will not change them. Use those results, try different "
    "arguments or another tool, or answer the user."
)


def make_tools(log: list[str]) -> list[Any]:
    @tool
    def lookup(city: str, unit: str = "C") -> str:
        """Weather of a city."""
        log.append(f"lookup {city} {unit}")
        return f"{city}: 20 {unit}"

    @tool
    def time_of(city: str) -> str:
        """Local time of a city."""
        log.append(f"time_of {city}")
        return f"{city}: 12:00"

    @tool
    def poll(job: str) -> str:
        """Poll a job."""
        log.append(f"poll {job}")
        return "pending"

    return [lookup, time_of, poll]


def calls(*items: tuple[str, dict[str, Any]]) -> ChatResponse:
    return ChatResponse.tool_calls(*(ToolCall(name, args) for name, args in items))


async def test_third_identical_call_is_not_run_and_the_model_is_told(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel(
        [
            calls(("lookup", {"city": "Paris", "unit": "C"})),
            calls(("lookup", {"unit": "C", "city": "Paris"})),  # same call: key order does not matter
            calls(("lookup", {"city": "Paris", "unit": "C"})),
            "It is 20 C in Paris.",
        ]
    )
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter()])
    result, streamed = await run_turn(kernel, "weather?", stream)
    assert log == ["lookup Paris C", "lookup Paris C"]
    assert len(model.requests) == 4
    last_tool = model.requests[3].messages[-1]
    assert last_tool.role == "tool"
    assert last_tool.content == REPEAT_2
    assert result.status == "completed"
    assert result.text == "It is 20 C in Paris."
    assert result.blocked_by is None
    assert result.tool_calls_made == 3
    if stream:
        assert streamed == "It is 20 C in Paris."


async def test_stop_ends_the_turn_with_an_explanation_and_no_dangling_call(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("lookup", {"city": "Oslo"}))] * 3 + ["never"])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter(action="stop")])
    result, streamed = await run_turn(kernel, "weather?", stream)
    expected = (
        'I stopped because I was going around in circles with my tools: lookup({"city":"Oslo"}) was requested 3 times.'
    )
    assert result.status == "completed"
    assert result.text == expected
    assert result.blocked_by == "loop_guard"
    assert log == ["lookup Oslo C", "lookup Oslo C"]
    assert len(model.requests) == 3
    roles = [m.role for m in result.messages]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    assert result.messages[-1].tool_calls == ()
    assert [r.getMessage() for r in caplog.records if r.name == "beamfilter.loop_guard"] == [
        'loop detected, stopping the turn: lookup({"city":"Oslo"}) was requested 3 times'
    ]
    if stream:
        assert streamed == result.text  # the explanation is delivered to the stream too


async def test_ping_pong_cycle_is_detected_on_the_fourth_round(stream: bool) -> None:
    log: list[str] = []
    a = ("lookup", {"city": "Rome"})
    b = ("time_of", {"city": "Rome"})
    model = ScriptedModel([calls(a), calls(b), calls(a), calls(b), "Rome: 20 C at noon."])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter()])
    result, _ = await run_turn(kernel, "Rome?", stream)
    assert log == ["lookup Rome C", "time_of Rome", "lookup Rome C"]
    feedback = model.requests[4].messages[-1].content
    assert feedback == (
        "loop_guard: this call was not run. Your last 4 rounds of tool calls repeat the same 2-step cycle "
        '(lookup({"city":"Rome"}) -> time_of({"city":"Rome"})) and make no progress. Stop cycling: use the '
        "results you already have, try something different, or answer the user."
    )
    assert result.text == "Rome: 20 C at noon."


async def test_three_step_cycle() -> None:
    log: list[str] = []
    steps = [("lookup", {"city": "A"}), ("time_of", {"city": "A"}), ("lookup", {"city": "B"})]
    model = ScriptedModel([calls(s) for s in steps * 2] + ["ok"])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter()])
    result = await kernel.run("go")
    assert log == ["lookup A C", "time_of A", "lookup B C", "lookup A C", "time_of A"]
    assert "repeat the same 3-step cycle" in str(model.requests[6].messages[-1].content)
    assert result.text == "ok"


async def test_cycles_can_be_turned_off() -> None:
    log: list[str] = []
    a, b = ("lookup", {"city": "Rome"}), ("time_of", {"city": "Rome"})
    model = ScriptedModel([calls(a), calls(b), calls(a), calls(b), "done"])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter(detect_cycles=False)])
    await kernel.run("go")
    assert log == ["lookup Rome C", "time_of Rome", "lookup Rome C", "time_of Rome"]


async def test_feedback_escalates_to_stop_after_max_warnings(stream: bool) -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("lookup", {"city": "Oslo"}))] * 4 + ["never"])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter(max_warnings=1)])
    result, _ = await run_turn(kernel, "weather?", stream)
    assert log == ["lookup Oslo C", "lookup Oslo C"]
    assert len(model.requests) == 4
    assert result.blocked_by == "loop_guard"
    assert result.text.endswith('lookup({"city":"Oslo"}) was requested 4 times.')
    roles = [m.role for m in result.messages]
    assert roles == ["user"] + ["assistant", "tool"] * 3 + ["assistant"]


async def test_parallel_duplicates_in_one_batch_count() -> None:
    log: list[str] = []
    same = ("lookup", {"city": "Lima"})
    model = ScriptedModel([calls(same, same, same, ("time_of", {"city": "Lima"})), "done"])
    kernel = Kernel(model, tools=make_tools(log), filters=[loop_guard_filter()])
    result = await kernel.run("go")
    assert sorted(log) == ["lookup Lima C", "lookup Lima C", "time_of Lima"]
    tool_texts = [m.content for m in result.messages if m.role == "tool"]
    assert tool_texts[:2] == ["Lima: 20 C", "Lima: 20 C"]
    assert str(tool_texts[2]).startswith("loop_guard: this call was not run.")
    assert tool_texts[3] == "Lima: 12:00"


async def test_ignored_tools_repeat_freely_and_different_arguments_are_different_calls() -> None:
    log: list[str] = []
    script = [calls(("poll", {"job": "j1"}))] * 4 + [calls(("lookup", {"city": c})) for c in "ABCD"] + ["done"]
    kernel = Kernel(ScriptedModel(script), tools=make_tools(log), filters=[loop_guard_filter(ignore_tools=["poll"])])
    result = await kernel.run("go")
    assert log == ["poll j1"] * 4 + [f"lookup {c} C" for c in "ABCD"]
    assert result.text == "done"


async def test_counters_reset_when_a_turn_filter_re_enters() -> None:
    log: list[str] = []
    same = ("lookup", {"city": "Oslo"})

    async def again(request: TurnRequest, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        first = await call_next(request)
        return await call_next(request.followup(first, Message.user("check again")))

    model = ScriptedModel([calls(same), calls(same), "first", calls(same), calls(same), "second"])
    kernel = Kernel(model, tools=make_tools(log), filters=[Filter("again", around_turn=again), loop_guard_filter()])
    result = await kernel.run("go")
    assert log == ["lookup Oslo C"] * 4  # 2 per turn: never 3 in one turn
    assert result.text == "second"


async def test_max_repeats_two_and_custom_stop_message() -> None:
    log: list[str] = []
    model = ScriptedModel([calls(("lookup", {"city": "X"}))] * 2)
    guard = loop_guard_filter(max_repeats=2, action="stop", stop_message="Loop: {reason}")
    result = await Kernel(model, tools=make_tools(log), filters=[guard]).run("go")
    assert result.text == 'Loop: lookup({"city":"X"}) was requested 2 times'
    assert log == ["lookup X C"]


def test_call_signature_is_canonical() -> None:
    one = ToolCall("f", {"b": [1, {"y": 2, "x": 1}], "a": "é"})
    two = ToolCall("f", {"a": "é", "b": [1, {"x": 1, "y": 2}]})
    assert call_signature(one) == call_signature(two) == ("f", '{"a":"é","b":[1,{"x":1,"y":2}]}')
    bad = ToolCall.from_json("f", " {not json ")
    assert call_signature(bad) == ("f", "{not json")


def test_find_cycle() -> None:
    a, b, c = frozenset({("a", "")}), frozenset({("b", "")}), frozenset({("c", "")})
    assert find_cycle([a, b, a, b], 3) == 2
    assert find_cycle([c, a, b, c, a, b], 3) == 3
    assert find_cycle([a, b, c, a, b, c], 2) == 0
    assert find_cycle([a, a, a, a], 3) == 0  # a plain repeat, not a cycle
    assert find_cycle([a, b, a], 3) == 0
    assert find_cycle([a, frozenset(), a, frozenset()], 3) == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_repeats": 1}, "loop_guard_filter(max_repeats=1) is invalid; give an integer >= 2."),
        ({"action": "halt"}, "loop_guard_filter(action='halt') is invalid; give one of 'feedback', 'stop'."),
        ({"max_warnings": -1}, "loop_guard_filter(max_warnings=-1) is invalid; give an integer >= 0 or None."),
        (
            {"ignore_tools": "poll"},
            "loop_guard_filter(ignore_tools='poll') is invalid; give a list of tool names, e.g. ['search'].",
        ),
    ],
)
def test_bad_options(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        loop_guard_filter(**options)
    assert str(caught.value) == message


def test_spec() -> None:
    assert SPEC.name == "loop_guard"
    assert SPEC.factory is loop_guard_filter
    assert tuple(SPEC.scopes) == ("iteration", "chat", "tool")
    assert loop_guard_filter().scopes == ("iteration", "chat", "tool")


def test_from_config_validates_options_and_builds() -> None:
    kernel = Kernel.from_config(
        {
            "model": {"use": "scripted", "script": ["x"]},
            "filters": [{"use": "loop_guard", "max_repeats": 4, "action": "stop", "ignore_tools": ["poll"]}],
        }
    )
    assert kernel.filters[0].scopes == ("iteration", "chat", "tool")
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(
            {"model": {"use": "scripted", "script": ["x"]}, "filters": [{"use": "loop_guard", "max_repeats": 1}]}
        )
    assert len(caught.value.problems) == 1
    assert caught.value.problems[0].startswith("filters[0]")
    assert "max_repeats" in caught.value.problems[0]


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(
        st.lists(st.tuples(st.sampled_from(["f", "g"]), st.integers(0, 2)), min_size=1, max_size=3),
        min_size=1,
        max_size=8,
    ),
    max_repeats=st.integers(2, 4),
    action=st.sampled_from(["feedback", "stop"]),
)
def test_property_no_call_runs_max_repeats_times_and_every_call_is_answered(
    rounds: list[list[tuple[str, int]]], max_repeats: int, action: str
) -> None:
    executed: list[tuple[str, int]] = []

    @tool
    async def f(x: int) -> str:
        """f."""
        executed.append(("f", x))
        return f"f{x}"

    @tool
    async def g(x: int) -> str:
        """g."""
        executed.append(("g", x))
        return f"g{x}"

    script: list[Any] = [calls(*((name, {"x": x}) for name, x in batch)) for batch in rounds] + ["end"]
    guard = loop_guard_filter(max_repeats=max_repeats, action=action, max_warnings=None)
    kernel = Kernel(ScriptedModel(script), tools=[f, g], filters=[guard], max_iterations=20)
    result = kernel.run_sync("go")
    assert result.status == "completed"
    for signature in set(executed):
        assert executed.count(signature) < max_repeats
    assert heal_messages(result.messages) is None  # no dangling call, no orphan result
    if result.blocked_by is None:
        assert result.text == "end"
    else:
        assert action == "stop"
