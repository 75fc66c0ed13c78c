"""The gateway's Anthropic (``/v1/messages``) and Responses (``/v1/responses``) dialects,
driven in-process by the official ``anthropic`` and ``openai`` clients: plain and streamed
answers, client tools, ``redact`` on every path, keys, pauses, malformed bodies and a
stream cut mid-way, each in the dialect's own error shape."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("beamfilter_server")

import anthropic
import httpx
import openai
from server._app import REVIEW, app_client, decide_when_listed, refund_tool
from server._serve import API_KEY, PAUSE_KEY
from starlette.testclient import TestClient

from beamfilter_builtins import approval_filter, redact_filter
from beamfilter_core import ChatRequest, ChatResponse, Kernel, ScriptedModel, ToolCall
from beamfilter_core.errors import ProviderConnectionError

pytestmark = pytest.mark.packages

SECRET = "sk-abcdefghijklmnopqrstuvwx"
WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
ANTHROPIC_WEATHER = {"name": "get_weather", "description": "The weather in a city.", "input_schema": WEATHER_SCHEMA}
RESPONSES_WEATHER = {"type": "function", "name": "get_weather", "parameters": WEATHER_SCHEMA}
LONG = f"Your key is {SECRET} and " + "word " * 100


def _answer(request: ChatRequest) -> ChatResponse | str:
    """The upstream model: answers by the last message, so tests do not depend on order."""
    last = request.messages[-1]
    if last.role == "tool":
        return "after: " + "; ".join(m.text for m in request.messages if m.role == "tool")
    text = last.text
    if "secret" in text:
        return f"Your key is {SECRET}."
    if "weather" in text:
        return ChatResponse.tool_calls(ToolCall("get_weather", {"city": "Oslo"}, "toolu_1"))
    if "refund" in text:
        return ChatResponse.tool_calls(ToolCall("refund", {"order": 7, "amount": 30}, "call_r"))
    if "long" in text:
        return LONG
    return f"echo: {text}"


@pytest.fixture
def refunds() -> list[tuple[int, int]]:
    return []


@pytest.fixture
def model() -> ScriptedModel:
    return ScriptedModel([_answer], repeat=True)


@pytest.fixture
def http(model: ScriptedModel, refunds: list[tuple[int, int]]) -> Iterator[TestClient]:
    kernel = Kernel(
        model,
        tools=[refund_tool(refunds)],
        filters=[redact_filter(), approval_filter()],
        pause_key=PAUSE_KEY,
    )
    with app_client(kernel, max_answer_chars=300) as client:
        yield client


def _claude(http: TestClient, **keys: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        base_url="http://testserver", http_client=http, max_retries=0, **({"api_key": API_KEY} | keys)
    )


def _openai(http: TestClient, key: str = API_KEY) -> openai.OpenAI:
    return openai.OpenAI(base_url="http://testserver/v1", api_key=key, http_client=http, max_retries=0)


def _raw_stream(http: TestClient, text: str) -> httpx.Response:
    """The raw HTTP answer to a streamed Anthropic request of one user message (50 tokens at most)."""
    body = {"model": "assistant", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": text}]}
    return http.post("/v1/messages", json=body, headers={"x-api-key": API_KEY})


def _events(text: str) -> list[dict[str, Any]]:
    """The JSON events of an SSE body, each checked against its ``event:`` line."""
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.split("\n") if not line.startswith(":"))
        if not lines:
            continue
        event = json.loads(lines["data"])
        assert event["type"] == lines["event"]
        out.append(event)
    return out


# -- Anthropic's Messages ----------------------------------------------------------------


def test_the_anthropic_client_gets_a_redacted_answer(http: TestClient, model: ScriptedModel) -> None:
    message = _claude(http).messages.create(
        model="assistant",
        max_tokens=200,
        stop_sequences=["END"],
        extra_body={"temperature": 0.2},
        system=[{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
        messages=[{"role": "user", "content": "tell me the secret"}],
    )
    assert (message.type, message.role, message.model) == ("message", "assistant", "assistant")
    assert [(b.type, b.text) for b in message.content] == [("text", "Your key is [REDACTED].")]
    assert (message.stop_reason, message.stop_sequence) == ("end_turn", None)
    assert message.id.startswith("msg_")
    request = model.requests[-1]
    assert [(m.role, m.text) for m in request.messages] == [("system", "Be brief."), ("user", "tell me the secret")]
    assert request.options == {"max_tokens": 200, "temperature": 0.2, "stop": ["END"]}


def test_the_anthropic_client_streams_a_redacted_answer(http: TestClient) -> None:
    with _claude(http).messages.stream(
        model="assistant", max_tokens=200, messages=[{"role": "user", "content": "tell me the secret"}]
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text == "Your key is [REDACTED]."
    assert final.stop_reason == "end_turn"
    assert [b.text for b in final.content] == [text]

    raw = _raw_stream(http, "secret")
    assert raw.headers["content-type"].startswith("text/event-stream")
    assert SECRET not in raw.text
    events = _events(raw.text)
    kinds = [e["type"] for e in events]
    assert kinds[:2] == ["message_start", "content_block_start"]
    assert kinds[-3:] == ["content_block_stop", "message_delta", "message_stop"]
    assert set(kinds[2:-3]) == {"content_block_delta"}
    assert "".join(e["delta"]["text"] for e in events[2:-3]) == "Your key is [REDACTED]."
    assert events[-2]["delta"] == {"stop_reason": "end_turn", "stop_sequence": None}


def test_a_client_tool_round_in_anthropics_wire(http: TestClient) -> None:
    claude = _claude(http)
    asked = [{"role": "user", "content": "weather in Oslo?"}]
    message = claude.messages.create(model="assistant", max_tokens=100, tools=[ANTHROPIC_WEATHER], messages=asked)
    assert message.stop_reason == "tool_use"
    assert [(b.type, b.id, b.name, b.input) for b in message.content] == [
        ("tool_use", "toolu_1", "get_weather", {"city": "Oslo"})
    ]
    with claude.messages.stream(
        model="assistant",
        max_tokens=100,
        tools=[ANTHROPIC_WEATHER],
        messages=asked,
    ) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "tool_use"
    assert [(b.type, b.input) for b in streamed.content] == [("tool_use", {"city": "Oslo"})]

    result = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny, 21 C"}]}]
    follow_up = [*asked, {"role": "assistant", "content": message.content}, {"role": "user", "content": result}]
    done = claude.messages.create(model="assistant", max_tokens=100, tools=[ANTHROPIC_WEATHER], messages=follow_up)
    assert (done.stop_reason, done.content[0].text) == ("end_turn", "after: sunny, 21 C")


def test_a_wrong_key_is_refused_in_anthropics_error_shape(http: TestClient) -> None:
    for client in (_claude(http, api_key="sk-wrong-key-0123456789"), _claude(http, api_key=None, auth_token="nope")):
        with pytest.raises(anthropic.AuthenticationError) as refused:
            client.messages.create(model="assistant", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
        assert refused.value.status_code == 401
        assert refused.value.body == {
            "type": "error",
            "error": {
                "type": "authentication_error",
                "message": "Incorrect or missing API key; send x-api-key: <key> or Authorization: Bearer <key>.",
            },
        }
    # the key as a bearer token works too (ANTHROPIC_AUTH_TOKEN)
    bearer = _claude(http, api_key=None, auth_token=API_KEY)
    answer = bearer.messages.create(model="assistant", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
    assert answer.content[0].text == "echo: hi"
    # x-api-key is this route's: the chat route still takes Bearer only
    chat = {"model": "assistant", "messages": [{"role": "user", "content": "hi"}]}
    assert http.post("/v1/chat/completions", json=chat, headers={"x-api-key": API_KEY}).status_code == 401


def test_an_unknown_model_is_a_404_in_anthropics_shape(http: TestClient) -> None:
    with pytest.raises(anthropic.NotFoundError) as refused:
        _claude(http).messages.create(
            model="claude-sonnet-4-5", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
    assert refused.value.body == {
        "type": "error",
        "error": {
            "type": "not_found_error",
            "message": "The model 'claude-sonnet-4-5' does not exist; this gateway serves 'assistant'.",
        },
    }


def test_a_paused_turn_answers_202_with_pause_turn_then_the_decided_answer(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    raw = _claude(http).messages.with_raw_response.create(
        model="assistant", max_tokens=50, messages=[{"role": "user", "content": "refund order 7"}]
    )
    assert raw.status_code == 202
    message = raw.parse()
    assert message.stop_reason == "pause_turn"
    paused = message.model_extra["beamfilter"]
    assert raw.headers["location"] == paused["poll"]
    assert paused["awaiting"] == [{"id": "call_r", "name": "refund", "arguments": {"order": 7, "amount": 30}}]
    assert message.content[0].text.startswith("Paused: refund waits for a human decision")
    assert refunds == []
    decided = http.post(
        f"/v1/pauses/{paused['pause_id']}/decide", json={"decisions": {"call_r": "approve"}}, headers=REVIEW
    )
    assert decided.json()["status"] == "completed"
    assert refunds == [(7, 30)]


def test_beamfilter_wait_gives_the_decided_answer_on_the_same_stream(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    reviewer = decide_when_listed(http, {"call_r": "approve"})
    with _claude(http).messages.stream(
        model="assistant",
        max_tokens=50,
        messages=[{"role": "user", "content": "refund order 7"}],
        extra_headers={"Beamfilter-Wait": "30"},
    ) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    reviewer.join()
    assert text == "after: refunded 30 on order 7"
    assert final.stop_reason == "end_turn"
    assert refunds == [(7, 30)]


def test_a_stream_cut_mid_way_ends_with_an_error_event_and_leaks_nothing(http: TestClient) -> None:
    ask = [{"role": "user", "content": "a long one"}]
    with (  # the cut comes while reading
        pytest.raises(anthropic.APIStatusError) as cut,
        _claude(http).messages.stream(model="assistant", max_tokens=50, messages=ask) as stream,
    ):
        for _ in stream.text_stream:
            pass
    assert cut.value.body == {
        "type": "error",
        "error": {"type": "api_error", "message": "The answer is longer than max_answer_chars=300."},
    }
    raw = _raw_stream(http, "long")
    events = _events(raw.text)
    assert [e["type"] for e in events[-1:]] == ["error"]
    assert "message_stop" not in [e["type"] for e in events]
    assert SECRET not in raw.text
    assert "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta").startswith(
        "Your key is [REDACTED] and word"
    )


# -- OpenAI's Responses ------------------------------------------------------------------


def test_the_openai_client_gets_a_redacted_response(http: TestClient, model: ScriptedModel) -> None:
    response = _openai(http).responses.create(
        model="assistant", instructions="Be brief.", input="tell me the secret", max_output_tokens=64, temperature=0.1
    )
    assert response.output_text == "Your key is [REDACTED]."
    assert (response.status, response.object, response.model, response.instructions) == (
        "completed",
        "response",
        "assistant",
        "Be brief.",
    )
    assert response.id.startswith("resp_")
    request = model.requests[-1]
    assert [(m.role, m.text) for m in request.messages] == [("system", "Be brief."), ("user", "tell me the secret")]
    assert request.options == {"max_tokens": 64, "temperature": 0.1}


def test_the_openai_client_streams_a_redacted_response(http: TestClient) -> None:
    with _openai(http).responses.stream(model="assistant", input="tell me the secret") as stream:
        deltas = [e.delta for e in stream if e.type == "response.output_text.delta"]
        final = stream.get_final_response()
    assert "".join(deltas) == "Your key is [REDACTED]."
    assert (final.status, final.output_text) == ("completed", "Your key is [REDACTED].")

    events = list(_openai(http).responses.create(model="assistant", input="secret", stream=True))
    assert [e.type for e in events[:5]] == [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.content_part.added",
        "response.output_text.delta",
    ]
    assert [e.type for e in events[-4:]] == [
        "response.output_text.done",
        "response.content_part.done",
        "response.output_item.done",
        "response.completed",
    ]
    assert [e.sequence_number for e in events] == list(range(len(events)))
    raw = http.post(
        "/v1/responses",
        json={"model": "assistant", "input": "secret", "stream": True},
        headers={"Authorization": f"Bearer {API_KEY}"},
    )
    assert SECRET not in raw.text


def test_a_function_call_round_in_the_responses_wire(http: TestClient) -> None:
    client = _openai(http)
    response = client.responses.create(model="assistant", input="weather in Oslo?", tools=[RESPONSES_WEATHER])
    calls = [(i.type, i.call_id, i.name, json.loads(i.arguments)) for i in response.output]
    assert calls == [("function_call", "toolu_1", "get_weather", {"city": "Oslo"})]
    with client.responses.stream(model="assistant", input="weather in Oslo?", tools=[RESPONSES_WEATHER]) as stream:
        arguments = "".join(e.delta for e in stream if e.type == "response.function_call_arguments.delta")
        streamed = stream.get_final_response()
    assert json.loads(arguments) == {"city": "Oslo"}
    assert [(i.type, i.name) for i in streamed.output] == [("function_call", "get_weather")]

    follow_up = [
        {"role": "user", "content": "weather in Oslo?"},
        {"type": "function_call", "call_id": "toolu_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'},
        {"type": "function_call_output", "call_id": "toolu_1", "output": "sunny, 21 C"},
    ]
    done = client.responses.create(model="assistant", input=follow_up, tools=[RESPONSES_WEATHER])
    assert (done.status, done.output_text) == ("completed", "after: sunny, 21 C")


def test_a_wrong_key_is_refused_in_openais_error_shape(http: TestClient) -> None:
    with pytest.raises(openai.AuthenticationError) as refused:
        _openai(http, "sk-wrong-key-0123456789").responses.create(model="assistant", input="hi")
    assert refused.value.status_code == 401
    assert refused.value.body == {
        "message": "Incorrect or missing API key; send Authorization: Bearer <key>.",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    # Anthropic's header is not this route's
    assert (
        http.post(
            "/v1/responses", json={"model": "assistant", "input": "hi"}, headers={"x-api-key": API_KEY}
        ).status_code
        == 401
    )


def test_a_paused_response_is_a_202_incomplete_for_paused(http: TestClient, refunds: list[tuple[int, int]]) -> None:
    raw = _openai(http).responses.with_raw_response.create(model="assistant", input="refund order 7")
    assert raw.status_code == 202
    response = raw.parse()
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "paused"
    paused = response.model_extra["beamfilter"]
    assert raw.headers["location"] == paused["poll"]
    assert response.output_text.startswith("Paused: refund waits for a human decision")
    rejected = http.post(
        f"/v1/pauses/{paused['pause_id']}/decide", json={"decisions": {"call_r": "reject"}}, headers=REVIEW
    )
    assert rejected.json()["status"] == "completed"
    assert refunds == []

    # with Beamfilter-Wait, the stream waits for the decision and ends with the decided answer
    reviewer = decide_when_listed(http, {"call_r": "approve"})
    with _openai(http).responses.stream(
        model="assistant", input="refund order 7", extra_headers={"Beamfilter-Wait": "30"}
    ) as stream:
        final = stream.get_final_response()
    reviewer.join()
    assert (final.status, final.output_text) == ("completed", "after: refunded 30 on order 7")
    assert refunds == [(7, 30)]


def test_a_cut_responses_stream_raises_in_the_openai_client(http: TestClient) -> None:
    with pytest.raises(openai.APIError) as cut:  # the cut comes while reading
        for _ in _openai(http).responses.create(model="assistant", input="a long one", stream=True):
            pass
    assert cut.value.message == "The answer is longer than max_answer_chars=300."
    assert cut.value.body == {
        "type": "server_error",
        "code": "answer_too_large",
        "message": "The answer is longer than max_answer_chars=300.",
        "param": None,
    }


class _Dropping:
    """An upstream model whose stream drops after two tokens, with a key in its error."""

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise ProviderConnectionError(f"connection reset (Authorization: Bearer {SECRET})")

    async def stream(self, request: ChatRequest, on_token: Any) -> ChatResponse:
        on_token("Hel")
        on_token("lo")
        raise ProviderConnectionError(f"connection reset (Authorization: Bearer {SECRET})")


@pytest.mark.parametrize("path", ["/v1/messages", "/v1/responses"])
def test_an_upstream_dropped_mid_stream_ends_it_with_an_error_and_a_masked_log_line(
    path: str, caplog: pytest.LogCaptureFixture
) -> None:
    kernel = Kernel(_Dropping(), filters=[redact_filter()])
    body = {"model": "assistant", "max_tokens": 50, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    if path == "/v1/responses":
        body = {"model": "assistant", "stream": True, "input": "hi"}
    with caplog.at_level(logging.ERROR, "beamfilter.server"), app_client(kernel, inbox_keys=[]) as http:
        raw = http.post(path, json=body, headers={"x-api-key": API_KEY, "Authorization": f"Bearer {API_KEY}"})
    assert raw.status_code == 200
    events = _events(raw.text)
    assert events[-1]["type"] == "error"
    message = "The upstream model failed (ProviderConnectionError); see the gateway's log."
    if path == "/v1/messages":
        assert events[-1]["error"] == {"type": "api_error", "message": message}
    else:
        assert (events[-1]["code"], events[-1]["message"]) == ("upstream_error", message)
    assert SECRET not in raw.text
    assert SECRET not in caplog.text
    assert "streamed turn failed: ProviderConnectionError: connection reset" in caplog.text


def test_a_retry_with_the_same_idempotency_key_attaches_to_the_same_pause(
    http: TestClient, refunds: list[tuple[int, int]]
) -> None:
    body = {"model": "assistant", "max_tokens": 50, "messages": [{"role": "user", "content": "refund order 7"}]}
    headers = {"x-api-key": API_KEY, "Idempotency-Key": "retry-0001"}
    first = http.post("/v1/messages", json=body, headers=headers)
    again = http.post("/v1/messages", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (202, 202)
    assert first.json()["beamfilter"]["pause_id"] == again.json()["beamfilter"]["pause_id"]
    assert len(http.get("/v1/pauses", headers=REVIEW).json()["data"]) == 1
    other = http.post("/v1/messages", json={**body, "max_tokens": 60}, headers=headers)
    assert other.status_code == 422
    assert other.json()["error"]["type"] == "invalid_request_error"


def test_an_anthropic_prefill_is_history_not_continued(http: TestClient, model: ScriptedModel) -> None:
    prefill = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "The answer is"}]
    message = _claude(http).messages.create(model="assistant", max_tokens=5, messages=prefill)
    assert message.content[0].text == "echo: The answer is"
    assert [(m.role, m.text) for m in model.requests[-1].messages] == [("user", "hi"), ("assistant", "The answer is")]


class _Forging:
    """An upstream model whose stream fails with a message that would forge a log line."""

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise ProviderConnectionError("reset\nCRITICAL beamfilter.server: forged")

    async def stream(self, request: ChatRequest, on_token: Any) -> ChatResponse:
        on_token("Hel")
        raise ProviderConnectionError("reset\nCRITICAL beamfilter.server: forged")


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/messages", "/v1/responses"])
def test_a_failed_stream_is_logged_on_one_line_on_every_route(path: str, caplog: pytest.LogCaptureFixture) -> None:
    body: dict[str, Any] = {"model": "assistant", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    if path == "/v1/messages":
        body["max_tokens"] = 50
    if path == "/v1/responses":
        body = {"model": "assistant", "stream": True, "input": "hi"}
    with caplog.at_level(logging.ERROR, "beamfilter.server"), app_client(Kernel(_Forging()), inbox_keys=[]) as http:
        raw = http.post(path, json=body, headers={"x-api-key": API_KEY, "Authorization": f"Bearer {API_KEY}"})
    assert raw.status_code == 200
    assert [r.getMessage() for r in caplog.records if r.name == "beamfilter.server"] == [
        "streamed turn failed: ProviderConnectionError: reset\\x0aCRITICAL beamfilter.server: forged"
    ]
