"""BedrockChatModel under the ChatModel contract (ConverseStream events in binary frames)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from core.models._provider_captures import event_frame, eventstream_frame
from core.models.model_contract import KEY, REQUEST, Call, ChatModelContract, ProviderWire

from beamfilter_core import BedrockChatModel
from beamfilter_core.errors import ProviderResponseError


def _delta(index: int, delta: dict[str, Any]) -> bytes:
    return event_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": delta})


def _end(stop: str, usage: tuple[int, int] | None = None) -> list[bytes]:
    counts = {} if usage is None else {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)}
    return [event_frame("messageStop", {"stopReason": stop}), event_frame("metadata", {"usage": counts})]


def _tool_use(call: Call) -> dict[str, Any]:
    call_id, name, arguments = call
    return {"toolUse": {"toolUseId": call_id, "name": name, "input": arguments}}


class BedrockWire(ProviderWire):
    key_header = ("authorization", f"Bearer {KEY}")

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> BedrockChatModel:
        return BedrockChatModel(
            "amazon.nova-lite-v1:0", region="us-east-1", api_key=KEY, transport=transport, **options
        )

    def text(self, text: str, usage: tuple[int, int]) -> Any:
        counts = {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)}
        message = {"role": "assistant", "content": [{"text": text}]}
        return {"output": {"message": message}, "stopReason": "end_turn", "usage": counts}

    def calls(self, calls: list[Call]) -> Any:
        message = {"role": "assistant", "content": [_tool_use(c) for c in calls]}
        return {"output": {"message": message}, "stopReason": "tool_use"}

    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        start = event_frame("messageStart", {"role": "assistant"})
        return [start, *(_delta(0, {"text": t}) for t in tokens), *_end("end_turn", usage)]

    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        frames = [event_frame("messageStart", {"role": "assistant"})]
        for n, (call_id, name, arguments) in enumerate(calls):
            start = {"contentBlockIndex": n, "start": {"toolUse": {"toolUseId": call_id, "name": name}}}
            frames.append(event_frame("contentBlockStart", start))
            frames.append(_delta(n, {"toolUse": {"input": json.dumps(arguments)}}))
        return [*frames, *_end("tool_use")]

    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        return [event_frame("messageStart", {"role": "assistant"}), *(_delta(0, {"text": t}) for t in tokens)]

    def error(self, status: int, message: str) -> Any:
        return {"message": message}

    def sent_system(self, body: dict[str, Any]) -> str:
        (system,) = body["system"]
        return str(system["text"])

    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        return [
            (b["toolUse"]["toolUseId"], b["toolUse"]["name"], b["toolUse"]["input"])
            for m in body["messages"]
            for b in m["content"]
            if "toolUse" in b
        ]

    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (b["toolResult"]["toolUseId"], b["toolResult"]["content"][0]["text"])
            for m in body["messages"]
            for b in m["content"]
            if "toolResult" in b
        ]


class TestBedrockContract(ChatModelContract):
    wire = BedrockWire()

    @pytest.mark.anyio
    async def test_a_malformed_stream_event_is_a_response_error(self, waits: list[float]) -> None:
        # Bedrock's events are binary frames: a well-framed event whose payload is not JSON
        broken = eventstream_frame({":message-type": "event", ":event-type": "contentBlockDelta"}, b"{not json")
        server, model = self.server(self.stream_answer([broken]))
        async with model:
            with pytest.raises(ProviderResponseError, match="not valid JSON"):
                await model.stream(REQUEST, lambda _: None)
        assert len(server.requests) == 3
