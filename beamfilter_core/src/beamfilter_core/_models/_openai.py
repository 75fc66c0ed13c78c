"""OpenAIChatModel: any OpenAI-compatible ``/chat/completions`` server over httpx.

Works with OpenAI, vLLM, llama.cpp's server, Ollama and LM Studio. Streams are decoded
with httpx-sse (incremental, any line ending, comments, multi-line data, UTF-8 split
across reads); the wire rules are in :mod:`._wire`, errors and retries in :mod:`._retry`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncIterator, Mapping
from types import TracebackType
from typing import Any

import httpx
from httpx_sse import EventSource

from .._records import ChatRequest, ChatResponse
from ..errors import (
    ConfigError,
    IncompleteStreamError,
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
)
from ._base import TokenSink
from ._retry import error_from_response, header_delay, retry_delay, status_retryable
from ._wire import StreamAccumulator, parse_completion, request_body

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger("beamfilter.models.openai")

_OPENAI = "https://api.openai.com/v1"

# The retry wait; module-level so tests can observe delays without sleeping.
_sleep = asyncio.sleep


# How long to keep reading after [DONE]: servers end the body within milliseconds, and
# a fully read response lets httpx reuse the connection (a TLS handshake saved).
_DRAIN_SECONDS = 0.1


async def _drain(events: AsyncIterator[Any]) -> None:
    """Read (and ignore) whatever follows ``[DONE]``, briefly; the answer is complete."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError):
        pass


