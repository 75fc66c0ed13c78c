"""OpenAIChatModel's behaviour over a scripted httpx.MockTransport: retries, errors, lifecycle."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from core.models._mock import REQUEST, STREAM, Server, delta, response, sse

from beamfilter_core import ChatRequest, Kernel, Message, OpenAIChatModel
from beamfilter_core.errors import (
    ConfigError,
    IncompleteStreamError,
    InternalServerError,
    ProviderConnectionError,
    ProviderResponseError,
    ProviderTimeoutError,
)

pytestmark = pytest.mark.anyio

OK = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "fine"}}]}


def text_stream(*tokens: str, finish: bool = True) -> bytes:
    chunks = [delta(t) for t in tokens]
    if finish:
        return sse(*chunks, delta(finish="stop"))
    return sse(*chunks, done=False)


async def test_headers_url_and_body(waits: list[float]) -> None:
    server = Server([response(200, OK)])
    async with server.model(options={"temperature": 0}) as model:
        assert (await model.complete(REQUEST)).text == "fine"
    (sent,) = server.requests
    assert str(sent.url) == "http://mock.test/v1/chat/completions"
    assert sent.headers["authorization"] == "Bearer sk-test"
    assert sent.headers["content-type"] == "application/json"
    assert server.bodies == [{"model": "test-model", "temperature": 0, "messages": [{"role": "user", "content": "hi"}]}]


async def test_api_key_from_the_environment_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MY_KEY", "sk-env")
    server = Server([lambda _: response(200, OK)])
    async with server.model(api_key=None, api_key_env="MY_KEY") as model:
        await model.complete(REQUEST)
    async with server.model(api_key=None, api_key_env=None) as model:
        await model.complete(REQUEST)
    assert server.requests[0].headers["authorization"] == "Bearer sk-env"
    assert "authorization" not in server.requests[1].headers


async def test_openai_without_a_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    model = OpenAIChatModel("gpt-4o-mini", transport=httpx.MockTransport(lambda r: httpx.Response(200)))
    with pytest.raises(ConfigError, match=r"api\.openai\.com without an API key; set OPENAI_API_KEY or pass api_key="):
        await model.complete(REQUEST)
    await model.aclose()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "needs a model name"),
        ({"base_url": "localhost:8080"}, "must be an http\\(s\\) URL"),
        ({"timeout": 0}, "timeout=0\\) must be a positive number"),
        ({"max_retries": -1}, "max_retries=-1\\) must be an integer >= 0"),
        ({"options": ["x"]}, "must be a mapping of extra body fields"),
        ({"client": httpx.AsyncClient(), "transport": httpx.MockTransport(lambda r: httpx.Response(200))}, "not both"),
    ],
)
async def test_bad_arguments_are_config_errors(kwargs: dict[str, object], message: str) -> None:
    kwargs = {"model": "m", **kwargs}
    with pytest.raises(ConfigError, match=message):
        OpenAIChatModel(**kwargs)  # type: ignore[arg-type]
    client = kwargs.get("client")
    if isinstance(client, httpx.AsyncClient):
        await client.aclose()


async def test_retry_after_ms_then_success(waits: list[float]) -> None:
    server = Server(
        [
            response(429, {"error": {"message": "slow down"}}, headers={"retry-after-ms": "250", "retry-after": "9"}),
            response(200, OK),
        ]
    )
    async with server.model() as model:
        assert (await model.complete(REQUEST)).text == "fine"
    assert waits == [0.25]


async def test_backoff_without_headers_then_give_up(waits: list[float]) -> None:
    server = Server([lambda _: response(500, "upstream broke")])
    async with server.model(max_retries=3) as model:
        with pytest.raises(InternalServerError, match="HTTP 500: upstream broke"):
            await model.complete(REQUEST)
    assert len(server.requests) == 4
    assert len(waits) == 3
    for wait, base in zip(waits, (0.5, 1.0, 2.0), strict=True):
        assert 0.75 * base <= wait <= base


async def test_x_should_retry_false_wins(waits: list[float]) -> None:
    server = Server([response(503, "busy", headers={"x-should-retry": "false"})])
    async with server.model() as model:
        with pytest.raises(InternalServerError):
            await model.complete(REQUEST)
    assert (len(server.requests), waits) == (1, [])


async def test_x_should_retry_true_retries_a_400(waits: list[float]) -> None:
    server = Server(
        [response(400, "try again", headers={"x-should-retry": "true", "retry-after": "1"}), response(200, OK)]
    )
    async with server.model() as model:
        assert (await model.complete(REQUEST)).text == "fine"
    assert waits == [1.0]


async def test_connection_errors_are_retried_then_raised(waits: list[float]) -> None:
    server = Server([httpx.ConnectError("connection refused")])
    async with server.model(max_retries=2) as model:
        with pytest.raises(
            ProviderConnectionError, match=r"Cannot reach http://mock\.test/v1/chat/completions: ConnectError"
        ):
            await model.stream(REQUEST, lambda _: None)
    assert len(server.requests) == 3
    assert len(waits) == 2


async def test_timeouts_are_provider_timeouts(waits: list[float]) -> None:
    server = Server([httpx.ReadTimeout("slow"), response(200, OK)])
    async with server.model(max_retries=0) as model:
        with pytest.raises(ProviderTimeoutError, match=r"no answer from .* within timeout=60 s before the response"):
            await model.complete(REQUEST)


async def test_a_stream_cut_before_any_text_is_retried(waits: list[float]) -> None:
    server = Server(
        [
            response(200, sse(delta(None, role="assistant"), done=False), headers=STREAM),
            response(200, text_stream("Hel", "lo"), headers=STREAM),
        ]
    )
    tokens: list[str] = []
    async with server.model() as model:
        result = await model.stream(REQUEST, tokens.append)
    assert tokens == ["Hel", "lo"]
    assert result.text == "Hello"
    assert len(server.requests) == 2


async def test_a_stream_that_delivered_text_is_never_silently_retried(waits: list[float]) -> None:
    server = Server(
        [
            response(200, text_stream("Hel", finish=False), headers=STREAM),
            response(200, text_stream("Hello"), headers=STREAM),
        ]
    )
    tokens: list[str] = []
    async with server.model(max_retries=2) as model:
        with pytest.raises(IncompleteStreamError, match=r"without finish_reason and \[DONE\].*\(3 characters"):
            await model.stream(REQUEST, tokens.append)
    assert tokens == ["Hel"]
    assert (len(server.requests), waits) == (1, [])


async def test_a_dropped_connection_mid_stream(waits: list[float]) -> None:
    drop = httpx.RemoteProtocolError("peer closed connection without sending complete message body")
    server = Server([response(200, text_stream("a", "b", finish=False), headers=STREAM, then_raise=drop)])
    async with server.model() as model:
        with pytest.raises(IncompleteStreamError, match="dropped after 2 stream chunk"):
            await model.stream(REQUEST, lambda _: None)
    assert len(server.requests) == 1


async def test_a_stall_mid_stream_is_a_timeout(waits: list[float]) -> None:
    stall = httpx.ReadTimeout("timed out")
    server = Server([response(200, text_stream("a", finish=False), headers=STREAM, then_raise=stall)])
    async with server.model(timeout=2) as model:
        with pytest.raises(ProviderTimeoutError, match=r"no data from .* within timeout=2 s after 1 stream chunk"):
            await model.stream(REQUEST, lambda _: None)


async def test_a_non_json_200_is_a_response_error_after_retries(waits: list[float]) -> None:
    server = Server([lambda _: response(200, "<html>proxy error</html>", headers={"content-type": "text/html"})])
    async with server.model(max_retries=1) as model:
        with pytest.raises(ProviderResponseError, match="not JSON: '<html>proxy error</html>'"):
            await model.complete(REQUEST)
    assert len(server.requests) == 2


async def test_an_error_in_on_token_propagates_unretried(waits: list[float]) -> None:
    server = Server([response(200, text_stream("x"), headers=STREAM)])

    def explode(token: str) -> None:
        raise RuntimeError("consumer broke")

    async with server.model() as model:
        with pytest.raises(RuntimeError, match="consumer broke"):
            await model.stream(REQUEST, explode)
    assert len(server.requests) == 1


async def test_an_injected_client_is_used_and_left_open() -> None:
    server = Server([response(200, OK)])
    client = httpx.AsyncClient(transport=httpx.MockTransport(server.handle))
    model = OpenAIChatModel("m", base_url="http://mock.test/v1", api_key="k", client=client)
    await model.complete(REQUEST)
    await model.aclose()
    assert not client.is_closed
    await client.aclose()


def test_run_sync_twice_remakes_the_owned_client_per_event_loop() -> None:
    server = Server([lambda _: response(200, OK)])
    model = server.model()
    kernel = Kernel(model)
    assert kernel.run_sync("one").text == "fine"
    assert kernel.run_sync("two").text == "fine"  # a pooled client of a closed loop would fail here
    client = model._client
    asyncio.run(model.aclose())
    assert model._client is None
    assert client is not None
    assert client.is_closed


async def test_cancellation_closes_the_response() -> None:
    closed = asyncio.Event()

    async def endless() -> object:
        try:
            yield b'data: {"choices":[{"index":0,"delta":{"content":"tick"}}]}\n\n'
            while True:
                await asyncio.sleep(0.01)
                yield b": keep-alive\n\n"
        finally:
            closed.set()

    server = Server([lambda _: httpx.Response(200, headers=STREAM, content=endless())])
    got = asyncio.Event()
    async with server.model() as model:
        task = asyncio.create_task(model.stream(REQUEST, lambda _: got.set()))
        await got.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await asyncio.wait_for(closed.wait(), 1)


async def test_the_body_is_sent_once_per_attempt_unchanged(waits: list[float]) -> None:
    server = Server([response(502, "bad gateway"), response(200, OK)])
    async with server.model() as model:
        await model.complete(ChatRequest((Message.user("h\u00e9"),), options={"seed": 3}))
    first, second = (r.content for r in server.requests)
    assert first == second
    assert json.loads(first)["messages"][0]["content"] == "h\u00e9"
