"""LiteLLM's side of bench_serve.py: a custom guardrail comparable to beamfilter's
``redact`` with one pattern: it replaces a keyword in the answer, streamed or not.

LiteLLM loads it by module path from its config (``guardrail: litellm_guardrail.KeywordRedact``).
Only the LiteLLM proxy's virtual environment imports this file.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Any

from litellm.integrations.custom_guardrail import CustomGuardrail

KEYWORD = re.compile(r"(?i)\bforbidden-word\b")


class KeywordRedact(CustomGuardrail):
    """Replaces the keyword with [REDACTED] in every answer."""

    async def async_post_call_success_hook(self, data: dict, user_api_key_dict: Any, response: Any) -> Any:
        for choice in getattr(response, "choices", []) or []:
            message = getattr(choice, "message", None)
            if message is not None and isinstance(message.content, str):
                message.content = KEYWORD.sub("[REDACTED]", message.content)
        return response

    async def async_post_call_streaming_iterator_hook(
        self, user_api_key_dict: Any, response: Any, request_data: dict
    ) -> AsyncGenerator[Any, None]:
        async for chunk in response:
            for choice in getattr(chunk, "choices", []) or []:
                delta = getattr(choice, "delta", None)
                if delta is not None and isinstance(getattr(delta, "content", None), str):
                    delta.content = KEYWORD.sub("[REDACTED]", delta.content)
            yield chunk
