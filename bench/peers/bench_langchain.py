"""LangChain side of the side-by-side benchmark (see ``bench/bench_peers.py``).

Agent: ``langchain.agents.create_agent`` (v1, a LangGraph graph), called with
``await agent.ainvoke({"messages": [...]})``. Model: langchain-core's own test model
``GenericFakeChatModel``, subclassed only so that it (a) accepts ``bind_tools`` (the base
class raises), and (b) answers natively async, as every real provider does (the base
class would run ``_generate``/``_stream`` in a thread per call and per token, which would
charge LangChain for a cost its real models do not have). Layers: ``AgentMiddleware``
with ``awrap_model_call`` and ``awrap_tool_call``. Prints one JSON object.
"""

from __future__ import annotations

import itertools
import time
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from importlib.metadata import version
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
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.tools import tool
from langgraph.stream._types import StreamTransformer

# The v3 event stream (the only place a LangChain agent can rewrite tokens) is marked
# experimental and warns on every run; the warning is not what is measured.
warnings.filterwarnings("ignore", message="The v3 streaming protocol")


class FakeModel(GenericFakeChatModel):
    """``GenericFakeChatModel`` with tool binding and native async answers."""

    tokens: Sequence[str] = ()
    calls: int = 0

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self

    async def _agenerate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        self.calls += 1
        message = next(self.messages)
        # A new message per call, as a real provider returns: LangChain writes ids into it.
        fresh = AIMessage(content=message) if isinstance(message, str) else message.model_copy()
        return ChatResult(generations=[ChatGeneration(message=fresh)])

    async def _astream(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> AsyncIterator[ChatGenerationChunk]:
        message = next(self.messages)
        message_id = message.id if isinstance(message, AIMessage) else None
        last = len(self.tokens) - 1
        for index, token in enumerate(self.tokens):
            chunk = ChatGenerationChunk(
                message=AIMessageChunk(content=token, id=message_id, chunk_position="last" if index == last else None)
            )
            if run_manager is not None:
                await run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk


def fake(responses: Sequence[AIMessage], tokens: Sequence[str] = ()) -> FakeModel:
    messages: Iterator[AIMessage | str] = itertools.cycle(responses)
    return FakeModel(messages=messages, tokens=tokens)


class PassThrough(AgentMiddleware):
    """The layer under test: does nothing but call the inner layers."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self._name = f"layer{index}"

    @property
    def name(self) -> str:
        return self._name

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        return await handler(request)


class Counting(PassThrough):
    """Records each scope it wraps (for the sanity check)."""

    def __init__(self, index: int, seen: list[str]) -> None:
        super().__init__(index)
        self.seen = seen

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        self.seen.append("chat")
        return await handler(request)

    async def awrap_tool_call(self, request: Any, handler: Callable[[Any], Awaitable[Any]]) -> Any:
        self.seen.append("tool")
        return await handler(request)


class UpperTransformer(StreamTransformer):
    """Upper-cases every text delta of the v3 event stream, before the built-in projections."""

    before_builtins = True
    required_stream_modes = ("messages",)

    def init(self) -> dict[str, Any]:
        return {}

    def process(self, event: Any) -> bool:
        if event["method"] == "messages":
            payload = event["params"]["data"][0]
            if payload.get("event") == "content-block-delta":
                delta = payload["delta"]
                if delta.get("type") == "text-delta":
                    delta["text"] = delta["text"].upper()
        return True


class Upper(AgentMiddleware):
    """The one transforming layer: a middleware registering :class:`UpperTransformer`."""

    transformers = (UpperTransformer,)


@tool
async def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


ANSWER = AIMessage(content=ANSWER_TEXT)
CALL = AIMessage(
    content="", tool_calls=[{"name": "add", "args": {"a": 1, "b": 2}, "id": "call_1", "type": "tool_call"}]
)
STREAM_ANSWER = AIMessage(content="")  # the streamed text comes from ``tokens``


def build_agent() -> Any:
    """One agent with a tool and one layer (what the footprint probe builds)."""
    return create_agent(fake([CALL, ANSWER]), tools=[add], middleware=[PassThrough(0)])


def request() -> dict[str, Any]:
    return {"messages": [HumanMessage(QUESTION)]}


async def turn(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    probe: Any = create_agent(fake([ANSWER]), middleware=[Counting(i, seen) for i in range(2)])
    out = await probe.ainvoke(request())
    check(out["messages"][-1].content == ANSWER_TEXT and seen == ["chat", "chat"], f"langchain turn: {seen}")
    agent: Any = create_agent(fake([ANSWER]), middleware=[PassThrough(i) for i in range(n)])
    out = await agent.ainvoke(request())
    check(out["messages"][-1].content == ANSWER_TEXT and len(out["messages"]) == 2, f"langchain turn N={n}: {out}")
    ainvoke = agent.ainvoke
    return lambda: ainvoke(request())


async def tool_round(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    model = fake([CALL, ANSWER])
    probe: Any = create_agent(model, tools=[add], middleware=[Counting(0, seen)])
    out = await probe.ainvoke(request())
    check(
        out["messages"][-1].content == ANSWER_TEXT and seen == ["chat", "tool", "chat"] and model.calls == 2,
        f"langchain tool round: {seen}, {model.calls} model calls",
    )
    agent: Any = create_agent(fake([CALL, ANSWER]), tools=[add], middleware=[PassThrough(i) for i in range(n)])
    out = await agent.ainvoke(request())
    messages = out["messages"]
    check(
        len(messages) == 4 and messages[2].content == "3" and messages[-1].content == ANSWER_TEXT,
        f"langchain tool round N={n}: {messages}",
    )
    ainvoke = agent.ainvoke
    return lambda: ainvoke(request())


def stream_consumer(agent: Any) -> Callable[[], Awaitable[str]]:
    """The usual token stream: ``agent.astream(stream_mode="messages")``."""

    async def consume() -> str:
        parts: list[str] = []
        append = parts.append
        async for chunk, _meta in agent.astream({"messages": [HumanMessage("stream")]}, stream_mode="messages"):
            if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str):
                append(chunk.content)
        return "".join(parts)

    return consume


def v3_consumer(agent: Any) -> Callable[[], Awaitable[str]]:
    """The v3 event stream, where middleware-registered transformers run."""

    async def consume() -> str:
        parts: list[str] = []
        append = parts.append
        run = await agent.astream_events({"messages": [HumanMessage("stream")]}, version="v3")
        async for message in run.messages:
            async for text in message.text:
                append(text)
        return "".join(parts)

    return consume


async def scenarios(timer: Timer) -> dict[str, Any]:
    bare = create_agent(fake([STREAM_ANSWER], STREAM_TOKENS))
    upper = create_agent(fake([STREAM_ANSWER], STREAM_TOKENS), middleware=[Upper()])
    v3_bare = v3_consumer(create_agent(fake([STREAM_ANSWER], STREAM_TOKENS)))
    started = time.perf_counter()
    check(await v3_bare() == STREAM_TEXT, "the bare v3 stream delivers the 10,000 tokens")
    v3_once_ms = (time.perf_counter() - started) * 1000
    note = (
        "bare: agent.astream(stream_mode='messages'); transform: an AgentMiddleware registering a "
        "LangGraph StreamTransformer (before_builtins) that upper-cases text deltas, consumed through "
        "agent.astream_events(version='v3') (experimental); wrap_model_call itself only sees the finished "
        f"response. The v3 path costs about the same without the transform: {v3_once_ms:,.0f} ms in one run"
    )
    return await run_scenarios(
        "langchain",
        ", ".join(f"{name} {version(name)}" for name in ("langchain", "langchain-core", "langgraph")),
        "bench_langchain",
        timer,
        turn=turn,
        tool_round=tool_round,
        stream=(stream_consumer(bare), v3_consumer(upper), note),
        mechanism="AgentMiddleware(awrap_model_call, awrap_tool_call) on create_agent; await agent.ainvoke(...)",
        notes=["GenericFakeChatModel subclass: bind_tools returns self; native async _agenerate/_astream"],
    )


if __name__ == "__main__":
    main(scenarios)
