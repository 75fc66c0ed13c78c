"""BedrockChatModel: Amazon Bedrock's Converse and ConverseStream over httpx.

botocore (extra ``beamfilter-core[bedrock]``) does what AWS defines: the credential chain
(environment, shared config and credentials files with profiles, SSO, container and
instance roles), SigV4 signing and the parser of ConverseStream's binary event-stream
frames. The wire rules are in :mod:`._bedrock_wire`; the retry policy is the OpenAI
provider's (:mod:`._retry`): throttling (429), 5xx and a stream that broke before any
text are retried, honouring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
from collections.abc import Mapping
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx

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
from ._bedrock_wire import (
    ConverseStreamAccumulator,
    EventStreamDecoder,
    exception_error,
    missing_botocore,
    parse_converse,
    request_body,
)
from ._openai import _read_capped
from ._retry import error_from_response, header_delay, retry_delay, status_retryable
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS, loads

__all__ = ["BedrockChatModel"]

logger = logging.getLogger("beamfilter.models.bedrock")

# The retry wait; module-level so tests can observe delays without sleeping.
_sleep = asyncio.sleep

DEADLINE = 600.0
_ERROR_BODY_BYTES = 65_536


class _Failed(Exception):
    """One failed attempt: the error to raise, whether it may be retried, the asked delay."""

    def __init__(self, error: ProviderError, retryable: bool, asked: float | None = None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retryable = retryable
        self.asked = asked


class _NoSigningDetails(logging.Filter):
    """Drops botocore's DEBUG records of each signature: the canonical request holds the
    ``x-amz-security-token`` header (a credential) and the signature itself can be replayed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("CanonicalRequest", "StringToSign", "Signature", "String to sign"))


def _quiet_signing() -> None:
    signing = logging.getLogger("botocore.auth")
    if not any(isinstance(f, _NoSigningDetails) for f in signing.filters):
        signing.addFilter(_NoSigningDetails())


