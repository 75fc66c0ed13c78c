"""OpenAIChatModel(api="responses") under the ChatModel contract."""

from __future__ import annotations

import json
from typing import Any

import httpx
from core.models.model_contract import KEY, Call, ChatModelContract, ProviderWire

from beamfilter_core import OpenAIChatModel


def _event(data: dict[str, Any]) -> bytes:
    return f"event: {data['type']}\ndata: {json.dumps(data)}\n\n".encode()


def _completed(usage: tuple[int, int] | None = None, status: str = "completed") -> bytes:
    counts = (
        None if usage is None else {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)}
    )
    return _event({"type": f"response.{status}", "response": {"status": status, "usage": counts}})


def _call_item(index: int, call: Call, arguments: str) -> dict[str, Any]:
    call_id, name, _ = call
    return {"type": "function_call", "id": f"fc_{index}", "call_id": call_id, "name": name, "arguments": arguments}


class ResponsesWire(ProviderWire):
    key_header = ("authorization", f"Bearer {KEY}")

    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> OpenAIChatModel:
        return OpenAIChatModel(
            "gpt-test", base_url="http://mock.test/v1", api="responses", api_key=KEY, transport=transport, **options
        )

    def text(self, text: str, usage: tuple[int, int]) -> Any:
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        counts = {"input_tokens": usage[0], "output_tokens": usage[1], "total_tokens": sum(usage)}
        return {"object": "response", "status": "completed", "output": [message], "usage": counts}

    def calls(self, calls: list[Call]) -> Any:
        items = [_call_item(n, c, json.dumps(c[2])) for n, c in enumerate(calls)]
        return {"object": "response", "status": "completed", "output": items}

    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        deltas = [_event({"type": "response.output_text.delta", "output_index": 0, "delta": t}) for t in tokens]
        return [_event({"type": "response.created", "response": {}}), *deltas, _completed(usage)]

    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        events = []
        for n, call in enumerate(calls):
            events.append(
                _event({"type": "response.output_item.added", "output_index": n, "item": _call_item(n, call, "")})
            )
            events.append(
                _event(
                    {"type": "response.function_call_arguments.delta", "output_index": n, "delta": json.dumps(call[2])}
                )
            )
            events.append(
                _event(
                    {
                        "type": "response.output_item.done",
                        "output_index": n,
                        "item": _call_item(n, call, json.dumps(call[2])),
                    }
                )
            )
        return [*events, _completed()]

    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        deltas = [_event({"type": "response.output_text.delta", "output_index": 0, "delta": t}) for t in tokens]
        return [_event({"type": "response.created", "response": {}}), *deltas]

    def error(self, status: int, message: str) -> Any:
        return {"error": {"message": message, "type": "invalid_request_error", "code": None}}

    def sent_system(self, body: dict[str, Any]) -> str:
        return str(body["instructions"])

    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        return [
            (item["call_id"], item["name"], json.loads(item["arguments"]))
            for item in body["input"]
            if item["type"] == "function_call"
        ]

    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        return [(i["call_id"], i["output"]) for i in body["input"] if i["type"] == "function_call_output"]


class TestResponsesContract(ChatModelContract):
    wire = ResponsesWire()
