"""``model_retry``: retry a failed LLM call on retryable provider errors.

Retryable: rate limits (except ``insufficient_quota``), 408/409/5xx answers, connection
failures, timeouts and incomplete streams. A ``Retry-After`` from the server replaces
the backoff delay; one longer than ``max_retry_after`` is not waited for (the error is
raised). A call that already streamed text towards the consumer is never retried (see
:mod:`._streamwatch`). A retry resends the same request, ``ChatRequest.model`` included,
so inside ``fallback`` it retries whichever model the call targets.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import ChatRequest, ChatResponse, Filter, FilterSpec, options_schema
from beamfilter_core.errors import (
    AuthenticationError,
    IncompleteStreamError,
    NotFoundError,
    PermissionDeniedError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
)

from ._backoff import BACKOFF_OPTIONS, Backoff
from ._streamwatch import StreamWatch

__all__ = ["SPEC", "is_retryable", "model_retry_filter"]

_log = logging.getLogger("beamfilter.model_retry")
_RETRY_STATUS = frozenset({408, 409, 429})


def is_retryable(exc: BaseException) -> bool:
    """True for provider errors that may succeed when the same call is tried again."""
    if isinstance(exc, ProviderHTTPError):
        if exc.status_code == 429:
            return exc.code != "insufficient_quota"  # an empty quota does not refill in seconds
        return exc.status_code in _RETRY_STATUS or exc.status_code >= 500
    return isinstance(exc, ProviderConnectionError | ProviderTimeoutError | IncompleteStreamError)


def is_auth_or_missing(exc: BaseException) -> bool:
    """True for 401/403/404: this model cannot answer, another one might."""
    return isinstance(exc, AuthenticationError | PermissionDeniedError | NotFoundError)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        **BACKOFF_OPTIONS,
        "max_retry_after": {"type": "number", "minimum": 0},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def model_retry_filter(
    *,
    max_retries: int = 3,
    initial_delay: float = 1.0,
    max_delay: float = 30.0,
    multiplier: float = 2.0,
    jitter: bool = True,
    max_retry_after: float = 60.0,
    name: str = "model_retry",
) -> Filter:
    """Retry LLM calls that failed with a retryable provider error.

    Args:
        max_retries: Retries after the first attempt (0 disables retrying).
        initial_delay: Seconds before the first retry; doubles (``multiplier``) each time.
        max_delay: Cap on one backoff delay, in seconds.
        multiplier: Growth factor of the delay.
        jitter: Draw each delay from ``[delay / 2, delay]``.
        max_retry_after: Longest ``Retry-After`` (seconds) worth waiting for; a server
            asking for more gets its error raised at once.
        name: The filter's name.

    Returns:
        A chat-scope filter (plus a pass-through token transform that notices streaming).
    """
    retries = max_retries
    backoff = Backoff.from_options(initial_delay, max_delay, multiplier, jitter)
    longest = float(max_retry_after)
    watch = StreamWatch(name)

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        attempt = 0
        while True:
            with watch.attempt() as current:
                try:
                    return await call_next(request)
                except Exception as exc:
                    if attempt >= retries or not is_retryable(exc) or current.streamed:
                        raise
                    error = exc
            retry_after = getattr(error, "retry_after", None)
            if retry_after is not None:
                if retry_after > longest:
                    raise error
                delay = float(retry_after)
            else:
                delay = backoff.delay(attempt)
            attempt += 1
            state["retries"] = state.get("retries", 0) + 1
            _log.warning("LLM call failed (%s); retry %d/%d in %.2f s", error, attempt, retries, delay)
            await asyncio.sleep(delay)

    return Filter(name, around_chat=around_chat, token=watch.transform)


SPEC = FilterSpec(
    "model_retry",
    model_retry_filter,
    OPTIONS,
    "Retry LLM calls on rate limits, 5xx and connection errors, honouring Retry-After.",
    ("chat", "token"),
)
