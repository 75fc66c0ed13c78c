"""AzureOpenAIChatModel: chat completions on an Azure OpenAI resource.

The wire is OpenAI's (:mod:`._wire`), so is the transport, the retry policy and the stream
decoding (:class:`~._openai.OpenAIChatModel`); only the address and the key differ: the URL
names the deployment and the API version, and the key travels in an ``api-key`` header.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx

from .._records import ChatRequest, ChatResponse
from .._secrets import mask_credentials
from ..errors import ConfigError
from ._base import TokenSink
from ._openai import _ENV_NAME, DEADLINE, MAX_EVENT_CHARS, OpenAIChatModel
from ._wire import MAX_ANSWER_CHARS, MAX_ARGUMENT_CHARS

__all__ = ["AzureOpenAIChatModel"]

#: The GA data-plane version used when none is given.
API_VERSION = "2024-10-21"


class AzureOpenAIChatModel(OpenAIChatModel):
    """A chat model deployed on Azure OpenAI.

    Args:
        deployment: the deployment name (Azure routes by it; it is also sent as ``model``).
        base_url: the resource, e.g. ``https://my-resource.openai.azure.com``.
        api_version: the ``api-version`` query parameter.
        api_key: the key; when None it is read from ``api_key_env``
            (default ``AZURE_OPENAI_API_KEY``). Sent as the ``api-key`` header.

    The other arguments are :class:`~beamfilter_core.OpenAIChatModel`'s.
    """

    def __init__(
        self,
        deployment: str,
        *,
        base_url: str,
        api_version: str = API_VERSION,
        api_key: str | None = None,
        api_key_env: str | None = "AZURE_OPENAI_API_KEY",
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
        if not isinstance(deployment, str) or not deployment:
            msg = f"AzureOpenAIChatModel(deployment={deployment!r}) needs the deployment name of the model."
            raise ConfigError(msg)
        if not isinstance(api_version, str) or not api_version:
            msg = f"AzureOpenAIChatModel(api_version={api_version!r}) needs an API version such as {API_VERSION!r}."
            raise ConfigError(msg)
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            shown = mask_credentials(base_url) if isinstance(base_url, str) else base_url
            msg = (
                f"AzureOpenAIChatModel(base_url={shown!r}) must be the resource's https URL, "
                "such as 'https://my-resource.openai.azure.com'."
            )
            raise ConfigError(msg)
        super().__init__(
            deployment,
            base_url=base_url,
            api_key=None,
            api_key_env=None,
            options=options,
            timeout=timeout,
            deadline=deadline,
            max_retries=max_retries,
            max_event_chars=max_event_chars,
            max_answer_chars=max_answer_chars,
            max_argument_chars=max_argument_chars,
            client=client,
            transport=transport,
        )
        self.deployment = deployment
        self.api_version = api_version
        # OpenAIChatModel checked api_key_env's form; here it is checked before any read.
        if api_key_env is not None and not (isinstance(api_key_env, str) and _ENV_NAME.match(api_key_env)):
            msg = (
                "AzureOpenAIChatModel(api_key_env=...) must name an environment variable, such as "
                "'AZURE_OPENAI_API_KEY'; to pass the key itself use api_key=."
            )
            raise ConfigError(msg)
        key = api_key if api_key is not None else (os.environ.get(api_key_env) if api_key_env else None)
        self._key_hint = api_key_env
        self._has_key = bool(key)
        base = self.base_url
        if base.endswith("/openai"):  # the resource URL as some portals show it
            base = base[: -len("/openai")]
        self._url = (
            f"{base}/openai/deployments/{quote(deployment, safe='')}/chat/completions"
            f"?api-version={quote(api_version, safe='')}"
        )
        self._shown_url = mask_credentials(self._url)
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if key:
            headers["api-key"] = key
        self._headers = headers
        self._stream_headers = {**headers, "Accept": "text/event-stream"}

    def __repr__(self) -> str:
        return (
            f"AzureOpenAIChatModel(deployment={self.deployment!r}, base_url={mask_credentials(self.base_url)!r}, "
            f"api_version={self.api_version!r})"
        )

    def _check_key(self) -> None:
        if not self._has_key:
            msg = (
                f"AzureOpenAIChatModel(deployment={self.deployment!r}) has no API key; "
                f"set {self._key_hint or 'AZURE_OPENAI_API_KEY'} or pass api_key=."
            )
            raise ConfigError(msg)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer ``request`` in one piece (a non-streaming call)."""
        self._check_key()
        return await super().complete(request)

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Answer ``request`` as a stream, calling ``on_token`` for each text delta."""
        self._check_key()
        return await super().stream(request, on_token)