def _seconds(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        msg = f"BedrockChatModel({name}={value!r}) must be a positive number of seconds (not nan or inf)."
        raise ConfigError(msg)
    return float(value)


class BedrockChatModel:
    """A model on Amazon Bedrock, through the Converse API.

    Args:
        model: the model or inference-profile id (or ARN), e.g.
            ``"anthropic.claude-3-5-haiku-20241022-v1:0"`` or ``"us.amazon.nova-lite-v1:0"``.
        region: the AWS region; when None, botocore's (``AWS_REGION``, ``AWS_DEFAULT_REGION``,
            the profile's ``region``).
        base_url: an endpoint override (a VPC endpoint, a proxy, a test server).
        profile: the shared-config profile for the credential chain (default: botocore's).
        api_key: a Bedrock API key, sent as ``Authorization: Bearer`` instead of SigV4; when
            None it is read from ``api_key_env`` (default ``AWS_BEARER_TOKEN_BEDROCK``).
        options: native Converse body fields (``inferenceConfig``,
            ``additionalModelRequestFields``, ``guardrailConfig``...); ``max_tokens``,
            ``temperature``, ``top_p`` and ``stop`` go into ``inferenceConfig``.
        timeout, deadline, max_retries, max_answer_chars, max_argument_chars, client,
            transport: as for :class:`~beamfilter_core.OpenAIChatModel`.
        session: a ``botocore.session.Session`` to take credentials and region from.
        cache_points: end the system prompt and the tool list with a ``cachePoint`` (prompt
            caching, for the models that support it; reads and writes show in ``Usage``).
    """

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        base_url: str | None = None,
        profile: str | None = None,
        api_key: str | None = None,
        api_key_env: str | None = "AWS_BEARER_TOKEN_BEDROCK",
        options: Mapping[str, Any] | None = None,
        timeout: float = 60.0,
        deadline: float | None = DEADLINE,
        max_retries: int = 2,
        max_answer_chars: int = MAX_ANSWER_CHARS,
        max_argument_chars: int = MAX_ARGUMENT_CHARS,
        client: httpx.AsyncClient | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        session: Any = None,
        cache_points: bool = False,
    ) -> None:
        if not isinstance(model, str) or not model:
            msg = f"BedrockChatModel(model={model!r}) needs a model id, e.g. 'us.amazon.nova-lite-v1:0'."
            raise ConfigError(msg)
        try:
            import botocore.session
        except ImportError:
            raise missing_botocore() from None
        if base_url is not None and not (isinstance(base_url, str) and base_url.startswith(("http://", "https://"))):
            shown = mask_credentials(base_url) if isinstance(base_url, str) else base_url
            msg = f"BedrockChatModel(base_url={shown!r}) must be an http(s) URL, e.g. a VPC endpoint."
            raise ConfigError(msg)
        self.timeout = _seconds("timeout", timeout)
        self.deadline = None if deadline is None else _seconds("deadline", deadline)
        for name, value, least in (
            ("max_retries", max_retries, 0),
            ("max_answer_chars", max_answer_chars, 1),
            ("max_argument_chars", max_argument_chars, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                msg = f"BedrockChatModel({name}={value!r}) must be an integer >= {least}."
                raise ConfigError(msg)
        if options is not None and not isinstance(options, Mapping):
            msg = f"BedrockChatModel(options={options!r}) must be a mapping of Converse body fields."
            raise ConfigError(msg)
        if client is not None and transport is not None:
            msg = "BedrockChatModel takes client= or transport=, not both; configure the transport on your client."
            raise ConfigError(msg)
        _quiet_signing()
        self._session = session if session is not None else botocore.session.Session(profile=profile)
        # AWS_REGION is what the other AWS SDKs read; botocore reads AWS_DEFAULT_REGION and the profile
        region = region or os.environ.get("AWS_REGION") or self._session.get_config_variable("region")
        if not region:
            msg = (
                f"BedrockChatModel(model={model!r}) needs a region: pass region= or set AWS_REGION "
                "(or a region in the AWS profile)."
            )
            raise ConfigError(msg)
        self.model = model
        self.region = region
        self.base_url = (base_url or f"https://bedrock-runtime.{region}.amazonaws.com").rstrip("/")
        self.options: Mapping[str, Any] = dict(options or {})
        self.max_retries = max_retries
        self.cache_points = bool(cache_points)
        self.max_answer_chars = max_answer_chars
        self.max_argument_chars = max_argument_chars
        path = f"/model/{quote(model, safe='')}"
        self._urls = (self.base_url + path + "/converse", self.base_url + path + "/converse-stream")
        self._token = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._credentials: Any = None
        self._timeout = httpx.Timeout(self.timeout)
        self._client = client
        self._owns_client = client is None
        self._transport = transport
        self._client_loop: asyncio.AbstractEventLoop | None = None

    def __repr__(self) -> str:
        shown = mask_credentials(self.base_url)
        return f"BedrockChatModel(model={self.model!r}, region={self.region!r}, base_url={shown!r})"

    # -- lifecycle ----------------------------------------------------------------------

    def _http(self) -> httpx.AsyncClient:
        if not self._owns_client:
            assert self._client is not None  # set in __init__ when not owned
            return self._client
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop:
            self._client = httpx.AsyncClient(transport=self._transport, timeout=self._timeout)
            self._client_loop = loop
        return self._client

    async def aclose(self) -> None:
        """Close the HTTP client this model created (an injected client is left open)."""
        client = self._client
        if self._owns_client and client is not None:
            self._client = None
            self._client_loop = None
            await client.aclose()

    async def __aenter__(self) -> BedrockChatModel:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- signing ------------------------------------------------------------------------

    def _resolve(self) -> Any:
        """The frozen credentials (botocore's chain; may read files or an instance role)."""
        from botocore.exceptions import BotoCoreError

        try:
            return self._frozen()
        except BotoCoreError as exc:  # an expired SSO token, a profile that cannot be read...
            msg = (
                f"BedrockChatModel(model={self.model!r}) could not load AWS credentials: {type(exc).__name__}: "
                f"{mask_credentials(str(exc))} (for an SSO profile, run: aws sso login)."
            )
            raise ConfigError(msg) from None

    def _frozen(self) -> Any:
        if self._credentials is None:
            self._credentials = self._session.get_credentials()
        if self._credentials is None:
            msg = (
                f"BedrockChatModel(model={self.model!r}) found no AWS credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE (aws configure / aws sso login), run with an instance or "
                "task role, or pass api_key= (a Bedrock API key; $AWS_BEARER_TOKEN_BEDROCK)."
            )
            raise ConfigError(msg)
        return self._credentials.get_frozen_credentials()

    async def _headers(self, url: str, body: bytes, stream: bool) -> dict[str, str]:
        accept = "application/vnd.amazon.eventstream" if stream else "application/json"
        headers = {"Content-Type": "application/json", "Accept": accept}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
            return headers
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        # off the event loop: a refresh may read files or ask the instance metadata service
        credentials = await asyncio.to_thread(self._resolve)
        signed = AWSRequest(method="POST", url=url, data=body, headers=headers)
        SigV4Auth(credentials, "bedrock", self.region).add_auth(signed)
        return dict(signed.headers.items())

    # -- calls --------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer ``request`` with Converse."""
        return await self._with_retries(request, None)

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Answer ``request`` with ConverseStream, calling ``on_token`` for each text delta."""
        return await self._with_retries(request, on_token)

    async def _with_retries(self, request: ChatRequest, on_token: TokenSink | None) -> ChatResponse:
        text = json.dumps(request_body(request, self.options, cache_points=self.cache_points), ensure_ascii=False)
        try:
            body = text.encode()
        except UnicodeEncodeError:  # lone surrogates
            body = utf8_safe(text).encode()
        if self.deadline is None:
            return await self._attempts(body, on_token)
        try:
            async with asyncio.timeout(self.deadline) as scope:
                return await self._attempts(body, on_token)
        except TimeoutError:
            if not scope.expired():
                raise
            msg = (
                f"The call to {mask_credentials(self._urls[0])} took longer than deadline={self.deadline:g} s "
                "(retries and waits included); raise deadline= if such answers are expected."
            )
            raise ProviderTimeoutError(msg) from None

    async def _attempts(self, body: bytes, on_token: TokenSink | None) -> ChatResponse:
        attempt = 0
        while True:
            accumulator = None
            if on_token is not None:
                accumulator = ConverseStreamAccumulator(
                    on_token, max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
                )
            try:
                if accumulator is not None:
                    return await self._stream_once(body, accumulator)
                return await self._complete_once(body)
            except _Failed as failed:
                error = failed.error
                delay = None
                if not (accumulator is not None and accumulator.delivered) and attempt < self.max_retries:
                    delay = retry_delay(failed.retryable, failed.asked, attempt)
                if delay is None:
                    raise error from failed.__cause__
                logger.info("retry %d/%d in %.2f s after: %s", attempt + 1, self.max_retries, delay, error)
                await _sleep(delay)
                attempt += 1

    def _http_failure(self, response: httpx.Response, body: bytes) -> _Failed:
        headers = response.headers
        error = error_from_response(response.status_code, headers, body)
        # AWS names the fault in a header: "ThrottlingException:http://internal.amazon.com/..."
        kind = headers.get("x-amzn-errortype", "").split(":")[0]
        if kind:
            error.error_type = kind
        logger.debug(
            "HTTP %d from Bedrock (x-amzn-requestid %s)", response.status_code, headers.get("x-amzn-requestid")
        )
        return _Failed(error, status_retryable(response.status_code, headers, error.code), header_delay(headers))

    def _transport_failure(self, exc: httpx.HTTPError, url: str, chunks: int | None) -> _Failed:
        shown = mask_credentials(url)
        where = "before the response" if chunks is None else f"after {chunks} stream event(s)"
        if isinstance(exc, httpx.TimeoutException):
            what = "no data" if chunks is not None else "no answer"
            msg = f"{what} from {shown} within timeout={self.timeout:g} s {where} ({type(exc).__name__})."
            return _Failed(ProviderTimeoutError(msg), True)
        if chunks is not None:
            msg = f"The connection to {shown} dropped {where}: {mask_credentials(str(exc)) or type(exc).__name__}."
            return _Failed(IncompleteStreamError(msg), True)
        msg = f"Cannot reach {shown}: {type(exc).__name__}: {mask_credentials(str(exc))}."
        return _Failed(ProviderConnectionError(msg), True)

    def _parsed(self, body: bytes, url: str) -> ChatResponse:
        try:
            data = loads(body, f"{mask_credentials(url)} answered with a body that is not JSON")
            return parse_converse(
                data, max_answer_chars=self.max_answer_chars, max_argument_chars=self.max_argument_chars
            )
        except ResponseTooLargeError:
            raise
        except ProviderResponseError as exc:
            raise _Failed(exc, True) from None

    async def _body(self, response: httpx.Response) -> bytes:
        body = await _read_capped(response, 6 * self.max_answer_chars + _ERROR_BODY_BYTES)
        if body is None:
            msg = f"Bedrock answered with a body longer than max_answer_chars={self.max_answer_chars} allows."
            raise ResponseTooLargeError(msg)
        return body

    async def _error_body(self, response: httpx.Response) -> bytes:
        body = await _read_capped(response, _ERROR_BODY_BYTES)
        return b"(a body longer than 64 KiB)" if body is None else body

    async def _complete_once(self, body: bytes) -> ChatResponse:
        url = self._urls[0]
        headers = await self._headers(url, body, stream=False)
        try:
            async with self._http().stream("POST", url, content=body, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    raise self._http_failure(response, await self._error_body(response))
                data = await self._body(response)
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc, url, None) from exc
        return self._parsed(data, url)

    async def _stream_once(self, body: bytes, accumulator: ConverseStreamAccumulator) -> ChatResponse:
        url = self._urls[1]
        headers = await self._headers(url, body, stream=True)
        chunks: int | None = None
        decoder = EventStreamDecoder()
        try:
            async with self._http().stream("POST", url, content=body, headers=headers) as response:
                if not 200 <= response.status_code < 300:
                    raise self._http_failure(response, await self._error_body(response))
                chunks = 0
                content_type = response.headers.get("content-type", "").lower()
                if content_type.startswith(("application/json", "text/html", "text/plain")):
                    return await self._not_a_stream(response, content_type, accumulator, url)
                async for data in response.aiter_bytes():
                    for message_headers, payload in self._decoded(decoder, data):
                        chunks += 1
                        self._event(message_headers, payload, accumulator)
                    if accumulator.done:
                        break
        except httpx.HTTPError as exc:
            raise self._transport_failure(exc, url, chunks) from exc
        try:
            if decoder.pending:
                msg = f"The event stream ended inside a frame ({decoder.pending} bytes of it received)."
                raise IncompleteStreamError(msg)
            return accumulator.result(chunks=chunks)
        except IncompleteStreamError as exc:
            raise _Failed(exc, True) from None

    @staticmethod
    def _decoded(decoder: EventStreamDecoder, data: bytes) -> list[tuple[Mapping[str, Any], bytes]]:
        try:
            return decoder.feed(data)
        except ProviderResponseError as exc:
            raise _Failed(exc, True) from None

    @staticmethod
    def _event(headers: Mapping[str, Any], payload: bytes, accumulator: ConverseStreamAccumulator) -> None:
        kind = headers.get(":message-type")
        if kind == "event":
            try:
                accumulator.feed(str(headers.get(":event-type")), payload)
            except ResponseTooLargeError:
                raise
            except ProviderResponseError as exc:
                raise _Failed(exc, True) from None
        elif kind == "exception":
            error, retryable = exception_error(str(headers.get(":exception-type")), payload)
            raise _Failed(error, retryable)
        else:  # an "error" message: the service's own fault, named in its headers
            msg = f"The event stream reported {headers.get(':error-code')}: {headers.get(':error-message')}."
            raise _Failed(ProviderResponseError(msg), True)

    async def _not_a_stream(
        self, response: httpx.Response, content_type: str, accumulator: ConverseStreamAccumulator, url: str
    ) -> ChatResponse:
        body = await self._body(response)
        if content_type.startswith("application/json"):  # a proxy that answered in one piece
            result = self._parsed(body, url)
            if result.text:
                accumulator.feed("contentBlockDelta", json.dumps({"delta": {"text": result.text}}).encode())
            return result
        msg = f"{mask_credentials(url)} answered a stream request with content-type {content_type!r}: {body[:200]!r}."
        raise _Failed(ProviderResponseError(msg), True)
