"""Microsoft Agent Framework side of the side-by-side benchmark (see ``bench/bench_peers.py``).

Agent: ``agent_framework.Agent``, called with ``await agent.run(text)``. Model: the
framework ships no fake client, so this is the documented custom client: a
``BaseChatClient`` subclass implementing ``_inner_get_response`` (non-streaming and
streaming), composed with the same layers as the framework's public clients
(``FunctionInvocationLayer``, ``ChatMiddlewareLayer``, ``ChatTelemetryLayer``), so tool
calls are invoked and chat middleware runs around each model call. Layers: N
``ChatMiddleware`` (around each model call) and N ``FunctionMiddleware`` (around each
tool call), pass-through. Stream transform: a ``ChatMiddleware`` that appends a hook to
``context.stream_transform_hooks``. Prints one JSON object.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from importlib.metadata import version
from typing import Any

from _common import (
    ANSWER_TEXT,
    QUESTION,
    STREAM_TOKENS,
    Timer,
    check,
    main,
    run_scenarios,
)
from agent_framework import (
    Agent,
    BaseChatClient,
    ChatContext,
    ChatMiddleware,
    ChatMiddlewareLayer,
    ChatResponse,
    ChatResponseUpdate,
    Content,
    FunctionInvocationContext,
    FunctionInvocationLayer,
    FunctionMiddleware,
    Message,
    tool,
)
from agent_framework.observability import ChatTelemetryLayer


class FakeClient(FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer, BaseChatClient):
    """An in-process chat client: cycles through response factories, streams prebuilt tokens.

    Each call builds a new ``ChatResponse``, as a real client does: the framework appends
    the turn's messages to the response object it gets, so a shared one would grow.
    """

    def __init__(
        self, responses: Sequence[Callable[[], ChatResponse]], tokens: Sequence[str] = (), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self._responses = tuple(responses)
        self._next = 0
        self.tokens = tuple(tokens)
        self.calls = 0

    def _inner_get_response(
        self, *, messages: Sequence[Message], stream: bool, options: Mapping[str, Any], **kwargs: Any
    ) -> Any:
        self.calls += 1
        if stream:
            return self._build_response_stream(self._updates())
        index = self._next
        self._next = (index + 1) % len(self._responses)
        return self._answer(self._responses[index]())

    async def _answer(self, response: ChatResponse) -> ChatResponse:
        return response

    async def _updates(self) -> AsyncIterator[ChatResponseUpdate]:
        for token in self.tokens:
            yield ChatResponseUpdate(role="assistant", contents=[Content.from_text(token)])


class PassChat(ChatMiddleware):
    """The layer under test around the model call."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class PassFunction(FunctionMiddleware):
    """The layer under test around tool calls."""

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        await call_next()


class CountChat(ChatMiddleware):
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.seen.append("chat")
        await call_next()


class CountFunction(FunctionMiddleware):
    def __init__(self, seen: list[str]) -> None:
        self.seen = seen

    async def process(self, context: FunctionInvocationContext, call_next: Callable[[], Awaitable[None]]) -> None:
        self.seen.append("tool")
        await call_next()


def _upper(update: ChatResponseUpdate) -> ChatResponseUpdate:
    return ChatResponseUpdate(role=update.role, contents=[Content.from_text(update.text.upper())])


class Upper(ChatMiddleware):
    """Upper-cases every streamed update (the one transforming layer)."""

    async def process(self, context: ChatContext, call_next: Callable[[], Awaitable[None]]) -> None:
        context.stream_transform_hooks.append(_upper)
        await call_next()


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def answer() -> ChatResponse:
    return ChatResponse(messages=[Message(role="assistant", contents=[ANSWER_TEXT])])


def tool_call() -> ChatResponse:
    call = Content.from_function_call(call_id="call_1", name="add", arguments={"a": 1, "b": 2})
    return ChatResponse(messages=[Message(role="assistant", contents=[call])])


def layers(n: int) -> list[Any]:
    return [*(PassChat() for _ in range(n)), *(PassFunction() for _ in range(n))]


def build_agent() -> Agent:
    """One agent with a tool and one layer (what the footprint probe builds)."""
    return Agent(client=FakeClient([tool_call, answer]), tools=[add], middleware=layers(1))


async def turn(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    probe = Agent(client=FakeClient([answer]), middleware=[CountChat(seen), CountChat(seen), CountFunction(seen)])
    out = await probe.run(QUESTION)
    check(out.text == ANSWER_TEXT and seen == ["chat", "chat"], f"agent framework turn: {out.text!r}, {seen}")
    client = FakeClient([answer])
    agent = Agent(client=client, middleware=layers(n))
    out = await agent.run(QUESTION)
    check(out.text == ANSWER_TEXT and client.calls == 1, f"agent framework turn N={n}: {out!r}")
    run = agent.run
    return lambda: run(QUESTION)


async def tool_round(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    client = FakeClient([tool_call, answer])
    probe = Agent(client=client, tools=[add], middleware=[CountChat(seen), CountFunction(seen)])
    out = await probe.run(QUESTION)
    check(
        out.text == ANSWER_TEXT and seen == ["chat", "tool", "chat"] and client.calls == 2,
        f"agent framework tool round: {out.text!r}, {seen}, {client.calls} model calls",
    )
    agent = Agent(client=FakeClient([tool_call, answer]), tools=[add], middleware=layers(n))
    out = await agent.run(QUESTION)
    results = [c.result for m in out.messages for c in m.contents if c.type == "function_result"]
    check(
        out.text == ANSWER_TEXT and [str(r) for r in results] == ["3"], f"agent framework tool round N={n}: {results}"
    )
    run = agent.run
    return lambda: run(QUESTION)


def stream_consumer(agent: Agent) -> Callable[[], Awaitable[str]]:
    async def consume() -> str:
        parts: list[str] = []
        append = parts.append
        async for update in agent.run("stream", stream=True):
            append(update.text)
        return "".join(parts)

    return consume


async def scenarios(timer: Timer) -> dict[str, Any]:
    bare = Agent(client=FakeClient([answer], STREAM_TOKENS))
    upper = Agent(client=FakeClient([answer], STREAM_TOKENS), middleware=[Upper()])
    return await run_scenarios(
        "agent-framework",
        f"agent-framework-core {version('agent-framework-core')}",
        "bench_agent_framework",
        timer,
        turn=turn,
        tool_round=tool_round,
        stream=(
            stream_consumer(bare),
            stream_consumer(upper),
            "agent.run(text, stream=True); ChatMiddleware adding a context.stream_transform_hooks entry",
        ),
        mechanism="N ChatMiddleware + N FunctionMiddleware on Agent; await agent.run(text)",
        notes=["custom BaseChatClient composed with FunctionInvocationLayer, ChatMiddlewareLayer, ChatTelemetryLayer"],
    )


if __name__ == "__main__":
    main(scenarios)
