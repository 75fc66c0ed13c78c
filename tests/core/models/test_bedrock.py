"""BedrockChatModel: the Converse wire on data and on captures shaped like the Bedrock API
reference's examples, SigV4 checked by an independent implementation of the algorithm,
the credential chain (environment, profiles), ConverseStream's binary frames split
anywhere, stream exceptions, retries and errors."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from core.models._mock import Server, pieces, response
from core.models._mock import captured as capture
from core.models._provider_captures import converse_stream, event_frame, eventstream_frame, exception_frame

from beamfilter_core import BedrockChatModel, ChatRequest, ContentPart, Kernel, Message, Registry, ToolCall, Usage, tool
from beamfilter_core._messages import Reasoning
from beamfilter_core._models import _bedrock_wire as wire
from beamfilter_core.errors import (
    BadRequestError,
    ConfigError,
    IncompleteStreamError,
    InternalServerError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
    ResponseTooLargeError,
)
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio

MODEL_ID = "anthropic.claude-3-5-haiku-20241022-v1:0"
EVENTS = {"content-type": "application/vnd.amazon.eventstream"}
SPLITS = [None, 1, 7, 100]
AKID, SECRET, SESSION = "AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY", "FQoGZXIvYXdzEXAMPLETOKEN"


@tool
def top_song(sign: str) -> str:
    """The most popular song on a radio station."""
    return "Elemental Hotel by 8 Storey Hike"


@pytest.fixture(autouse=True)
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Static credentials in the environment; no config files, no instance metadata service."""
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(name, raising=False)
    for name in ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET)
    monkeypatch.setenv("AWS_SESSION_TOKEN", SESSION)
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return tmp_path


def model(server: Server, **options: Any) -> BedrockChatModel:
    return BedrockChatModel(MODEL_ID, transport=httpx.MockTransport(server.handle), **options)


def stream_of(body: bytes, chunk: int | None = None) -> httpx.Response:
    return response(200, body, headers=EVENTS, chunk=chunk)


REQUEST = ChatRequest((Message.system("Be brief."), Message.user("top song on WZPZ?")))


# -- SigV4, checked against the algorithm as AWS documents it ------------------------------


def _sign(key: bytes, text: str) -> bytes:
    return hmac.new(key, text.encode(), hashlib.sha256).digest()


def expected_authorization(request: httpx.Request, secret: str, region: str) -> str:
    """The Authorization header for ``request``, computed from scratch (no botocore)."""
    amz_date = request.headers["x-amz-date"]
    authorization = request.headers["authorization"]
    signed = authorization.split("SignedHeaders=")[1].split(",")[0].split(";")
    path = quote(request.url.raw_path.decode().split("?")[0], safe="/~")  # each segment encoded twice
    canonical = "\n".join(
        [
            "POST",
            path,
            "",
            "".join(f"{name}:{request.headers[name].strip()}\n" for name in signed),
            ";".join(signed),
            hashlib.sha256(request.content).hexdigest(),
        ]
    )
    scope = f"{amz_date[:8]}/{region}/bedrock/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    key = _sign(_sign(_sign(_sign(f"AWS4{secret}".encode(), amz_date[:8]), region), "bedrock"), "aws4_request")
    signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
    return f"AWS4-HMAC-SHA256 Credential={AKID}/{scope}, SignedHeaders={';'.join(signed)}, Signature={signature}"


async def test_sigv4_signature_path_and_body() -> None:
    server = Server([capture("bedrock_converse_text.http")])
    async with model(server) as m:
        await m.complete(REQUEST)
    (sent,) = server.requests
    assert str(sent.url) == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    )
    assert sent.headers["x-amz-security-token"] == SESSION
    assert "host" in sent.headers["authorization"].split("SignedHeaders=")[1]
    assert sent.headers["authorization"] == expected_authorization(sent, SECRET, "us-east-1")
    assert SECRET not in str(sent.headers)


