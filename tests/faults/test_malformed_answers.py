"""Every malformed answer shape of an OpenAI-compatible server is a ProviderResponseError,
retried by the rule that retries a non-JSON body or chunk, never a raw AttributeError,
TypeError or RecursionError.

Two tables, 16 shapes each: non-streamed completions and stream chunks. Each case runs
through a real OpenAIChatModel with ``max_retries=1`` (two attempts, the retry wait
recorded, not slept) and pins the exact message, which names the field, what came and
what was expected. A hypothesis fuzzer then throws generated shapes at the decoder.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from _support import record_retry_waits
from core.models._mock import REQUEST, STREAM, Server, response, sse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamfilter_core._models._wire import StreamAccumulator, parse_completion
from beamfilter_core.errors import ProviderResponseError

pytestmark = pytest.mark.anyio

URL = "http://mock.test/v1/chat/completions"
DEEP = "[" * 100_000 + "]" * 100_000  # JSON nested 100,000 deep


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    return record_retry_waits(monkeypatch)


def _completion(message: Any = None, **choice: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": "x"} if message is None else message
    return {"choices": [{"index": 0, "message": message, "finish_reason": "stop", **choice}]}


def _tool_calls(value: Any) -> dict[str, Any]:
    return _completion({"content": None, "tool_calls": value})


def _delta(delta: Any, **choice: Any) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": delta, **choice}]}


def _call_delta(call: dict[str, Any]) -> dict[str, Any]:
    return _delta({"tool_calls": [{"index": 0, **call}]})


SENT = "The server sent "
NOT_JSON = f"{URL} answered 200 with a body that is not JSON"

# (id, body, exact message; a message ending in "..." is a prefix)
COMPLETIONS: list[tuple[str, Any, str]] = [
    ("body-list", [1, 2], "Expected a JSON object from /chat/completions, got list: [1, 2]."),
    ("choices-strings", {"choices": ["a", "b"]}, 'The completion\'s first choice has no message: "a".'),
    ("choices-object", {"choices": {"0": {}}}, 'The completion has no choices: {"choices": {"0": {}}}.'),
    ("no-choices", {"choices": []}, 'The completion has no choices: {"choices": []}.'),
    (
        "message-string",
        _completion("hi"),
        'The completion\'s first choice has no message: {"index": 0, "message": "hi", "finish_reason": "stop"}.',
    ),
    (
        "content-number",
        _completion({"content": 5}),
        SENT + "message.content as int 5; expected a string, null or a list of text parts.",
    ),
    (
        "content-object",
        _completion({"content": {"a": 1}}),
        SENT + 'message.content as dict {"a": 1}; expected a string, null or a list of text parts.',
    ),
    ("tool_calls-number", _tool_calls(5), SENT + "message.tool_calls as int 5; expected a JSON array or null."),
    ("tool_calls-string", _tool_calls("add"), SENT + 'message.tool_calls as str "add"; expected a JSON array or null.'),
    (
        "function-string",
        _tool_calls([{"id": "c1", "function": "add"}]),
        SENT + 'message.tool_calls[0].function as str "add"; expected a JSON object or null.',
    ),
    (
        "name-number",
        _tool_calls([{"id": "c1", "function": {"name": 5}}]),
        SENT + "message.tool_calls[0].function.name as int 5; expected a string or null.",
    ),
    (
        "id-number",
        _tool_calls([{"id": 7, "function": {"name": "add"}}]),
        SENT + "message.tool_calls[0].id as int 7; expected a string or null.",
    ),
    ("finish-number", _completion(finish_reason=3), SENT + "finish_reason as int 3; expected a string or null."),
    (
        "error-in-200",
        {"error": {"message": "overloaded"}},
        "The server reported an error inside a 200 response: 'overloaded'.",
    ),
    ("deep-json", DEEP, f"{NOT_JSON} (nested too deeply to decode): '[[[[..."),
    ("not-json", "<html>", f"{NOT_JSON}: '<html>'."),
]

CHUNK_NOT_JSON = "The stream sent a chunk that is not valid JSON"
CHUNKS: list[tuple[str, Any, str]] = [
    ("chunk-list", [1], "The stream sent a chunk that is not a JSON object: '[1]'."),
    ("choices-string", {"choices": "abc"}, SENT + 'choices as str "abc"; expected a JSON array or null.'),
    ("choice-number", {"choices": [5]}, SENT + "choices[0] as int 5; expected a JSON object."),
    ("delta-string", _delta("hi"), SENT + 'choices[0].delta as str "hi"; expected a JSON object or null.'),
    ("delta-list", _delta(["hi"]), SENT + 'choices[0].delta as list ["hi"]; expected a JSON object or null.'),
    (
        "content-number",
        _delta({"content": 5}),
        SENT + "choices[0].delta.content as int 5; expected a string, null or a list of text parts.",
    ),
    (
        "content-object",
        _delta({"content": {"a": 1}}),
        SENT + 'choices[0].delta.content as dict {"a": 1}; expected a string, null or a list of text parts.',
    ),
    (
        "refusal-number",
        _delta({"refusal": 5}),
        SENT + "choices[0].delta.refusal as int 5; expected a string or null.",
    ),
    (
        "tool_calls-number",
        _delta({"tool_calls": 5}),
        SENT + "choices[0].delta.tool_calls as int 5; expected a JSON array or null.",
    ),
    (
        "tool_calls-string",
        _delta({"tool_calls": "add"}),
        SENT + 'choices[0].delta.tool_calls as str "add"; expected a JSON array or null.',
    ),
    (
        "function-string",
        _call_delta({"function": "add"}),
        SENT + 'choices[0].delta.tool_calls[0].function as str "add"; expected a JSON object or null.',
    ),
    (
        "name-number",
        _call_delta({"function": {"name": 5}}),
        SENT + "choices[0].delta.tool_calls[0].function.name as int 5; expected a string or null.",
    ),
    (
        "id-number",
        _call_delta({"id": 5}),
        SENT + "choices[0].delta.tool_calls[0].id as int 5; expected a string or null.",
    ),
    (
        "finish-number",
        _delta({}, finish_reason=5),
        SENT + "choices[0].finish_reason as int 5; expected a string or null.",
    ),
    ("deep-json", DEEP, f"{CHUNK_NOT_JSON} (nested too deeply to decode): '[[[[..."),
    ("not-json", "{oops", f"{CHUNK_NOT_JSON}: '{{oops'."),
]


def _check(exc: BaseException, expected: str) -> None:
    assert type(exc) is ProviderResponseError
    if expected.endswith("..."):
        assert str(exc).startswith(expected[:-3])
    else:
        assert str(exc) == expected


@pytest.mark.parametrize(("body", "expected"), [c[1:] for c in COMPLETIONS], ids=[c[0] for c in COMPLETIONS])
async def test_a_malformed_completion_is_a_retried_response_error(body: Any, expected: str, waits: list[float]) -> None:
    text = body if isinstance(body, str) else json.dumps(body)
    server = Server([lambda _: response(200, text, headers={"content-type": "application/json"})])
    async with server.model(max_retries=1) as model:
        with pytest.raises(ProviderResponseError) as caught:
            await model.complete(REQUEST)
    _check(caught.value, expected)
    assert len(server.requests) == 2
    assert len(waits) == 1


@pytest.mark.parametrize(("chunk", "expected"), [c[1:] for c in CHUNKS], ids=[c[0] for c in CHUNKS])
async def test_a_malformed_chunk_is_a_retried_response_error(chunk: Any, expected: str, waits: list[float]) -> None:
    server = Server([lambda _: response(200, sse(chunk), headers=STREAM)])
    tokens: list[str] = []
    async with server.model(max_retries=1) as model:
        with pytest.raises(ProviderResponseError) as caught:
            await model.stream(REQUEST, tokens.append)
    _check(caught.value, expected)
    assert (len(server.requests), len(waits), tokens) == (2, 1, [])


async def test_a_malformed_shape_in_a_json_answer_to_a_stream_request_is_retried(waits: list[float]) -> None:
    # some servers ignore stream: true and answer in one piece; the same rule applies
    body = json.dumps(_completion({"content": 5}))
    server = Server([lambda _: response(200, body, headers={"content-type": "application/json"})])
    async with server.model(max_retries=2) as model:
        with pytest.raises(ProviderResponseError, match=r"message\.content as int 5"):
            await model.stream(REQUEST, lambda _: None)
    assert (len(server.requests), len(waits)) == (3, 2)


async def test_a_malformed_chunk_after_delivered_text_is_not_retried(waits: list[float]) -> None:
    body = sse({"choices": [{"index": 0, "delta": {"content": "Hel"}}]}, _delta("lo"))
    server = Server([lambda _: response(200, body, headers=STREAM)])
    tokens: list[str] = []
    async with server.model(max_retries=2) as model:
        with pytest.raises(ProviderResponseError, match=r"choices\[0\]\.delta as str"):
            await model.stream(REQUEST, tokens.append)
    assert (len(server.requests), waits, tokens) == (1, [], ["Hel"])


def test_content_as_a_list_of_text_parts_is_joined() -> None:
    parts = [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]
    assert parse_completion(_completion({"content": parts})).text == "Hello"
    stream = StreamAccumulator(None)
    stream.feed(json.dumps(_delta({"content": parts}, finish_reason="stop")))
    stream.feed("[DONE]")
    assert stream.result(chunks=2).text == "Hello"


def test_deeply_nested_tool_arguments_are_kept_as_bad_arguments_not_a_crash() -> None:
    answer = parse_completion(_tool_calls([{"id": "c1", "function": {"name": "add", "arguments": DEEP}}]))
    call = answer.message.tool_calls[0]
    assert (call.arguments, call.raw_arguments) == ({}, DEEP)


# -- fuzzing: generated shapes, typed errors only -------------------------------------------

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5)
_json = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=12,
)
_keys = st.sampled_from(
    [
        "choices",
        "index",
        "message",
        "delta",
        "content",
        "refusal",
        "tool_calls",
        "function",
        "name",
        "arguments",
        "id",
        "finish_reason",
        "usage",
        "error",
        "message",
    ]
)
# shapes biased to the protocol's own keys, so the fuzzer reaches the deep branches
_shaped = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=4),
    max_leaves=16,
)

_FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_FUZZ
@given(st.one_of(_json, _shaped))
def test_the_completion_decoder_raises_typed_errors_only(data: Any) -> None:
    with contextlib.suppress(ProviderResponseError):
        parse_completion(data)


@_FUZZ
@given(st.lists(st.one_of(_json, _shaped).map(json.dumps) | st.text(max_size=20), max_size=4))
def test_the_stream_decoder_raises_typed_errors_only(chunks: list[str]) -> None:
    stream = StreamAccumulator(lambda _: None)
    with contextlib.suppress(ProviderResponseError):
        for chunk in chunks:
            stream.feed(chunk)
        stream.feed("[DONE]")
        stream.result(chunks=len(chunks) + 1)


async def test_a_body_that_is_not_utf8_is_a_retried_response_error(waits: list[float]) -> None:
    server = Server([lambda _: response(200, b"\xff\xfe{", headers={"content-type": "application/json"})])
    async with server.model(max_retries=1) as model:
        with pytest.raises(ProviderResponseError) as caught:
            await model.complete(REQUEST)
    assert str(caught.value) == f"{NOT_JSON}: '\ufffd\ufffd{{'."
    assert len(server.requests) == 2
