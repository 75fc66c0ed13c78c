"""The HTTP half of every model provider: one JSON POST, answered in one piece or streamed.

A provider is its sans-IO wire module plus a thin subclass of :class:`HTTPChatModel` that
names its URLs, its key header, its body builder, parser and stream accumulator (and, for
Bedrock, its signing and binary stream framing). This base does the rest once for all of
them: the options and their checks, the retry policy (:mod:`._retry`, honouring
``Retry-After``), the deadline, the stall timeout and the size caps, errors mapped onto
:mod:`beamfilter_core.errors` with credentials masked, a stream that delivered text is
never retried, and cancelling closes the response.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import re
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, ClassVar, Protocol, Self, TypedDict

import httpx

from .._messages import utf8_safe
from .._records import ChatRequest, ChatResponse
from .._secrets import mask_credentials
from ..errors import (
    ConfigError,
    IncompleteStreamError,
    ProviderConnectionError,
    ProviderError,
    ProviderHTTPError,
    ProviderResponseError,
    ProviderTimeoutError,
    ResponseTooLargeError,
)
from ._base import TokenSink
from ._retry import error_from_response, retry_delay, status_retryable
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS, loads

__all__ = ["DEADLINE", "MAX_EVENT_CHARS", "Accumulator", "HTTPChatModel", "HTTPOptions", "sse_data"]

# The retry wait; module-level so tests can observe delays without sleeping.
_sleep = asyncio.sleep

#: Default bound on one whole model call, retries and their waits included, in seconds.
DEADLINE = 600.0
#: Default bound on one SSE event (its lines, comments and blank lines), in characters.
MAX_EVENT_CHARS = 2_000_000
_ERROR_BODY_BYTES = 65_536
# how long to keep reading after the last event: servers end the body within milliseconds
_DRAIN_SECONDS = 0.1
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class HTTPOptions(TypedDict, total=False):
    """The options every provider takes alike (a provider names its own ``base_url`` and
    ``api_key_env``, whose defaults differ); see :class:`~beamfilter_core.OpenAIChatModel`."""

    api_key: str | None
    options: Mapping[str, Any] | None
    timeout: float
    deadline: float | None
    max_retries: int
    max_event_chars: int
    max_answer_chars: int
    max_argument_chars: int
    client: httpx.AsyncClient | None
    transport: httpx.AsyncBaseTransport | None


class Accumulator(Protocol):
    """Folds a provider's stream events into one :class:`ChatResponse` (its ``feed`` takes
    one event as :meth:`HTTPChatModel._events` yields it: an SSE event's ``data`` text, or
    Bedrock's decoded frame)."""

    @property
    def delivered(self) -> bool:
        """True once text reached ``on_token`` (such a stream is never retried)."""
        ...

    @property
    def done(self) -> bool:
        """True at the event that ends the stream (the rest of the body is only drained)."""
        ...

    def result(self, *, chunks: int) -> ChatResponse:
        """The whole answer; raises IncompleteStreamError when the stream was cut short."""
        ...


def _event_data(block: str) -> str:
    """The ``data`` of one SSE event (its lines joined by newlines); comments and other fields dropped."""
    # the common cases: one data line, alone or last after other fields (Anthropic's event:)
    fast = block.startswith("data:")
    start = 0
    if not fast and not block.startswith("data"):
        start = block.find("\ndata:") + 1
        fast = start > 0 and block.find("\ndata", 0, start - 1) < 0
    if fast and block.find("\n", start) < 0:
        return block[start + 6 :] if block.startswith("data: ", start) else block[start + 5 :]
    lines = []
    for line in block.split("\n"):
        field, _, value = line.partition(":")
        if field == "data":
            lines.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(lines)