async def test_credentials_from_a_profile_and_a_bearer_key(aws_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION"):
        monkeypatch.delenv(name)
    (aws_env / "credentials").write_text(f"[work]\naws_access_key_id = {AKID}\naws_secret_access_key = other-secret\n")
    (aws_env / "config").write_text("[profile work]\nregion = eu-west-3\n")
    server = Server([lambda _: capture("bedrock_converse_text.http")])
    async with model(server, profile="work") as m:
        assert m.region == "eu-west-3"
        await m.complete(REQUEST)
    sent = server.requests[0]
    assert sent.url.host == "bedrock-runtime.eu-west-3.amazonaws.com"
    assert sent.headers["authorization"] == expected_authorization(sent, "other-secret", "eu-west-3")
    assert "x-amz-security-token" not in sent.headers
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", "bedrock-api-key-ABSK0123456789")
    async with model(server, region="us-west-2") as m:
        await m.complete(REQUEST)
    assert server.requests[1].headers["authorization"] == "Bearer bedrock-api-key-ABSK0123456789"
    assert "x-amz-date" not in server.requests[1].headers


async def test_missing_credentials_and_region_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name)
    server = Server([capture("bedrock_converse_text.http")])
    async with model(server) as m:
        with pytest.raises(ConfigError) as caught:
            await m.complete(REQUEST)
    assert str(caught.value) == (
        f"BedrockChatModel(model={MODEL_ID!r}) found no AWS credentials: set AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY, AWS_PROFILE (aws configure / aws sso login), run with an instance or task role, "
        "or pass api_key= (a Bedrock API key; $AWS_BEARER_TOKEN_BEDROCK)."
    )
    assert server.requests == []
    monkeypatch.delenv("AWS_REGION")
    with pytest.raises(ConfigError) as caught:
        BedrockChatModel(MODEL_ID)
    assert str(caught.value) == (
        f"BedrockChatModel(model={MODEL_ID!r}) needs a region: pass region= or set AWS_REGION "
        "(or a region in the AWS profile)."
    )


# -- requests ---------------------------------------------------------------------------

PNG = "iVBORw0KGgo="


def test_request_body_native_shapes() -> None:
    thought = {"reasoningContent": {"reasoningText": {"text": "look it up", "signature": "sig"}}}
    messages = (
        Message.system("Be brief."),
        Message(
            "user", (ContentPart("text", "this station:"), ContentPart("image_url", url=f"data:image/png;base64,{PNG}"))
        ),
        Message.user("and WZPZ?"),
        Message(
            "assistant",
            "Looking.",
            (ToolCall("top_song", {"sign": "WZPZ"}, "t1"), ToolCall("top_song", {"sign": "WKRP"}, "t2")),
            reasoning=(
                Reasoning("bedrock.converse", "look it up", thought),
                Reasoning("openai.responses", "x", {"a": 1}),
            ),
        ),
        Message.tool("t1", "Elemental Hotel"),
        Message.tool("t2", "Venus"),
        Message.system("Answer in one line."),
        Message.user(""),
        Message("assistant", None),
    )
    options = {"max_tokens": 512, "stop": "END", "inferenceConfig": {"topP": 0.9}, "messages": "ignored"}
    request = ChatRequest(messages, tools=(top_song,), tool_choice="required", options={"temperature": 0.2})
    body = wire.request_body(request, options)
    assert body == {
        "inferenceConfig": {"maxTokens": 512, "stopSequences": ["END"], "topP": 0.9, "temperature": 0.2},
        "messages": [
            {
                "role": "user",
                "content": [
                    {"text": "this station:"},
                    {"image": {"format": "png", "source": {"bytes": PNG}}},
                    {"text": "and WZPZ?"},
                ],
            },
            {
                "role": "assistant",
                "content": [
                    thought,
                    {"text": "Looking."},
                    {"toolUse": {"toolUseId": "t1", "name": "top_song", "input": {"sign": "WZPZ"}}},
                    {"toolUse": {"toolUseId": "t2", "name": "top_song", "input": {"sign": "WKRP"}}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"toolResult": {"toolUseId": "t1", "content": [{"text": "Elemental Hotel"}]}},
                    {"toolResult": {"toolUseId": "t2", "content": [{"text": "Venus"}]}},
                ],
            },
        ],
        "system": [{"text": "Be brief."}, {"text": "Answer in one line."}],
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "top_song",
                        "inputSchema": {"json": top_song.definition["function"]["parameters"]},
                        "description": "The most popular song on a radio station.",
                    }
                }
            ],
            "toolChoice": {"any": {}},
        },
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"auto": {}}),
        ("none", None),
        ({"type": "function", "function": {"name": "top_song"}}, {"tool": {"name": "top_song"}}),
        ({"tool": {"name": "x"}}, {"tool": {"name": "x"}}),
    ],
)
def test_tool_choices(choice: Any, sent: Any) -> None:
    body = wire.request_body(ChatRequest((Message.user("hi"),), tools=(top_song,), tool_choice=choice), {})
    assert body["toolConfig"].get("toolChoice") == sent


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "https://x.test/a.png",
            "Bedrock Converse takes images as bytes: ContentPart(image_url='https://x.test/a.png') must be a "
            "base64 data: URL of a png, jpeg, gif or webp image.",
        ),
        (
            "data:image/png;base64,%%%",
            "ContentPart(image_url='data:image/png;base64,%%%') is not valid base64 after 'base64,'.",
        ),
    ],
)
def test_images_must_be_inline(url: str, message: str) -> None:
    request = ChatRequest((Message("user", (ContentPart("image_url", url=url),)),))
    with pytest.raises(ConfigError) as caught:
        wire.request_body(request, {})
    assert str(caught.value) == message


