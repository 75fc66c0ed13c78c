"""Edges of the wire and retry rules, each pinned so that a one-token change fails a test.

Found by mutation testing of ``_wire`` and ``_retry``: odd usage counts, a tool call
without ``arguments``, choices without ``index``, non-mapping ``tool_calls`` entries, the
first id of a streamed call winning, the retry delay edges, error bodies, and the 499/500
boundary.
"""

from __future__ import annotations

import email.utils
import json
from typing import Any

import pytest

from beamfilter_core import ToolCall, Usage
from beamfilter_core._models._retry import (
    INITIAL_DELAY,
    MAX_DELAY,
    MAX_RETRY_AFTER,
    backoff,
    error_from_response,
    header_delay,
    retry_delay,
    status_retryable,
)
from beamfilter_core._models._wire import StreamAccumulator, parse_completion, parse_usage
from beamfilter_core.errors import (
    BadRequestError,
    ConflictError,
    InternalServerError,
    ProviderHTTPError,
    RateLimitError,
    UnprocessableEntityError,
)

# -- usage -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "usage"),
    [
        ({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 9}, Usage(3, 4, 9)),
        ({"prompt_tokens": 3, "completion_tokens": 4}, Usage(3, 4, 7)),
        ({"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 0}, Usage(3, 4, 7)),
        ({"prompt_tokens": True, "completion_tokens": False, "total_tokens": True}, Usage(0, 0, 0)),
        ({"prompt_tokens": 2.5, "completion_tokens": "4", "total_tokens": None}, Usage(0, 0, 0)),
        ({"prompt_tokens": -1, "completion_tokens": 1}, Usage(-1, 1, 0)),
        ({}, Usage(0, 0, 0)),
        ([1, 2], None),
        ("usage", None),
        (None, None),
    ],
)
def test_odd_usage_counts_read_as_zero(data: Any, usage: Usage | None) -> None:
    assert parse_usage(data) == usage


def test_usage_is_read_from_a_completion_and_from_the_last_stream_chunk() -> None:
    data = {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 2}}
    assert parse_completion(data).usage == Usage(1, 2, 3)
    stream = StreamAccumulator(None)
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": "x"}, "finish_reason": "stop"}]}))
    stream.feed(json.dumps({"choices": [], "usage": {"prompt_tokens": 5, "completion_tokens": 6, "total_tokens": 11}}))
    stream.feed(json.dumps({"choices": [], "usage": {}}))  # an empty usage object changes nothing
    stream.feed("[DONE]")
    assert stream.result(chunks=4).usage == Usage(5, 6, 11)


# -- tool calls ------------------------------------------------------------------------------


def _completion_calls(calls: Any) -> tuple[ToolCall, ...]:
    data = {"choices": [{"index": 0, "message": {"content": None, "tool_calls": calls}, "finish_reason": "tool_calls"}]}
    return parse_completion(data).message.tool_calls


def test_a_non_streamed_tool_call_without_arguments_has_empty_arguments() -> None:
    (call,) = _completion_calls([{"id": "c1", "type": "function", "function": {"name": "now"}}])
    assert (call.name, call.arguments, call.id, call.raw_arguments) == ("now", {}, "c1", None)


def test_non_streamed_arguments_given_as_an_object_or_a_number() -> None:
    first, second = _completion_calls(
        [
            {"id": "c1", "function": {"name": "add", "arguments": {"a": 1}}},
            {"id": "c2", "function": {"name": "x", "arguments": 5}},
        ]
    )
    assert (first.arguments, first.raw_arguments) == ({"a": 1}, None)
    assert (second.arguments, second.raw_arguments) == ({}, "5")


def test_non_mapping_entries_in_tool_calls_are_skipped() -> None:
    calls = _completion_calls([5, "x", None, {"id": "c1", "function": {"name": "add", "arguments": "{}"}}])
    assert [(c.id, c.name) for c in calls] == [("c1", "add")]
    stream = StreamAccumulator(None)
    deltas = [5, {"index": 0, "id": "c1", "function": {"name": "add", "arguments": '{"a":'}}]
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": deltas}}]}))
    stream.feed(
        json.dumps(
            {"choices": [{"index": 0, "delta": {"tool_calls": ["y", {"index": 0, "function": {"arguments": " 1}"}}]}}]}
        )
    )
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    stream.feed("[DONE]")
    (call,) = stream.result(chunks=4).message.tool_calls
    assert (call.id, call.name, call.arguments) == ("c1", "add", {"a": 1})


