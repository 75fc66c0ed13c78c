"""Provider faults: every broken answer of an OpenAI-compatible server, through a Kernel
with the memory filter on a real SQLite file.

Each fault ends in the documented typed error (with the exact message) or in a
recovery, and the store never holds a partial turn: after an error it holds nothing
of the failed turn, after a recovery exactly the whole turn.

The faults come from an in-test ``httpx.MockTransport`` (exact bytes, reads cut where
we choose) and from the real peers llmock and aimock (a real socket, real timing).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from _support import record_retry_waits
from core.models._mock import STREAM, delta, response, sse
from faults._faults import CID, Transport, kernel, peer_model, run_turn, scenario, sqlite_store
from peers._peer import Peer

from beamfilter_core import Message
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    InternalServerError,
    ProviderConnectionError,
    ProviderError,
    ProviderResponseError,
    ProviderTimeoutError,
    RateLimitError,
)
from beamfilter_memory import SQLiteStore

pytestmark = pytest.mark.anyio

U, A = Message.user, Message.assistant
URL = "http://mock.test/v1/chat/completions"


@pytest.fixture
def slept(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The retry waits the model asked for (recorded, not slept)."""
    return record_retry_waits(monkeypatch)


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """The SQLite store of the test's turns, closed after the test."""
    made = sqlite_store(tmp_path)
    try:
        yield made
    finally:
        await made.aclose()


def error(status: int, message: str, **headers: str) -> httpx.Response:
    body = json.dumps({"error": {"message": message, "type": "test_error"}})
    return httpx.Response(status, headers={"content-type": "application/json", **headers}, content=body)


def text_stream(text: str) -> httpx.Response:
    return response(200, sse(delta(text), delta(finish="stop")), headers=STREAM)


def completion(text: str) -> httpx.Response:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}
    return httpx.Response(200, json=body)


# (id, answers, stream, error type, exact message or None, attempts)
FAILURES: list[tuple[str, list[Any], bool, type[ProviderError], str, int]] = [
    (
        "401",
        [error(401, "Incorrect API key provided.")],
        False,
        AuthenticationError,
        "HTTP 401: Incorrect API key provided.",
        1,
    ),
    ("400", [error(400, "Bad 'messages'.")], True, BadRequestError, "HTTP 400: Bad 'messages'.", 1),
    ("500 x3", [error(500, "boom")], False, InternalServerError, "HTTP 500: boom", 3),
    ("502 x3", [error(502, "bad gateway")], True, InternalServerError, "HTTP 502: bad gateway", 3),
    ("503 x3", [error(503, "overloaded")], False, InternalServerError, "HTTP 503: overloaded", 3),
    (
        "429 asks 90 s",
        [error(429, "slow down", **{"retry-after": "90"})],
        False,
        RateLimitError,
        "HTTP 429: slow down",
        1,
    ),
    (
        "empty 200 (complete)",
        [httpx.Response(200, content=b"")],
        False,
        ProviderResponseError,
        f"{URL} answered 200 with a body that is not JSON: ''.",
        3,
    ),
    (
        "empty 200 (stream)",
        [httpx.Response(200, headers=STREAM, content=b"")],
        True,
        IncompleteStreamError,
        "The server answered 200 but the stream was empty (no chunks, no [DONE]).",
        3,
    ),
    (
        "truncated stream, no text",
        [lambda _: response(200, sse(delta(None, role="assistant"), done=False), headers=STREAM)],
        True,
        IncompleteStreamError,
        "The stream ended after 1 chunk(s) without finish_reason and [DONE]; the answer is incomplete "
        "(0 characters of text received).",
        3,
    ),
    (
        "truncated stream after text",
        [response(200, sse(delta("Hello "), delta("wor"), done=False), headers=STREAM)],
        True,
        IncompleteStreamError,
        "The stream ended after 2 chunk(s) without finish_reason and [DONE]; the answer is incomplete "
        "(9 characters of text received).",
        1,
    ),
    (
        "disconnect mid-stream",
        [response(200, sse(delta("Hel"), done=False), headers=STREAM, then_raise=httpx.ReadError("reset by peer"))],
        True,
        IncompleteStreamError,
        f"The connection to {URL} dropped after 1 stream chunk(s): reset by peer.",
        1,
    ),
    (
        "malformed chunk after text",
        [response(200, sse(delta("Hi"), '{"choices": [', delta(finish="stop")), headers=STREAM)],
        True,
        ProviderResponseError,
        "The stream sent a chunk that is not valid JSON: '{\"choices\": ['.",
        1,
    ),
    (
        "connection refused",
        [httpx.ConnectError("connection refused")],
        False,
        ProviderConnectionError,
        f"Cannot reach {URL}: ConnectError: connection refused. Is the server running?",
        3,
    ),
    (
        "stall before the answer",
        [httpx.ReadTimeout("timed out")],
        False,
        ProviderTimeoutError,
        f"no answer from {URL} within timeout=60 s before the response (ReadTimeout).",
        3,
    ),
]