# -- answers ----------------------------------------------------------------------------


async def test_text_answer_with_cache_usage() -> None:
    server = Server([capture("bedrock_converse_text.http")])
    async with model(server, options={"max_tokens": 256}) as m:
        result = await m.complete(REQUEST)
    assert result.text == "The most popular song on WZPZ is Elemental Hotel by 8 Storey Hike."
    assert (result.finish_reason, result.usage) == ("stop", Usage(1845, 18, 1863, 1824, 0))
    assert server.bodies == [
        {
            "inferenceConfig": {"maxTokens": 256},
            "messages": [{"role": "user", "content": [{"text": "top song on WZPZ?"}]}],
            "system": [{"text": "Be brief."}],
        }
    ]
    assert server.requests[0].headers["accept"] == "application/json"


async def test_a_tool_round_in_native_shapes() -> None:
    done = {
        "output": {"message": {"role": "assistant", "content": [{"text": "It is Elemental Hotel."}]}},
        "stopReason": "end_turn",
    }
    server = Server([capture("bedrock_converse_tool_use.http"), response(200, done)])
    async with model(server) as m:
        result = await Kernel(m, tools=[top_song], system_prompt="Be brief.").run("top song on WZPZ?")
    assert result.text == "It is Elemental Hotel."
    asked = result.messages[1]
    assert asked.text == "I'll look up the most popular song on WZPZ for you."
    assert asked.tool_calls == (ToolCall("top_song", {"sign": "WZPZ"}, "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q"),)
    assert server.bodies[1]["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"text": "I'll look up the most popular song on WZPZ for you."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                        "name": "top_song",
                        "input": {"sign": "WZPZ"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "toolResult": {
                        "toolUseId": "tooluse_kZJMlvQmRJ6eAyJE5GIl7Q",
                        "content": [{"text": "Elemental Hotel by 8 Storey Hike"}],
                    }
                }
            ],
        },
    ]


def converse(*content: Any, stop: Any = "end_turn", **extra: Any) -> dict[str, Any]:
    return {"output": {"message": {"role": "assistant", "content": list(content)}}, "stopReason": stop, **extra}


@pytest.mark.parametrize(
    ("stop", "finish"),
    [
        ("max_tokens", "length"),
        ("stop_sequence", "stop"),
        ("guardrail_intervened", "content_filter"),
        ("content_filtered", "content_filter"),
        ("model_context_window_exceeded", "length"),
        ("something_new", "something_new"),
    ],
)
def test_stop_reasons(stop: str, finish: str) -> None:
    assert wire.parse_converse(converse({"text": "x"}, stop=stop)).finish_reason == finish


def test_reasoning_blocks_are_kept_and_sent_back() -> None:
    block = {"reasoningContent": {"reasoningText": {"text": "think", "signature": "s1"}}}
    hidden = {"reasoningContent": {"redactedContent": "b64"}}
    result = wire.parse_converse(converse(block, hidden, {"text": "ok"}))
    assert result.message.reasoning == (
        Reasoning("bedrock.converse", "think", block),
        Reasoning("bedrock.converse", "", hidden),
    )
    body = wire.request_body(ChatRequest((Message.user("q"), result.message)), {})
    assert body["messages"][1]["content"] == [block, hidden, {"text": "ok"}]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "Expected a Converse answer with output.message.content, got {}."),
        (converse("x"), 'The server sent output.message.content[0] as str "x"; expected a JSON object.'),
        (converse({"text": 1}), "The server sent output.message.content[0].text as int 1; expected a string."),
        (
            converse({"toolUse": {"name": "f"}}),
            'The server sent output.message.content[0].toolUse as dict {"name": "f"}; '
            "expected an object with a name and a toolUseId.",
        ),
        (converse({"text": "x"}, stop=None), "The server sent stopReason as NoneType null; expected a string."),
    ],
)
def test_malformed_answers(data: Any, message: str) -> None:
    with pytest.raises(ProviderResponseError) as caught:
        wire.parse_converse(data)
    assert str(caught.value) == message


