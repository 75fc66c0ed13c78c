"""OpenAIChatModel: any OpenAI-compatible ``/chat/completions`` server over httpx.

Works with OpenAI, vLLM, llama.cpp's server, Ollama and LM Studio. Streams are decoded
with httpx-sse (incremental, any line ending, comments, multi-line data, UTF-8 split
across reads); the wire rules are in :mod:`._wire`, errors and retries in :mod:`._retry`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

import httpx
from httpx_sse import EventSource

from .._messages import utf8_safe
from .._records import ChatRequest, ChatResponse
from .._secrets import mask_credentials
from ..errors import (
    ConfigError,
    IncompleteStreamError,
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    ResponseTooLargeError,
)
from ._base import TokenSink
from ._retry import error_from_response, header_delay, retry_delay, status_retryable
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS, StreamAccumulator, loads, parse_completion, request_body

if TYPE_CHECKING:
    from ._responses_wire import ResponsesAccumulator

__all__ = ["OpenAIChatModel"]

logger = logging.getLogger("beamfilter.models.openai")

_OPENAI = "https://api.openai.com/v1"
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

# The retry wait; module-level so tests can observe delays without sleeping.
_sleep = asyncio.sleep


#: Default bound on one whole model call, retries and their waits included, in seconds.
DEADLINE = 600.0
#: Default bound on one SSE event (its lines, comments and blank lines), in characters.
MAX_EVENT_CHARS = 2_000_000
# An error body is only shown in a message: the first 64 KiB are plenty.
_ERROR_BODY_BYTES = 65_536

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


class _CappedText:
    """The response seen by httpx-sse, with a bound on the text read between two events.

    httpx-sse buffers a line (and an event's data lines) until it ends; counting what was
    read since the last event bounds both, whatever a server sends.
    """

    __slots__ = ("_limit", "_response", "headers", "since_event")

    def __init__(self, response: httpx.Response, limit: int) -> None:
        self._response = response
        self._limit = limit
        self.headers = response.headers
        self.since_event = 0

    async def aiter_text(self) -> AsyncIterator[str]:
        limit = self._limit
        async for text in self._response.aiter_text():
            self.since_event += len(text)
            if self.since_event > limit:
                msg = (
                    f"The stream sent more than max_event_chars={limit} characters without completing an "
                    "event (one SSE line or event that large); raise the limit if such chunks are expected."
                )
                raise ResponseTooLargeError(msg)
            yield text


async def _read_capped(response: httpx.Response, limit: int) -> bytes | None:
    """The body, or None when it is longer than ``limit`` bytes (reading stops there)."""
    parts: list[bytes] = []
    size = 0
    async for part in response.aiter_bytes():
        size += len(part)
        if size > limit:
            return None
        parts.append(part)
    return b"".join(parts)


class _Failed(Exception):
    """One failed attempt: the error to raise, whether it may be retried, the asked delay."""

    def __init__(self, error: ProviderError, retryable: bool, asked: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retryable = retryable
        self.asked = asked


def _check_seconds(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        msg = f"OpenAIChatModel({name}={value!r}) must be a positive number of seconds (not nan or inf)."
        raise ConfigError(msg)


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
        deadline: seconds for the whole call, retries and their waits included (a server
            that keeps streaming never ends a call otherwise); None for no bound.
        max_retries: retries after the first attempt (see :mod:`._retry` for the policy).
        max_event_chars: the longest SSE event (or line) accepted from a stream.
        max_answer_chars: the longest answer (text plus tool arguments) accepted.
        max_argument_chars: the longest arguments of one tool call accepted.
        client: an ``httpx.AsyncClient`` you own (not closed by :meth:`aclose`).
        transport: an httpx transport for a client this model creates and owns.
        api: ``"chat"`` (``/chat/completions``, the default) or ``"responses"``
            (``/responses``, see :mod:`._responses_wire`).

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
        deadline: float | None = DEADLINE,
        max_retries: int = 2,
        max_event_chars: int = MAX_EVENT_CHARS,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        max_argument_chars: int = MAX_ARGUMENT_CHARS,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        api: str = "chat",
    ) -> None:
        if api not in ("chat", "responses"):
            msg = f"OpenAIChatModel(api={api!r}) must be 'chat' (/chat/completions) or 'responses' (/responses)."
            raise ConfigError(msg)
        if not isinstance(model, str) or not model:
            msg = f"OpenAIChatModel(model={model!r}) needs a model name, e.g. 'gpt-4o-mini'."
            raise ConfigError(msg)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = mask_credentials(base_url) if isinstance(base_url, str) else base_url
            msg = f"OpenAIChatModel(base_url={shown!r}) must be an http(s) URL such as 'http://127.0.0.1:8080/v1'."
            raise ConfigError(msg)
        _check_seconds("timeout", timeout)
        if deadline is not None:
            _check_seconds("deadline", deadline)
        for name, value in (
            ("max_retries", max_retries),
            ("max_event_chars", max_event_chars),
            ("max_answer_chars", max_answer_chars),
            ("max_argument_chars", max_argument_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_retries" else 1):
                least = ">= 0 (default 2)" if name == "max_retries" else ">= 1"
                msg = f"OpenAIChatModel({name}={value!r}) must be an integer {least}."
                raise ConfigError(msg)
        if options is not None and not isinstance(options, Mapping):
            msg = f"OpenAIChatModel(options={options!r}) must be a mapping of extra body fields."
            raise ConfigError(msg)
        if api_key_env is not None and not (isinstance(api_key_env, str) and _ENV_NAME.match(api_key_env)):
            # never echoed: a key pasted here by mistake must not reach an error message
            msg = (
                "OpenAIChatModel(api_key_env=...) must name an environment variable (letters, digits, '_'), "
                "such as 'OPENAI_API_KEY'; to pass the key itself use api_key= (in a config: "
                'api_key = { "$env" = "NAME" }).'
            )
            raise ConfigError(msg)
        if client is not None and transport is not None:
            msg = "OpenAIChatModel takes client= or transport=, not both; configure the transport on your client."
            raise ConfigError(msg)
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.options: Mapping[str, Any] = dict(options or {})
        self.timeout = float(timeout)
        self.deadline = None if deadline is None else float(deadline)
        self.max_retries = max_retries
        self.max_event_chars = max_event_chars
        self.max_answer_chars = max_answer_chars
        self.max_argument_chars = max_argument_chars
        self.api = api
        self._url = self.base_url + "/chat/completions"
        self._body_of: Callable[..., dict[str, Any]] = request_body
        self._parse: Callable[..., ChatResponse] = parse_completion
        self._new_accumulator: Callable[..., StreamAccumulator | ResponsesAccumulator] = StreamAccumulator
        if api == "responses":  # imported only when used: `import beamfilter_core` stays lean
            from . import _responses_wire

            self._url = self.base_url + "/responses"
            self._body_of = _responses_wire.request_body
            self._parse = _responses_wire.parse_response
            self._new_accumulator = _responses_wire.ResponsesAccumulator
        # The URL as messages and logs show it: credentials in base_url become ***.
        self._shown_url = mask_credentials(self._url)
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
        return f"OpenAIChatModel(model={self.model!r}, base_url={mask_credentials(self.base_url)!r})"

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
        text = json.dumps(self._body_of(request, self.model, self.options, stream=stream), ensure_ascii=False)
        try:
            body = text.encode()
        except UnicodeEncodeError:  # lone surrogates (e.g. a file read with surrogateescape)
            body = utf8_safe(text).encode()
        if self.deadline is None:
            return await self._attempts(body, on_token, stream=stream)
        try:
            async with asyncio.timeout(self.deadline) as scope:
                return await self._attempts(body, on_token, stream=stream)
        except TimeoutError:
            if not scope.expired():
                raise
            msg = (
                f"The call to {self._shown_url} took longer than deadline={self.deadline:g} s "
                "(retries and waits included); raise deadline= if such answers are expected."
            )
            raise ProviderTimeoutError(msg) from None

    def _accumulator(self, on_token: TokenSink | None) -> StreamAccumulator | ResponsesAccumulator:
        return self._new_accumulator(
            on_token, max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
        )

    async def _attempts(self, body: bytes, on_token: TokenSink | None, *, stream: bool) -> ChatResponse:
        attempt = 0
        while True:
            accumulator = self._accumulator(on_token) if stream else None
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
            logger.debug("HTTP %d from %s (x-request-id %s)", response.status_code, self._shown_url, request_id)
        retryable = status_retryable(response.status_code, headers, error.code)
        return _Failed(error, retryable, header_delay(headers))

    def _transport_failure(self, exc: httpx.HTTPError, chunks: int | None) -> _Failed:
        where = "before the response" if chunks is None else f"after {chunks} stream chunk(s)"
        url = self._shown_url
        if isinstance(exc, httpx.TimeoutException):
            what = "no data" if chunks is not None else "no answer"
            msg = f"{what} from {url} within timeout={self.timeout:g} s {where} ({type(exc).__name__})."
            return _Failed(ProviderTimeoutError(msg), True)
        if chunks is not None:
            msg = f"The connection to {url} dropped {where}: {mask_credentials(str(exc)) or type(exc).__name__}."
            return _Failed(IncompleteStreamError(msg), True)
        msg = f"Cannot reach {url}: {type(exc).__name__}: {mask_credentials(str(exc))}. Is the server running?"
        return _Failed(ProviderConnectionError(msg), True)

    async def _error_body(self, response: httpx.Response) -> bytes:
        body = await _read_capped(response, _ERROR_BODY_BYTES)
        return b"(a body longer than 64 KiB)" if body is None else body

    async def _body(self, response: httpx.Response) -> bytes:
        """A 200 body within the answer bound (JSON may spell a character in 6 bytes)."""
        body = await _read_capped(response, 6 * self.max_answer_chars + _ERROR_BODY_BYTES)
        if body is None:
            msg = (
                f"{self._shown_url} answered with a body longer than max_answer_chars={self.max_answer_chars} allows; "
                "raise the limit if such answers are expected."
            )
            raise ResponseTooLargeError(msg)
        return body

    def _parsed(self, body: bytes, problem: str) -> ChatResponse:
        """A non-streamed answer; every malformed shape is retried like a non-JSON body."""
        try:
            data = loads(body, problem)
            result = self._parse(
                data, max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
            )
        except ResponseTooLargeError:
            raise
        except ProviderResponseError as exc:
            raise _Failed(exc, True) from None
        return result

    async def _complete_once(self, body: bytes) -> ChatResponse:
        try:
            async with self._http().stream(
                "POST", self._url, content=body, headers=self._headers, timeout=self._timeout
            ) as response:
                if not 200 <= response.status_code < 300:
                    raise self._http_failure(response, await self._error_body(response))
                data = await self._body(response)
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc, None) from exc
        return self._parsed(data, f"{self._shown_url} answered {response.status_code} with a body that is not JSON")

    async def _stream_once(self, body: bytes, accumulator: StreamAccumulator | ResponsesAccumulator) -> ChatResponse:
        chunks: int | None = None
        try:
            async with self._http().stream(
                "POST", self._url, content=body, headers=self._stream_headers, timeout=self._timeout
            ) as response:
                if not 200 <= response.status_code < 300:
                    raise self._http_failure(response, await self._error_body(response))
                chunks = 0
                content_type = response.headers.get("content-type", "").lower()
                if not content_type.startswith("text/event-stream"):
                    return await self._not_a_stream(response, content_type, accumulator)
                feed = accumulator.feed
                capped = _CappedText(response, self.max_event_chars)
                events = EventSource(capped).aiter_sse()  # type: ignore[arg-type]  # headers + aiter_text suffice
                try:
                    async for event in events:
                        capped.since_event = 0
                        data = event.data
                        if not data:
                            continue
                        chunks += 1
                        try:
                            feed(data)
                        except ResponseTooLargeError:
                            raise
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
        self, response: httpx.Response, content_type: str, accumulator: StreamAccumulator | ResponsesAccumulator
    ) -> ChatResponse:
        body = await self._body(response)
        if content_type.startswith("application/json"):
            # Some servers ignore ``stream: true`` and answer in one piece.
            result = self._parsed(body, f"{self._shown_url} answered a stream request with invalid JSON")
            if result.text:
                chunk: Any = {"choices": [{"index": 0, "delta": {"content": result.text}}]}
                if self.api == "responses":
                    chunk = {"type": "response.output_text.delta", "delta": result.text}
                accumulator.feed(json.dumps(chunk))
            return result
        if not body.strip():
            msg = f"{self._shown_url} answered 200 to a stream request with an empty body."
            raise _Failed(IncompleteStreamError(msg), True)
        msg = f"{self._shown_url} answered a stream request with content-type {content_type!r}: {body[:200]!r}."
        raise _Failed(ProviderResponseError(msg), True)
