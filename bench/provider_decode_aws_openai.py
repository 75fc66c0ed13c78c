"""Decoding a 10k-token stream: OpenAI Chat Completions and Responses, and Bedrock
ConverseStream, beamfilter vs the SDKs.

The streams are the recorded captures of ``tests/core/models/provider_captures``
(``azure_chat_stream.http``, an OpenAI chat-completions stream as Azure sends it,
``openai_responses_text_stream.http``, ``bedrock_converse_stream_text.events.json``) with
their delta event repeated to 10,000 tokens, every field kept as recorded. Each row
decodes the same bytes, cut in the same 16 KiB reads, in one run:

- **OpenAI Chat Completions**: ``OpenAIChatModel.stream`` against the official ``openai``
  client's ``chat.completions.create(stream=True)``, both over one ``httpx.MockTransport``;

- **OpenAI Responses**: ``OpenAIChatModel(api="responses").stream`` against the official
  ``openai`` client's ``responses.create(stream=True)`` (its SSE decoder and typed event
  models), both reading the body from one ``httpx.MockTransport``, so the HTTP layer is the
  same and the difference is the decoding;
- **Bedrock ConverseStream**: ``BedrockChatModel.stream`` (SigV4-signed by botocore, the
  frames read by beamfilter's ``_eventstream`` decoder) over one ``httpx.MockTransport``,
  against a boto3 ``bedrock-runtime`` client's ``converse_stream()`` (signed, its answer's
  ``stream`` iterated: botocore's ``EventStream`` and ``EventStreamJSONParser``), the
  recorded bytes handed over by a ``before-send`` hook in the same 16 KiB reads. Both sides
  make the call and collect the text, the stop reason and the usage.

Each returns ``(seconds for beamfilter, seconds for the SDK)``, the best of ``rounds``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Callable, Iterator
from typing import Any

import httpx
from provider_decode_common import (
    CAPTURES,
    REQUEST,
    TOKENS,
    best,
    capture_body,
    expected,
    model_stream,
    reads,
    transport,
    word,
)

from beamfilter_core import OpenAIChatModel

MODEL = "anthropic.claude-3-5-haiku-20241022-v1:0"
EVENTSTREAM = "application/vnd.amazon.eventstream"


def responses_stream(tokens: int = TOKENS) -> bytes:
    """The recorded Responses stream with its ``response.output_text.delta`` event repeated."""
    raw = capture_body("openai_responses_text_stream.http")
    events = [json.loads(block.split("data: ", 1)[1]) for block in raw.split("\n\n") if block.strip()]
    deltas = [e for e in events if e["type"] == "response.output_text.delta"]
    head = [e for e in events if e["sequence_number"] < deltas[0]["sequence_number"]]
    tail = [e for e in events if e["sequence_number"] > deltas[-1]["sequence_number"]]
    body = [*head, *({**deltas[0], "delta": word(n)} for n in range(tokens)), *tail]
    for number, event in enumerate(body):
        event["sequence_number"] = number
    text = expected(tokens)
    for event in tail:  # the done events repeat the whole text, as the real API does
        if event["type"] == "response.output_text.done":
            event["text"] = text
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e, separators=(',', ':'))}\n\n" for e in body).encode()


def chat_stream(tokens: int = TOKENS) -> bytes:
    """The recorded chat-completions stream with its content delta chunk repeated."""
    raw = capture_body("azure_chat_stream.http")
    blocks = [block for block in raw.split("\n\n") if block.strip()]
    chunks = [json.loads(block.removeprefix("data: ")) for block in blocks[:-1]]  # the last is [DONE]
    deltas = [n for n, c in enumerate(chunks) if c["choices"] and c["choices"][0]["delta"].get("content")]
    delta = chunks[deltas[0]]
    head, tail = chunks[: deltas[0]], chunks[deltas[-1] + 1 :]

    def with_text(text: str) -> dict[str, Any]:
        return {**delta, "choices": [{**delta["choices"][0], "delta": {"content": text}}]}

    body = [*head, *(with_text(word(n)) for n in range(tokens)), *tail]
    events = "".join(f"data: {json.dumps(c, separators=(',', ':'))}\n\n" for c in body)
    return (events + "data: [DONE]\n\n").encode()


def chat_row(rounds: int = 5, tokens: int = TOKENS) -> tuple[float, float]:
    """OpenAI Chat Completions: beamfilter's stream decoding against the ``openai`` client's."""
    import openai

    body = chat_stream(tokens)
    text = expected(tokens)

    def ours(mock: Any) -> OpenAIChatModel:
        return OpenAIChatModel("gpt-4o", api_key="k", transport=mock)

    async def sdk() -> None:
        async with httpx.AsyncClient(transport=transport(body)) as http:
            client = openai.AsyncOpenAI(api_key="k", base_url="http://mock.test/v1", http_client=http, max_retries=0)
            pieces: list[str] = []
            messages: Any = [{"role": "user", "content": "hi"}]
            stream = await client.chat.completions.create(model="gpt-4o", messages=messages, stream=True)
            async for chunk in stream:
                if chunk.choices and chunk.choices[0].delta.content:
                    pieces.append(chunk.choices[0].delta.content)
        assert "".join(pieces) == text

    return best(rounds, model_stream(ours, body, tokens)), best(rounds, lambda: asyncio.run(sdk()))


def responses_row(rounds: int = 5, tokens: int = TOKENS) -> tuple[float, float]:
    """OpenAI Responses: beamfilter's stream decoding against the ``openai`` client's."""
    import openai

    body = responses_stream(tokens)
    text = expected(tokens)

    def ours(mock: Any) -> OpenAIChatModel:
        return OpenAIChatModel("gpt-4.1", api="responses", api_key="k", transport=mock)

    async def sdk() -> None:
        async with httpx.AsyncClient(transport=transport(body)) as http:
            client = openai.AsyncOpenAI(api_key="k", base_url="http://mock.test/v1", http_client=http, max_retries=0)
            pieces: list[str] = []
            stream = await client.responses.create(model="gpt-4.1", input="hi", stream=True)
            async for event in stream:
                if event.type == "response.output_text.delta":
                    pieces.append(event.delta)
        assert "".join(pieces) == text

    return best(rounds, model_stream(ours, body, tokens)), best(rounds, lambda: asyncio.run(sdk()))


def converse_stream(tokens: int = TOKENS) -> bytes:
    """The recorded ConverseStream events (with their ``p`` padding) with the text delta repeated."""
    sys.path.insert(0, str(CAPTURES.parents[2]))  # tests/: the frame encoder of the captures
    from core.models._provider_captures import event_frame

    events = json.loads((CAPTURES / "bedrock_converse_stream_text.events.json").read_text())
    delta = next(payload for kind, payload in events if kind == "contentBlockDelta")
    frames = [event_frame(*events[0])]
    for n in range(tokens):
        frames.append(event_frame("contentBlockDelta", {**delta, "delta": {"text": word(n)}}))
    frames += [event_frame(kind, payload) for kind, payload in events if kind != "contentBlockDelta"][1:]
    return b"".join(frames)


def bedrock_row(rounds: int = 5, tokens: int = TOKENS) -> tuple[float, float]:
    """Bedrock ConverseStream: ``BedrockChatModel.stream`` against boto3's ``converse_stream``."""
    ours, sdk = bedrock_sides(tokens)
    return best(rounds, ours), best(rounds, sdk)