def test_answer_bounds() -> None:
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=3"):
        wire.parse_converse(converse({"text": "abcd"}), max_answer_chars=3)
    use = {"toolUse": {"toolUseId": "t", "name": "f", "input": {"a": "bcdef"}}}
    with pytest.raises(ResponseTooLargeError, match="tool call 'f' are longer than max_argument_chars=5"):
        wire.parse_converse(converse(use), max_argument_chars=5)


# -- streams ------------------------------------------------------------------------------


TEXT_STREAM_ANSWER = (
    "Hello! As an AI language model, I don't have feelings, but I'm functioning well and ready to assist you."
    " How can I help you today?"
)


@pytest.mark.parametrize("chunk", SPLITS)
async def test_text_stream_capture(chunk: int | None) -> None:
    server = Server([stream_of(converse_stream("bedrock_converse_stream_text.events.json"), chunk)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens[:3] == ["Hello", "! As", " an AI"]
    assert len(tokens) == 12
    assert result.text == "".join(tokens) == TEXT_STREAM_ANSWER
    assert (result.finish_reason, result.usage) == ("stop", Usage(13, 35, 48))
    (sent,) = server.requests
    assert sent.url.raw_path == b"/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/converse-stream"
    assert sent.headers["accept"] == "application/vnd.amazon.eventstream"


@pytest.mark.parametrize("chunk", SPLITS)
async def test_tool_use_stream_capture(chunk: int | None) -> None:
    server = Server([stream_of(converse_stream("bedrock_converse_stream_tool_use.events.json"), chunk)])
    async with model(server) as m:
        result = await m.stream(REQUEST, lambda _: None)
    assert result.text == (
        "I can certainly help you with the weather in San Francisco, but I'm afraid I don't have a specific tool"
        " to check the current time there. Let me get the weather information for you."
    )
    arguments = {"location": "San Francisco, CA", "unit": "fahrenheit"}
    assert result.message.tool_calls == (ToolCall("get_weather", arguments, "tooluse_wnjikhCUTruJciycmmm5Kg"),)
    assert (result.finish_reason, result.usage) == ("tool_calls", Usage(414, 114, 528))


async def test_reasoning_stream_keeps_text_and_signature() -> None:
    server = Server([stream_of(converse_stream("bedrock_converse_stream_reasoning.events.json"), 5)])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == ["27 \u00d7 453 = 12,231."]
    said = {
        "text": "The user asks for 27 * 453.  27 * 453 = 12231.",
        "signature": "ErUBCkYIBRgCIkCjOqT8yZ1W2q3e4r5t6y7u8i9o0pASdFgHjKl",
    }
    assert result.message.reasoning == (
        Reasoning("bedrock.converse", said["text"], {"reasoningContent": {"reasoningText": said}}),
    )
    assert result.usage == Usage(45, 98, 143)


async def test_kernel_stream_joins_to_the_turn_text() -> None:
    server = Server([stream_of(converse_stream("bedrock_converse_stream_text.events.json"), 3)])
    async with model(server) as m:
        result, streamed = await run_turn(Kernel(m), "hi", stream=True)
    assert streamed == result.text == TEXT_STREAM_ANSWER


START = event_frame("messageStart", {"role": "assistant"})
STOP = event_frame("messageStop", {"stopReason": "end_turn"}) + event_frame("metadata", {"usage": {}})


def text_frame(text: str, index: int = 0) -> bytes:
    return event_frame("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": text}})


