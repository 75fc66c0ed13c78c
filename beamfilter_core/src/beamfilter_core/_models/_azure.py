"""AzureOpenAIChatModel: chat completions on an Azure OpenAI resource.

The wire is OpenAI's (:mod:`._wire`), so is the HTTP half (:class:`._http.HTTPChatModel`,
through :class:`~._openai.OpenAIChatModel`); only the address and the key differ: the URL
names the deployment and the API version, and the key travels in an ``api-key`` header.
"""

from __future__ import annotations

from typing import Unpack
from urllib.parse import quote

from .._secrets import mask_credentials
from ..errors import ConfigError
from ._http import _ENV_NAME, HTTPOptions
from ._openai import OpenAIChatModel

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

    The other arguments (``options``, ``timeout``, ``deadline``, ``max_retries``, the size
    caps, ``client``, ``transport``) are :class:`~beamfilter_core.OpenAIChatModel`'s.
    """

    _label = "AzureOpenAIChatModel"
    _default_base_url = ""  # no default resource: a call without a key is refused anyway
    _default_key_env = "AZURE_OPENAI_API_KEY"

    def __init__(
        self,
        deployment: str,
        *,
        base_url: str,
        api_version: str = API_VERSION,
        api_key_env: str | None = "AZURE_OPENAI_API_KEY",
        **options: Unpack[HTTPOptions],
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
        if api_key_env is not None and not (isinstance(api_key_env, str) and _ENV_NAME.match(api_key_env)):
            msg = (
                "AzureOpenAIChatModel(api_key_env=...) must name an environment variable, such as "
                "'AZURE_OPENAI_API_KEY'; to pass the key itself use api_key=."
            )
            raise ConfigError(msg)
        super().__init__(deployment, base_url=base_url, api_key_env=api_key_env, api="chat", **options)
        self.deployment = deployment
        self.api_version = api_version
        base = self.base_url.removesuffix("/openai")  # the resource URL as some portals show it
        self._plain_url = self._stream_url = (
            f"{base}/openai/deployments/{quote(deployment, safe='')}/chat/completions"
            f"?api-version={quote(api_version, safe='')}"
        )

    def __repr__(self) -> str:
        return (
            f"AzureOpenAIChatModel(deployment={self.deployment!r}, base_url={mask_credentials(self.base_url)!r}, "
            f"api_version={self.api_version!r})"
        )

    def _key_headers(self, key: str | None) -> dict[str, str]:
        return {"api-key": key} if key else {}

    def _check_key(self) -> None:
        if not self._has_key:
            msg = (
                f"AzureOpenAIChatModel(deployment={self.deployment!r}) has no API key; "
                f"set {self._key_hint} or pass api_key=."
            )
            raise ConfigError(msg)
