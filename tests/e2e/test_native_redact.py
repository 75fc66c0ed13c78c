"""``redact`` on a streamed answer of each native provider: a key split across stream events
never reaches the consumer, and the deltas joined equal the turn's text.

The same filter, unchanged, over each provider's own stream shape (through the contract's
wires, replayed by ``httpx.MockTransport``); ``redact`` is a builtins filter, hence ``packages``.
"""

from __future__ import annotations

import httpx
import pytest
from core.models._mock import Server, response
from core.models.model_contract import STREAM_HEADERS, ProviderWire
from core.models.test_contract_anthropic import AnthropicWire
from core.models.test_contract_gemini import GeminiWire

from beamfilter_builtins import redact_filter
from beamfilter_core import Kernel, TextDelta
from beamfilter_core.testing import collect_stream

pytestmark = [pytest.mark.packages, pytest.mark.anyio]

SECRET = "sk-proj-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
# the key is cut in three, across events
TOKENS = ["Your key is sk-proj-4f9a8b", "7c6d5e4f3a2b1c0d9e", "8f7a6b5c, keep it safe."]
WIRES: dict[str, ProviderWire] = {"anthropic": AnthropicWire(), "gemini": GeminiWire()}


@pytest.mark.parametrize("provider", sorted(WIRES))
async def test_a_key_split_across_stream_events_is_redacted(provider: str) -> None:
    wire = WIRES[provider]
    body = wire.sse(wire.text_stream(TOKENS, (5, 9)))
    server = Server([lambda _: response(200, body, headers=STREAM_HEADERS, chunk=11)])
    async with wire.model(httpx.MockTransport(server.handle)) as model:
        kernel = Kernel(model, filters=[redact_filter()])
        text, events = await collect_stream(kernel.run_stream("What is my key?"))
    result = events[-1].result  # type: ignore[union-attr]
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert text == result.text == "".join(deltas)
    assert SECRET not in text
    assert not [d for d in deltas if "4f9a8b" in d or "8f7a6b5c" in d]
    assert text == "Your key is [REDACTED], keep it safe."