async def test_throttling_in_the_stream_is_retried_before_text_and_raised_after(waits: list[float]) -> None:
    throttled = START + exception_frame("throttlingException", "Too many tokens, please wait before trying again.")
    server = Server([stream_of(throttled), stream_of(START + text_frame("ok") + STOP)])
    async with model(server) as m:
        assert (await m.stream(REQUEST, lambda _: None)).text == "ok"
        assert len(waits) == 1
        server.answers = [stream_of(START + text_frame("half") + exception_frame("throttlingException", "slow down"))]
        server.requests.clear()
        tokens: list[str] = []
        with pytest.raises(RateLimitError) as caught:
            await m.stream(REQUEST, tokens.append)
    assert (tokens, len(server.requests)) == (["half"], 1)
    assert (caught.value.status_code, caught.value.error_type, caught.value.message) == (
        429,
        "throttlingException",
        "slow down",
    )


@pytest.mark.parametrize(
    ("frame", "error", "text"),
    [
        (
            exception_frame("validationException", "Malformed input request."),
            BadRequestError,
            "HTTP 400: Malformed input request.",
        ),
        (
            eventstream_frame({":message-type": "exception", ":exception-type": "modelStreamErrorException"}, b"oops"),
            InternalServerError,
            "HTTP 424: oops",
        ),
    ],
)
async def test_exceptions_that_are_not_retried(
    frame: bytes, error: type[Exception], text: str, waits: list[float]
) -> None:
    server = Server([lambda _: stream_of(START + frame)])
    async with model(server) as m:
        with pytest.raises(error) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value) == text
    assert (len(server.requests), waits) == (1, [])


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            START,
            "The event stream ended after 1 event(s) without messageStop; the answer is incomplete "
            "(0 characters of text received).",
        ),
        (b"", "The server answered 200 but the event stream was empty."),
        (START + text_frame("x")[:-3], "The event stream ended inside a frame (144 bytes of it received)."),
        (
            START[:-1] + bytes([START[-1] ^ 1]),
            f"The event stream sent a broken frame at byte 0: the message checksum does not match "
            f"(expected 0x{START[-1] ^ 1 | int.from_bytes(START[-4:-1], 'big') << 8:08x}, "
            f"computed 0x{int.from_bytes(START[-4:], 'big'):08x}).",
        ),
        (
            eventstream_frame(
                {":message-type": "error", ":error-code": "InternalFailure", ":error-message": "boom"}, b""
            ),
            "The event stream reported InternalFailure: boom.",
        ),
        (
            event_frame("contentBlockDelta", [1]),
            "The server sent contentBlockDelta as list [1]; expected a JSON object.",
        ),
        (
            eventstream_frame({":message-type": "event", ":event-type": "metadata"}, b"{no"),
            "The stream sent a metadata event that is not valid JSON: '{no'.",
        ),
    ],
)
async def test_broken_streams_are_retried_then_raised(body: bytes, message: str, waits: list[float]) -> None:
    server = Server([lambda _: stream_of(body)])
    async with model(server, max_retries=1) as m:
        with pytest.raises(ProviderResponseError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value).startswith(message)
    assert (len(server.requests), len(waits)) == (2, 1)


@pytest.mark.parametrize(
    ("events", "message"),
    [
        (
            [("contentBlockDelta", {"delta": None})],
            "The server sent contentBlockDelta.delta as NoneType null; expected a JSON object.",
        ),
        (
            [("contentBlockDelta", {"delta": {"text": 5}})],
            "The server sent contentBlockDelta.delta.text as int 5; expected a string.",
        ),
        (
            [("contentBlockDelta", {"contentBlockIndex": "0", "delta": {"toolUse": {"input": "{"}}})],
            'The server sent contentBlockDelta.contentBlockIndex as str "0"; expected an integer.',
        ),
        (
            [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "{"}}})],
            'The server sent contentBlockDelta.delta.toolUse as dict {"input": "{"}; '
            "expected input text for a started toolUse block.",
        ),
        ([("messageStop", {"stopReason": 1})], "The server sent messageStop.stopReason as int 1; expected a string."),
    ],
)
def test_malformed_stream_events(events: list[tuple[str, Any]], message: str) -> None:
    accumulator = wire.ConverseStreamAccumulator(None)
    (kind, payload), *_ = events
    with pytest.raises(ProviderResponseError) as caught:
        accumulator.feed(kind, json.dumps(payload).encode())
    assert str(caught.value) == message


