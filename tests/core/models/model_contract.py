"""The ChatModel contract every HTTP provider passes, over a scripted ``httpx.MockTransport``.

A provider joins by writing a :class:`ProviderWire` (how its server answers, in its native
shapes, and where its request puts things) and a test module with::

    class TestMyProviderContract(ChatModelContract):
        wire = MyProviderWire()

The contract: a plain answer, a stream whose deltas join to the answer, a tool round and
parallel tool calls in the native shapes (the results go back in the next request), the
system prompt in its native field, usage, errors mapped onto ``beamfilter_core.errors``
and never retried when the request is wrong, the shared retry policy (429 honouring
``Retry-After``, 5xx with backoff, a stream that delivered text never retried),
cancellation mid-stream closing the response, malformed answers as typed errors, and
the key in its header and never in a repr, an error or a log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar

import httpx
import pytest
from core.models._mock import Server, response

from beamfilter_core import ChatModel, ChatRequest, Kernel, Message, TextDelta, ToolCall, Usage, tool
from beamfilter_core.errors import (
    AuthenticationError,
    BadRequestError,
    IncompleteStreamError,
    InternalServerError,
    NotFoundError,
    ProviderResponseError,
)
from beamfilter_core.testing import collect_stream, run_turn

#: The key every contract model is built with; it must never show up outside its header.
KEY = "sk-contract-4f1c9e0a7b2d"
Call = tuple[str, str, dict[str, Any]]  # (id, name, arguments)
STREAM_HEADERS = {"content-type": "text/event-stream"}


class ProviderWire(ABC):
    """One provider's side of the contract: its native answers and request shapes."""

    #: ``(header, value)`` that carries :data:`KEY`.
    key_header: ClassVar[tuple[str, str]]

    @abstractmethod
    def model(self, transport: httpx.AsyncBaseTransport, **options: Any) -> Any:
        """The provider's model over ``transport`` with ``api_key=KEY``."""

    @abstractmethod
    def text(self, text: str, usage: tuple[int, int]) -> Any:
        """A non-streamed answer (JSON) with ``text`` and ``(input, output)`` token counts."""

    @abstractmethod
    def calls(self, calls: list[Call]) -> Any:
        """A non-streamed answer (JSON) asking for ``calls``."""

    @abstractmethod
    def text_stream(self, tokens: list[str], usage: tuple[int, int]) -> list[bytes]:
        """A streamed answer, one item per event (a whole SSE event each)."""

    @abstractmethod
    def calls_stream(self, calls: list[Call]) -> list[bytes]:
        """A streamed answer asking for ``calls``, one item per event."""

    @abstractmethod
    def cut_stream(self, tokens: list[str]) -> list[bytes]:
        """The events of a stream that stops after ``tokens``, without its end."""

    @abstractmethod
    def error(self, status: int, message: str) -> Any:
        """The provider's error body (JSON) for ``status``."""

    @abstractmethod
    def sent_system(self, body: dict[str, Any]) -> str:
        """The system prompt as the request body carries it (in its native field)."""

    @abstractmethod
    def sent_calls(self, body: dict[str, Any]) -> list[Call]:
        """The assistant's tool calls sent back in a request body, in order."""

    @abstractmethod
    def sent_results(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """The tool results ``(call id, text)`` of a request body, in its native shape, in order."""

    def usage(self, usage: tuple[int, int]) -> Usage:
        """The :class:`Usage` for ``(input, output)`` token counts."""
        return Usage(usage[0], usage[1], usage[0] + usage[1])

    def sse(self, events: list[bytes]) -> bytes:
        return b"".join(events)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """Local time in a city."""
    return f"09:00 in {city}"


REQUEST = ChatRequest((Message.system("Be terse."), Message.user("hi")))
TOKENS = ["The sea ", "is wide, ", "Ünïcode ✓ ", "and deep."]


async def _slow(events: list[bytes], gate: asyncio.Event, closed: list[bool]) -> AsyncIterator[bytes]:
    try:
        yield events[0]
        yield events[1]
        gate.set()
        await asyncio.sleep(30)
        for event in events[2:]:  # pragma: no cover - cancelled before
            yield event
    finally:
        closed.append(True)


class ChatModelContract:
    """The tests; a subclass sets :attr:`wire`."""

    wire: ClassVar[ProviderWire]

    def server(self, *answers: Any) -> tuple[Server, Any]:
        server = Server(list(answers))
        return server, self.wire.model(httpx.MockTransport(server.handle))

    def stream_answer(self, events: list[bytes]) -> Callable[[httpx.Request], httpx.Response]:
        return lambda _: response(200, self.wire.sse(events), headers=STREAM_HEADERS, chunk=7)

    # -- answers -------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_is_a_chat_model_with_a_plain_answer(self, waits: list[float]) -> None:
        server, model = self.server(lambda _: response(200, self.wire.text("The sea is wide.", (12, 5))))
        async with model:
            assert isinstance(model, ChatModel)
            result = await model.complete(REQUEST)
        assert result.text == "The sea is wide."
        assert result.message.tool_calls == ()
        assert result.finish_reason == "stop"
        assert result.usage == self.wire.usage((12, 5))
        (body,) = server.bodies
        assert self.wire.sent_system(body) == "Be terse."
        assert "Be terse." not in json.dumps(body).replace(json.dumps(self.wire.sent_system(body)), "", 1)
        header, value = self.wire.key_header
        assert server.requests[0].headers[header] == value
        assert waits == []

    @pytest.mark.anyio
    async def test_stream_deltas_join_to_the_answer(self) -> None:
        _server, model = self.server(self.stream_answer(self.wire.text_stream(TOKENS, (9, 4))))
        tokens: list[str] = []
        async with model:
            result = await model.stream(REQUEST, tokens.append)
        assert tokens == TOKENS
        assert result.text == "".join(TOKENS)
        assert result.finish_reason == "stop"
        assert result.usage == self.wire.usage((9, 4))

    @pytest.mark.anyio
    async def test_kernel_stream_text_equals_the_turn_result(self) -> None:
        _server, model = self.server(self.stream_answer(self.wire.text_stream(TOKENS, (9, 4))))
        async with model:
            text, events = await collect_stream(Kernel(model).run_stream("hi"))
        result = events[-1].result  # type: ignore[union-attr]
        assert [e.text for e in events if isinstance(e, TextDelta)] == TOKENS
        assert text == result.text == "".join(TOKENS)

    # -- tools ---------------------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize("streaming", [False, True])
    async def test_a_tool_round_in_the_native_shapes(self, streaming: bool) -> None:
        call: Call = ("call_w1", "get_weather", {"city": "Paris"})
        first = (
            self.stream_answer(self.wire.calls_stream([call])) if streaming else response(200, self.wire.calls([call]))
        )
        done = (
            self.stream_answer(self.wire.text_stream(["It is sunny."], (30, 4)))
            if streaming
            else response(200, self.wire.text("It is sunny.", (30, 4)))
        )
        server, model = self.server(first, done)
        async with model:
            kernel = Kernel(model, tools=[get_weather], system_prompt="Be terse.")
            result, text = await run_turn(kernel, "weather in Paris?", streaming)
        assert text == ("It is sunny." if streaming else None)
        assert result.text == "It is sunny."
        assert result.tool_calls_made == 1
        (asked,) = result.messages[1].tool_calls
        assert (asked.id, asked.name, dict(asked.arguments)) == call
        assert result.messages[2] == Message("tool", "sunny in Paris", (), "call_w1", "get_weather")
        first_body, second_body = server.bodies
        assert self.wire.sent_system(second_body) == "Be terse."
        assert self.wire.sent_calls(second_body) == [call]
        assert self.wire.sent_results(second_body) == [("call_w1", "sunny in Paris")]
        assert self.wire.sent_results(first_body) == []

    @pytest.mark.anyio
    @pytest.mark.parametrize("streaming", [False, True])
    async def test_parallel_tool_calls_all_run_and_return_in_order(self, streaming: bool) -> None:
        calls: list[Call] = [
            ("call_a", "get_weather", {"city": "Paris"}),
            ("call_b", "get_time", {"city": "Tokyo"}),
        ]
        first = (
            self.stream_answer(self.wire.calls_stream(calls)) if streaming else response(200, self.wire.calls(calls))
        )
        again = response(200, self.wire.calls(calls))
        server, model = self.server(first, again, response(200, self.wire.text("Done.", (1, 1))))
        async with model:
            probe = await (model.stream(REQUEST, lambda _: None) if streaming else model.complete(REQUEST))
            assert probe.finish_reason == "tool_calls"
            assert [(c.id, c.name, dict(c.arguments)) for c in probe.message.tool_calls] == calls
            result = await Kernel(model, tools=[get_weather, get_time]).run("both")
        assert result.text == "Done."
        assert self.wire.sent_calls(server.bodies[-1]) == calls
        assert self.wire.sent_results(server.bodies[-1]) == [("call_a", "sunny in Paris"), ("call_b", "09:00 in Tokyo")]

    # -- errors and retries --------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize(
        ("status", "error"), [(400, BadRequestError), (401, AuthenticationError), (404, NotFoundError)]
    )
    async def test_a_wrong_request_is_a_typed_error_and_not_retried(
        self, status: int, error: type[Exception], waits: list[float]
    ) -> None:
        server, model = self.server(lambda _: response(status, self.wire.error(status, f"refused with {status}")))
        async with model:
            with pytest.raises(error) as caught:
                await model.complete(REQUEST)
        assert caught.value.status_code == status  # type: ignore[union-attr]
        assert caught.value.message == f"refused with {status}"  # type: ignore[union-attr]
        assert str(caught.value) == f"HTTP {status}: refused with {status}"
        assert len(server.requests) == 1
        assert waits == []

    @pytest.mark.anyio
    async def test_429_waits_for_retry_after_then_answers(self, waits: list[float]) -> None:
        busy = response(429, self.wire.error(429, "slow down"), headers={"retry-after": "2"})
        server, model = self.server(busy, response(200, self.wire.text("ok", (1, 1))))
        async with model:
            assert (await model.complete(REQUEST)).text == "ok"
        assert waits == [2.0]
        assert len(server.requests) == 2

    @pytest.mark.anyio
    async def test_5xx_is_retried_with_backoff_then_raised(self, waits: list[float]) -> None:
        server, model = self.server(lambda _: response(503, self.wire.error(503, "try later")))
        async with model:
            with pytest.raises(InternalServerError) as caught:
                await model.stream(REQUEST, lambda _: None)
        assert caught.value.status_code == 503
        assert len(server.requests) == 3  # max_retries=2
        assert len(waits) == 2
        assert 0.375 <= waits[0] <= 0.5
        assert 0.75 <= waits[1] <= 1.0

    @pytest.mark.anyio
    async def test_a_cut_stream_is_retried_before_text_and_raised_after(self, waits: list[float]) -> None:
        cut = self.stream_answer(self.wire.cut_stream([]))
        server, model = self.server(cut, self.stream_answer(self.wire.text_stream(["ok"], (1, 1))))
        async with model:
            assert (await model.stream(REQUEST, lambda _: None)).text == "ok"
        assert len(waits) == 1
        server, model = self.server(self.stream_answer(self.wire.cut_stream(["half an "])))
        tokens: list[str] = []
        async with model:
            with pytest.raises(IncompleteStreamError):
                await model.stream(REQUEST, tokens.append)
        assert tokens == ["half an "]
        assert len(server.requests) == 1  # text reached the consumer: never retried

    # -- malformed answers ---------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize("body", [b"<html>oops</html>", b"[1, 2]", b'"text"', b"{}"])
    async def test_a_malformed_answer_is_a_response_error(self, body: bytes, waits: list[float]) -> None:
        server, model = self.server(lambda _: response(200, body))
        async with model:
            with pytest.raises(ProviderResponseError):
                await model.complete(REQUEST)
        assert len(server.requests) == 3  # retried like any broken answer

    @pytest.mark.anyio
    async def test_a_malformed_stream_event_is_a_response_error(self, waits: list[float]) -> None:
        server, model = self.server(self.stream_answer([b"data: {not json\n\n"]))
        async with model:
            with pytest.raises(ProviderResponseError, match="not valid JSON"):
                await model.stream(REQUEST, lambda _: None)
        assert len(server.requests) == 3

    @pytest.mark.anyio
    async def test_a_stream_request_answered_with_html_is_a_response_error(self, waits: list[float]) -> None:
        html = {"content-type": "text/html"}
        _server, model = self.server(lambda _: response(200, b"<html>maintenance</html>", headers=html))
        async with model:
            with pytest.raises(ProviderResponseError, match="content-type 'text/html'"):
                await model.stream(REQUEST, lambda _: None)

    # -- cancellation --------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_cancelling_mid_stream_closes_the_response(self) -> None:
        gate = asyncio.Event()
        closed: list[bool] = []
        events = self.wire.text_stream(TOKENS, (1, 1))

        def slow(_: httpx.Request) -> httpx.Response:
            return httpx.Response(200, headers=STREAM_HEADERS, content=_slow(events, gate, closed))

        _server, model = self.server(slow)
        tokens: list[str] = []
        async with model:
            task = asyncio.create_task(model.stream(REQUEST, tokens.append))
            await gate.wait()
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert closed == [True]
        assert "".join(tokens) in {"", TOKENS[0], "".join(TOKENS[:2])}

    # -- secrets -------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_the_key_is_in_no_repr_error_or_log(
        self, caplog: pytest.LogCaptureFixture, waits: list[float]
    ) -> None:
        caplog.set_level(logging.DEBUG)
        server, model = self.server(lambda _: response(500, self.wire.error(500, "broken")))
        async with model:
            with pytest.raises(InternalServerError) as caught:
                await model.complete(REQUEST)
            shown = [repr(model), str(model), str(caught.value), repr(caught.value), repr(caught.value.body)]
        shown += [record.getMessage() for record in caplog.records]
        assert waits  # it was retried, so the retry was logged
        assert any("retry" in line for line in shown)
        assert not [line for line in shown if KEY in line]
        assert KEY not in str(server.requests[0].url)

    @pytest.mark.anyio
    async def test_request_options_reach_the_body(self) -> None:
        server, model = self.server(response(200, self.wire.text("ok", (1, 1))))
        async with model:
            await model.complete(REQUEST.replace(tools=(get_weather,), tool_choice="required"))
        (body,) = server.bodies
        assert "get_weather" in json.dumps(body)


__all__ = ["KEY", "Call", "ChatModelContract", "ProviderWire", "ToolCall"]
