"""GeminiChatModel (generateContent) under the ChatModel contract."""

from __future__ import annotations

import json
from typing import Any

import httpx
from core.models.model_contract import KEY, Call, ChatModelContract, ProviderWire

from beamfilter_core import GeminiChatModel

STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED"}


def chunk(
    parts: list[dict[str, Any]], finish: str | None = None, usage: tuple[int, int] | None = None
) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
    if finish is not None:
        candidate["finishReason"] = finish
    data: dict[str, Any] = {"candidates": [candidate], "modelVersion": "gemini-test"}
    if usage is not None:
        data["usageMetadata"] = {
            "promptTokenCount": usage[0],
            "candidatesTokenCount": usage[1],
            "totalTokenCount": sum(usage),
        }
    return data


def event(data: dict[str, Any]) -> bytes:
    return f"data: {json.dumps(data)}\r\n\r\n".encode()


def call_parts(calls: list[Call]) -> list[dict[str, Any]]:
    return [{"functionCall": {"id": i, "name": n, "args": a}} for i, n, a in calls]


class GeminiWire(ProviderWire):
    key_header = ("x-goog-api-key", KEY)

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> GeminiChatModel:
        return GeminiChatModel("gemini-test", base_url="http://mock.test", api_key=KEY, transport=transport, **options)

    def text(self, text: str, usage: tuple[int, int]) -> Any:
        return chunk([{"text": text}], "STOP", usage)

    def calls(self, calls: list[Call]) -> Any:
        return chunk(call_parts(calls), "STOP", (1, 1))

    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        events = [event(chunk([{"text": t}], usage=(usage[0], n))) for n, t in enumerate(tokens[:-1])]
        return [*events, event(chunk([{"text": tokens[-1]}], "STOP", usage))]

    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        return [event(chunk(call_parts(calls), "STOP", (1, 1)))]

    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        return [event(chunk([{"text": t}])) for t in tokens] or [b": keep-alive\r\n\r\n", event(chunk([]))]

    def error(self, status: int, message: str) -> Any:
        return {"error": {"code": status, "message": message, "status": STATUS.get(status, "INTERNAL")}}

    def sent_system(self, body: dict[str, Any]) -> str:
        return "".join(part["text"] for part in body["systemInstruction"]["parts"])

    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        return [
            (p["functionCall"]["id"], p["functionCall"]["name"], p["functionCall"]["args"])
            for c in body["contents"]
            if c["role"] == "model"
            for p in c["parts"]
            if "functionCall" in p
        ]

    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [
            (p["functionResponse"]["id"], p["functionResponse"]["response"]["result"])
            for c in body["contents"]
            if c["role"] == "user"
            for p in c["parts"]
            if "functionResponse" in p
        ]


class TestGeminiContract(ChatModelContract):
    wire = GeminiWire()