def test_stream_bounds_and_unknown_blocks() -> None:
    accumulator = wire.ConverseStreamAccumulator(None, max_answer_chars=3, max_argument_chars=2)
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=3"):
        accumulator.feed("contentBlockDelta", b'{"delta": {"text": "abcd"}}')
    start = {"contentBlockIndex": 1, "start": {"toolUse": {"toolUseId": "t", "name": "f"}}}
    accumulator.feed("contentBlockStart", json.dumps(start).encode())
    accumulator.feed("contentBlockStart", b'{"contentBlockIndex": 2, "start": {"image": {}}}')
    accumulator.feed("contentBlockDelta", b'{"contentBlockIndex": 3, "delta": {"citation": {}}}')
    accumulator.feed("contentBlockDelta", b'{"contentBlockIndex": 4, "delta": {"reasoningContent": "odd"}}')
    with pytest.raises(ResponseTooLargeError, match="tool call 'f' are longer than max_argument_chars=2"):
        accumulator.feed("contentBlockDelta", b'{"contentBlockIndex": 1, "delta": {"toolUse": {"input": "abc"}}}')


async def test_http_errors_are_typed_and_throttling_is_retried(waits: list[float]) -> None:
    server = Server([capture("bedrock_throttling_429.http"), capture("bedrock_converse_text.http")])
    async with model(server) as m:
        assert (await m.complete(REQUEST)).text.startswith("The most popular song")
        assert len(waits) == 1
        assert 0.375 <= waits[0] <= 0.5
        server.answers = [lambda _: capture("bedrock_validation_400.http")]
        server.requests.clear()
        with pytest.raises(BadRequestError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert caught.value.message == (
        "A conversation must start with a user message. Try again with a conversation that starts with a user message."
    )
    assert (caught.value.error_type, len(server.requests)) == ("ValidationException", 1)


async def test_a_stream_answered_in_one_piece_or_with_html() -> None:
    server = Server([capture("bedrock_converse_text.http")])
    tokens: list[str] = []
    async with model(server) as m:
        result = await m.stream(REQUEST, tokens.append)
    assert tokens == [result.text]
    server = Server([lambda _: response(200, b"<html>down</html>", headers={"content-type": "text/html"})])
    async with model(server, max_retries=0) as m:
        with pytest.raises(ProviderResponseError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value) == (
        "https://bedrock-runtime.us-east-1.amazonaws.com/model/anthropic.claude-3-5-haiku-20241022-v1%3A0/"
        "converse-stream answered a stream request with content-type 'text/html': b'<html>down</html>'."
    )


async def test_transport_failures(waits: list[float]) -> None:
    server = Server([httpx.ConnectError("refused"), httpx.ReadTimeout("slow"), capture("bedrock_converse_text.http")])
    async with model(server) as m:
        assert (await m.complete(REQUEST)).usage == Usage(1845, 18, 1863, 1824)
    assert len(waits) == 2
    dropped = response(200, START + text_frame("par"), headers=EVENTS, then_raise=httpx.ReadError("reset"))
    server = Server([dropped])
    async with model(server) as m:
        with pytest.raises(IncompleteStreamError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert str(caught.value).endswith("dropped after 2 stream event(s): reset.")
    server = Server([httpx.ReadTimeout("slow")])
    async with model(
        server, max_retries=0, base_url="https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com"
    ) as m:
        with pytest.raises(ProviderTimeoutError) as timeout:
            await m.complete(REQUEST)
    assert str(timeout.value) == (
        "no answer from https://vpce-1.bedrock-runtime.us-east-1.vpce.amazonaws.com/model/"
        "anthropic.claude-3-5-haiku-20241022-v1%3A0/converse within timeout=60 s before the response (ReadTimeout)."
    )


async def test_deadline_and_owned_or_injected_clients() -> None:
    async def slow(_: httpx.Request) -> httpx.Response:
        await asyncio.sleep(5)
        raise AssertionError  # pragma: no cover - the deadline strikes first

    async with BedrockChatModel(MODEL_ID, deadline=0.05, transport=httpx.MockTransport(slow)) as m:
        with pytest.raises(ProviderTimeoutError, match=r"took longer than deadline=0\.05 s"):
            await m.complete(REQUEST)
    server = Server([lambda _: capture("bedrock_converse_text.http")])
    client = httpx.AsyncClient(transport=httpx.MockTransport(server.handle))
    async with BedrockChatModel(MODEL_ID, client=client, deadline=None) as m:
        await m.complete(REQUEST)
    assert not client.is_closed
    await client.aclose()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"model": ""}, "BedrockChatModel(model='') needs a model id, e.g. 'us.amazon.nova-lite-v1:0'."),
        (
            {"base_url": "vpce.local"},
            "BedrockChatModel(base_url='vpce.local') must be an http(s) URL, e.g. a VPC endpoint.",
        ),
        (
            {"timeout": float("nan")},
            "BedrockChatModel(timeout=nan) must be a positive number of seconds (not nan or inf).",
        ),
        ({"max_retries": -1}, "BedrockChatModel(max_retries=-1) must be an integer >= 0."),
        ({"options": [1]}, "BedrockChatModel(options=[1]) must be a mapping of Converse body fields."),
        (
            {"client": httpx.AsyncClient(), "transport": httpx.MockTransport(lambda _: httpx.Response(200))},
            "BedrockChatModel takes client= or transport=, not both; configure the transport on your client.",
        ),
    ],
)
def test_bad_options_are_config_errors(options: dict[str, Any], message: str) -> None:
    arguments: dict[str, Any] = {"model": MODEL_ID, **options}
    with pytest.raises(ConfigError) as caught:
        BedrockChatModel(arguments.pop("model"), **arguments)
    assert str(caught.value) == message