class _Failed(Exception):
    """One failed attempt: the error to raise, whether it may be retried, the asked delay."""

    def __init__(self, error: ProviderError, retryable: bool, asked: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retryable = retryable
        self.asked = asked


class OpenAIChatModel:
    """A chat model served over the OpenAI chat-completions protocol.

    Args:
        model: the model name sent in every request.
        base_url: the API root, e.g. ``http://127.0.0.1:8080/v1`` for llama.cpp's server.
        api_key: the key; when None it is read from the ``api_key_env`` variable.
            Local servers usually need none (no ``Authorization`` header is sent then).
        options: extra body fields for every call (``temperature``, ``max_tokens``...);
            ``ChatRequest.options`` are merged over them.
        timeout: seconds for connecting, for a non-streamed answer, and the longest
            silence allowed between two chunks of a stream.
        max_retries: retries after the first attempt (see :mod:`._retry` for the policy).
        client: an ``httpx.AsyncClient`` you own (not closed by :meth:`aclose`).
        transport: an httpx transport for a client this model creates and owns.

    Example::

        async with OpenAIChatModel("gpt-4o-mini") as model:
            kernel = Kernel(model)
            print((await kernel.run("Hello")).text)
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str = _OPENAI,
        api_key: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        options: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        max_retries: int = 2,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if not isinstance(model, str) or not model:
            msg = f"OpenAIChatModel(model={model!r}) needs a model name, e.g. 'gpt-4o-mini'."
            raise ConfigError(msg)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            msg = f"OpenAIChatModel(base_url={base_url!r}) must be an http(s) URL such as 'http://127.0.0.1:8080/v1'."
            raise ConfigError(msg)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or timeout <= 0:
            msg = f"OpenAIChatModel(timeout={timeout!r}) must be a positive number of seconds."
            raise ConfigError(msg)
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            msg = f"OpenAIChatModel(max_retries={max_retries!r}) must be an integer >= 0 (default 2)."
            raise ConfigError(msg)
        if options is not None and not isinstance(options, Mapping):
            msg = f"OpenAIChatModel(options={options!r}) must be a mapping of extra body fields."
            raise ConfigError(msg)
        if client is not None and transport is not None:
            msg = "OpenAIChatModel takes client= or transport=, not both; configure the transport on your client."
            raise ConfigError(msg)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.options: Mapping[str, Any] = dict(options or {})
        self.timeout = float(timeout)
        self.max_retries = max_retries
        self._url = self.base_url + "/chat/completions"
        key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._key_hint = api_key_env
        self._has_key = bool(key)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._headers = headers
        self._stream_headers = {**headers, "Accept": "text/event-stream"}
        self._timeout = httpx.Timeout(self.timeout)
        self._client = client
        self._owns_client = client is None
        self._transport = transport
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        return f"OpenAIChatModel(model={self.model!r}, base_url={self.base_url!r})"

    # -- lifecycle ----------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if not self._owns_client:
            assert self._client is not None  # set in __init__ when not owned
            return self._client
        loop = asyncio.get_running_loop()
        client = self._client
        if client is None or self._client_loop is not loop:
            # Pooled connections belong to one event loop; ``run_sync`` starts a new
            # loop per call, so an owned client is remade when the loop changes.
            client = self._client = httpx.AsyncClient(transport=self._transport, timeout=self._timeout)
            self._client_loop = loop
        return client

    async def aclose(self) -> None:
        """Close the HTTP client this model created (an injected client is left open)."""
        client = self._client
        if self._owns_client and client is not None:
            self._client = None
            self._client_loop = None
            await client.aclose()

    async def __aenter__(self) -> OpenAIChatModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- calls --------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer ``request`` in one piece (a non-streaming call)."""
        return await self._with_retries(request, None, stream=False)

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Answer ``request`` as a stream, calling ``on_token`` for each text delta."""
        return await self._with_retries(request, on_token, stream=True)

    async def _with_retries(self, request: ChatRequest, on_token: TokenSink | None, *, stream: bool) -> ChatResponse:
        if not self._has_key and self.base_url == _OPENAI:
            msg = (
                f"OpenAIChatModel(model={self.model!r}) talks to api.openai.com without an API key; "
                f"set {self._key_hint or 'OPENAI_API_KEY'} or pass api_key=."
            )
            raise ConfigError(msg)
        body = json.dumps(request_body(request, self.model, self.options, stream=stream), ensure_ascii=False).encode()
        attempt = 0
        while True:
            accumulator = StreamAccumulator(on_token) if stream else None
            try:
                if accumulator is not None:
                    return await self._stream_once(body, accumulator)
                return await self._complete_once(body)
            except _Failed as failed:
                error = failed.error
                delivered = accumulator is not None and accumulator.delivered
                delay = None
                if not delivered and attempt < self.max_retries:
                    delay = retry_delay(failed.retryable, failed.asked, attempt)
                if delay is None:
                    raise error from failed.__cause__
                logger.info("retry %d/%d in %.2f s after: %s", attempt + 1, self.max_retries, delay, error)
                await _sleep(delay)
                attempt += 1

    def _http_failure(self, response: httpx.Response, body: bytes) -> _Failed:
        headers = response.headers
        error = error_from_response(response.status_code, headers, body)
        request_id = headers.get("x-request-id")
        if request_id:
            logger.debug("HTTP %d from %s (x-request-id %s)", response.status_code, self._url, request_id)
        retryable = status_retryable(response.status_code, headers, error.code)
        return _Failed(error, retryable, header_delay(headers))

    def _transport_failure(self, exc: httpx.HTTPError, chunks: int | None) -> _Failed:
        where = "before the response" if chunks is None else f"after {chunks} stream chunk(s)"
        if isinstance(exc, httpx.TimeoutException):
            what = "no data" if chunks is not None else "no answer"
            msg = f"{what} from {self._url} within timeout={self.timeout:g} s {where} ({type(exc).__name__})."
            return _Failed(ProviderTimeoutError(msg), True)
        if chunks is not None:
            msg = f"The connection to {self._url} dropped {where}: {exc or type(exc).__name__}."
            return _Failed(IncompleteStreamError(msg), True)
        msg = f"Cannot reach {self._url}: {type(exc).__name__}: {exc}. Is the server running?"
        return _Failed(ProviderConnectionError(msg), True)

    async def _complete_once(self, body: bytes) -> ChatResponse:
        try:
            response = await self._http().post(self._url, content=body, headers=self._headers, timeout=self._timeout)
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc, None) from exc
        if not 200 <= response.status_code < 300:
            raise self._http_failure(response, response.content)
        try:
            data = json.loads(response.content)
        except ValueError:
            msg = f"{self._url} answered {response.status_code} with a body that is not JSON: {response.text[:200]!r}."
            raise _Failed(ProviderResponseError(msg), True) from None
        return parse_completion(data)

    async def _stream_once(self, body: bytes, accumulator: StreamAccumulator) -> ChatResponse:
        chunks: int | None = None
        try:
            async with self._http().stream(
                "POST", self._url, content=body, headers=self._stream_headers, timeout=self._timeout
            ) as response:
                if not 200 <= response.status_code < 300:
                    raise self._http_failure(response, await response.aread())
                chunks = 0
                content_type = response.headers.get("content-type", "").lower()
                if not content_type.startswith("text/event-stream"):
                    return await self._not_a_stream(response, content_type, accumulator)
                feed = accumulator.feed
                events = EventSource(response).aiter_sse()
                try:
                    async for event in events:
                        data = event.data
                        if not data:
                            continue
                        chunks += 1
                        try:
                            feed(data)
                        except ProviderResponseError as exc:
                            raise _Failed(exc, True) from None
                        if accumulator.done:
                            await _drain(events)
                            break
                finally:
                    await events.aclose()
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc, chunks) from exc
        try:
            return accumulator.result(chunks=chunks)
        except IncompleteStreamError as exc:
            raise _Failed(exc, True) from None

    async def _not_a_stream(
        self, response: httpx.Response, content_type: str, accumulator: StreamAccumulator
    ) -> ChatResponse:
        body = await response.aread()
        if content_type.startswith("application/json"):
            # Some servers ignore ``stream: true`` and answer in one piece.
            try:
                result = parse_completion(json.loads(body))
            except ValueError:
                msg = f"{self._url} answered a stream request with invalid JSON: {body[:200]!r}."
                raise _Failed(ProviderResponseError(msg), True) from None
            if result.text:
                accumulator.feed(json.dumps({"choices": [{"index": 0, "delta": {"content": result.text}}]}))
            return result
        if not body.strip():
            msg = f"{self._url} answered 200 to a stream request with an empty body."
            raise _Failed(IncompleteStreamError(msg), True)
        msg = f"{self._url} answered a stream request with content-type {content_type!r}: {body[:200]!r}."
        raise _Failed(ProviderResponseError(msg), True)
