"""The retry policy and the error mapping, as pure functions."""

from __future__ import annotations

import email.utils

import pytest

from beamfilter_core._models._retry import (
    backoff,
    error_from_response,
    header_delay,
    retry_delay,
    status_retryable,
)
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    InternalServerError,
    NotFoundError,
    PermissionDeniedError,
    ProviderHTTPError,
    RateLimitError,
    UnprocessableEntityError,
)


def test_header_delay_order_and_formats() -> None:
    assert header_delay({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert header_delay({"retry-after": "2.5"}) == 2.5
    assert header_delay({"retry-after-ms": "soon", "retry-after": "3"}) == 3.0
    assert header_delay({}) is None
    assert header_delay({"retry-after": "whenever"}) is None
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert header_delay({"retry-after": date}, now=now) == pytest.approx(30.0)


def test_backoff_doubles_from_half_a_second_to_eight_with_jitter() -> None:
    assert [backoff(n, rand=lambda: 0.0) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert [backoff(n, rand=lambda: 1.0) for n in range(3)] == [0.375, 0.75, 1.5]
    assert all(0.375 <= backoff(0) <= 0.5 for _ in range(200))


@pytest.mark.parametrize(
    ("status", "headers", "code", "expected"),
    [
        (408, {}, None, True),
        (409, {}, None, True),
        (429, {}, "rate_limit_exceeded", True),
        (429, {}, "insufficient_quota", False),
        (500, {}, None, True),
        (503, {}, None, True),
        (400, {}, None, False),
        (401, {}, None, False),
        (403, {}, None, False),
        (404, {}, None, False),
        (422, {}, None, False),
        (400, {"x-should-retry": "true"}, None, True),
        (500, {"x-should-retry": "false"}, None, False),
        (429, {"x-should-retry": "true"}, "insufficient_quota", True),
    ],
)
def test_status_retryable(status: int, headers: dict[str, str], code: str | None, expected: bool) -> None:
    assert status_retryable(status, headers, code) is expected


def test_retry_delay_prefers_the_server_and_caps_at_60_s() -> None:
    fixed = lambda: 0.0  # noqa: E731
    assert retry_delay(False, 1.0, 0, fixed) is None
    assert retry_delay(True, 7.0, 0, fixed) == 7.0
    assert retry_delay(True, 60.0, 0, fixed) == 60.0
    assert retry_delay(True, 60.5, 0, fixed) is None
    assert retry_delay(True, None, 2, fixed) == 2.0
    assert retry_delay(True, -5.0, 1, fixed) == 1.0  # a date in the past: back off instead


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, BadRequestError),
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (422, UnprocessableEntityError),
        (429, RateLimitError),
        (500, InternalServerError),
        (502, InternalServerError),
        (418, ProviderHTTPError),
    ],
)
def test_error_classes_by_status(status: int, cls: type[ProviderHTTPError]) -> None:
    error = error_from_response(status, {}, b'{"error": {"message": "nope", "type": "t", "code": "c", "param": null}}')
    assert type(error) is cls
    assert (error.status_code, error.message, error.error_type, error.code) == (status, "nope", "t", "c")
    assert str(error) == f"HTTP {status}: nope"


def test_error_bodies_are_parsed_leniently() -> None:
    plain = error_from_response(500, {}, b"Internal Server Error")
    assert (plain.message, plain.body, plain.code) == ("Internal Server Error", "Internal Server Error", None)
    bare = error_from_response(422, {}, b'{"message": "messages: field required", "type": "invalid"}')
    assert (bare.message, bare.error_type) == ("messages: field required", "invalid")
    empty = error_from_response(503, {"retry-after": "4"}, b"")
    assert empty.message == "no error message in the response (status 503)"
    assert empty.retry_after == 4.0
    string_error = error_from_response(400, {}, b'{"error": "model is required"}')
    assert string_error.message == "model is required"
    quota = error_from_response(429, {}, b'{"error": {"message": "Quota exceeded.", "code": "insufficient_quota"}}')
    assert quota.message == (
        "Quota exceeded. (out of quota: retrying will not help; check the account's plan and billing)"
    )
