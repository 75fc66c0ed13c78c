"""The Anthropic and Responses dialects of a real ``beamfilter serve`` process in front of
llmock, driven by the official ``anthropic`` and ``openai`` clients: redact on both paths,
a server tool, a paused refund decided while the client waits, and wrong keys refused
(the session fixture checks that no key reaches the log)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import openai
import pytest
from peers._peer import Peer
from server._serve import API_KEY, WRONG_KEY, Gateway, listed_pauses, refunds, reviewer, scenario

pytestmark = [pytest.mark.peers, pytest.mark.packages]

SECRET = "sk-abcdefghijklmnopqrstuvwx"


@pytest.fixture
def claude(tools_gateway: Gateway) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=tools_gateway.url, api_key=API_KEY, max_retries=0, timeout=60) as opened:
        yield opened


@pytest.fixture
def client(tools_gateway: Gateway) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=tools_gateway.url + "/v1", api_key=API_KEY, max_retries=0, timeout=60) as opened:
        yield opened


def _say(text: str) -> dict[str, Any]:
    return {"type": "reply", "text": text}


def test_anthropic_clients_get_redacted_answers_plain_and_streamed(claude: anthropic.Anthropic, llmock: Peer) -> None:
    scenario(llmock, _say(f"The key is {SECRET} here."), _say(f"Streamed: {SECRET} done."))
    ask = [{"role": "user", "content": "What is the key?"}]
    plain = claude.messages.create(model="assistant", max_tokens=100, messages=ask)
    assert [b.text for b in plain.content] == ["The key is [REDACTED] here."]
    assert plain.stop_reason == "end_turn"
    with claude.messages.stream(model="assistant", max_tokens=100, messages=ask) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Streamed: [REDACTED] done."
    assert (final.stop_reason, final.usage.output_tokens > 0) == ("end_turn", True)


def test_responses_clients_get_redacted_answers_plain_and_streamed(client: openai.OpenAI, llmock: Peer) -> None:
    scenario(llmock, _say(f"The key is {SECRET} here."), _say(f"Streamed: {SECRET} done."))
    plain = client.responses.create(model="assistant", input="What is the key?")
    assert (plain.status, plain.output_text) == ("completed", "The key is [REDACTED] here.")
    with client.responses.stream(model="assistant", input="What is the key?") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == final.output_text == "Streamed: [REDACTED] done."
    assert final.usage is not None
    assert final.usage.output_tokens > 0


def test_a_server_tool_runs_inside_the_gateway_for_an_anthropic_client(
    claude: anthropic.Anthropic, llmock: Peer
) -> None:
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "lookup_order", "arguments": {"order": 7}}]},
        _say("Order 7 has shipped."),
    )
    message = claude.messages.create(
        model="assistant", max_tokens=100, messages=[{"role": "user", "content": "Where is 7?"}]
    )
    assert [(b.type, b.text) for b in message.content] == [("text", "Order 7 has shipped.")]


def test_a_paused_refund_waits_for_the_reviewer_on_an_anthropic_stream(
    tools_gateway: Gateway, claude: anthropic.Anthropic, llmock: Peer
) -> None:
    folder: Path = tools_gateway.folder
    before = len(refunds(folder))
    scenario(
        llmock,
        {"type": "reply", "tool_calls": [{"name": "refund", "arguments": {"order": 9, "amount": 4}}]},
        _say("Refunded 4 on order 9."),
    )
    got: list[str] = []

    def ask() -> None:
        with claude.messages.stream(
            model="assistant",
            max_tokens=100,
            messages=[{"role": "user", "content": "Refund 4 on order 9"}],
            extra_headers={"Beamfilter-Wait": "30", "Beamfilter-Conversation": "anthropic-refund-9"},
        ) as stream:
            got.extend(stream.text_stream)
            got.append(str(stream.get_final_message().stop_reason))

    waiting = threading.Thread(target=ask)
    waiting.start()
    pending = listed_pauses(tools_gateway, waiting)
    assert [p["conversation_id"] for p in pending] == ["anthropic-refund-9"]
    url = tools_gateway.url + f"/v1/pauses/{pending[0]['pause_id']}/decide"
    call_id = pending[0]["awaiting"][0]["id"]
    assert httpx.post(url, json={"decisions": {call_id: "approve"}}, headers=reviewer(), timeout=30).status_code == 200
    waiting.join(30)
    assert not waiting.is_alive()
    assert got == ["Refunded 4 on order 9.", "end_turn"]
    assert refunds(folder)[before:] == [{"order": 9, "amount": 4}]


def test_wrong_keys_are_refused_in_each_dialects_shape(tools_gateway: Gateway) -> None:
    with (
        anthropic.Anthropic(base_url=tools_gateway.url, api_key=WRONG_KEY, max_retries=0) as wrong,
        pytest.raises(anthropic.AuthenticationError) as refused,
    ):
        wrong.messages.create(model="assistant", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert refused.value.body["error"]["type"] == "authentication_error"
    with (
        openai.OpenAI(base_url=tools_gateway.url + "/v1", api_key=WRONG_KEY, max_retries=0) as responses,
        pytest.raises(openai.AuthenticationError) as refused_too,
    ):
        responses.responses.create(model="assistant", input="hi")
    assert refused_too.value.code == "invalid_api_key"
