"""GeminiChatModel: the sans-IO wire on data, the recorded captures (shaped like the Gemini API
docs' examples: text, an SSE stream, parallel function calls with a thought signature, a safety
block, a blocked prompt, a 429 with RetryInfo) replayed whole and cut anywhere, and the model."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from core.models._mock import REQUEST, SPLITS, Server, response
from core.models._mock import replay as capture
from core.models.test_contract_gemini import chunk, event

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    GeminiChatModel,
    Kernel,
    Message,
    Reasoning,
    ToolCall,
    Usage,
    tool,
)
from beamfilter_core._models import _gemini_wire as wire
from beamfilter_core.errors import (
    BadRequestError,
    ConfigError,
    ContentBlockedError,
    IncompleteStreamError,
    ProviderResponseError,
    RateLimitError,
    ResponseTooLargeError,
)

pytestmark = pytest.mark.anyio

KEY = "AIzaSy-test-key-9f8e7d"


@tool
def power_disco_ball(power: bool) -> str:
    """Powers the spinning disco ball."""
    return "Disco ball is spinning!"


@tool
def start_music(energetic: bool, loud: bool) -> str:
    """Play some music matching the specified parameters."""
    return "Never gonna give you up."


@tool
def dim_lights(brightness: float) -> str:
    """Dim the lights."""
    return "Lights are now set to 50%"


def model(server: Server, **options: Any) -> GeminiChatModel:
    options.setdefault("api_key", KEY)
    return GeminiChatModel(
        "gemini-2.5-flash", base_url="http://mock.test", transport=httpx.MockTransport(server.handle), **options
    )


# -- the request ----------------------------------------------------------------------


def test_request_body_in_native_shapes() -> None:
    call = ToolCall("power_disco_ball", {"power": True}, "call_1")
    second = ToolCall("dim_lights", {"brightness": 0.5}, "call_2")
    signature = Reasoning("gemini", "", {"thoughtSignature": "SIG1", "call": "call_1"})
    text_signature = Reasoning("gemini", "", {"thoughtSignature": "SIG0"})
    foreign = Reasoning("anthropic", "x", {"type": "thinking", "thinking": "x", "signature": "s"})
    image = ContentPart("image_url", url="data:image/jpeg;base64,/9j/4AAQ")
    remote = ContentPart("image_url", url="https://example.com/cat.jpg")
    request = ChatRequest(
        (
            Message.system("Be terse."),
            Message("user", (ContentPart("text", "Party?"), image, remote, ContentPart("text", None))),
            Message("assistant", "Sure.", (call, second), reasoning=(signature, text_signature, foreign)),
            Message.tool("call_1", "Disco ball is spinning!"),
            Message.tool("call_2", "Lights are now set to 50%", "dim_lights"),
            Message.user("Thanks"),
            Message.assistant(None),
        ),
        tools=(power_disco_ball,),
        tool_choice="required",
        options={
            "temperature": 0.2,
            "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        },
    )
    options = {"maxOutputTokens": 100, "generationConfig": {"topK": 3}, "contents": "ignored"}
    body = wire.request_body(request, options)
    assert body == {
        "safetySettings": [{"category": "HARM_CATEGORY_HARASSMENT", "threshold": "BLOCK_NONE"}],
        "systemInstruction": {"parts": [{"text": "Be terse."}]},
        "contents": [
            {
                "role": "user",
                "parts": [
                    {"text": "Party?"},
                    {"inlineData": {"mimeType": "image/jpeg", "data": "/9j/4AAQ"}},
                    {"fileData": {"fileUri": "https://example.com/cat.jpg"}},
                ],
            },
            {
                "role": "model",
                "parts": [
                    {"text": "Sure.", "thoughtSignature": "SIG0"},
                    {
                        "functionCall": {"id": "call_1", "name": "power_disco_ball", "args": {"power": True}},
                        "thoughtSignature": "SIG1",
                    },
                    {"functionCall": {"id": "call_2", "name": "dim_lights", "args": {"brightness": 0.5}}},
                ],
            },
            {
                "role": "user",
                "parts": [
                    {
                        "functionResponse": {
                            "id": "call_1",
                            "name": "power_disco_ball",
                            "response": {"result": "Disco ball is spinning!"},
                        }
                    },
                    {
                        "functionResponse": {
                            "id": "call_2",
                            "name": "dim_lights",
                            "response": {"result": "Lights are now set to 50%"},
                        }
                    },
                    {"text": "Thanks"},
                ],
            },
        ],
        "tools": [
            {
                "functionDeclarations": [
                    {
                        "name": "power_disco_ball",
                        "description": "Powers the spinning disco ball.",
                        "parametersJsonSchema": power_disco_ball.parameters,
                    }
                ]
            }
        ],
        "toolConfig": {"functionCallingConfig": {"mode": "ANY"}},
        "generationConfig": {"maxOutputTokens": 100, "topK": 3, "temperature": 0.2},
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"functionCallingConfig": {"mode": "AUTO"}}),
        ("none", {"functionCallingConfig": {"mode": "NONE"}}),
        ("start_music", {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["start_music"]}}),
        (
            {"type": "function", "function": {"name": "dim_lights"}},
            {"functionCallingConfig": {"mode": "ANY", "allowedFunctionNames": ["dim_lights"]}},
        ),
        ({"functionCallingConfig": {"mode": "VALIDATED"}}, {"functionCallingConfig": {"mode": "VALIDATED"}}),
    ],
)
def test_tool_choice_mapping(choice: Any, sent: Any) -> None:
    request = ChatRequest((Message.user("hi"),), tools=(start_music,), tool_choice=choice)
    assert wire.request_body(request, {})["toolConfig"] == sent


def test_an_explicit_tool_config_option_wins_over_tool_choice() -> None:
    request = ChatRequest((Message.user("hi"),), tools=(start_music,), tool_choice="none")
    config = {"functionCallingConfig": {"mode": "AUTO"}}
    assert wire.request_body(request, {"toolConfig": config})["toolConfig"] == config
    assert "generationConfig" not in wire.request_body(REQUEST, {})


# -- answers --------------------------------------------------------------------------


def test_finish_reasons() -> None:
    assert wire.finish_reason("STOP", "x", False) == "stop"
    assert wire.finish_reason("STOP", "", True) == "tool_calls"
    assert wire.finish_reason("FUNCTION_CALL", "", True) == "tool_calls"  # aimock's word for it
    assert wire.finish_reason("MAX_TOKENS", "x", False) == "length"
    assert wire.finish_reason("OTHER", "x", False) == "other"
    assert wire.finish_reason(None, "", False) is None
    with pytest.raises(ProviderResponseError, match="finishReason as int 1; expected a string"):
        wire.finish_reason(1, "", False)
    with pytest.raises(ProviderResponseError) as caught:
        wire.finish_reason("MALFORMED_FUNCTION_CALL", "", False)
    assert str(caught.value) == (
        "Gemini ended the answer with finishReason 'MALFORMED_FUNCTION_CALL': the model produced a tool call "
        "it could not use."
    )
    for reason in sorted(wire.BLOCKED):
        with pytest.raises(ContentBlockedError) as blocked:
            wire.finish_reason(reason, "", False, [{"blocked": True}])
        assert (blocked.value.reason, blocked.value.details) == (reason, [{"blocked": True}])


def test_usage_counts_thoughts_as_completion_and_cached_content_as_cache_reads() -> None:
    data = {
        "promptTokenCount": 100,
        "toolUsePromptTokenCount": 5,
        "candidatesTokenCount": 10,
        "thoughtsTokenCount": 30,
        "cachedContentTokenCount": 60,
        "totalTokenCount": 145,
    }
    assert wire.parse_usage(data) == Usage(105, 40, 145, 60, 0)
    assert wire.parse_usage({"promptTokenCount": 3, "candidatesTokenCount": True}) == Usage(3, 0, 3)
    assert wire.parse_usage([]) is None


def test_malformed_responses() -> None:
    cases = [
        ([1], "Expected a JSON object from Gemini, got list: [1]."),
        ({"error": {"message": "quota"}}, 'The server reported an error inside a 200 response: "quota".'),
        ({"candidates": {}}, "The server sent candidates as dict {}; expected a list."),
        ({"candidates": []}, 'The response has no candidate with a finishReason: {"candidates": []}.'),
        (
            chunk([{"functionCall": {"args": {}}}], "STOP"),
            'The server sent a functionCall without a name or object args: {"args": {}}.',
        ),
        (chunk([{"functionCall": {"name": "f", "args": [1]}}], "STOP"), "without a name or object args"),
    ]
    for data, message in cases:
        with pytest.raises(ProviderResponseError) as caught:
            wire.parse_response(data)
        assert message in str(caught.value)


def test_thought_summaries_are_reasoning_not_answer_text() -> None:
    parts = [
        {"text": "**Planning** the answer", "thought": True},
        {"text": "Four."},
        {"text": "", "thoughtSignature": "SIGT"},
        "not a part",
    ]
    result = wire.parse_response(chunk(parts, "STOP", (3, 2)))
    assert result.text == "Four."
    assert result.message.reasoning == (
        Reasoning("gemini", "**Planning** the answer", {}),
        Reasoning("gemini", "", {"thoughtSignature": "SIGT"}),
    )
    assert result.usage == Usage(3, 2, 5)
    empty = wire.parse_response(chunk([], "STOP"))
    assert (empty.text, empty.message.content, empty.finish_reason) == ("", "", "stop")


def test_size_bounds() -> None:
    with pytest.raises(ResponseTooLargeError, match="arguments of tool call 'f'"):
        wire.parse_response(
            chunk([{"functionCall": {"name": "f", "args": {"a": "x" * 40}}}], "STOP"), max_argument_chars=20
        )
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=5"):
        wire.parse_response(chunk([{"text": "abcdef"}], "STOP"), max_answer_chars=5)


def test_a_stream_without_finish_reason_is_incomplete() -> None:
    stream = wire.StreamAccumulator(None)
    stream.feed(json.dumps(chunk([{"text": "The old"}])))
    assert not stream.done
    with pytest.raises(IncompleteStreamError) as caught:
        stream.result(chunks=1)
    assert str(caught.value) == (
        "The stream ended after 1 chunk(s) without finishReason; the answer is incomplete "
        "(7 characters of text received)."
    )


# -- captures -------------------------------------------------------------------------


async def test_capture_text() -> None:
    server = Server([capture("gemini_text.http")])
    async with model(server) as m:
        result = await m.complete(REQUEST)
    text = "Google's headquarters, also known as the Googleplex, is located in **Mountain View, California**.\n"
    assert result == ChatResponse(Message("assistant", text), "stop", Usage(7, 22, 29))
    (sent,) = server.requests
    assert str(sent.url) == "http://mock.test/v1beta/models/gemini-2.5-flash:generateContent"
    assert sent.headers["x-goog-api-key"] == KEY
    assert KEY not in str(sent.url)


@pytest.mark.parametrize("chunk_size", SPLITS)
async def test_capture_text_stream(chunk_size: int | None) -> None:
    server = Server([capture("gemini_text_stream.http", chunk_size)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == [
        "The",
        " old lighthouse keeper, Silas, had seen",
        " ten thousand storms — and one ship that never came home. ✓",
    ]
    assert result == ChatResponse(Message("assistant", "".join(tokens)), "stop", Usage(9, 552, 561, 4, 0))
    assert (
        str(server.requests[0].url) == "http://mock.test/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
    )
    assert server.requests[0].headers["accept"] == "text/event-stream"


async def test_capture_parallel_function_calls_round_trip_with_the_thought_signature() -> None:
    final = response(200, chunk([{"text": "Let's party!"}], "STOP", (300, 5)))
    server = Server([capture("gemini_parallel_function_calls.http"), final])
    async with model(server) as m:
        result = await Kernel(m, tools=[power_disco_ball, start_music, dim_lights]).run("Turn this place into a party!")
    assert result.text == "Let's party!"
    assert result.tool_calls_made == 3
    calls = result.messages[1].tool_calls
    assert [(c.name, dict(c.arguments)) for c in calls] == [
        ("power_disco_ball", {"power": True}),
        ("start_music", {"energetic": True, "loud": True}),
        ("dim_lights", {"brightness": 0.5}),
    ]
    assert result.messages[1].reasoning == (
        Reasoning(
            "gemini",
            "",
            {
                "thoughtSignature": "CiwBVKhc7sFJ8k2mTo5F8lXnPcdbhPrAYfx3VXqMsr1ZVbcWcbBi5fPq5QIKZgFUqFzu",
                "call": calls[0].id,
            },
        ),
    )
    second = server.bodies[1]["contents"]
    assert second[1]["role"] == "model"
    assert second[1]["parts"][0] == {
        "functionCall": {"id": calls[0].id, "name": "power_disco_ball", "args": {"power": True}},
        "thoughtSignature": "CiwBVKhc7sFJ8k2mTo5F8lXnPcdbhPrAYfx3VXqMsr1ZVbcWcbBi5fPq5QIKZgFUqFzu",
    }
    assert [p.get("thoughtSignature") for p in second[1]["parts"][1:]] == [None, None]
    assert second[2] == {
        "role": "user",
        "parts": [
            {
                "functionResponse": {
                    "id": calls[0].id,
                    "name": "power_disco_ball",
                    "response": {"result": "Disco ball is spinning!"},
                }
            },
            {
                "functionResponse": {
                    "id": calls[1].id,
                    "name": "start_music",
                    "response": {"result": "Never gonna give you up."},
                }
            },
            {
                "functionResponse": {
                    "id": calls[2].id,
                    "name": "dim_lights",
                    "response": {"result": "Lights are now set to 50%"},
                }
            },
        ],
    }


async def test_a_block_after_streamed_text_keeps_the_text() -> None:
    events = [event(chunk([{"text": "Here is how to "}])), event(chunk([], "SAFETY"))]
    server = Server([response(200, b"".join(events), headers={"content-type": "text/event-stream"})])
    tokens: list[str] = []
    async with model(server) as m:
        with pytest.raises(ContentBlockedError) as caught:
            await m.stream(REQUEST, tokens.append)
    assert tokens == ["Here is how to "]
    assert caught.value.text == "Here is how to "
    assert str(caught.value) == (
        "Gemini withheld the answer (finishReason 'SAFETY') after 15 characters of text; rephrase the request."
    )


async def test_capture_blocked_prompt() -> None:
    server = Server([capture("gemini_prompt_blocked.http")])
    async with model(server) as m:
        with pytest.raises(ContentBlockedError) as caught:
            await m.complete(REQUEST)
    assert str(caught.value) == "Gemini blocked the prompt (promptFeedback.blockReason 'SAFETY'); rephrase the request."
    assert caught.value.details["blockReason"] == "SAFETY"


async def test_capture_429_waits_for_retry_info(waits: list[float]) -> None:
    server = Server([capture("gemini_429.http")])
    async with model(server, max_retries=1) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(REQUEST)
    error = caught.value
    assert (error.status_code, error.error_type, error.code, error.retry_after) == (
        429,
        "RESOURCE_EXHAUSTED",
        "RESOURCE_EXHAUSTED",
        37.0,
    )
    assert error.message.startswith("You exceeded your current quota")
    assert waits == [37.0]


async def test_a_stream_error_sent_as_a_json_list_is_read(waits: list[float]) -> None:
    body = json.dumps([{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT"}}])
    server = Server([response(400, body)])
    async with model(server) as m:
        with pytest.raises(BadRequestError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert (caught.value.message, caught.value.code) == ("API key not valid.", "INVALID_ARGUMENT")
    for odd in (b"[1, 2]", b"[not json]"):
        server = Server([response(400, odd)])
        async with model(server) as m:
            with pytest.raises(BadRequestError):
                await m.complete(REQUEST)
    bad_delay = {"error": {"code": 503, "message": "busy", "details": [{"retryDelay": "soons"}, {"retryDelay": 3}]}}
    server = Server([response(503, bad_delay), response(200, chunk([{"text": "ok"}], "STOP"))])
    async with model(server) as m:
        assert (await m.complete(REQUEST)).text == "ok"
    assert 0.375 <= waits[-1] <= 0.5  # no usable RetryInfo: backoff


# -- the model ------------------------------------------------------------------------


async def test_the_key_is_never_in_the_url_a_log_or_an_error(
    caplog: pytest.LogCaptureFixture, waits: list[float]
) -> None:
    caplog.set_level(logging.DEBUG)
    server = Server([httpx.ConnectError("refused")])
    async with model(server, max_retries=1) as m:
        from beamfilter_core.errors import ProviderConnectionError

        with pytest.raises(ProviderConnectionError) as caught:
            await m.complete(REQUEST)
    seen = [
        str(caught.value),
        repr(m),
        *(r.getMessage() for r in caplog.records),
        *(str(r.url) for r in server.requests),
    ]
    assert any("retry 1/1" in line for line in seen)
    assert not [line for line in seen if KEY in line]


async def test_the_key_comes_from_gemini_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "AIza-env")
    server = Server([capture("gemini_text.http")])
    async with model(server, api_key=None) as m:
        await m.complete(REQUEST)
    assert server.requests[0].headers["x-goog-api-key"] == "AIza-env"
    monkeypatch.delenv("GEMINI_API_KEY")
    async with GeminiChatModel("models/gemini-2.5-pro") as m:
        with pytest.raises(ConfigError) as caught:
            await m.complete(REQUEST)
        assert m._plain_url == "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-pro:generateContent"
    assert str(caught.value) == (
        "GeminiChatModel(model='models/gemini-2.5-pro') talks to https://generativelanguage.googleapis.com without "
        "an API key; set GEMINI_API_KEY or pass api_key=."
    )
    keyless = Server([capture("gemini_text.http")])
    async with model(keyless, api_key=None, api_key_env="NO_SUCH_VARIABLE_SET") as m:
        await m.complete(REQUEST)  # a proxy or local server needs no key
    assert "x-goog-api-key" not in keyless.requests[0].headers


def test_a_model_name_cannot_break_out_of_the_path() -> None:
    m = GeminiChatModel("../../v1/secrets?x=1", api_key="k")
    assert (
        m._plain_url
        == "https://generativelanguage.googleapis.com/v1beta/models/..%2F..%2Fv1%2Fsecrets%3Fx%3D1:generateContent"
    )


def test_built_from_a_config_and_its_options_checked() -> None:
    model = Kernel.from_config(
        {"model": {"use": "gemini", "model": "gemini-2.5-flash", "api_key": "k", "timeout": 5}}
    ).model
    assert isinstance(model, GeminiChatModel)
    assert model.timeout == 5.0
    with pytest.raises(ConfigError, match="cache_control"):
        Kernel.from_config({"model": {"use": "gemini", "model": "gemini-2.5-flash", "cache_control": True}})


async def test_credentials_pasted_into_base_url_are_masked_in_reprs_and_errors(waits: list[float]) -> None:
    from beamfilter_core.errors import ProviderConnectionError

    server = Server([httpx.ConnectError("refused")])
    transport = httpx.MockTransport(server.handle)
    m = GeminiChatModel("g", base_url="https://u:pw-123@proxy.test/?key=AIzaPasted99", api_key="k", transport=transport)
    async with m:
        with pytest.raises(ProviderConnectionError) as caught:
            await m.complete(REQUEST)
    shown = repr(m) + str(caught.value)
    assert "pw-123" not in shown
    assert "AIzaPasted99" not in shown
    assert repr(m) == "GeminiChatModel(model='g', base_url='https://u:***@proxy.test/?key=***')"


@pytest.mark.parametrize("streaming", [False, True])
async def test_a_malformed_function_call_is_retried_like_any_broken_answer(streaming: bool, waits: list[float]) -> None:
    bad = chunk([], "MALFORMED_FUNCTION_CALL")
    good = chunk([{"text": "ok"}], "STOP")
    if streaming:
        answers = [response(200, event(x), headers={"content-type": "text/event-stream"}) for x in (bad, good)]
    else:
        answers = [response(200, bad), response(200, good)]
    server = Server(answers)
    async with model(server) as m:
        result = await (m.stream(REQUEST, lambda _: None) if streaming else m.complete(REQUEST))
    assert result.text == "ok"
    assert len(waits) == 1
