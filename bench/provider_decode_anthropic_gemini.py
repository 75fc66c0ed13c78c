"""Decoding a 10k-token stream: Anthropic Messages and Gemini, beamfilter vs the SDKs.

The streams are the recorded captures of ``tests/core/models/provider_captures``
(``anthropic_text_stream.http``, ``gemini_text_stream.http``) with their text event
repeated to 10,000 tokens, every other field kept as recorded. Each row decodes the same
bytes, cut in the same 16 KiB reads from one ``httpx.MockTransport``, in one run, so the
HTTP layer is the same and the difference is the decoding:

- **Anthropic Messages**: ``AnthropicChatModel.stream`` against the official ``anthropic``
  client's ``messages.create(stream=True)`` (its SSE decoder and typed event models);
- **Gemini**: ``GeminiChatModel.stream`` against the official ``google-genai`` client's
  ``aio.models.generate_content_stream`` (its SSE reader and ``GenerateContentResponse``
  models).

Each ``*_row`` returns ``(seconds for beamfilter, seconds for the SDK)``, the best of ``rounds``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import httpx
from provider_decode_common import TOKENS, best, capture_body, expected, model_stream, transport, word

from beamfilter_core import AnthropicChatModel, GeminiChatModel


def anthropic_stream(tokens: int = TOKENS) -> bytes:
    """The recorded Messages stream with its ``text_delta`` event repeated."""
    events = [
        json.loads(block.split("data: ", 1)[1])
        for block in capture_body("anthropic_text_stream.http").split("\n\n")
        if block.strip()
    ]
    deltas = [n for n, e in enumerate(events) if e.get("delta", {}).get("type") == "text_delta"]
    delta = events[deltas[0]]
    body = [
        *events[: deltas[0]],
        *({**delta, "delta": {"type": "text_delta", "text": word(n)}} for n in range(tokens)),
        *events[deltas[-1] + 1 :],
    ]
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in body).encode()


def gemini_stream(tokens: int = TOKENS) -> bytes:
    """The recorded ``streamGenerateContent?alt=sse`` chunks with a middle chunk repeated."""
    chunks = [
        json.loads(block[len("data: ") :])
        for block in capture_body("gemini_text_stream.http").split("\r\n\r\n")
        if block
    ]
    middle, last = chunks[1], chunks[-1]

    def with_text(chunk: dict[str, Any], text: str) -> dict[str, Any]:
        candidate = {**chunk["candidates"][0], "content": {"parts": [{"text": text}], "role": "model"}}
        return {**chunk, "candidates": [candidate]}

    body = [with_text(middle, word(n)) for n in range(tokens - 1)]
    body.append(with_text(last, word(tokens - 1)))
    return "".join(f"data: {json.dumps(c, separators=(',', ':'))}\r\n\r\n" for c in body).encode()


def anthropic_row(rounds: int = 5, tokens: int = TOKENS) -> tuple[float, float]:
    """Anthropic Messages: beamfilter's stream decoding against the ``anthropic`` client's."""
    import anthropic
    import httpx2  # the anthropic SDK's own fork of httpx; it refuses an httpx client

    body = anthropic_stream(tokens)
    text = expected(tokens)

    def ours(mock: Any) -> AnthropicChatModel:
        return AnthropicChatModel("claude-sonnet-4-5", api_key="k", transport=mock)

    async def sdk() -> None:
        async with httpx2.AsyncClient(transport=transport(body, httpx2)) as http:
            client = anthropic.AsyncAnthropic(api_key="k", base_url="http://mock.test", http_client=http, max_retries=0)
            pieces: list[str] = []
            stream = await client.messages.create(
                model="claude-sonnet-4-5", max_tokens=4096, messages=[{"role": "user", "content": "hi"}], stream=True
            )
            async for event in stream:
                if event.type == "content_block_delta" and event.delta.type == "text_delta":
                    pieces.append(event.delta.text)
        assert "".join(pieces) == text

    # wall-clock time, as these rows were first measured
    clock = time.perf_counter
    return best(rounds, model_stream(ours, body, tokens), clock), best(rounds, lambda: asyncio.run(sdk()), clock)


def gemini_row(rounds: int = 5, tokens: int = TOKENS) -> tuple[float, float]:
    """Gemini: beamfilter's stream decoding against the ``google-genai`` client's."""
    from google import genai
    from google.genai import types

    body = gemini_stream(tokens)
    text = expected(tokens)

    def ours(mock: Any) -> GeminiChatModel:
        return GeminiChatModel("gemini-2.5-flash", api_key="k", transport=mock)

    async def sdk() -> None:
        async with httpx.AsyncClient(transport=transport(body)) as http:
            options = types.HttpOptions(base_url="http://mock.test", httpx_async_client=http)
            client = genai.Client(api_key="k", http_options=options)
            pieces: list[str] = []
            async for chunk in await client.aio.models.generate_content_stream(model="gemini-2.5-flash", contents="hi"):
                pieces.append(chunk.text or "")
        assert "".join(pieces) == text

    # wall-clock time, as these rows were first measured
    clock = time.perf_counter
    return best(rounds, model_stream(ours, body, tokens), clock), best(rounds, lambda: asyncio.run(sdk()), clock)


ROWS: list[tuple[str, Callable[..., tuple[float, float]]]] = [
    ("Anthropic Messages", anthropic_row),
    ("Gemini", gemini_row),
]