def test_built_from_a_config_and_its_repr() -> None:
    kernel = Kernel.from_config(
        {"model": {"use": "bedrock", "model": MODEL_ID, "region": "ap-northeast-1", "api_key": "k-secret"}},
        registry=Registry(autoload=False),
    )
    assert isinstance(kernel.model, BedrockChatModel)
    assert repr(kernel.model) == (
        f"BedrockChatModel(model={MODEL_ID!r}, region='ap-northeast-1', "
        "base_url='https://bedrock-runtime.ap-northeast-1.amazonaws.com')"
    )


def test_frames_split_anywhere_decode_the_same() -> None:
    body = converse_stream("bedrock_converse_stream_tool_use.events.json")
    for size in (1, 2, 13, len(body)):
        decoder = wire.EventStreamDecoder()
        kinds = [headers[":event-type"] for part in pieces(body, size) for headers, _ in decoder.feed(part)]
        assert (kinds[0], kinds[-1], len(kinds)) == ("messageStart", "metadata", 27)
        assert decoder.pending == 0


async def test_an_arn_model_id_is_encoded_and_signed(aws_env: Path) -> None:
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.anthropic.claude-3-5-haiku-20241022-v1:0"
    server = Server([capture("bedrock_converse_text.http")])
    async with BedrockChatModel(arn, transport=httpx.MockTransport(server.handle)) as m:
        await m.complete(REQUEST)
    (sent,) = server.requests
    assert sent.url.raw_path == (
        b"/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2F"
        b"us.anthropic.claude-3-5-haiku-20241022-v1%3A0/converse"
    )
    assert sent.headers["authorization"] == expected_authorization(sent, SECRET, "us-east-1")


async def test_the_secret_key_is_in_no_repr_error_or_log(caplog: pytest.LogCaptureFixture, waits: list[float]) -> None:
    caplog.set_level("DEBUG")
    server = Server([lambda _: capture("bedrock_throttling_429.http")])
    async with model(server) as m:
        with pytest.raises(RateLimitError) as caught:
            await m.stream(REQUEST, lambda _: None)
        shown = [repr(m), str(caught.value), repr(caught.value), repr(caught.value.body)]
    shown += [record.getMessage() for record in caplog.records]
    assert any("retry 2/2" in line for line in shown)
    assert not [line for line in shown if SECRET in line or SESSION in line]


def test_a_frame_declaring_a_huge_payload_is_refused() -> None:
    import struct
    import zlib

    prelude = struct.pack(">II", 30_000_000, 0)
    frame = prelude + struct.pack(">I", zlib.crc32(prelude)) + b"x" * 8
    with pytest.raises(ProviderResponseError) as caught:
        wire.EventStreamDecoder().feed(frame)
    assert str(caught.value) == (
        "The event stream sent a broken frame at byte 0: it declares 30000000 bytes, "
        "over the 16777216 a frame may have."
    )


def test_native_options_pass_through_and_the_missing_extra_is_named() -> None:
    options = {"additionalModelRequestFields": {"top_k": 5}, "toolConfig": "ignored", "system": "ignored"}
    body = wire.request_body(ChatRequest((Message.user("hi"),)), options)
    assert body == {
        "additionalModelRequestFields": {"top_k": 5},
        "messages": [{"role": "user", "content": [{"text": "hi"}]}],
    }
    assert str(wire.missing_botocore()) == (
        "BedrockChatModel needs botocore (SigV4 signing and the AWS credential chain): "
        "pip install 'beamfilter-core[bedrock]'."
    )