def test_the_first_id_of_a_streamed_call_wins() -> None:
    stream = StreamAccumulator(None)
    for fragment in (
        {"index": 0, "id": "first", "function": {"name": "add", "arguments": "{"}},
        {"index": 0, "id": "second", "function": {"arguments": "}"}},
    ):
        stream.feed(json.dumps({"choices": [{"index": 0, "delta": {"tool_calls": [fragment]}}]}))
    stream.feed(json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
    stream.feed("[DONE]")
    (call,) = stream.result(chunks=4).message.tool_calls
    assert (call.id, call.name, call.arguments) == ("first", "add", {})


def test_streamed_choices_without_index_are_choice_zero_and_other_indexes_are_ignored() -> None:
    tokens: list[str] = []
    stream = StreamAccumulator(tokens.append)
    stream.feed(json.dumps({"choices": [{"delta": {"content": "Hel"}}]}))
    stream.feed(json.dumps({"choices": [{"index": 1, "delta": {"content": "NO"}, "finish_reason": "length"}]}))
    stream.feed(json.dumps({"choices": [{"delta": {"content": "lo"}, "finish_reason": "stop"}]}))
    stream.feed("[DONE]")
    result = stream.result(chunks=4)
    assert (result.text, result.finish_reason, tokens) == ("Hello", "stop", ["Hel", "lo"])


def test_a_completion_answers_with_choice_zero_wherever_it_is() -> None:
    data = {
        "choices": [
            {"index": 1, "message": {"content": "second"}, "finish_reason": "length"},
            {"index": 0, "message": {"content": "first"}, "finish_reason": "stop"},
        ]
    }
    result = parse_completion(data)
    assert (result.text, result.finish_reason) == ("first", "stop")
    assert parse_completion({"choices": [{"message": {"content": "only"}}]}).text == "only"


# -- retry delays ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("retryable", "asked", "attempt", "delay"),
    [
        (False, 1.0, 0, None),
        (True, MAX_RETRY_AFTER, 0, MAX_RETRY_AFTER),  # exactly the ceiling: still waited
        (True, MAX_RETRY_AFTER + 0.001, 0, None),  # above it: not retried at all
        (True, 0.0, 3, 0.0),  # zero is a real answer: retry at once
        (True, 2.5, 3, 2.5),
        (True, -1.0, 0, INITIAL_DELAY),  # a date in the past: fall back to backoff
        (True, None, 0, INITIAL_DELAY),
        (True, None, 1, 1.0),
        (True, None, 4, MAX_DELAY),
        (True, None, 9, MAX_DELAY),
    ],
)
def test_retry_delay_edges(retryable: bool, asked: float | None, attempt: int, delay: float | None) -> None:
    assert retry_delay(retryable, asked, attempt, rand=lambda: 0.0) == delay


def test_backoff_jitter_is_between_three_quarters_and_the_whole_delay() -> None:
    assert backoff(0, lambda: 0.0) == 0.5
    assert backoff(0, lambda: 1.0) == 0.375
    assert backoff(2, lambda: 0.5) == 2.0 * 0.875
    assert backoff(10, lambda: 1.0) == MAX_DELAY * 0.75


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        ({"retry-after-ms": "1500"}, 1.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),
        ({"retry-after-ms": "soon", "retry-after": "9"}, 9.0),
        ({"retry-after": "0"}, 0.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after": "whenever"}, None),
        ({}, None),
    ],
)
def test_header_delay(headers: dict[str, str], delay: float | None) -> None:
    assert header_delay(headers) == delay


def test_header_delay_reads_an_http_date_relative_to_now() -> None:
    now = 1_700_000_000.0
    assert header_delay({"retry-after": email.utils.formatdate(now + 30, usegmt=True)}, now=now) == 30.0
    assert header_delay({"retry-after": email.utils.formatdate(now - 5, usegmt=True)}, now=now) == -5.0


# -- status and error bodies ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "headers", "code", "retryable"),
    [
        (408, {}, None, True),
        (409, {}, None, True),
        (429, {}, None, True),
        (429, {}, "insufficient_quota", False),
        (429, {"x-should-retry": "true"}, "insufficient_quota", True),
        (500, {"x-should-retry": "false"}, None, False),
        (400, {"x-should-retry": "true"}, None, True),
        (400, {"x-should-retry": "maybe"}, None, False),
        (407, {}, None, False),
        (410, {}, None, False),
        (499, {}, None, False),
        (500, {}, None, True),
        (503, {}, None, True),
    ],
)
def test_status_retryable(status: int, headers: dict[str, str], code: str | None, retryable: bool) -> None:
    assert status_retryable(status, headers, code) is retryable


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (409, ConflictError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (418, ProviderHTTPError),
        (499, ProviderHTTPError),
        (500, InternalServerError),
        (599, InternalServerError),
    ],
)
def test_the_499_500_boundary_and_the_classes(status: int, cls: type[ProviderHTTPError]) -> None:
    error = error_from_response(status, {}, b"")
    assert type(error) is cls
    assert (error.status_code, error.message) == (status, f"no error message in the response (status {status})")


@pytest.mark.parametrize(
    ("body", "message", "code", "error_type"),
    [
        (
            b'{"error": {"message": "Bad key.", "type": "auth", "code": "invalid_api_key"}}',
            "Bad key.",
            "invalid_api_key",
            "auth",
        ),
        (b'{"error": {"message": "", "code": 7}}', '{"error": {"message": "", "code": 7}}', "7", None),
        (b'{"error": {"message": 5, "type": 3}}', '{"error": {"message": 5, "type": 3}}', None, None),
        (b'{"message": "bare object", "code": 500}', "bare object", "500", None),  # llama.cpp
        (b'{"error": "plain string"}', "plain string", None, None),
        (b'{"error": ""}', '{"error": ""}', None, None),
        (b"  upstream timed out \n", "upstream timed out", None, None),
        (b"[1, 2]", "[1, 2]", None, None),
        (b"x" * 600, "x" * 500, None, None),
        (b"\xff bad bytes", "\ufffd bad bytes", None, None),
    ],
)
def test_error_body_edge_cases(body: bytes, message: str, code: str | None, error_type: str | None) -> None:
    error = error_from_response(400, {"retry-after": "3"}, body)
    assert (error.message, error.code, error.error_type, error.retry_after) == (message, code, error_type, 3.0)


def test_insufficient_quota_says_retrying_will_not_help() -> None:
    error = error_from_response(429, {}, b'{"error": {"message": "Quota.", "code": "insufficient_quota"}}')
    assert error.message == "Quota. (out of quota: retrying will not help; check the account's plan and billing)"
    other = error_from_response(403, {}, b'{"error": {"message": "Quota.", "code": "insufficient_quota"}}')
    assert other.message == "Quota."