@pytest.mark.parametrize(
    ("answers", "stream", "expected", "message", "attempts"),
    [pytest.param(*case[1:], id=case[0]) for case in FAILURES],
)
async def test_a_failed_call_raises_its_typed_error_and_stores_nothing(
    store: SQLiteStore,
    slept: list[float],
    answers: list[Any],
    stream: bool,
    expected: type[ProviderError],
    message: str,
    attempts: int,
) -> None:
    server = Transport(answers)
    async with server.model() as model:
        with pytest.raises(expected) as caught:
            await run_turn(kernel(model, store), "hello", stream=stream)
    assert type(caught.value) is expected
    assert str(caught.value) == message
    assert len(server.requests) == attempts
    assert len(slept) == attempts - 1
    assert await store.load(CID) == []
    assert await store.load_pause(CID) is None


@pytest.mark.parametrize("stream", [False, True])
async def test_429_with_retry_after_waits_that_long_then_the_turn_is_stored_whole(
    store: SQLiteStore, slept: list[float], stream: bool
) -> None:
    server = Transport(
        [error(429, "Rate limit", **{"retry-after": "7"}), text_stream("Done.") if stream else completion("Done.")]
    )
    async with server.model() as model:
        streamed, result = await run_turn(kernel(model, store), "hello", stream=stream)
    assert result.text == "Done."
    assert streamed == ("Done." if stream else "")
    assert slept == [7.0]
    assert await store.load(CID) == [U("hello"), A("Done.")]


@pytest.mark.parametrize("status", [500, 502, 503])
async def test_5xx_then_success_recovers_with_backoff(store: SQLiteStore, slept: list[float], status: int) -> None:
    server = Transport([error(status, "transient"), error(status, "transient"), completion("Recovered.")])
    async with server.model() as model:
        _, result = await run_turn(kernel(model, store), "hello", stream=False)
    assert result.text == "Recovered."
    assert len(server.requests) == 3
    # 0.5 s then 1 s, each jittered by a factor in (0.75, 1].
    assert 0.375 <= slept[0] <= 0.5
    assert 0.75 <= slept[1] <= 1.0
    assert await store.load(CID) == [U("hello"), A("Recovered.")]


async def test_a_failed_turn_after_a_good_one_keeps_only_the_good_one(store: SQLiteStore, slept: list[float]) -> None:
    server = Transport([completion("First."), error(401, "revoked")])
    async with server.model() as model:
        k = kernel(model, store)
        await run_turn(k, "one", stream=False)
        with pytest.raises(AuthenticationError, match=r"^HTTP 401: revoked$"):
            await run_turn(k, "two", stream=False)
    assert await store.load(CID) == [U("one"), A("First.")]


@pytest.mark.parametrize("size", [1, 2, 3, 5])
async def test_utf8_split_across_reads_is_decoded_whole(store: SQLiteStore, size: int) -> None:
    text = "Grüße, 東京 🌧️ naïve"
    server = Transport(
        [response(200, sse(delta(text[:8]), delta(text[8:]), delta(finish="stop")), headers=STREAM, chunk=size)]
    )
    async with server.model() as model:
        streamed, result = await run_turn(kernel(model, store), "hello", stream=True)
    assert streamed == text
    assert result.text == text
    assert await store.load(CID) == [U("hello"), A(text)]


async def test_tool_arguments_that_are_not_json_go_back_to_the_model(store: SQLiteStore) -> None:
    from beamfilter_core import tool

    calls: list[str] = []

    @tool
    def weather(city: str) -> str:
        """Weather of a city."""
        calls.append(city)
        return "sunny"

    bad = {
        "index": 0,
        "id": "call_1",
        "type": "function",
        "function": {"name": "weather", "arguments": '{"city": "Par'},
    }
    first = response(
        200,
        sse({"choices": [{"index": 0, "delta": {"tool_calls": [bad]}}]}, delta(finish="tool_calls")),
        headers=STREAM,
    )
    server = Transport([first, text_stream("Sorry.")])
    async with server.model() as model:
        _, result = await run_turn(kernel(model, store, tools=[weather]), "weather?", stream=True)
    assert calls == []
    assert result.text == "Sorry."
    feedback = result.messages[2]
    assert feedback.role == "tool"
    assert feedback.content == (
        "Arguments for tool 'weather' are not a JSON object: '{\"city\": \"Par'. "
        "Call the tool again with a JSON object of arguments."
    )
    # The second request sends the broken text back verbatim, as the model wrote it.
    sent = json.loads(server.requests[1].content)["messages"][1]["tool_calls"][0]["function"]["arguments"]
    assert sent == '{"city": "Par'
    assert [m.role for m in await store.load(CID)] == ["user", "assistant", "tool", "assistant"]


# -- the same faults from real servers -------------------------------------------------


@pytest.mark.peers
async def test_llmock_429_retry_after_then_success(store: SQLiteStore, llmock: Peer) -> None:
    scenario(llmock, {"type": "fail", "status": 429, "retry_after": 1}, {"type": "reply", "text": "Made it."})
    async with peer_model(llmock) as model:
        streamed, result = await run_turn(kernel(model, store), "hello", stream=True)
    assert streamed == result.text == "Made it."
    assert await store.load(CID) == [U("hello"), A("Made it.")]


