"""The gateway against a real ``beamfilter serve`` process on 127.0.0.1, with llmock as the
upstream model: the real ``openai`` client and ``curl`` speak to it. Each request is one
turn through the config's onion (``memory``, ``tool_policy``, ``approval``, ``redact``)."""

from __future__ import annotations

import json
import sqlite3
import subprocess

import httpx
import openai
import pytest
from peers._peer import Peer
from server._serve import API_KEY, OTHER_KEY, WRONG_KEY, Gateway, reviewer, scenario

from beamfilter_server import client_id

pytestmark = [pytest.mark.peers, pytest.mark.packages]

SECRET = "sk-abcdefghijklmnopqrstuvwx"


@pytest.fixture
def gateway(tools_gateway: Gateway) -> Gateway:
    return tools_gateway


@pytest.fixture
def client(gateway: Gateway) -> openai.OpenAI:
    return openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0)


def test_models_lists_the_configured_name(client: openai.OpenAI) -> None:
    assert [m.id for m in client.models.list().data] == ["assistant"]


def test_a_completion_runs_through_the_onion(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": f"Use {SECRET} to call the API."})
    answer = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "Which key?"}])
    assert answer.choices[0].message.content == "Use [REDACTED] to call the API."
    assert answer.choices[0].finish_reason == "stop"
    assert answer.object == "chat.completion"
    assert answer.id.startswith("chatcmpl-")
    assert answer.usage is not None
    assert answer.usage.total_tokens > 0


def test_a_streamed_completion_is_redacted_across_chunks(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": f"Use {SECRET} to call the API, then stop."})
    stream = client.chat.completions.create(
        model="assistant",
        messages=[{"role": "user", "content": "Which key?"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Use [REDACTED] to call the API, then stop."
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert len({c.id for c in chunks}) == 1


def test_memory_carries_a_conversation_across_requests(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": "Hello Ada."}, {"type": "reply", "text": "Your name is Ada."})
    llmock.delete("/_llmock/requests")
    headers = {"Beamfilter-Conversation": "test-memory-1"}
    first = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "I am Ada."}], extra_headers=headers
    )
    assert first.choices[0].message.content == "Hello Ada."
    # the client sends only its new message: the gateway's memory holds the rest
    second = client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "What is my name?"}], extra_headers=headers
    )
    assert second.choices[0].message.content == "Your name is Ada."
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "I am Ada."),
        ("assistant", "Hello Ada."),
        ("user", "What is my name?"),
    ]
    # the `user` field names the conversation too; a client resending the whole history
    # is not duplicated (only what follows the last assistant message is new)
    scenario(llmock, {"type": "reply", "text": "Still Ada."})
    client.chat.completions.create(
        model="assistant",
        user="test-memory-1",
        messages=[
            {"role": "user", "content": "I am Ada."},
            {"role": "assistant", "content": "Hello Ada."},
            {"role": "user", "content": "What is my name?"},
            {"role": "assistant", "content": "Your name is Ada."},
            {"role": "user", "content": "And now?"},
        ],
    )
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert [m["content"] for m in sent] == [
        "I am Ada.",
        "Hello Ada.",
        "What is my name?",
        "Your name is Ada.",
        "And now?",
    ]


def test_each_client_key_has_its_own_conversations_and_pauses(
    gateway: Gateway, client: openai.OpenAI, llmock: Peer
) -> None:
    other = openai.OpenAI(base_url=gateway.url + "/v1", api_key=OTHER_KEY, max_retries=0)
    headers = {"Beamfilter-Conversation": "support-1"}  # the same id, sent with two keys
    scenario(llmock, {"type": "reply", "text": "Hello Ada."}, {"type": "reply", "text": "I do not know your name."})
    llmock.delete("/_llmock/requests")
    client.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "I am Ada."}], extra_headers=headers
    )
    answer = other.chat.completions.create(
        model="assistant", messages=[{"role": "user", "content": "What is my name?"}], extra_headers=headers
    )
    assert answer.choices[0].message.content == "I do not know your name."
    sent = llmock.get("/_llmock/requests")["requests"][-1]["body"]["messages"]
    assert [(m["role"], m["content"]) for m in sent] == [("user", "What is my name?")]  # nothing of Ada's
    # the store keys each conversation by the client key's id, never by the key itself
    db = sqlite3.connect(gateway.folder / "chats.db")
    try:
        ids = {row[0] for row in db.execute("SELECT DISTINCT conversation_id FROM beamfilter_messages")}
        dump = "\n".join(db.iterdump())
    finally:
        db.close()
    assert {f"{client_id(API_KEY)}:support-1", f"{client_id(OTHER_KEY)}:support-1"} <= ids
    assert API_KEY not in dump
    assert OTHER_KEY not in dump
    # a pause belongs to its client: the other key cannot poll it, the inbox names the client
    scenario(llmock, {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 3, "amount": 1}}]})
    raw = client.chat.completions.with_raw_response.create(
        model="assistant", messages=[{"role": "user", "content": "Refund order 3"}], extra_headers=headers
    )
    pause_id = raw.parse().model_extra["beamfilter"]["pause_id"]  # type: ignore[index]
    assert gateway.get(f"/v1/pauses/{pause_id}").json()["status"] == "pending"
    refused = httpx.get(
        gateway.url + f"/v1/pauses/{pause_id}", headers={"Authorization": f"Bearer {OTHER_KEY}"}, timeout=10
    )
    assert refused.status_code == 404
    assert refused.json()["error"]["message"] == f"No pause {pause_id!r} is known here."
    listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
    mine = [(p["client"], p["conversation_id"]) for p in listed if p["pause_id"] == pause_id]
    assert mine == [(client_id(API_KEY), "support-1")]
    call_id = raw.parse().model_extra["beamfilter"]["awaiting"][0]["id"]  # type: ignore[index]
    reject = {"decisions": {call_id: {"kind": "reject", "reason": "not now"}}}
    scenario(llmock, {"type": "reply", "text": "Not refunded."})
    url = gateway.url + f"/v1/pauses/{pause_id}/decide"
    assert httpx.post(url, json=reject, headers=reviewer(), timeout=30).status_code == 200
    assert gateway.get(f"/v1/pauses/{pause_id}?wait=20").json()["status"] == "completed"


