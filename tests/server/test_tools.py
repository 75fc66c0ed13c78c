"""Tools through the gateway: a server tool runs under the tool chain, a client's tool comes
back as a tool call once the gate and tool_policy let it through (or is explained as
refused), and a sensitive call pauses the turn until a reviewer decides it, exactly once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from peers._peer import Peer
from server._serve import API_KEY, WEATHER, Gateway, listed_pauses, refunds, reviewer, scenario

pytestmark = [pytest.mark.peers, pytest.mark.packages]

DELETE = {
    "type": "function",
    "function": {
        "name": "delete_account",
        "parameters": {"type": "object", "properties": {"user": {"type": "string"}}},
    },
}


@pytest.fixture
def gateway(tools_gateway: Gateway) -> Gateway:
    return tools_gateway


@pytest.fixture
def folder(tools_gateway: Gateway) -> Path:
    return tools_gateway.folder


@pytest.fixture
def client(gateway: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0)


def test_a_server_tool_runs_inside_the_gateway(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "lookup_order", "arguments": {"order": 7}}]},
        {"type": "reply", "text": "Order 7 has shipped."},
    )
    llmock.delete("/_llmock/requests")
    answer = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "Where is 7?"}])
    assert answer.choices[0].message.content == "Order 7 has shipped."
    assert answer.choices[0].message.tool_calls is None
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert sent[-1]["role"] == "tool"
    assert sent[-1]["content"] == "order 7: shipped"


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_tool_comes_back_as_a_tool_call(client: openai.OpenAI, llmock: Peer, stream: bool) -> None:
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
        {"type": "reply", "text": "Sunny in Paris."},
    )
    messages: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    if stream:
        chunks = list(
            client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER], stream=True)
        )
        last = chunks[-1].choices[0]
        assert last.finish_reason == "tool_calls"
        assert last.delta.tool_calls is not None
        call = last.delta.tool_calls[0]
        assert call.function is not None
        call_id, name, arguments = call.id, call.function.name, call.function.arguments
    else:
        answer = client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])
        assert answer.choices[0].finish_reason == "tool_calls"
        calls = answer.choices[0].message.tool_calls
        assert calls is not None
        assert len(calls) == 1
        call_id, name, arguments = calls[0].id, calls[0].function.name, calls[0].function.arguments  # type: ignore[union-attr]
    assert (name, json.loads(arguments or "")) == ("get_weather", {"city": "Paris"})
    # the client runs its tool and sends the result with the whole history (no conversation id)
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "sunny, 24 C"},
    ]
    final = client.chat.completions.create(model="assistant", messages=messages, tools=[WEATHER])
    assert final.choices[0].message.content == "Sunny in Paris."
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert sent[-1] == {"role": "tool", "content": "sunny, 24 C", "tool_call_id": call_id}


def test_a_refused_client_tool_is_explained(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "delete_account", "arguments": {"user": "ada"}}]},
        {"type": "reply", "text": "I cannot delete accounts; support can."},
    )
    answer = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "Delete ada"}], tools=[DELETE, WEATHER]
    )
    assert answer.choices[0].message.content == "I cannot delete accounts; support can."
    assert answer.choices[0].finish_reason == "stop"
    refused = answer.model_extra["beamfilter"]["refused"]  # type: ignore[index]
    assert [(r["name"], r["reason"].startswith("The call to 'delete_account' was denied")) for r in refused] == [
        ("delete_account", True)
    ]
    assert "accounts are deleted by support only" in refused[0]["reason"]


def test_a_declared_tool_cannot_shadow_a_server_tool(client: openai.OpenAI) -> None:
    shadow = {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}}
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "x"}], tools=[shadow])
    assert caught.value.body["message"] == (  # type: ignore[index]
        "tools declares 'refund', which the server already provides; rename it."
    )


def test_a_paused_turn_is_decided_once_and_polled(
    gateway: Gateway, client: openai.OpenAI, llmock: Peer, folder: Path
) -> None:
    before = len(refunds(folder))
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 7, "amount": 30}}]},
        {"type": "reply", "text": "Refunded 20 on order 7."},
    )
    raw = client.chat.completions.with_raw_response.create(
        model="assistant",
        messages=[{"role": "user", "content": "Refund 30 on order 7"}],
        extra_headers={"Beamfilter-Conversation": "refund-7"},
    )
    assert raw.status_code == 202
    answer = raw.parse()
    info = answer.model_extra["beamfilter"]  # type: ignore[index]
    pause_id = info["pause_id"]
    assert answer.choices[0].finish_reason == "paused"
    assert info["status"] == "paused"
    assert info["reason"] == "'refund' is a sensitive tool: a human decides"
    assert [(a["name"], a["arguments"]) for a in info["awaiting"]] == [("refund", {"order": 7, "amount": 30})]
    assert info["inbox"] == f"/inbox#pause-{pause_id}"
    assert raw.headers["location"] == f"/v1/pauses/{pause_id}"
    assert answer.choices[0].message.content == (
        f"Paused: refund waits for a human decision ('refund' is a sensitive tool: a human decides). "
        f"Pause {pause_id}; decide at /inbox#pause-{pause_id}; the outcome is at /v1/pauses/{pause_id}."
    )
    assert refunds(folder)[before:] == []
    # a client key cannot decide; the list of pending pauses needs a reviewer key too
    url = gateway.url + f"/v1/pauses/{pause_id}"
    call_id = info["awaiting"][0]["id"]
    edited = {"decisions": {call_id: {"kind": "approve", "arguments": {"order": 7, "amount": 20}}}}
    assert httpx.post(url + "/decide", json=edited, headers=gateway.headers(), timeout=10).status_code == 401
    assert gateway.get(f"/v1/pauses/{pause_id}").json()["status"] == "pending"
    listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
    assert [(p["pause_id"], p["conversation_id"]) for p in listed] == [(pause_id, "refund-7")]
    # arguments that break the tool's schema are refused before anything runs: still pending
    bad = {"decisions": {call_id: {"kind": "approve", "arguments": {"order": 7, "amount": "lots"}}}}
    refused = httpx.post(url + "/decide", json=bad, headers=reviewer(), timeout=10)
    assert (refused.status_code, refused.json()["error"]["code"]) == (422, "decision_refused")  # at once
    assert "break the schema of tool 'refund'" in refused.json()["error"]["message"]
    polled = gateway.get(f"/v1/pauses/{pause_id}").json()
    assert polled["status"] == "pending"
    assert "break the schema of tool 'refund'" in polled["refusal"]
    # the reviewer edits the amount and approves: the gate judges the edited call again, and
    # the answer is the resumed turn's outcome, a new pause for the call as edited
    decided = httpx.post(url + "/decide", json=edited, headers=reviewer(), timeout=30)
    assert (decided.status_code, decided.json()["status"]) == (200, "completed")
    repaused = decided.json()["completion"]["beamfilter"]
    assert repaused["awaiting"] == [{"id": call_id, "name": "refund", "arguments": {"order": 7, "amount": 20}}]
    assert refunds(folder)[before:] == []
    second = gateway.url + f"/v1/pauses/{repaused['pause_id']}/decide"
    approved = httpx.post(second, json={"decisions": {call_id: "approve"}}, headers=reviewer(), timeout=30)
    assert approved.json()["completion"]["choices"][0]["message"]["content"] == "Refunded 20 on order 7."
    again = httpx.post(url + "/decide", json={"decisions": {call_id: "reject"}}, headers=reviewer(), timeout=10)
    assert again.status_code == 409
    assert again.json()["error"]["message"].startswith("already decided by api: pause ")
    outcome = httpx.get(url + "?wait=20", headers=gateway.headers(), timeout=30).json()
    assert outcome["status"] == "completed"
    assert outcome["completion"]["beamfilter"]["pause_id"] == repaused["pause_id"]
    assert refunds(folder)[before:] == [{"order": 7, "amount": 20}]


def test_a_waiting_stream_completes_after_the_decision(gateway: Gateway, llmock: Peer, folder: Path) -> None:
    before = len(refunds(folder))
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 8, "amount": 5}}]},
        {"type": "reply", "text": "Refunded 5 on order 8."},
    )
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)
    got: list[Any] = []

    def ask() -> None:
        stream = client.chat.completions.create(
            model="assistant",
            messages=[{"role": "user", "content": "Refund 5 on order 8"}],
            stream=True,
            extra_headers={"Beamfilter-Wait": "30", "Beamfilter-Conversation": "refund-8"},
        )
        got.extend(stream)

    waiting = threading.Thread(target=ask)
    waiting.start()
    pending = listed_pauses(gateway, waiting)
    assert [p["conversation_id"] for p in pending] == ["refund-8"]
    assert waiting.is_alive()
    call_id = pending[0]["awaiting"][0]["id"]
    url = gateway.url + f"/v1/pauses/{pending[0]['pause_id']}/decide"
    assert httpx.post(url, json={"decisions": {call_id: "approve"}}, headers=reviewer(), timeout=30).status_code == 200
    waiting.join(30)
    assert not waiting.is_alive()
    text = "".join(c.choices[0].delta.content or "" for c in got if c.choices)
    assert text == "Refunded 5 on order 8."
    assert got[-1].choices[0].finish_reason == "stop"
    assert refunds(folder)[before:] == [{"order": 8, "amount": 5}]
