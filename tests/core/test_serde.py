"""JSON round-trip of messages, requests, responses, results and pause states (issue 2,
contract 13), property-tested with hypothesis."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    Decision,
    IterationResult,
    Message,
    PauseState,
    ToolCall,
    ToolResult,
    TurnRequest,
    TurnResult,
    Usage,
    tool,
)
from beamfilter_core._serde import dumps, loads

text = st.text(max_size=30)
json_scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(text, inner, max_size=3),
    max_leaves=8,
)
arguments = st.dictionaries(text, json_values, max_size=4)
calls = st.builds(
    ToolCall,
    st.from_regex(r"[a-z_]{1,12}", fullmatch=True),
    arguments,
    st.from_regex(r"call_[a-z0-9]{4,10}", fullmatch=True),
)
bad_calls = st.builds(
    lambda t: ToolCall.from_json("tool", t, "call_bad"),
    st.text(max_size=20).filter(lambda t: not t.strip().startswith("{")),
)
parts = st.tuples(
    st.builds(ContentPart, st.just("text"), text), st.builds(ContentPart, st.just("image_url"), st.none(), text)
)
contents = st.none() | text | parts
usage = st.builds(Usage, st.integers(0, 10**6), st.integers(0, 10**6), st.integers(0, 10**6))
messages = st.one_of(
    st.builds(Message, st.sampled_from(["system", "user"]), contents),
    st.builds(Message, st.just("assistant"), contents, st.lists(calls | bad_calls, max_size=3).map(tuple)),
    st.builds(
        Message,
        st.just("tool"),
        text,
        st.just(()),
        st.from_regex(r"call_[a-z0-9]{4}", fullmatch=True),
        st.none() | text,
    ),
)
transcripts = st.lists(messages, max_size=5).map(tuple)
contexts = st.dictionaries(text, json_values, max_size=4)
decisions = st.one_of(
    st.builds(Decision.approve, st.none() | arguments),
    st.builds(Decision.reject, st.none() | text),
    st.builds(Decision.reply, text),
)


def roundtrip(value: Any) -> Any:
    encoded = dumps(value)
    json.loads(encoded)  # plain JSON, nothing exotic
    return loads(encoded, type(value))


@settings(max_examples=150, deadline=None)
@given(messages)
def test_messages(message: Message) -> None:
    assert roundtrip(message) == message


@settings(max_examples=100, deadline=None)
@given(transcripts, contexts, transcripts, st.sampled_from([None, "auto", "none"]), st.none() | text)
def test_chat_requests(
    msgs: tuple[Message, ...], context: dict[str, Any], delta: tuple[Message, ...], choice: Any, system: Any
) -> None:
    request = ChatRequest(msgs, (), choice, {"temperature": 0.5}, context, delta, system)
    assert roundtrip(request) == request


def test_chat_request_tools_roundtrip_as_declarations() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    restored = roundtrip(ChatRequest((Message.user("hi"),), (add,)))
    (declared,) = restored.tools
    assert (declared.name, declared.description, declared.parameters) == (add.name, add.description, add.parameters)
    assert declared.fn is None


@settings(max_examples=100, deadline=None)
@given(messages, st.sampled_from(["stop", "tool_calls", "length", None]), st.none() | usage)
def test_chat_responses(message: Message, finish: Any, used: Any) -> None:
    response = ChatResponse(message, finish, used)
    assert roundtrip(response) == response


@settings(max_examples=100, deadline=None)
@given(text, st.none() | st.sampled_from(["transient", "semantic", "permission"]), contexts)
def test_tool_results(content: str, kind: Any, writes: dict[str, Any]) -> None:
    result = ToolResult(content, writes=writes) if kind is None else ToolResult.failure(kind, content)
    assert roundtrip(result) == result


@settings(max_examples=100, deadline=None)
@given(
    transcripts,
    st.lists(calls, min_size=1, max_size=3).map(tuple),
    contexts,
    st.integers(0, 20),
    usage,
    st.dictionaries(st.from_regex(r"call_[a-z0-9]{4}", fullmatch=True), decisions, max_size=2),
)
def test_pause_states(
    msgs: tuple[Message, ...],
    pending: tuple[ToolCall, ...],
    context: dict[str, Any],
    remaining: int,
    used: Usage,
    decided: dict[str, Decision],
) -> None:
    pause = PauseState(msgs, pending, (pending[0].id,), decided, context, remaining, 3, 2, used, "why")
    assert PauseState.from_json(pause.to_json()) == pause


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["completed", "paused", "cancelled"]), st.none() | messages, transcripts, usage)
def test_turn_results(status: Any, final: Any, msgs: tuple[Message, ...], used: Usage) -> None:
    result = TurnResult(status, final, msgs, 2, 3, used, None, "safeguard", False)
    assert roundtrip(result) == result


@settings(max_examples=50, deadline=None)
@given(transcripts, contexts, st.booleans(), transcripts)
def test_turn_requests_and_iteration_results(
    msgs: tuple[Message, ...], context: dict[str, Any], resume: bool, history: tuple[Message, ...]
) -> None:
    request = TurnRequest(msgs, context, resume, history)
    assert roundtrip(request) == request
    result = IterationResult("continue", msgs)
    assert roundtrip(result) == result


def test_bad_arguments_survive_as_raw_text() -> None:
    call = ToolCall.from_json("f", "{not json", "call_x")
    assert call.arguments == {}
    assert call.raw_arguments == "{not json"
    assert call.arguments_json == "{not json"
    assert roundtrip(call) == call
