"""beamfilter side of the side-by-side benchmark (see ``bench/bench_peers.py``).

Agent: :class:`beamfilter_core.Kernel`; model: an in-process fake implementing the
``ChatModel`` protocol (``complete`` / ``stream``); layers: ``Filter(around_chat=...,
around_tool=...)`` pass-through hooks; stream transform: ``Filter(token=TokenTransform(...))``.
Prints one JSON object; run it with the venv that has beamfilter installed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from _common import (
    ANSWER_TEXT,
    QUESTION,
    STREAM_TEXT,
    STREAM_TOKENS,
    Timer,
    check,
    main,
    run_scenarios,
)

from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    Filter,
    Kernel,
    RunFinished,
    TextDelta,
    TokenTransform,
    ToolCall,
    __version__,
    tool,
)


class FakeModel:
    """A minimal in-process ChatModel: cycles through response factories.

    Each call builds a new response, as a real model does (and as the peers' fakes must).
    """

    def __init__(self, responses: Sequence[Callable[[], ChatResponse]], tokens: Sequence[str] = ()) -> None:
        self._responses = tuple(responses)
        self._next = 0
        self.tokens = tuple(tokens)
        self.calls = 0

    async def complete(self, request: ChatRequest) -> ChatResponse:
        self.calls += 1
        index = self._next
        self._next = (index + 1) % len(self._responses)
        return self._responses[index]()

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        for token in self.tokens:
            on_token(token)
        return await self.complete(request)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def answer() -> ChatResponse:
    return ChatResponse.from_text(ANSWER_TEXT)


def tool_call() -> ChatResponse:
    return ChatResponse.tool_calls(ToolCall("add", {"a": 1, "b": 2}, "call_1"))


def stream_answer() -> ChatResponse:
    return ChatResponse.from_text(STREAM_TEXT)


async def passthrough(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
    """The layer under test: does nothing but call the inner layers."""
    return await call_next(request)


def layers(n: int) -> list[Filter]:
    """N pass-through layers, each around the model call and around tool calls."""
    return [Filter(f"layer{i}", around_chat=passthrough, around_tool=passthrough) for i in range(n)]


def counting_layers(n: int, seen: list[str]) -> list[Filter]:
    """Like :func:`layers`, but each hook records its scope (for the sanity check)."""

    async def chat(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        seen.append("chat")
        return await call_next(request)

    async def tool_hook(request: Any, state: dict[str, Any], call_next: Callable[[Any], Awaitable[Any]]) -> Any:
        seen.append("tool")
        return await call_next(request)

    return [Filter(f"count{i}", around_chat=chat, around_tool=tool_hook) for i in range(n)]


def build_agent() -> Kernel:
    """One agent with a tool and one layer (what the footprint probe builds)."""
    return Kernel(model=FakeModel([tool_call, answer]), tools=[add], filters=layers(1))


async def turn(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    probe = Kernel(model=FakeModel([answer]), filters=counting_layers(2, seen))
    result = await probe.run(QUESTION)
    check(result.text == ANSWER_TEXT and seen == ["chat", "chat"], f"beamfilter turn: {result.text!r}, {seen}")
    kernel = Kernel(model=FakeModel([answer]), filters=layers(n))
    result = await kernel.run(QUESTION)
    check(result.text == ANSWER_TEXT and result.iterations == 1, f"beamfilter turn N={n}: {result!r}")
    run = kernel.run
    return lambda: run(QUESTION)


async def tool_round(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    model = FakeModel([tool_call, answer])
    probe = Kernel(model=model, tools=[add], filters=counting_layers(1, seen))
    result = await probe.run(QUESTION)
    check(
        result.text == ANSWER_TEXT and seen == ["chat", "tool", "chat"] and model.calls == 2,
        f"beamfilter tool round: {result.text!r}, {seen}, {model.calls} model calls",
    )
    kernel = Kernel(model=FakeModel([tool_call, answer]), tools=[add], filters=layers(n))
    result = await kernel.run(QUESTION)
    check(
        result.text == ANSWER_TEXT and result.tool_calls_made == 1 and result.messages[2].content == "3",
        f"beamfilter tool round N={n}: {result!r}",
    )
    run = kernel.run
    return lambda: run(QUESTION)


def upper_step(token: str, state: Any) -> tuple[tuple[str, ...], Any]:
    return (token.upper(),), state


def stream_consumer(kernel: Kernel) -> Callable[[], Awaitable[str]]:
    async def consume() -> str:
        parts: list[str] = []
        append = parts.append
        async for event in kernel.run_stream("stream"):
            if type(event) is TextDelta:
                append(event.text)
            elif isinstance(event, RunFinished) and event.result.status != "completed":
                msg = f"stream ended with {event.result!r}"
                raise RuntimeError(msg)
        return "".join(parts)

    return consume


async def scenarios(timer: Timer) -> dict[str, Any]:
    bare = Kernel(model=FakeModel([stream_answer], STREAM_TOKENS))
    upper = Kernel(
        model=FakeModel([stream_answer], STREAM_TOKENS), filters=[Filter("upper", token=TokenTransform(upper_step))]
    )
    return await run_scenarios(
        "beamfilter",
        __version__,
        "bench_beamfilter",
        timer,
        turn=turn,
        tool_round=tool_round,
        stream=(stream_consumer(bare), stream_consumer(upper), "Kernel.run_stream; Filter(token=TokenTransform)"),
        mechanism="Filter(around_chat=..., around_tool=...) on Kernel; await kernel.run(text)",
    )


if __name__ == "__main__":
    main(scenarios)