async def test_an_unknown_exception_in_the_stream_is_a_retried_server_error(waits: list[float]) -> None:
    server = Server([lambda _: stream_of(START + exception_frame("somethingNewException", "new fault"))])
    async with model(server, max_retries=1) as m:
        with pytest.raises(InternalServerError) as caught:
            await m.stream(REQUEST, lambda _: None)
    assert (str(caught.value), caught.value.error_type, len(server.requests)) == (
        "HTTP 500: new fault",
        "somethingNewException",
        2,
    )


async def test_a_stream_over_the_answer_bound_is_not_retried(waits: list[float]) -> None:
    server = Server([lambda _: stream_of(START + text_frame("abcdef") + STOP)])
    async with model(server, max_answer_chars=5) as m:
        with pytest.raises(ResponseTooLargeError, match="max_answer_chars=5"):
            await m.stream(REQUEST, lambda _: None)
    assert (len(server.requests), waits) == (1, [])


async def test_cache_points_end_the_system_prompt_and_the_tools() -> None:
    server = Server([capture("bedrock_converse_text.http")])
    async with model(server, cache_points=True) as m:
        result = await m.complete(REQUEST.replace(tools=(top_song,)))
    assert result.usage == Usage(1845, 18, 1863, 1824, 0)  # the prefix read from the cache
    (body,) = server.bodies
    assert body["system"] == [{"text": "Be brief."}, {"cachePoint": {"type": "default"}}]
    assert body["toolConfig"]["tools"][-1] == {"cachePoint": {"type": "default"}}
    assert [t["toolSpec"]["name"] for t in body["toolConfig"]["tools"][:-1]] == ["top_song"]
    config = {"use": "bedrock", "model": MODEL_ID, "cache_points": True}
    kernel = Kernel.from_config({"model": config}, registry=Registry(autoload=False))
    assert kernel.model.cache_points is True  # type: ignore[attr-defined]


def test_without_botocore_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    for name in ("botocore", "botocore.session", "botocore.eventstream"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    expected = (
        "BedrockChatModel needs botocore (SigV4 signing and the AWS credential chain): "
        "pip install 'beamfilter-core[bedrock]'."
    )
    with pytest.raises(ConfigError) as caught:
        BedrockChatModel(MODEL_ID)
    assert str(caught.value) == expected
    body = converse_stream("bedrock_converse_stream_tool_use.events.json")
    assert len(wire.EventStreamDecoder().feed(body)) == 27  # the frames are read without botocore


def test_streamed_redacted_reasoning_is_kept_and_reasoning_counts_toward_the_bound() -> None:
    accumulator = wire.ConverseStreamAccumulator(None)
    for payload in (
        {"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}}},
        {"contentBlockIndex": 1, "delta": {"text": "ok"}},
    ):
        accumulator.feed("contentBlockDelta", json.dumps(payload).encode())
    accumulator.feed("messageStop", b'{"stopReason": "end_turn"}')
    result = accumulator.result(chunks=3)
    assert result.message.reasoning == (
        Reasoning("bedrock.converse", "", {"reasoningContent": {"redactedContent": "ZW5jcnlwdGVk"}}),
    )
    assert result.text == "ok"
    bounded = wire.ConverseStreamAccumulator(None, max_answer_chars=10)
    thinking = {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "x" * 11}}}
    with pytest.raises(ResponseTooLargeError, match="max_answer_chars=10"):
        bounded.feed("contentBlockDelta", json.dumps(thinking).encode())


def test_text_deltas_without_a_sink_and_empty_ones_keep_their_order() -> None:
    accumulator = wire.ConverseStreamAccumulator(None)
    for text in ("a", "", "b"):
        accumulator.feed("contentBlockDelta", json.dumps({"contentBlockIndex": 0, "delta": {"text": text}}).encode())
    accumulator.feed("messageStop", b'{"stopReason":"end_turn"}')
    assert (accumulator.text, accumulator.delivered, accumulator.result(chunks=4).text) == ("ab", False, "ab")
    with pytest.raises(ProviderResponseError) as caught:
        accumulator.feed("contentBlockDelta", b'{"delta":{"text":null}}')
    assert str(caught.value) == "The server sent contentBlockDelta.delta.text as NoneType null; expected a string."
