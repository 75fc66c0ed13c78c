"""GeminiChatModel: Gemini over the native ``generateContent`` API with httpx.

The wire rules are in :mod:`._gemini_wire`; the HTTP half (retries, timeouts, caps,
cancellation) is :class:`._http.HTTPChatModel`, shared with every provider. The
key travels in the ``x-goog-api-key`` header, never in the URL, so no URL that reaches a
log or an error message holds it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any, ClassVar, Unpack
from urllib.parse import quote

from .._records import ChatRequest
from ..errors import ProviderHTTPError
from . import _gemini_wire as wire
from ._http import HTTPChatModel, HTTPOptions
from ._retry import error_from_response

__all__ = ["GeminiChatModel"]


def _retry_info(body: Any) -> float | None:
    """The ``retryDelay`` of a ``google.rpc.RetryInfo`` detail (``"37s"``), in seconds."""
    error = body.get("error") if isinstance(body, Mapping) else None
    details = error.get("details") if isinstance(error, Mapping) else None
    for detail in details if isinstance(details, list) else ():
        delay = detail.get("retryDelay") if isinstance(detail, Mapping) else None
        if isinstance(delay, str) and delay.endswith("s"):
            try:
                return float(delay[:-1])
            except ValueError:
                return None
    return None


class GeminiChatModel(HTTPChatModel):
    """Gemini through the Gemini API (``generativelanguage.googleapis.com``).

    Args:
        model: e.g. ``"gemini-2.5-flash"`` (a ``models/`` prefix is accepted).
        api_key: the key, sent as ``x-goog-api-key``; when None it is read from
            ``api_key_env`` (default ``GEMINI_API_KEY``).
        base_url: the API root (default ``https://generativelanguage.googleapis.com``);
            requests go to ``{base_url}/v1beta/models/{model}:generateContent``.
        options: extra fields for every call: ``safetySettings``, ``cachedContent``...
            as they are, anything else (``temperature``, ``maxOutputTokens``,
            ``thinkingConfig``) into ``generationConfig``.

    ``timeout``, ``deadline``, ``max_retries``, the size caps, ``client`` and ``transport``
    are those of :class:`~beamfilter_core.OpenAIChatModel`.
    """

    _label = "GeminiChatModel"
    _default_base_url = "https://generativelanguage.googleapis.com"
    _default_key_env = "GEMINI_API_KEY"
    _logger: ClassVar[logging.Logger] = logging.getLogger("beamfilter.models.gemini")

    def __init__(
        self, model: str, *, base_url: str | None = None, api_key_env: str | None = None, **options: Unpack[HTTPOptions]
    ) -> None:
        super().__init__(model, base_url=base_url, api_key_env=api_key_env, **options)
        name = quote(self.model.removeprefix("models/"), safe="-._~")
        root = f"{self.base_url}/v1beta/models/{name}"
        self._plain_url = root + ":generateContent"
        self._stream_url = root + ":streamGenerateContent?alt=sse"
        self._parse_answer = wire.parse_response
        self._new_accumulator = wire.StreamAccumulator

    def _key_headers(self, key: str | None) -> dict[str, str]:
        return {"x-goog-api-key": key} if key else {}

    def _body(self, request: ChatRequest, *, stream: bool) -> dict[str, Any]:
        return wire.request_body(request, self.options)

    def _error(self, status: int, headers: Mapping[str, str], body: bytes) -> ProviderHTTPError:
        # Gemini's {"error": {"code": 429, "message", "status": "RESOURCE_EXHAUSTED", "details"}};
        # a stream's error may come as a one-item list
        text = body.strip()
        if text.startswith(b"[") and text.endswith(b"]"):
            try:
                items = json.loads(text)
            except ValueError:
                items = None
            if isinstance(items, list) and len(items) == 1:
                body = json.dumps(items[0]).encode()
        error = error_from_response(status, headers, body)
        details = error.body.get("error") if isinstance(error.body, Mapping) else None
        if isinstance(details, Mapping) and isinstance(details.get("status"), str):
            error.error_type = error.code = details["status"]
        if error.retry_after is None:
            error.retry_after = _retry_info(error.body)
        return error
