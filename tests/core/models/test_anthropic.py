"""AnthropicChatModel: the sans-IO wire on data, the recorded captures (shaped like the Messages
API reference's and the streaming guide's examples) replayed whole and cut anywhere, and the
model's own options (headers, max_tokens, cache_control, thinking carried into the next tool round)."""

from __future__ import annotations

import json
import re
from typing import Any

import httpx
import pytest
from core.models._mock import REQUEST, SPLITS, Server, pieces, response
from core.models._mock import replay as capture
from core.models._provider_captures import load
from core.models.test_contract_anthropic import end, event, start

from beamfilter_core import (
    AnthropicChatModel,
    ChatRequest,
    ChatResponse,
    ContentPart,
    Kernel,
    Message,
    Reasoning,
    ToolCall,
    Usage,
    tool,
)
from beamfilter_core._models import _anthropic_wire as wire
from beamfilter_core.errors import (
    ConfigError,
    ContentBlockedError,
    IncompleteStreamError,
    InternalServerError,
    ProviderResponseError,
    RateLimitError,
    ResponseTooLargeError,
)

pytestmark = pytest.mark.anyio


@tool
def get_weather(location: str, unit: str = "celsius") -> str:
    """Current weather in a place."""
    return "15 degrees, cloudy"


def model(server: Server, **options: Any) -> AnthropicChatModel:
    options.setdefault("api_key", "sk-ant-test")
    return AnthropicChatModel(
        "claude-test", base_url="http://mock.test", transport=httpx.MockTransport(server.handle), **options
    )


# -- the request ----------------------------------------------------------------------