def test_keys_are_required_and_errors_are_openai_json(gateway: Gateway, llmock: Peer) -> None:
    wrong = openai.OpenAI(base_url=gateway.url + "/v1", api_key=WRONG_KEY, max_retries=0)
    with pytest.raises(openai.AuthenticationError) as caught:
        wrong.models.list()
    assert caught.value.status_code == 401
    assert caught.value.body == {
        "message": "Incorrect or missing API key; send Authorization: Bearer <key>.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    bare = httpx.post(gateway.url + "/v1/chat/completions", json={}, timeout=10)
    assert bare.status_code == 401
    assert bare.json()["error"]["code"] == "invalid_api_key"
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0)
    with pytest.raises(openai.NotFoundError) as missing:
        client.chat.completions.create(model="gpt-5", messages=[{"role": "user", "content": "hi"}])
    assert missing.value.body["code"] == "model_not_found"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as many:
        client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "hi"}] * 9)
    assert many.value.body == {  # type: ignore[comparison-overlap]
        "message": "The request has 9 messages; this gateway takes at most 8 (max_messages).",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "too_many_messages",
    }
    with pytest.raises(openai.BadRequestError) as role:
        client.chat.completions.create(model="assistant", messages=[{"role": "wizard", "content": "hi"}])  # type: ignore[misc,list-item]
    assert role.value.body["param"] == "messages[0].role"  # type: ignore[index]
    # the upstream model fails: a 502 that names no upstream detail
    scenario(llmock, {"type": "fail", "status": 500, "message": "upstream exploded with secret sk-upstream"})
    with pytest.raises(openai.InternalServerError) as upstream_error:
        client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "hi"}])
    assert upstream_error.value.status_code == 502
    assert upstream_error.value.body == {  # type: ignore[comparison-overlap]
        "message": "The upstream model failed (InternalServerError); see the gateway's log.",
        "type": "server_error",
        "param": None,
        "code": "upstream_error",
    }


def test_bodies_and_answers_are_capped(gateway: Gateway, llmock: Peer) -> None:
    big = {"model": "assistant", "messages": [{"role": "user", "content": "x" * 30_000}]}
    response = gateway.post("/v1/chat/completions", big)
    assert response.status_code == 413
    assert response.json()["error"]["message"] == "The request body is larger than max_body_bytes=20000."
    garbage = httpx.post(
        gateway.url + "/v1/chat/completions",
        content=b"{not json",
        headers=gateway.headers(**{"Content-Type": "application/json"}),
        timeout=10,
    )
    assert garbage.status_code == 400
    assert garbage.json()["error"]["code"] == "invalid_json"
    deep = httpx.post(
        gateway.url + "/v1/chat/completions",
        content=b"[" * 5000 + b"]" * 5000,
        headers=gateway.headers(**{"Content-Type": "application/json"}),
        timeout=10,
    )
    assert deep.status_code == 400
    scenario(llmock, {"type": "reply", "text": "word " * 100})
    long = gateway.post("/v1/chat/completions", {"model": "assistant", "messages": [{"role": "user", "content": "?"}]})
    assert long.status_code == 502
    assert long.json()["error"]["code"] == "answer_too_large"
    scenario(llmock, {"type": "reply", "text": "word " * 100})
    client = openai.OpenAI(base_url=gateway.url + "/v1", api_key=API_KEY, max_retries=0)
    stream = client.chat.completions.create(model="assistant", messages=[{"role": "user", "content": "?"}], stream=True)
    with pytest.raises(openai.APIError, match="longer than max_answer_chars=400"):
        for _ in stream:
            pass


def test_curl_streams_sse(gateway: Gateway, llmock: Peer) -> None:
    scenario(llmock, {"type": "reply", "text": "Hi from curl."})
    body = json.dumps({"model": "assistant", "stream": True, "messages": [{"role": "user", "content": "hi"}]})
    out = subprocess.run(
        [
            "curl",
            "-sS",
            "-N",
            "-H",
            f"Authorization: Bearer {API_KEY}",
            "-H",
            "Content-Type: application/json",
            "-d",
            body,
            gateway.url + "/v1/chat/completions",
        ],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    events = [line[len("data: ") :] for line in out.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == "Hi from curl."
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    status = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", gateway.url + "/v1/models"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    assert status == "401"


def test_cors_is_off_by_default(gateway: Gateway) -> None:
    preflight = httpx.options(
        gateway.url + "/v1/chat/completions",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "POST"},
        timeout=10,
    )
    assert "access-control-allow-origin" not in preflight.headers
    assert preflight.status_code == 405
    assert preflight.json()["error"]["message"] == "Method not allowed."