async def sse_data(response: httpx.Response, limit: int) -> AsyncGenerator[list[str], None]:
    """The ``data`` of the server-sent events of ``response``, in order, as they complete.

    Yields the events each read completed, as a list (one resumption per read, not per
    event: a stream of short tokens has a hundred events in a 16 KiB read).

    Any line ending (``\r\n``, ``\r``, ``\n``, even cut between two reads), comments and
    multi-line data; an event without data is skipped, and one unfinished at the end of the
    body is dropped (as the SSE standard says). More than ``limit`` characters without an
    event boundary raise :class:`ResponseTooLargeError`. A decoder of its own: about five
    times faster than httpx-sse's line by line one on long streams (bench_provider_decode.py).
    """
    # the text of the unfinished event, in pieces: a server that sends one byte per read
    # costs linear time (each read is searched alone, the pieces joined once per event)
    pending: list[str] = []
    size = 0
    last = ""  # the last character of the pending text: a blank line may straddle two reads
    carry = "\ufeff"  # a byte order mark opening the body is dropped, as the standard says
    async for text in response.aiter_text():
        if not text:
            continue
        if carry == "\ufeff":
            text, carry = text.removeprefix("\ufeff"), ""
        elif carry:
            text, carry = carry + text, ""
        if "\r" in text:
            if text.endswith("\r"):  # may be the first half of a \r\n cut between reads
                text, carry = text[:-1], "\r"
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        if not text:
            continue
        if "\n\n" in text or (last == "\n" and text[0] == "\n"):
            *blocks, rest = "".join((*pending, text)).split("\n\n")
            pending, size = [rest], len(rest)
            batch = [data for data in map(_event_data, blocks) if data]
            if batch:
                yield batch
        else:
            pending.append(text)
            size += len(text)
        last = text[-1]
        if size > limit:
            msg = (
                f"The stream sent more than max_event_chars={limit} characters without completing an "
                "event (one SSE line or event that large); raise the limit if such chunks are expected."
            )
            raise ResponseTooLargeError(msg)


async def _drain(events: AsyncIterator[list[Any]]) -> None:
    """Read (and ignore) what follows the last event, briefly, so the connection can be reused."""
    try:
        async with asyncio.timeout(_DRAIN_SECONDS):
            async for _ in events:
                pass
    except (TimeoutError, httpx.HTTPError, ProviderError):
        pass


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


