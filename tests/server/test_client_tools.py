"""Tools the client declares in its request, on the gateway's ASGI app in-process: the
model's call of one is handed back to the client (plain and streamed), a call the server's
policy denies is listed as refused, and a declaration that shadows a server tool is a 400."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

from server._app import AUTH, CHAT, app_client
from starlette.testclient import TestClient

from beamfilter_builtins import tool_policy_filter
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall, tool

pytestmark = pytest.mark.packages

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
DELETE = {"type": "function", "function": {"name": "delete_account", "parameters": {"type": "object"}}}


@tool
def lookup_order(order: int) -> str:
    """The status of an order."""
    return f"order {order}: shipped"


def _calls(request: ChatRequest) -> ChatResponse | str:
    """Ask for the weather (and a deletion when offered), then answer from the results."""
    if request.messages[-1].role == "tool":
        return "after: " + "; ".join(m.text for m in request.messages if m.role == "tool")
    wanted = [ToolCall("get_weather", {"city": "Oslo"}, "call_w")]
    if any(t.name == "delete_account" for t in request.tools):
        wanted.append(ToolCall("delete_account", {}, "call_d"))
    return ChatResponse.tool_calls(*wanted)


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel([_calls], repeat=True)


@pytest.fixture
def http(model: ScriptedModel) -> Iterator[TestClient]:
    policy = tool_policy_filter([{"tool": "delete_*", "kind": "deny", "reason": "accounts are deleted by support"}])
    kernel = Kernel(model, tools=[lookup_order], filters=[policy])
    with app_client(kernel, inbox_keys=[]) as client:
        yield client


def _ask(**fields: Any) -> dict[str, Any]:
    return {"model": "assistant", "messages": [{"role": "user", "content": "weather in Oslo?"}], **fields}


HANDED = [{"id": "call_w", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}}]


def test_the_models_call_of_a_client_tool_is_handed_to_the_client(http: TestClient, model: ScriptedModel) -> None:
    answer = http.post(CHAT, json=_ask(tools=[WEATHER], temperature=0.3), headers=AUTH)
    assert answer.status_code == 200
    choice = answer.json()["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"]["tool_calls"] == HANDED
    assert "beamfilter" not in answer.json()
    request = model.requests[-1]
    assert sorted(t.name for t in request.tools) == ["get_weather", "lookup_order"]
    assert request.options["temperature"] == 0.3

    # the client runs it and sends the result: the turn goes on with it
    follow_up = _ask(tools=[WEATHER])
    follow_up["messages"] += [
        {"role": "assistant", "content": None, "tool_calls": HANDED},
        {"role": "tool", "tool_call_id": "call_w", "content": "sunny, 21 C"},
    ]
    done = http.post(CHAT, json=follow_up, headers=AUTH).json()["choices"][0]
    assert (done["finish_reason"], done["message"]["content"]) == ("stop", "after: sunny, 21 C")


def test_a_streamed_client_tool_call_ends_the_stream_with_its_deltas(http: TestClient) -> None:
    answer = http.post(CHAT, json=_ask(tools=[WEATHER], stream=True), headers=AUTH)
    chunks = [json.loads(e.removeprefix("data: ")) for e in answer.text.split("\n\n") if e.startswith("data: {")]
    last = chunks[-1]["choices"][0]
    assert last["finish_reason"] == "tool_calls"
    assert last["delta"]["tool_calls"] == [{"index": 0, **HANDED[0]}]
    assert answer.text.endswith("data: [DONE]\n\n")


def test_a_client_tool_call_the_policy_denies_is_refused_not_handed(http: TestClient) -> None:
    answer = http.post(CHAT, json=_ask(tools=[WEATHER, DELETE]), headers=AUTH).json()
    assert answer["choices"][0]["message"]["tool_calls"] == HANDED
    refused = answer["beamfilter"]["refused"]
    assert [(r["id"], r["name"]) for r in refused] == [("call_d", "delete_account")]
    assert "accounts are deleted by support" in refused[0]["reason"]


def test_a_client_tool_named_like_a_server_tool_is_400(http: TestClient) -> None:
    shadow = {"type": "function", "function": {"name": "lookup_order"}}
    answer = http.post(CHAT, json=_ask(tools=[WEATHER, shadow]), headers=AUTH)
    assert answer.status_code == 400
    assert answer.json()["error"] == {
        "message": "tools declares 'lookup_order', which the server already provides; rename it.",
        "type": "invalid_request_error",
        "param": "tools",
        "code": None,
    }