def test_request_body_in_native_shapes() -> None:
    call = ToolCall("get_weather", {"location": "Paris"}, "toolu_1")
    bad = ToolCall.from_json("get_weather", '{"location": "Par', "toolu_2")
    image = ContentPart("image_url", url="data:image/png;base64,iVBORw0KGgo=")
    remote = ContentPart("image_url", url="https://example.com/cat.jpg")
    request = ChatRequest(
        (
            Message.system("Be terse."),
            Message("user", (ContentPart("text", "What is this?"), image, remote, ContentPart("text", ""))),
            Message.assistant("Let me look.", (call, bad)),
            Message.tool("toolu_1", "15 degrees"),
            Message.tool("toolu_2", "bad arguments"),
            Message.user("And now?"),
            Message.system("Answer in French."),
            Message.assistant(""),
        ),
        tools=(get_weather,),
        tool_choice="required",
        options={"temperature": 0.5, "messages": "ignored", "max_tokens": 99},
    )
    body = wire.request_body(request, "claude-test", {"top_k": 3, "stream": True}, max_tokens=4096, stream=False)
    assert body == {
        "model": "claude-test",
        "max_tokens": 99,
        "top_k": 3,
        "temperature": 0.5,
        "system": [{"type": "text", "text": "Be terse."}, {"type": "text", "text": "Answer in French."}],
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What is this?"},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                    {"type": "image", "source": {"type": "url", "url": "https://example.com/cat.jpg"}},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "get_weather", "input": {}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "15 degrees"},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "bad arguments"},
                    {"type": "text", "text": "And now?"},
                ],
            },
        ],
        "tools": [
            {
                "name": "get_weather",
                "input_schema": get_weather.parameters,
                "description": "Current weather in a place.",
            }
        ],
        "tool_choice": {"type": "any"},
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("get_weather", {"type": "tool", "name": "get_weather"}),
        ({"type": "function", "function": {"name": "get_weather"}}, {"type": "tool", "name": "get_weather"}),
        (
            {"type": "tool", "name": "x", "disable_parallel_tool_use": True},
            {"type": "tool", "name": "x", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_mapping(choice: Any, sent: Any) -> None:
    request = ChatRequest((Message.user("hi"),), tools=(get_weather,), tool_choice=choice)
    assert wire.request_body(request, "m", {}, max_tokens=1, stream=True)["tool_choice"] == sent


def test_cache_control_marks_the_system_prompt_and_the_last_tool() -> None:
    request = ChatRequest((Message.system("Long rules."), Message.user("hi")), tools=(get_weather,))
    body = wire.request_body(request, "m", {}, max_tokens=1, stream=True, cache_control=True)
    assert body["system"] == [{"type": "text", "text": "Long rules.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["stream"] is True
    hour = {"type": "ephemeral", "ttl": "1h"}
    one_call = request.replace(options={"cache_control": hour})
    body = wire.request_body(one_call, "m", {}, max_tokens=1, stream=False, cache_control=True)
    assert body["system"][0]["cache_control"] == hour
    assert "cache_control" not in body
    body = wire.request_body(request, "m", {"cache_control": True}, max_tokens=1, stream=False)
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}  # in the model's options too
    assert "cache_control" not in body
    off = request.replace(options={"cache_control": False})
    body = wire.request_body(off, "m", {}, max_tokens=1, stream=False, cache_control=True)
    assert "cache_control" not in body["system"][0]
    assert "cache_control" not in body["tools"][0]


def test_thinking_goes_back_first_and_only_to_anthropic() -> None:
    thinking = Reasoning("anthropic", "hmm", {"type": "thinking", "thinking": "hmm", "signature": "sig"})
    other = Reasoning("gemini", "", {"thoughtSignature": "x"})
    call = ToolCall("get_weather", {"location": "Paris"}, "toolu_1")
    message = Message("assistant", None, (call,), reasoning=(thinking, other))
    body = wire.request_body(ChatRequest((Message.user("hi"), message)), "m", {}, max_tokens=1, stream=False)
    assert body["messages"][1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"location": "Paris"}},
    ]


# -- answers --------------------------------------------------------------------------


def test_parse_message_refusal_and_malformed_shapes() -> None:
    refusal = {"content": [{"type": "text", "text": "I can"}], "stop_reason": "refusal"}
    with pytest.raises(ContentBlockedError) as caught:
        wire.parse_message(refusal)
    assert caught.value.reason == "refusal"
    assert caught.value.text == "I can"
    assert str(caught.value) == (
        "Anthropic's safety system stopped the answer (stop_reason 'refusal') after 5 characters of text; "
        "rephrase the request."
    )
    cases = [
        ([1], "Expected a JSON object from /v1/messages, got list: [1]."),
        (
            {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
            "The server reported an error inside a 200 response: overloaded_error: 'Overloaded'.",
        ),
        ({"content": "hi"}, 'The message has no content list: {"content": "hi"}.'),
        ({"content": ["hi"]}, 'The server sent content[0] as str "hi"; expected an object.'),
        (
            {"content": [{"type": "tool_use", "input": {}}]},
            'The server sent a tool_use block without a name or an object input: {"type": "tool_use", "input": {}}.',
        ),
        ({"content": [], "stop_reason": 3}, "The server sent stop_reason as int 3; expected a string."),
    ]
    for data, message in cases:
        with pytest.raises(ProviderResponseError) as failed:
            wire.parse_message(data)
        assert str(failed.value) == message
    assert wire.parse_message({"content": [], "stop_reason": "pause_turn"}).finish_reason == "pause_turn"
    assert wire.parse_message({"content": [{"type": "server_tool_use"}], "stop_reason": None}).finish_reason is None


def test_parse_message_size_bounds() -> None:
    data = {
        "content": [{"type": "tool_use", "id": "t", "name": "f", "input": {"a": "x" * 50}}],
        "stop_reason": "tool_use",
    }
    with pytest.raises(ResponseTooLargeError, match="arguments of tool call 'f'"):
        wire.parse_message(data, max_argument_chars=20)
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=20"):
        wire.parse_message(
            {"content": [{"type": "text", "text": "y" * 21}], "stop_reason": "end_turn"}, max_answer_chars=20
        )


def test_usage_counts_cached_input_as_prompt_tokens() -> None:
    usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 7}
    assert wire.parse_usage(usage) == Usage(117, 5, 122, 7, 100)
    assert wire.parse_usage({"input_tokens": True, "output_tokens": "5"}) == Usage(0, 0, 0)
    assert wire.parse_usage(None) is None


def test_stream_protocol_errors() -> None:
    cases = [
        ("[1]", "The stream sent an event that is not a JSON object: '[1]'."),
        ('{"type": "content_block_start", "index": 0}', "without a content_block"),
        ('{"type": "content_block_start", "index": "0", "content_block": {}}', "without an integer index"),
        ('{"type": "content_block_delta", "index": 4, "delta": {}}', "for no started block"),
        (
            '{"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}',
            "The server reported an error mid-stream: overloaded_error: 'Overloaded'.",
        ),
    ]
    for data, message in cases:
        with pytest.raises(ProviderResponseError, match=re.escape(message)):
            wire.StreamAccumulator(None).feed(data)
    started = wire.StreamAccumulator(None)
    started.feed(
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}}'
    )
    with pytest.raises(ProviderResponseError, match="input_json_delta without partial_json"):
        started.feed('{"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta"}}')
    with pytest.raises(ProviderResponseError, match="text_delta without text"):
        started.feed('{"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 1}}')
    whole = wire.StreamAccumulator(None, max_answer_chars=3)
    whole.feed(
        json.dumps({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "name": "f"}})
    )
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=3"):
        whole.feed(
            json.dumps(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": "{}{}"},
                }
            )
        )
    big = wire.StreamAccumulator(None, max_argument_chars=3)
    big.feed(
        '{"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "t", "name": "f"}}'
    )
    with pytest.raises(ResponseTooLargeError, match="tool call 'f'"):
        big.feed(
            json.dumps(
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"a": 1}'},
                }
            )
        )
    cut = wire.StreamAccumulator(None)
    cut.feed('{"type": "message_delta", "delta": {"stop_reason": "end_turn"}}')
    with pytest.raises(IncompleteStreamError) as caught:
        cut.result(chunks=1)
    assert str(caught.value) == (
        "The stream ended after 1 event(s) without message_stop; the answer is incomplete "
        "(0 characters of text received)."
    )


