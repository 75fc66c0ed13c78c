"""model_retry: retryable provider errors are retried (Retry-After honoured), never after streaming."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from beamfilter_builtins import model_retry_filter
from beamfilter_builtins._model_retry import SPEC, is_retryable
from beamfilter_core import ChatRequest, ChatResponse, Kernel
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    ConfigError,
    IncompleteStreamError,
    InternalServerError,
    NotFoundError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    RateLimitError,
)
from beamfilter_core.testing import collect_stream, run_turn

pytestmark = pytest.mark.anyio


class FlakyModel:
    """Fails with ``errors`` (in order, one per call), then answers ``text``.

    ``partial`` streams that text before raising (a stream broken mid-way).
    """

    def __init__(self, errors: list[Exception], text: str = "hello there", partial: str = "") -> None:
        self.errors = list(errors)
        self.text = text
        self.partial = partial
        self.calls: list[float] = []

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls.append(time.perf_counter())
        if self.errors:
            raise self.errors.pop(0)
        return ChatResponse.from_text(self.text)

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        self.calls.append(time.perf_counter())
        if self.errors:
            if self.partial:
                on_token(self.partial)
            raise self.errors.pop(0)
        for word in self.text.split(" "):
            on_token(word + " ")
        return ChatResponse.from_text(self.text)


def rate_limit(retry_after: float | None = None, code: str | None = None) -> RateLimitError:
    return RateLimitError("slow down", status_code=429, code=code, retry_after=retry_after)


async def test_retries_with_backoff_then_succeeds(stream: bool) -> None:
    model = FlakyModel([InternalServerError("boom", status_code=500), ProviderConnectionError("reset")])
    retry = model_retry_filter(initial_delay=0.05, jitter=False)
    result, streamed = await run_turn(Kernel(model, filters=[retry]), "hi", stream)
    assert result.text == "hello there"
    assert len(model.calls) == 3
    gaps = [b - a for a, b in itertools.pairwise(model.calls)]
    assert 0.05 <= gaps[0] < 0.09
    assert 0.10 <= gaps[1] < 0.15
    if stream:
        assert streamed == "hello there "


async def test_retry_after_replaces_the_backoff(stream: bool) -> None:
    model = FlakyModel([rate_limit(retry_after=0.2)])
    retry = model_retry_filter(initial_delay=0.001, jitter=False)
    result, _ = await run_turn(Kernel(model, filters=[retry]), "hi", stream)
    assert result.text == "hello there"
    assert 0.2 <= model.calls[1] - model.calls[0] < 0.3


async def test_retry_after_longer_than_allowed_raises_at_once() -> None:
    model = FlakyModel([rate_limit(retry_after=120.0)])
    with pytest.raises(RateLimitError) as caught:
        await Kernel(model, filters=[model_retry_filter()]).run("hi")
    assert caught.value.retry_after == 120.0
    assert len(model.calls) == 1


async def test_exhaustion_raises_the_last_error() -> None:
    errors: list[Exception] = [ProviderTimeoutError(f"stall {n}") for n in range(4)]
    model = FlakyModel(errors)
    with pytest.raises(ProviderTimeoutError, match="stall 3"):
        await Kernel(model, filters=[model_retry_filter(initial_delay=0.001)]).run("hi")
    assert len(model.calls) == 4


@pytest.mark.parametrize(
    "error",
    [
        BadRequestError("bad", status_code=400),
        AuthenticationError("key", status_code=401),
        NotFoundError("model", status_code=404),
        rate_limit(code="insufficient_quota"),
        ValueError("a bug"),
    ],
    ids=["400", "401", "404", "quota", "bug"],
)
async def test_non_retryable_errors_pass_at_once(error: Exception) -> None:
    model = FlakyModel([error])
    with pytest.raises(type(error)):
        await Kernel(model, filters=[model_retry_filter(initial_delay=0.001)]).run("hi")
    assert len(model.calls) == 1


async def test_never_retries_after_tokens_reached_the_consumer() -> None:
    model = FlakyModel([IncompleteStreamError("cut")], partial="Hel")
    kernel = Kernel(model, filters=[model_retry_filter(initial_delay=0.001)])
    seen: list[Any] = []

    async def consume() -> None:
        async for event in kernel.run_stream("hi"):
            seen.append(event)

    with pytest.raises(IncompleteStreamError):
        await consume()
    assert len(model.calls) == 1
    assert [getattr(e, "text", None) for e in seen] == ["Hel"]


async def test_the_same_broken_stream_is_retried_without_streaming() -> None:
    # Non-streaming runs never deliver tokens, so a cut answer is retried.
    model = FlakyModel([IncompleteStreamError("cut")], partial="Hel")
    result = await Kernel(model, filters=[model_retry_filter(initial_delay=0.001)]).run("hi")
    assert result.text == "hello there"
    assert len(model.calls) == 2


async def test_concurrent_runs_do_not_share_the_streamed_flag() -> None:
    import asyncio

    retry = model_retry_filter(initial_delay=0.01)
    broken = Kernel(FlakyModel([IncompleteStreamError("cut")], partial="x"), filters=[retry])
    healthy = Kernel(FlakyModel([ProviderConnectionError("reset")]), filters=[retry])

    async def drain(kernel: Kernel) -> str:
        text, _ = await collect_stream(kernel.run_stream("hi"))
        return text

    outcome = await asyncio.gather(drain(broken), drain(healthy), return_exceptions=True)
    assert isinstance(outcome[0], IncompleteStreamError)
    assert outcome[1] == "hello there "


def test_is_retryable() -> None:
    assert is_retryable(ProviderHTTPError("timeout", status_code=408))
    assert is_retryable(ProviderHTTPError("conflict", status_code=409))
    assert is_retryable(ProviderHTTPError("gateway", status_code=502))
    assert is_retryable(rate_limit())
    assert not is_retryable(rate_limit(code="insufficient_quota"))
    assert not is_retryable(ProviderHTTPError("unprocessable", status_code=422))
    assert not is_retryable(RuntimeError("x"))


def test_bad_options() -> None:
    with pytest.raises(ConfigError) as caught:
        model_retry_filter(max_retry_after=-1)
    assert str(caught.value) == "model_retry_filter(max_retry_after=-1) is invalid; give a number >= 0."


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("model_retry", ("chat", "token"))