class HTTPChatModel:
    """Base of every model provider; see :class:`~beamfilter_core.OpenAIChatModel` for the options."""

    #: The class name used in messages.
    _label = "HTTPChatModel"
    #: The default API root; a call to it without a key is refused before any request.
    _default_base_url = ""
    #: The environment variable the key is read from by default.
    _default_key_env = ""
    #: How messages name the default API root (default: the URL itself).
    _default_host = ""
    #: Wording of the argument checks, where providers say it their own way.
    _model_needed = "a model name"
    _base_url_needed = ""  # default: "an http(s) URL such as '<the default base_url>'"
    _options_needed = "a mapping of extra body fields"
    _retries_hint = " (default 2)"
    #: What a stream request accepts, and how a transport failure counts the events.
    _stream_accept = "text/event-stream"
    _stream_unit = "stream chunk(s)"
    #: Appended to the message of an unreachable server.
    _unreachable_hint = " Is the server running?"
    #: The response header naming the request, logged (DEBUG) with an error status.
    _request_id_header = "x-request-id"
    #: Whether a JSON answer to a stream request is taken as the whole answer (see :meth:`_replay`).
    _replays_json = False
    _logger: ClassVar[logging.Logger] = logging.getLogger("beamfilter.models")

    # the provider's wire, set in its __init__: parse(data, caps) and accumulator(on_token, caps)
    _parse_answer: Callable[..., ChatResponse]
    _new_accumulator: Callable[..., Accumulator]
    _plain_url: str
    _stream_url: str

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = None,
        options: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        deadline: float | None = DEADLINE,
        max_retries: int = 2,
        max_event_chars: int = MAX_EVENT_CHARS,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        max_argument_chars: int = MAX_ARGUMENT_CHARS,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        label = self._label
        base_url = self._default_base_url if base_url is None else base_url
        api_key_env = self._default_key_env if api_key_env is None else api_key_env  # "" reads no variable
        if not isinstance(model, str) or not model:
            msg = f"{label}(model={model!r}) needs {self._model_needed}."
            raise ConfigError(msg)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = mask_credentials(base_url) if isinstance(base_url, str) else base_url
            needed = self._base_url_needed or f"an http(s) URL such as {self._default_base_url!r}"
            msg = f"{label}(base_url={shown!r}) must be {needed}."
            raise ConfigError(msg)
        for name, value in (("timeout", timeout), ("deadline", deadline)):
            if value is None and name == "deadline":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
                msg = f"{label}({name}={value!r}) must be a positive number of seconds (not nan or inf)."
                raise ConfigError(msg)
        for name, value in (
            ("max_retries", max_retries),
            ("max_event_chars", max_event_chars),
            ("max_answer_chars", max_answer_chars),
            ("max_argument_chars", max_argument_chars),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < (0 if name == "max_retries" else 1):
                least = f">= 0{self._retries_hint}" if name == "max_retries" else ">= 1"
                msg = f"{label}({name}={value!r}) must be an integer {least}."
                raise ConfigError(msg)
        if options is not None and not isinstance(options, Mapping):
            msg = f"{label}(options={options!r}) must be {self._options_needed}."
            raise ConfigError(msg)
        if api_key_env and not (isinstance(api_key_env, str) and _ENV_NAME.match(api_key_env)):
            # never echoed: a key pasted here by mistake must not reach an error message
            msg = (
                f"{label}(api_key_env=...) must name an environment variable (letters, digits, '_'), such as "
                f"{self._default_key_env!r}; to pass the key itself use api_key= (in a config: "
                'api_key = { "$env" = "NAME" }).'
            )
            raise ConfigError(msg)
        if client is not None and transport is not None:
            msg = f"{label} takes client= or transport=, not both; configure the transport on your client."
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
        key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._key_hint = api_key_env or self._default_key_env
        self._has_key = bool(key)
        headers = {"Content-Type": "application/json", "Accept": "application/json", **self._key_headers(key)}
        self._headers = headers
        self._stream_headers = {**headers, "Accept": self._stream_accept}
        self._timeout = httpx.Timeout(self.timeout)
        self._client = client
        self._owns_client = client is None
        self._transport = transport
        self._client_loop: asyncio.AbstractEventLoop | None = None

    # -- what a provider may refine -------------------------------------------------------

    def _key_headers(self, key: str | None) -> dict[str, str]:
        """The headers carrying ``key`` (default ``Authorization: Bearer``; none without a key)."""
        return {"Authorization": f"Bearer {key}"} if key else {}

    def _check_key(self) -> None:
        """Refuses a call to the provider's own service without a key, before any request."""
        if not self._has_key and self.base_url == self._default_base_url:
            msg = (
                f"{self._label}(model={self.model!r}) talks to {self._default_host or self.base_url} without an "
                f"API key; set {self._key_hint} or pass api_key=."
            )
            raise ConfigError(msg)

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:  # pragma: no cover - overridden
        raise NotImplementedError

    async def _request_headers(self, url: str, body: bytes, *, stream: bool) -> Mapping[str, str]:
        """The headers of one attempt (Bedrock signs each one)."""
        return self._stream_headers if stream else self._headers

    def _error(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderHTTPError:
        """The typed error of an error response (providers refine ``error_type``/``code``)."""
        return error_from_response(status, headers, body)

    def _is_stream(self, content_type: str) -> bool:
        """Whether a 2xx answer to a stream request is the stream (else it is read whole)."""
        return content_type.startswith("text/event-stream")

    def _events(self, response: httpx.Response) -> AsyncGenerator[list[Any], None]:
        """The stream's events, a list per read; raises ProviderResponseError on a broken framing."""
        return sse_data(response, self.max_event_chars)

    def _feeder(self, accumulator: Any) -> Callable[[Any], None]:
        """What takes one event of :meth:`_events` (default the accumulator's ``feed``)."""
        feed: Callable[[Any], None] = accumulator.feed
        return feed

    def _replay(self, accumulator: Any, text: str) -> None:  # pragma: no cover - when _replays_json
        """Hands the text of a whole answer to a stream's accumulator (so ``on_token`` sees it)."""
        raise NotImplementedError

    # -- lifecycle ----------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"{self._label}(model={self.model!r}, base_url={mask_credentials(self.base_url)!r})"

    def _http(self) -> httpx.AsyncClient:
        if not self._owns_client:
            assert self._client is not None  # set in __init__ when not owned
            return self._client
        loop = asyncio.get_running_loop()
        client = self._client
        if client is None or self._client_loop is not loop:
            # pooled connections belong to one event loop; run_sync starts one per call
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

    async def __aenter__(self) -> Self:
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
        self._check_key()
        url = self._stream_url if stream else self._plain_url
        text = json.dumps(self._body(request, stream=stream), ensure_ascii=False)
        try:
            body = text.encode()
        except UnicodeEncodeError:  # lone surrogates (e.g. a file read with surrogateescape)
            body = utf8_safe(text).encode()
        if self.deadline is None:
            return await self._attempts(url, body, on_token, stream=stream)
        try:
            async with asyncio.timeout(self.deadline) as scope:
                return await self._attempts(url, body, on_token, stream=stream)
        except TimeoutError:
            if not scope.expired():  # pragma: no cover - a TimeoutError of the caller's own
                raise
            msg = (
                f"The call to {mask_credentials(url)} took longer than deadline={self.deadline:g} s "
                "(retries and waits included); raise deadline= if such answers are expected."
            )
            raise ProviderTimeoutError(msg) from None

    def _accumulator(self, on_token: TokenSink | None) -> Accumulator:
        return self._new_accumulator(
            on_token, max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
        )

    async def _attempts(self, url: str, body: bytes, on_token: TokenSink | None, *, stream: bool) -> ChatResponse:
        attempt = 0
        while True:
            accumulator = self._accumulator(on_token) if stream else None
            try:
                if accumulator is not None:
                    return await self._stream_once(url, body, accumulator)
                return await self._complete_once(url, body)
            except _Failed as failed:
                error = failed.error
                delivered = accumulator is not None and accumulator.delivered
                delay = None
                if not delivered and attempt < self.max_retries:
                    delay = retry_delay(failed.retryable, failed.asked, attempt)
                if delay is None:
                    raise error from failed.__cause__
                self._logger.info("retry %d/%d in %.2f s after: %s", attempt + 1, self.max_retries, delay, error)
                await _sleep(delay)
                attempt += 1

    def _http_failure(self, url: str, response: httpx.Response, body: bytes) -> _Failed:
        headers = response.headers
        status = response.status_code
        error = self._error(status, headers, body)
        request_id = headers.get(self._request_id_header)
        if request_id:
            self._logger.debug(
                "HTTP %d from %s (%s %s)", status, mask_credentials(url), self._request_id_header, request_id
            )
        # a provider may name the delay in its body (Gemini's RetryInfo) rather than a header
        return _Failed(error, status_retryable(status, headers, error.code), error.retry_after)

    def _transport_failure(self, url: str, exc: httpx.HTTPError, chunks: int | None) -> _Failed:
        where = "before the response" if chunks is None else f"after {chunks} {self._stream_unit}"
        shown = mask_credentials(url)
        if isinstance(exc, httpx.TimeoutException):
            what = "no data" if chunks is not None else "no answer"
            msg = f"{what} from {shown} within timeout={self.timeout:g} s {where} ({type(exc).__name__})."
            return _Failed(ProviderTimeoutError(msg), True)
        if chunks is not None:
            msg = f"The connection to {shown} dropped {where}: {mask_credentials(str(exc)) or type(exc).__name__}."
            return _Failed(IncompleteStreamError(msg), True)
        msg = f"Cannot reach {shown}: {type(exc).__name__}: {mask_credentials(str(exc))}.{self._unreachable_hint}"
        return _Failed(ProviderConnectionError(msg), True)

    async def _error_body(self, url: str, response: httpx.Response) -> _Failed:
        body = await _read_capped(response, _ERROR_BODY_BYTES)
        return self._http_failure(url, response, b"(a body longer than 64 KiB)" if body is None else body)

    async def _read_body(self, url: str, response: httpx.Response) -> bytes:
        """A 2xx body within the answer bound (JSON may spell a character in 6 bytes)."""
        body = await _read_capped(response, 6 * self.max_answer_chars + _ERROR_BODY_BYTES)
        if body is None:
            msg = (
                f"{mask_credentials(url)} answered with a body longer than max_answer_chars={self.max_answer_chars} "
                "allows; raise the limit if such answers are expected."
            )
            raise ResponseTooLargeError(msg)
        return body

    def _parsed(self, body: bytes, problem: str) -> ChatResponse:
        """A non-streamed answer; every malformed shape is retried like a non-JSON body."""
        try:
            return self._parse_answer(
                loads(body, problem), max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
            )
        except ResponseTooLargeError:
            raise
        except ProviderResponseError as exc:
            raise _Failed(exc, True) from None

    def _send(self, url: str, body: bytes, headers: Mapping[str, str]) -> Any:
        return self._http().stream("POST", url, content=body, headers=headers, timeout=self._timeout)

    async def _complete_once(self, url: str, body: bytes) -> ChatResponse:
        headers = await self._request_headers(url, body, stream=False)
        try:
            async with self._send(url, body, headers) as response:
                if not 200 <= response.status_code < 300:
                    raise await self._error_body(url, response)
                data = await self._read_body(url, response)
        except httpx.HTTPError as exc:
            raise self._transport_failure(url, exc, None) from exc
        return self._parsed(
            data, f"{mask_credentials(url)} answered {response.status_code} with a body that is not JSON"
        )

    async def _stream_once(self, url: str, body: bytes, accumulator: Accumulator) -> ChatResponse:
        headers = await self._request_headers(url, body, stream=True)
        chunks: int | None = None
        try:
            async with self._send(url, body, headers) as response:
                if not 200 <= response.status_code < 300:
                    raise await self._error_body(url, response)
                chunks = 0
                content_type = response.headers.get("content-type", "").lower()
                if not self._is_stream(content_type):
                    return await self._not_a_stream(url, response, content_type, accumulator)
                feed = self._feeder(accumulator)
                events = self._events(response)
                try:
                    async for batch in events:
                        for event in batch:
                            chunks += 1
                            feed(event)
                            if accumulator.done:
                                break
                        if accumulator.done:
                            await _drain(events)
                            break
                except ResponseTooLargeError:
                    raise
                except ProviderResponseError as exc:  # a broken event or framing: retried
                    raise _Failed(exc, True) from None
                finally:
                    await events.aclose()
        except httpx.HTTPError as exc:
            raise self._transport_failure(url, exc, chunks) from exc
        try:
            return accumulator.result(chunks=chunks)
        except ProviderResponseError as exc:  # a cut stream, or an end the protocol does not allow
            raise _Failed(exc, True) from None

    async def _not_a_stream(
        self, url: str, response: httpx.Response, content_type: str, accumulator: Accumulator
    ) -> ChatResponse:
        data = await self._read_body(url, response)
        shown = mask_credentials(url)
        if self._replays_json and content_type.startswith("application/json"):
            # some servers and proxies ignore the stream request and answer in one piece
            result = self._parsed(data, f"{shown} answered a stream request with invalid JSON")
            if result.text:
                self._replay(accumulator, result.text)
            return result
        if not data.strip():
            msg = f"{shown} answered 200 to a stream request with an empty body."
            raise _Failed(IncompleteStreamError(msg), True)
        msg = f"{shown} answered a stream request with content-type {content_type!r}: {data[:200]!r}."
        raise _Failed(ProviderResponseError(msg), True)
