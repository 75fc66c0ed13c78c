"""OpenAIChatModel (chat completions) under the ChatModel contract."""

from __future__ import annotations

import json
from typing import Any

import httpx
from core.models.model_contract import KEY, Call, ChatModelContract, ProviderWire

from beamfilter_core import OpenAIChatModel


def _event(data: Any) -> bytes:
    return f"data: {data if isinstance(data, str) else json.dumps(data)}\n\n".encode()


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    return _event({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


def _usage(usage: tuple[int, int]) -> dict[str, int]:
    return {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}


def _calls(calls: list[Call]) -> list[dict[str, Any]]:
    return [{"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in calls]


class OpenAIWire(ProviderWire):
    key_header = ("authorization", f"Bearer {KEY}")

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> OpenAIChatModel:
        return OpenAIChatModel("gpt-test", base_url="http://mock.test/v1", api_key=KEY, transport=transport, **options)

    def text(self, text: str, usage: tuple[int, int]) -> Any:
        message = {"role": "assistant", "content": text}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}], "usage": _usage(usage)}

    def calls(self, calls: list[Call]) -> Any:
        message = {"role": "assistant", "content": None, "tool_calls": _calls(calls)}
        return {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}

    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        events = [_chunk({"content": t}) for t in tokens]
        return [*events, _chunk({}, "stop"), _event({"choices": [], "usage": _usage(usage)}), _event("[DONE]")]

    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        deltas = [{**c, "index": n} for n, c in enumerate(_calls(calls))]
        return [_chunk({"tool_calls": deltas}), _chunk({}, "tool_calls"), _event("[DONE]")]

    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        return [_chunk({"role": "assistant"}), *(_chunk({"content": t}) for t in tokens)]

    def error(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}

    def sent_system(self, body: dict[str, Any]) -> str:
        (system,) = [m["content"] for m in body["messages"] if m["role"] == "system"]
        return str(system)

    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        return [
            (c["id"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for m in body["messages"]
            for c in m.get("tool_calls", ())
        ]

    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(m["tool_call_id"], m["content"]) for m in body["messages"] if m["role"] == "tool"]


class TestOpenAIContract(ChatModelContract):
    wire = OpenAIWire()
