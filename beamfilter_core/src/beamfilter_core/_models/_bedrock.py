"""BedrockChatModel: Amazon Bedrock's Converse and ConverseStream over httpx.

botocore (extra ``beamfilter-core[bedrock]``) does what is security-sensitive and AWS's
to define: the credential chain (environment, shared config and credentials files with
profiles, SSO, container and instance roles) and SigV4 signing. ConverseStream's binary
frames are read by :mod:`._eventstream`, checked as botocore's parser checks them, in a
third of its time even when it parses each header block once (bench/RESULTS.md). The
wire rules are in :mod:`._bedrock_wire`; the HTTP half is every provider's
(:class:`._http.HTTPChatModel`), with the retry policy of :mod:`._retry`: throttling (429),
5xx and a stream that broke before any text are retried, honouring ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
from collections.abc import AsyncGenerator, Callable, Mapping
from typing import Any, ClassVar, Unpack
from urllib.parse import quote

import httpx

from .._records import ChatRequest
from .._secrets import mask_credentials
from ..errors import ConfigError, IncompleteStreamError, ProviderHTTPError, ProviderResponseError
from ._bedrock_wire import (
    ConverseStreamAccumulator,
    EventStreamDecoder,
    exception_error,
    missing_botocore,
    parse_converse,
    request_body,
)
from ._http import HTTPChatModel, HTTPOptions, _Failed
from ._retry import error_from_response

__all__ = ["BedrockChatModel"]


class _NoSigningDetails(logging.Filter):
    """Drops botocore's DEBUG records of each signature: the canonical request holds the
    ``x-amz-security-token`` header (a credential) and the signature itself can be replayed."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("CanonicalRequest", "StringToSign", "Signature", "String to sign"))


def _quiet_signing() -> None:
    signing = logging.getLogger("botocore.auth")
    if not any(isinstance(f, _NoSigningDetails) for f in signing.filters):
        signing.addFilter(_NoSigningDetails())


class BedrockChatModel(HTTPChatModel):
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
        session: a ``botocore.session.Session`` to take credentials and region from.
        cache_points: end the system prompt and the tool list with a ``cachePoint`` (prompt
            caching, for the models that support it; reads and writes show in ``Usage``).
        options: native Converse body fields (``inferenceConfig``,
            ``additionalModelRequestFields``, ``guardrailConfig``...); ``max_tokens``,
            ``temperature``, ``top_p`` and ``stop`` go into ``inferenceConfig``.

    ``timeout``, ``deadline``, ``max_retries``, ``max_answer_chars``, ``max_argument_chars``,
    ``client`` and ``transport`` are those of :class:`~beamfilter_core.OpenAIChatModel`.
    """

    _label = "BedrockChatModel"
    _default_key_env = "AWS_BEARER_TOKEN_BEDROCK"
    _model_needed = "a model id, e.g. 'us.amazon.nova-lite-v1:0'"
    _base_url_needed = "an http(s) URL, e.g. a VPC endpoint"
    _options_needed = "a mapping of Converse body fields"
    _retries_hint = ""
    _stream_accept = "application/vnd.amazon.eventstream"
    _stream_unit = "stream event(s)"
    _unreachable_hint = ""
    _request_id_header = "x-amzn-requestid"
    _replays_json = True
    _logger: ClassVar[logging.Logger] = logging.getLogger("beamfilter.models.bedrock")

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        base_url: str | None = None,
        profile: str | None = None,
        session: Any = None,
        cache_points: bool = False,
        api_key_env: str | None = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if not isinstance(model, str) or not model:
            msg = f"BedrockChatModel(model={model!r}) needs {self._model_needed}."
            raise ConfigError(msg)
        try:
            import botocore.session
        except ImportError:
            raise missing_botocore() from None
        if base_url is not None and not (isinstance(base_url, str) and base_url.startswith(("http://", "https://"))):
            shown = mask_credentials(base_url) if isinstance(base_url, str) else base_url
            msg = f"BedrockChatModel(base_url={shown!r}) must be {self._base_url_needed}."
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
        endpoint = base_url or f"https://bedrock-runtime.{region}.amazonaws.com"
        super().__init__(model, base_url=endpoint, api_key_env=api_key_env, **options)
        self.region = region
        self.cache_points = bool(cache_points)
        path = f"{self.base_url}/model/{quote(model, safe='')}"
        self._plain_url, self._stream_url = path + "/converse", path + "/converse-stream"
        self._parse_answer = parse_converse
        self._new_accumulator = ConverseStreamAccumulator
        self._credentials: Any = None

    def __repr__(self) -> str:
        shown = mask_credentials(self.base_url)
        return f"BedrockChatModel(model={self.model!r}, region={self.region!r}, base_url={shown!r})"

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

    async def _request_headers(self, url: str, body: bytes, *, stream: bool) -> Mapping[str, str]:
        headers = self._stream_headers if stream else self._headers
        if self._has_key:  # a Bedrock API key, as a bearer token
            return headers
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        # off the event loop: a refresh may read files or ask the instance metadata service
        credentials = await asyncio.to_thread(self._resolve)
        signed = AWSRequest(method="POST", url=url, data=body, headers=dict(headers))
        SigV4Auth(credentials, "bedrock", self.region).add_auth(signed)
        return dict(signed.headers.items())

    # -- the wire -----------------------------------------------------------------------

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return request_body(request, self.options, cache_points=self.cache_points)

    def _error(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderHTTPError:
        error = error_from_response(status, headers, body)
        # AWS names the fault in a header: "ThrottlingException:http://internal.amazon.com/..."
        kind = headers.get("x-amzn-errortype", "").split(":")[0]
        if kind:
            error.error_type = kind
        return error

    def _is_stream(self, content_type: str) -> bool:
        return not content_type.startswith(("application/json", "text/html", "text/plain"))

    async def _events(self, response: httpx.Response) -> AsyncGenerator[list[Any], None]:
        """ConverseStream's binary frames as ``(headers, payload)``."""
        decoder = EventStreamDecoder()
        async for data in response.aiter_bytes():
            yield decoder.feed(data)
        if decoder.pending:
            msg = f"The event stream ended inside a frame ({decoder.pending} bytes of it received)."
            raise IncompleteStreamError(msg)

    def _feeder(self, accumulator: Any) -> Callable[[Any], None]:
        feed = accumulator.feed

        def frame(message: tuple[Mapping[str, Any], bytes]) -> None:
            headers, payload = message
            kind = headers.get(":message-type")
            if kind == "event":
                feed(str(headers.get(":event-type")), payload)
            elif kind == "exception":
                error, retryable = exception_error(str(headers.get(":exception-type")), payload)
                raise _Failed(error, retryable)
            else:  # an "error" message: the service's own fault, named in its headers
                msg = f"The event stream reported {headers.get(':error-code')}: {headers.get(':error-message')}."
                raise ProviderResponseError(msg)

        return frame

    def _replay(self, accumulator: Any, text: str) -> None:
        accumulator.feed("contentBlockDelta", json.dumps({"delta": {"text": text}}).encode())