@pytest.mark.peers
@pytest.mark.parametrize(
    ("behaviors", "expected", "message"),
    [
        pytest.param(
            [{"type": "fail", "status": 401, "message": "Incorrect API key provided."}],
            AuthenticationError,
            "Incorrect API key provided.",
            id="401",
        ),
        pytest.param(
            [{"type": "fail", "status": 400, "message": "Bad messages."}], BadRequestError, "Bad messages.", id="400"
        ),
        pytest.param(
            [
                {"type": "reply", "text": "one two three four five six"},
                {"type": "stream_fault", "kind": "disconnect", "after_chunks": 3},
            ],
            IncompleteStreamError,
            "dropped after",
            id="disconnect-after-text",
        ),
        pytest.param(
            [{"type": "stream_fault", "kind": "malformed", "after_chunks": 2}],
            ProviderResponseError,
            "not valid JSON",
            id="malformed-after-text",
        ),
        pytest.param(
            [
                {"type": "reply", "text": "alpha beta gamma delta"},
                {"type": "stream_fault", "kind": "stall", "after_chunks": 3, "stall_seconds": 3},
            ],
            ProviderTimeoutError,
            r"no data from .* within timeout=0\.5 s after 3 stream chunk\(s\)",
            id="stall-after-text",
        ),
    ],
)
async def test_llmock_faults_raise_and_store_nothing(
    store: SQLiteStore, llmock: Peer, behaviors: list[dict[str, Any]], expected: type[ProviderError], message: str
) -> None:
    scenario(llmock, *behaviors)
    async with peer_model(llmock, timeout=0.5) as model:
        with pytest.raises(expected, match=message):
            await run_turn(kernel(model, store), "hello", stream=True)
    assert await store.load(CID) == []


@pytest.mark.peers
async def test_llmock_truncation_before_text_is_retried_and_stored_once(store: SQLiteStore, llmock: Peer) -> None:
    scenario(
        llmock,
        {"type": "stream_fault", "kind": "truncate", "after_chunks": 1},
        {"type": "reply", "text": "Whole.", "times": 2},
    )
    async with peer_model(llmock) as model:
        streamed, result = await run_turn(kernel(model, store), "hello", stream=True)
    assert streamed == result.text == "Whole."
    assert await store.load(CID) == [U("hello"), A("Whole.")]


@pytest.mark.peers
@pytest.mark.parametrize(
    ("prompt", "expected", "message"),
    [
        ("trigger 400", BadRequestError, r"^HTTP 400: Invalid 'messages\[0\]\.content': string too long\.$"),
        ("trigger quota", RateLimitError, r"^HTTP 429: You exceeded your current quota\. \(out of quota"),
        ("trigger truncation", IncompleteStreamError, r"dropped after \d+ stream chunk\(s\)"),
        ("trigger disconnect", IncompleteStreamError, "dropped after"),
    ],
)
async def test_aimock_faults_raise_and_store_nothing(
    store: SQLiteStore, aimock: Peer, prompt: str, expected: type[ProviderError], message: str
) -> None:
    async with peer_model(aimock, max_retries=0) as model:
        with pytest.raises(expected, match=message):
            await run_turn(kernel(model, store), prompt, stream=True)
    assert await store.load(CID) == []


@pytest.mark.peers
async def test_llmock_503_twice_then_success_is_stored_once(store: SQLiteStore, llmock: Peer) -> None:
    scenario(llmock, {"type": "fail", "status": 503, "times": 2}, {"type": "reply", "text": "Back."})
    before = max((r["seq"] for r in llmock.get("/_llmock/requests")["requests"]), default=0)
    async with peer_model(llmock) as model:
        _, result = await run_turn(kernel(model, store), "hello", stream=False)
    assert result.text == "Back."
    statuses = [r["status"] for r in llmock.get("/_llmock/requests")["requests"] if r["seq"] > before]
    assert statuses == [503, 503, 200]
    assert await store.load(CID) == [U("hello"), A("Back.")]


@pytest.mark.peers
@pytest.mark.parametrize(
    ("kind", "feedback"),
    [
        ("malformed_arguments", "Arguments for tool 'get_weather' are not a JSON object: "),
        ("unknown_tool", "Unknown tool "),
    ],
)
async def test_llmock_tool_call_faults_are_fed_back_and_the_turn_stored_whole(
    store: SQLiteStore, llmock: Peer, kind: str, feedback: str
) -> None:
    from beamfilter_core import tool

    ran: list[str] = []

    @tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return "sunny"

    scenario(llmock, {"type": "tool_fault", "kind": kind})
    async with peer_model(llmock) as model:
        _, result = await run_turn(kernel(model, store, tools=[get_weather]), "weather?", stream=True)
    assert ran == []
    # llmock answers in text once a tool result (here: our feedback) comes back.
    assert (result.status, result.iterations, result.tool_calls_made) == ("completed", 2, 1)
    assert result.text
    assert str(result.messages[2].content).startswith(feedback)
    assert await store.load(CID) == list(result.messages)