def test_a_streamed_refusal_is_a_content_blocked_error_with_the_text_so_far() -> None:
    tokens: list[str] = []
    stream = wire.StreamAccumulator(tokens.append)
    stream.feed(
        json.dumps({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "Sure, "}})
    )
    stream.feed(
        json.dumps({"type": "message_delta", "delta": {"stop_reason": "refusal"}, "usage": {"output_tokens": 2}})
    )
    stream.feed('{"type": "message_stop"}')
    with pytest.raises(ContentBlockedError) as caught:
        stream.result(chunks=3)
    assert (caught.value.reason, caught.value.text, tokens) == ("refusal", "Sure, ", ["Sure, "])


# -- captures -------------------------------------------------------------------------


async def test_capture_text_with_cache_usage() -> None:
    server = Server([capture("anthropic_text.http")])
    async with model(server) as m:
        result = await m.complete(REQUEST)
    assert result == ChatResponse(
        Message("assistant", "Hi! My name is Claude."), "stop", Usage(6197, 503, 6700, 2051, 2051)
    )


@pytest.mark.parametrize("chunk", SPLITS)
@pytest.mark.parametrize("crlf", [False, True])
async def test_capture_text_stream(chunk: int | None, crlf: bool) -> None:
    status, headers, body = load("anthropic_text_stream.http")
    body = body.replace(b"\n", b"\r\n") if crlf else body
    server = Server([lambda _: response(status, body, headers=headers, chunk=chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["Hello", "!"]
    assert result == ChatResponse(Message("assistant", "Hello!"), "stop", Usage(25, 15, 40))


@pytest.mark.parametrize("chunk", SPLITS)
async def test_capture_tool_use_stream(chunk: int | None) -> None:
    server = Server([capture("anthropic_tool_use_stream.http", chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert "".join(tokens) == "Okay, let's check the weather for San Francisco, CA:"
    assert len(tokens) == 13
    assert result == ChatResponse(
        Message(
            "assistant",
            "Okay, let's check the weather for San Francisco, CA:",
            (
                ToolCall(
                    "get_weather",
                    {"location": "San Francisco, CA"},
                    "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
                ),
            ),
        ),
        "tool_calls",
        Usage(472, 89, 561),
    )


@pytest.mark.parametrize("chunk", SPLITS)
async def test_capture_thinking_stream_keeps_the_block_and_its_signature(chunk: int | None) -> None:
    server = Server([capture("anthropic_thinking_stream.http", chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    thought = (
        "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n1071 = 2 \u00d7 462 + 147"
        "\n462 = 3 \u00d7 147 + 21\n147 = 7 \u00d7 21 + 0\nThe remainder is 0, so GCD(1071, 462) = 21."
    )
    answer = "The greatest common divisor of 1071 and 462 is **21**."
    assert tokens == [answer]  # thinking is not answer text
    signature = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds..."
    block = {"type": "thinking", "thinking": thought, "signature": signature}
    assert result.message.reasoning == (Reasoning("anthropic", thought, block),)
    # the documented stream reports no usage at all: none is made up
    assert (result.text, result.finish_reason, result.usage) == (answer, "stop", None)


async def test_thinking_and_redacted_thinking_are_carried_across_the_tool_round() -> None:
    server = Server(
        [
            capture("anthropic_thinking_tool_use.http"),
            response(200, {"content": [{"type": "text", "text": "15 degrees."}], "stop_reason": "end_turn"}),
        ]
    )
    async with model(server, options={"thinking": {"type": "enabled", "budget_tokens": 2048}}) as m:
        result = await Kernel(m, tools=[get_weather]).run("Weather in Paris?")
    assert result.text == "15 degrees."
    first, second = server.bodies
    assert first["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    _, _, body = load("anthropic_thinking_tool_use.http")
    sent = json.loads(body)["content"]
    assert second["messages"][1] == {"role": "assistant", "content": sent}  # verbatim, signatures included
    assert second["messages"][2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01CswdEQBMshySk6Y9DFKrfq", "content": "15 degrees, cloudy"}
        ],
    }


async def test_capture_529_overloaded_is_retried(waits: list[float]) -> None:
    server = Server([capture("anthropic_529_overloaded.http"), capture("anthropic_text.http")])
    async with model(server) as m:
        assert (await m.complete(REQUEST)).text == "Hi! My name is Claude."
    assert len(waits) == 1
    server = Server([capture("anthropic_529_overloaded.http")])
    async with model(server, max_retries=1) as m:
        with pytest.raises(InternalServerError) as caught:
            await m.stream(REQUEST, lambda _: None)
    error = caught.value
    assert (error.status_code, error.error_type, error.message) == (529, "overloaded_error", "Overloaded")
    assert len(server.requests) == 2


async def test_capture_429_honours_retry_after(waits: list[float]) -> None:
    server = Server([capture("anthropic_429.http")])
    async with model(server, max_retries=2) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.complete(REQUEST)
    assert caught.value.retry_after == 7.0
    assert caught.value.error_type == "rate_limit_error"
    assert waits == [7.0, 7.0]


async def test_an_error_event_mid_stream_before_text_is_retried(waits: list[float]) -> None:
    overloaded = event({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    good = [
        start((3, 1)),
        event({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "ok"}}),
        *end("end_turn", 1),
    ]
    stream = {"content-type": "text/event-stream"}
    server = Server(
        [response(200, start() + overloaded, headers=stream), response(200, b"".join(good), headers=stream)]
    )
    async with model(server) as m:
        result = await m.stream(REQUEST, lambda _: None)
    assert (result.text, result.usage) == ("ok", Usage(3, 1, 4))
    assert len(waits) == 1


# -- the model ------------------------------------------------------------------------


async def test_headers_url_max_tokens_and_cache_control() -> None:
    server = Server([capture("anthropic_text.http")])
    request = REQUEST.replace(messages=(Message.system("rules"), Message.user("hi")))
    async with model(server, max_tokens=512, cache_control={"type": "ephemeral", "ttl": "1h"}) as m:
        await m.complete(request)
        assert repr(m) == "AnthropicChatModel(model='claude-test', base_url='http://mock.test')"
    (sent,) = server.requests
    assert str(sent.url) == "http://mock.test/v1/messages"
    assert sent.headers["x-api-key"] == "sk-ant-test"
    assert sent.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in sent.headers
    assert server.bodies[0]["max_tokens"] == 512
    assert server.bodies[0]["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}


async def test_the_key_comes_from_anthropic_api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-env")
    server = Server([capture("anthropic_text.http")])
    async with model(server, api_key=None) as m:
        await m.complete(REQUEST)
    assert server.requests[0].headers["x-api-key"] == "sk-ant-env"
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    async with AnthropicChatModel("claude-test") as m:
        with pytest.raises(ConfigError) as caught:
            await m.complete(REQUEST)
    assert str(caught.value) == (
        "AnthropicChatModel(model='claude-test') talks to https://api.anthropic.com without an API key; "
        "set ANTHROPIC_API_KEY or pass api_key=."
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_tokens": 0}, "AnthropicChatModel(max_tokens=0) must be an integer >= 1 (default 4096)."),
        ({"max_tokens": True}, "AnthropicChatModel(max_tokens=True) must be an integer >= 1 (default 4096)."),
        ({"cache_control": "yes"}, "AnthropicChatModel(cache_control='yes') must be true, false or a block such as"),
        ({"model": ""}, "AnthropicChatModel(model='') needs a model name."),
        (
            {"base_url": "ftp://x"},
            "AnthropicChatModel(base_url='ftp://x') must be an http(s) URL such as 'https://api.anthropic.com'.",
        ),
        ({"timeout": 0}, "AnthropicChatModel(timeout=0) must be a positive number of seconds (not nan or inf)."),
        ({"deadline": float("inf")}, "AnthropicChatModel(deadline=inf) must be a positive number of seconds"),
        ({"max_retries": -1}, "AnthropicChatModel(max_retries=-1) must be an integer >= 0 (default 2)."),
        ({"max_event_chars": 0}, "AnthropicChatModel(max_event_chars=0) must be an integer >= 1."),
        ({"options": [1]}, "AnthropicChatModel(options=[1]) must be a mapping of extra body fields."),
        (
            {"api_key_env": "sk-ant-secret-value"},
            "AnthropicChatModel(api_key_env=...) must name an environment variable",
        ),
        (
            {"client": httpx.AsyncClient(), "transport": httpx.MockTransport(lambda r: httpx.Response(200))},
            "AnthropicChatModel takes client= or transport=, not both",
        ),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], message: str) -> None:
    options = {"model": "claude-test", **options}
    with pytest.raises(ConfigError) as caught:
        AnthropicChatModel(**options)
    assert str(caught.value).startswith(message)
    assert "sk-ant-secret-value" not in str(caught.value)


async def test_an_owned_client_is_closed_and_an_injected_one_is_not() -> None:
    server = Server([capture("anthropic_text.http")])
    async with httpx.AsyncClient(transport=httpx.MockTransport(server.handle)) as client:
        m = AnthropicChatModel("claude-test", api_key="k", base_url="http://mock.test", client=client)
        await m.complete(REQUEST)
        await m.aclose()
        assert not client.is_closed
    m = model(server)
    await m.complete(REQUEST)
    await m.aclose()
    assert m._client is None
    await m.aclose()


async def test_transport_failures_are_typed(waits: list[float]) -> None:
    from beamfilter_core.errors import ProviderConnectionError, ProviderTimeoutError

    server = Server([httpx.ConnectError("refused")])
    async with model(server, max_retries=0) as m:
        with pytest.raises(
            ProviderConnectionError, match=r"Cannot reach http://mock.test/v1/messages: ConnectError: refused"
        ):
            await m.complete(REQUEST)
    server = Server([httpx.ReadTimeout("slow")])
    async with model(server, max_retries=0, timeout=2) as m:
        with pytest.raises(
            ProviderTimeoutError, match=r"no answer from http://mock.test/v1/messages within timeout=2 s"
        ):
            await m.complete(REQUEST)
    stream = {"content-type": "text/event-stream"}
    dropped = response(200, start(), headers=stream, then_raise=httpx.ReadError("reset"))
    server = Server([dropped])
    async with model(server, max_retries=0) as m:
        with pytest.raises(IncompleteStreamError, match=r"dropped after 1 stream chunk\(s\): reset"):
            await m.stream(REQUEST, lambda _: None)
    slow = response(200, start(), headers=stream, then_raise=httpx.ReadTimeout("stalled"))
    async with model(Server([slow]), max_retries=0) as m:
        with pytest.raises(ProviderTimeoutError, match=r"no data from .* after 1 stream chunk\(s\)"):
            await m.stream(REQUEST, lambda _: None)
    async with model(Server([response(200, b"", headers={"content-type": "application/json"})]), max_retries=0) as m:
        with pytest.raises(IncompleteStreamError, match="answered 200 to a stream request with an empty body"):
            await m.stream(REQUEST, lambda _: None)


async def test_the_deadline_bounds_the_whole_call(waits: list[float]) -> None:
    import asyncio

    from beamfilter_core.errors import ProviderTimeoutError

    async def slow(_: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        return httpx.Response(200)  # pragma: no cover - cut by the deadline

    m = AnthropicChatModel(
        "c", api_key="k", base_url="http://mock.test", transport=httpx.MockTransport(slow), deadline=0.05
    )
    async with m:
        with pytest.raises(ProviderTimeoutError) as caught:
            await m.complete(REQUEST)
    assert str(caught.value) == (
        "The call to http://mock.test/v1/messages took longer than deadline=0.05 s (retries and waits included); "
        "raise deadline= if such answers are expected."
    )


async def test_a_huge_body_and_a_huge_event_are_refused(waits: list[float]) -> None:
    server = Server([lambda _: response(200, b"x" * 200_000)])
    async with model(server, max_answer_chars=10) as m:
        with pytest.raises(ResponseTooLargeError, match="answered with a body longer than max_answer_chars=10"):
            await m.complete(REQUEST)
    assert len(server.requests) == 1  # never retried
    line = b"data: " + b"x" * 100 + b"\n\n"
    server = Server([lambda _: response(200, line, headers={"content-type": "text/event-stream"}, chunk=10)])
    async with model(server, max_event_chars=50) as m:
        with pytest.raises(ResponseTooLargeError, match="max_event_chars=50"):
            await m.stream(REQUEST, lambda _: None)


def test_pieces_helper_is_shared() -> None:
    assert pieces(b"abc", 2) == [b"ab", b"c"]


def test_a_stream_with_every_kind_of_block_and_event() -> None:
    stream = wire.StreamAccumulator(None)
    for item in (
        {"type": "message_start", "message": {"id": "msg_1"}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "redacted_thinking", "data": "EmwK"}},
        {"type": "content_block_stop", "index": 0},
        {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": ""}},
        {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "Cited."}},
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "citations_delta", "citation": {"cited_text": "x"}},
        },
        {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 3, "input_tokens": None}},
        {"type": "message_delta", "delta": {"stop_reason": "stop_sequence"}},
        {"type": "message_stop"},
    ):
        stream.feed(json.dumps(item))
    result = stream.result(chunks=10)
    assert result == ChatResponse(
        Message(
            "assistant",
            "Cited.",
            reasoning=(Reasoning("anthropic", "", {"type": "redacted_thinking", "data": "EmwK"}),),
        ),
        "stop",
        Usage(0, 3, 3),
    )
    assert not stream.delivered
    big = wire.StreamAccumulator(None, max_answer_chars=3)
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=3"):
        big.feed(
            json.dumps({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": "abcd"}})
        )


def test_edge_shapes_of_the_request() -> None:
    assert wire.data_url("data:text/plain,hello") is None
    assert wire.data_url("data:;base64,AAAA") == ("application/octet-stream", "AAAA")
    from beamfilter_core import Tool

    bare = Tool.declaration("ping", "", {})
    request = ChatRequest((Message.system(""), Message.user("hi")), tools=(bare,))
    body = wire.request_body(request, "m", {}, max_tokens=1, stream=False)
    assert "system" not in body
    assert body["tools"] == [{"name": "ping", "input_schema": {"type": "object", "properties": {}}}]


async def test_streams_without_a_deadline_with_empty_events_and_lone_surrogates() -> None:
    status, headers, body = load("anthropic_text_stream.http")
    server = Server([lambda _: response(status, b"event: ping\n\n" + body, headers=headers)])
    async with model(server, deadline=None) as m:
        result = await m.stream(ChatRequest((Message.user("bad \udcff byte"),)), lambda _: None)
    assert result.text == "Hello!"
    assert server.bodies[0]["messages"][0]["content"] == [{"type": "text", "text": "bad \ufffd byte"}]


async def test_a_streamed_answer_over_its_bound_is_not_retried(waits: list[float]) -> None:
    server = Server([capture("anthropic_tool_use_stream.http")])
    async with model(server, max_answer_chars=10) as m:
        with pytest.raises(ResponseTooLargeError):
            await m.stream(REQUEST, lambda _: None)
        server.answers = [capture("anthropic_thinking_tool_use.http")]
        with pytest.raises(ResponseTooLargeError):
            await m.complete(REQUEST)
    assert waits == []


def test_built_from_a_config_with_cache_control_and_its_options_checked() -> None:
    config = {
        "model": {"use": "anthropic", "model": "claude-test", "api_key": "k", "cache_control": {"type": "ephemeral"}}
    }
    model = Kernel.from_config(config).model
    assert isinstance(model, AnthropicChatModel)
    assert (model.cache_control, model.max_tokens) == ({"type": "ephemeral"}, 4096)
    with pytest.raises(ConfigError, match="max_tokens"):
        Kernel.from_config({"model": {"use": "anthropic", "model": "claude-test", "max_tokens": 0}})
    for unknown in ("api_version", "api"):  # the openai provider's own options are not taken
        with pytest.raises(ConfigError, match=unknown):
            Kernel.from_config({"model": {"use": "anthropic", "model": "claude-test", unknown: "chat"}})
