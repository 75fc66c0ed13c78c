"""AnthropicChatModel (Messages API) under the ChatModel contract."""

from __future__ import annotations

import json
from typing import Any

import httpx
from core.models.model_contract import KEY, Call, ChatModelContract, ProviderWire

from beamfilter_core import AnthropicChatModel


def event(data: dict[str, Any]) -> bytes:
    """One SSE event as Anthropic sends it: ``event:`` names the ``type`` of the data."""
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def start(usage: tuple[int, int] = (1, 1)) -> bytes:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": "claude-test",
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": 1},
    }
    return event({"type": "message_start", "message": message})


def end(stop: str, output_tokens: int) -> list[bytes]:
    return [
        event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            }
        ),
        event({"type": "message_stop"}),
    ]


def message(content: list[dict[str, Any]], stop: str, usage: tuple[int, int] = (1, 1)) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
    }


class AnthropicWire(ProviderWire):
    key_header = ("x-api-key", KEY)

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> AnthropicChatModel:
        return AnthropicChatModel(
            "claude-test", base_url="http://mock.test", api_key=KEY, transport=transport, **options
        )

    def text(self, text: str, usage: tuple[int, int]) -> Any:
        return message([{"type": "text", "text": text}], "end_turn", usage)

    def calls(self, calls: list[Call]) -> Any:
        return message([{"type": "tool_use", "id": i, "name": n, "input": a} for i, n, a in calls], "tool_use")

    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        block = event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
        deltas = [
            event({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}})
            for t in tokens
        ]
        stop = event({"type": "content_block_stop", "index": 0})
        return [start(usage), block, event({"type": "ping"}), *deltas, stop, *end("end_turn", usage[1])]

    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        events = [start()]
        for index, (call_id, name, arguments) in enumerate(calls):
            block = {"type": "tool_use", "id": call_id, "name": name, "input": {}}
            events.append(event({"type": "content_block_start", "index": index, "content_block": block}))
            text = json.dumps(arguments)
            for piece in (text[:5], text[5:]):
                delta = {"type": "input_json_delta", "partial_json": piece}
                events.append(event({"type": "content_block_delta", "index": index, "delta": delta}))
            events.append(event({"type": "content_block_stop", "index": index}))
        return [*events, *end("tool_use", 20)]

    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        return self.text_stream(tokens, (1, 1))[: 3 + len(tokens)] if tokens else [start()]

    def error(self, status: int, message: str) -> Any:
        kinds = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error"}
        return {"type": "error", "error": {"type": kinds.get(status, "api_error"), "message": message}}

    def sent_system(self, body: dict[str, Any]) -> str:
        return "".join(block["text"] for block in body["system"])

    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        return [
            (b["id"], b["name"], b["input"])
            for m in body["messages"]
            if m["role"] == "assistant"
            for b in m["content"]
            if b["type"] == "tool_use"
        ]

    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (b["tool_use_id"], b["content"])
            for m in body["messages"]
            if m["role"] == "user"
            for b in m["content"]
            if b["type"] == "tool_result"
        ]


class TestAnthropicContract(ChatModelContract):
    wire = AnthropicWire()