def bedrock_sides(tokens: int = TOKENS) -> tuple[Callable[[], None], Callable[[], None]]:
    """The two sides of the Bedrock row: one streamed call each, checking what it got."""
    import boto3
    import botocore.session
    from botocore.awsrequest import AWSResponse

    from beamfilter_core import BedrockChatModel

    body = converse_stream(tokens)
    text = expected(tokens)
    events = dict(json.loads((CAPTURES / "bedrock_converse_stream_text.events.json").read_text()))
    usage, stop = events["metadata"]["usage"], events["messageStop"]["stopReason"]
    session = botocore.session.Session()
    session.set_credentials("AKIDEXAMPLE", "secret")
    mock = transport(body, content_type=EVENTSTREAM)

    async def ours() -> None:
        pieces: list[str] = []
        async with BedrockChatModel(MODEL, region="us-east-1", session=session, transport=mock) as model:
            result = await model.stream(REQUEST, pieces.append)
        assert result.text == "".join(pieces) == text
        assert (result.finish_reason, result.usage and result.usage.total_tokens) == ("stop", usage["totalTokens"])

    client = boto3.client(
        "bedrock-runtime", region_name="us-east-1", aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret"
    )

    class Raw:  # the body of the HTTP response, as botocore reads a streamed one
        def stream(self, **_: Any) -> Iterator[bytes]:
            return reads(body)

        def close(self) -> None:
            pass

    def send(request: Any, **_: Any) -> AWSResponse:  # the recorded answer instead of the network
        return AWSResponse(request.url, 200, {"content-type": EVENTSTREAM}, Raw())

    client.meta.events.register("before-send.bedrock-runtime.ConverseStream", send)

    def sdk() -> None:
        pieces: list[str] = []
        answer = client.converse_stream(modelId=MODEL, messages=[{"role": "user", "content": [{"text": "hi"}]}])
        finish = total = None
        for event in answer["stream"]:
            if "contentBlockDelta" in event:
                pieces.append(event["contentBlockDelta"]["delta"]["text"])
            elif "messageStop" in event:
                finish = event["messageStop"]["stopReason"]
            elif "metadata" in event:
                total = event["metadata"]["usage"]["totalTokens"]
        assert ("".join(pieces), finish, total) == (text, stop, usage["totalTokens"])

    return lambda: asyncio.run(ours()), sdk


def main() -> None:
    rows = (
        ("OpenAI Chat Completions", chat_row),
        ("OpenAI Responses", responses_row),
        ("Bedrock ConverseStream", bedrock_row),
    )
    for name, row in rows:
        ours, sdk = row()
        print(f"{name:24s} beamfilter {ours * 1000:7.1f} ms   SDK {sdk * 1000:7.1f} ms   {sdk / ours:5.1f}x")


if __name__ == "__main__":
    main()
