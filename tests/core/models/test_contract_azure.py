"""AzureOpenAIChatModel under the ChatModel contract: OpenAI's chat wire, the key in ``api-key``."""

from __future__ import annotations

from typing import Any

import httpx
from core.models.model_contract import KEY, ChatModelContract
from core.models.test_contract_openai import OpenAIWire

from beamfilter_core import AzureOpenAIChatModel


class AzureWire(OpenAIWire):
    key_header = ("api-key", KEY)

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> AzureOpenAIChatModel:
        return AzureOpenAIChatModel(
            "gpt-4o-prod", base_url="https://r.openai.azure.com", api_key=KEY, transport=transport, **options
        )


class TestAzureOpenAIContract(ChatModelContract):
    wire = AzureWire()
