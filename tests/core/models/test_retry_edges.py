"""Edges of the retry policy and the error mapping that mutation testing found unpinned:
the 499/500 boundary, a zero delay, the 500-character cut, and malformed error bodies."""

from __future__ import annotations

import pytest

from beamfilter_core._models._retry import error_from_response, retry_delay, status_retryable
from beamfilter_core.errors import InternalServerError, ProviderHTTPError, RateLimitError


def test_499_is_neither_retried_nor_a_server_error_and_500_is_both() -> None:
    assert (status_retryable(499, {}, None), status_retryable(500, {}, None)) == (False, True)
    assert type(error_from_response(499, {}, b"x")) is ProviderHTTPError
    assert type(error_from_response(500, {}, b"x")) is InternalServerError


def test_a_server_asking_for_no_delay_is_retried_at_once() -> None:
    assert retry_delay(True, 0.0, 3, lambda: 0.0) == 0.0


def test_any_negative_delay_falls_back_to_the_backoff() -> None:
    # a date a fraction of a second in the past, not only whole seconds
    assert retry_delay(True, -0.5, 0, lambda: 0.0) == 0.5
    assert retry_delay(True, -1.0, 1, lambda: 0.0) == 1.0


def test_a_long_non_json_body_is_cut_to_500_characters() -> None:
    error = error_from_response(502, {}, b"<html>" + b"x" * 600)
    assert error.message == "<html>" + "x" * 494
    assert error.body == "<html>" + "x" * 600


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b'{"error": {"message": 5}}', '{"error": {"message": 5}}'),  # not a string
        (b'{"error": {"message": ""}}', '{"error": {"message": ""}}'),  # empty
        (b'{"error": ""}', '{"error": ""}'),
        (b"[1, 2]", "[1, 2]"),  # JSON, but not an object
    ],
)
def test_an_unusable_error_message_falls_back_to_the_body_text(body: bytes, message: str) -> None:
    assert error_from_response(400, {}, body).message == message


def test_error_fields_keep_only_what_they_can_use() -> None:
    llama = error_from_response(500, {}, b'{"error": {"code": 500, "message": "slot busy", "type": 7}}')
    assert (llama.code, llama.error_type, llama.message) == ("500", None, "slot busy")
    assert llama.body == {"error": {"code": 500, "message": "slot busy", "type": 7}}
    assert error_from_response(500, {}, b'{"error": {"message": "m"}}').code is None


def test_only_a_429_out_of_quota_gets_the_billing_hint() -> None:
    limited = error_from_response(429, {}, b'{"error": {"message": "Slow down.", "code": "rate_limit_exceeded"}}')
    assert type(limited) is RateLimitError
    assert limited.message == "Slow down."
    server = error_from_response(500, {}, b'{"error": {"message": "Down.", "code": "insufficient_quota"}}')
    assert server.message == "Down."
    assert status_retryable(500, {}, "insufficient_quota") is True
