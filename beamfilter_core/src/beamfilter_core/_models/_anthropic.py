"""AnthropicChatModel: Claude over the native Messages API (``/v1/messages``) with httpx.

The wire rules are in :mod:`._anthropic_wire`; the HTTP half (retries, timeouts, caps,
cancellation) is :class:`._http.HTTPChatModel`, shared with every provider.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack

from .._records import ChatRequest
from ..errors import ConfigError
from . import _anthropic_wire as wire
from ._http import HTTPChatModel, HTTPOptions

__all__ = ["AnthropicChatModel"]

#: The API version sent in ``anthropic-version`` (the only stable one).
API_VERSION = "2023-06-01"


class AnthropicChatModel(HTTPChatModel):
    """Claude through Anthropic's Messages API.

    Args:
        model: e.g. ``"claude-sonnet-4-5"``.
        api_key: the key, sent as ``x-api-key``; when None it is read from ``api_key_env``
            (default ``ANTHROPIC_API_KEY``).
        base_url: the API root (default ``https://api.anthropic.com``).
        max_tokens: the answer's token bound, required by the API (default 4096).
        cache_control: True (or a block such as ``{"type": "ephemeral", "ttl": "1h"}``)
            marks the system prompt and the tools as a prompt-cache breakpoint.
        options: extra body fields for every call (``temperature``, ``thinking``...);
            ``ChatRequest.options`` are merged over them.

    ``timeout``, ``deadline``, ``max_retries``, the size caps, ``client`` and ``transport``
    are those of :class:`~beamfilter_core.OpenAIChatModel`.
    """

    _label = "AnthropicChatModel"
    _default_base_url = "https://api.anthropic.com"
    _default_key_env = "ANTHROPIC_API_KEY"
    _logger: ClassVar[logging.Logger] = logging.getLogger("beamfilter.models.anthropic")

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key_env: str | None = None,
        max_tokens: int = 4096,
        cache_control: Any = None,
        **options: Unpack[HTTPOptions],
    ) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            msg = f"AnthropicChatModel(max_tokens={max_tokens!r}) must be an integer >= 1 (default 4096)."
            raise ConfigError(msg)
        if not (cache_control is None or isinstance(cache_control, bool | Mapping)):
            msg = (
                f"AnthropicChatModel(cache_control={cache_control!r}) must be true, false or a block such as "
                '{"type": "ephemeral", "ttl": "1h"}.'
            )
            raise ConfigError(msg)
        self.max_tokens = max_tokens
        self.cache_control = cache_control
        super().__init__(model, base_url=base_url, api_key_env=api_key_env, **options)
        self._plain_url = self._stream_url = self.base_url + "/v1/messages"
        self._parse_answer = wire.parse_message
        self._new_accumulator = wire.StreamAccumulator

    def _key_headers(self, key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if key:
            headers["x-api-key"] = key
        return headers

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return wire.request_body(
            request,
            self.model,
            self.options,
            max_tokens=self.max_tokens,
            stream=stream,
            cache_control=self.cache_control,
        )
