"""Failures of an OpenAI-compatible server: typed errors and the retry policy.

The policy is the official SDK's (``wire.md`` section 6), with a 60 s ceiling:

- ``x-should-retry: true|false`` decides first;
- otherwise 408, 409, 429 and 5xx are retried, and so are connection errors, timeouts
  and broken streams that have not delivered any text yet; a 429 whose code is
  ``insufficient_quota`` is not (waiting does not buy quota);
- the delay is ``retry-after-ms``, else ``retry-after`` (seconds or an HTTP date); a
  server asking for more than 60 s is not retried at all; without a header the delay
  is ``min(0.5 * 2**attempt, 8)`` seconds times a jitter factor in (0.75, 1].
"""

from __future__ import annotations

import email.utils
import json
import random
import time
from collections.abc import Callable, Mapping
from typing import Any

from .._masking import mask_secrets
from ..errors import (
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

__all__ = [
    "INITIAL_DELAY",
    "MAX_DELAY",
    "MAX_RETRY_AFTER",
    "backoff",
    "error_from_response",
    "header_delay",
    "retry_delay",
    "status_retryable",
]

#: A server asking to wait longer than this many seconds is not retried.
MAX_RETRY_AFTER = 60.0
#: First backoff delay in seconds, doubled per attempt up to :data:`MAX_DELAY`.
INITIAL_DELAY = 0.5
MAX_DELAY = 8.0

_CLASSES: dict[int, type[ProviderHTTPError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def header_delay(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """The delay a response asks for, in seconds, or None when it names none.

    Checks ``retry-after-ms`` (float milliseconds), then ``retry-after`` as seconds, then
    as an HTTP date (relative to ``now``, default the current time).
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return float(value) / 1000.0
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        moment = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return moment.timestamp() - (time.time() if now is None else now)


def backoff(attempt: int, rand: Callable[[], float] = random.random) -> float:
    """Exponential backoff for retry number ``attempt + 1``: 0.5, 1, 2, 4, 8, 8... s, jittered."""
    return min(INITIAL_DELAY * 2.0**attempt, MAX_DELAY) * (1.0 - 0.25 * rand())


def status_retryable(status: int, headers: Mapping[str, str], code: str | None) -> bool:
    """Whether an error status may be retried (``x-should-retry`` wins)."""
    override = headers.get("x-should-retry")
    if override == "true":
        return True
    if override == "false":
        return False
    if status == 429 and code == "insufficient_quota":
        return False
    return status in (408, 409, 429) or status >= 500


def retry_delay(
    retryable: bool, asked: float | None, attempt: int, rand: Callable[[], float] = random.random
) -> float | None:
    """Seconds to wait before retrying, or None when the failure must not be retried.

    ``asked`` is the server's :func:`header_delay`; ``attempt`` counts from 0.
    """
    if not retryable:
        return None
    if asked is not None:
        if asked > MAX_RETRY_AFTER:
            return None
        if asked >= 0:
            return asked
    return backoff(attempt, rand)


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> ProviderHTTPError:
    """The typed error for an error response, with the server's own message.

    Accepts OpenAI's ``{"error": {...}}``, a bare error object (AWS's ``__type`` too), llama.cpp's integer
    ``code``, and non-JSON bodies (the text is the message). The message is masked with
    the secret rule set (:func:`beamfilter_core.secrets.mask_secrets`): servers echo the
    key they refused (``Incorrect API key provided: sk-...``), and the message is written
    to the retry log and to the gateway's error log.
    """
    text = body.decode("utf-8", "replace").strip()
    decoded: Any = None
    try:
        decoded = json.loads(text) if text else None
    except ValueError:
        decoded = None
    error = decoded.get("error", decoded) if isinstance(decoded, dict) else None
    message: str | None = None
    error_type: str | None = None
    code: str | None = None
    if isinstance(error, dict):
        raw_message = error.get("message")
        message = raw_message if isinstance(raw_message, str) and raw_message else None
        error_type = error.get("type") if isinstance(error.get("type"), str) else None
        aws_type = error.get("__type")
        if error_type is None and isinstance(aws_type, str):
            # AWS JSON protocols may name the fault in the body instead of x-amzn-ErrorType:
            # "ThrottlingException", or "namespace#ThrottlingException"
            error_type = aws_type.rsplit("#", 1)[-1].split(":")[0] or None
        raw_code = error.get("code")
        code = None if raw_code is None else str(raw_code)
    elif isinstance(error, str) and error:
        message = error
    if message is None:
        message = text[:500] if text else f"no error message in the response (status {status})"
    if status == 429 and code == "insufficient_quota":
        message += " (out of quota: retrying will not help; check the account's plan and billing)"
    cls = _CLASSES.get(status, InternalServerError if status >= 500 else ProviderHTTPError)
    return cls(
        mask_secrets(message),
        status_code=status,
        error_type=error_type,
        code=code,
        body=decoded if decoded is not None else mask_secrets(text),
        retry_after=header_delay(headers),
    )
