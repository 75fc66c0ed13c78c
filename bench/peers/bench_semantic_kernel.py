"""Semantic Kernel side of the side-by-side benchmark (see ``bench/bench_peers.py``).

Agent: a ``semantic_kernel.Kernel`` invoking a prompt function
(``KernelFunctionFromPrompt``, template ``{{$input}}``) with ``await kernel.invoke(...)``;
for the tool round with ``FunctionChoiceBehavior.Auto()``, so the chat service runs SK's
auto function-calling loop. This is the path where SK's filters wrap the model call:
``ChatCompletionAgent`` has no filter around the model call. Model: a
``ChatCompletionClientBase`` subclass (SK ships no fake service) implementing
``_inner_get_chat_message_contents`` and ``_inner_get_streaming_chat_message_contents``.
Layers: N ``FUNCTION_INVOCATION`` filters, pass-through; each wraps the prompt function
(so, once per turn, around both LLM calls of a tool round) and each tool call. Stream
transform: a function-invocation filter that wraps ``context.result.value`` (the
documented streaming-filter pattern). Prints one JSON object.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
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
from semantic_kernel import Kernel
from semantic_kernel.connectors.ai.chat_completion_client_base import ChatCompletionClientBase
from semantic_kernel.connectors.ai.function_choice_behavior import FunctionChoiceBehavior
from semantic_kernel.connectors.ai.prompt_execution_settings import PromptExecutionSettings
from semantic_kernel.contents import AuthorRole, ChatMessageContent, FunctionCallContent, StreamingChatMessageContent
from semantic_kernel.filters import FilterTypes, FunctionInvocationContext
from semantic_kernel.functions import FunctionResult, KernelArguments, kernel_function
from semantic_kernel.functions.kernel_function_from_prompt import KernelFunctionFromPrompt

Next = Callable[[FunctionInvocationContext], Awaitable[None]]


class FakeChat(ChatCompletionClientBase):
    """An in-process chat service: cycles through response factories, streams prebuilt tokens."""

    SUPPORTS_FUNCTION_CALLING = True
    responses: list[Any] = []  # noqa: RUF012  # a pydantic field: copied per instance
    tokens: Sequence[str] = ()
    index: int = 0
    calls: int = 0

    async def _inner_get_chat_message_contents(self, chat_history: Any, settings: Any) -> list[ChatMessageContent]:
        self.calls += 1
        index = self.index
        self.index = (index + 1) % len(self.responses)
        return [self.responses[index]()]

    async def _inner_get_streaming_chat_message_contents(
        self, chat_history: Any, settings: Any, function_invoke_attempt: int = 0
    ) -> AsyncGenerator[list[StreamingChatMessageContent], Any]:
        for token in self.tokens:
            yield [StreamingChatMessageContent(role=AuthorRole.ASSISTANT, content=token, choice_index=0)]


def service(responses: Sequence[Callable[[], ChatMessageContent]], tokens: Sequence[str] = ()) -> FakeChat:
    return FakeChat(ai_model_id="fake", service_id="fake", responses=list(responses), tokens=tokens)


class MathPlugin:
    @kernel_function(name="add", description="Add two integers.")
    async def add(self, a: int, b: int) -> int:
        return a + b


async def passthrough(context: FunctionInvocationContext, next: Next) -> None:  # SK's name
    """The layer under test: does nothing but call the inner layers."""
    await next(context)


def counting(seen: list[str]) -> Callable[[FunctionInvocationContext, Next], Awaitable[None]]:
    async def count(context: FunctionInvocationContext, next: Next) -> None:
        seen.append("chat" if context.function.name == "ask" else "tool")
        await next(context)

    return count


async def upper(context: FunctionInvocationContext, next: Next) -> None:
    """Upper-cases every streamed part (the one transforming layer)."""
    await next(context)
    if not context.is_streaming or context.result is None:
        return
    stream = context.result.value

    async def upper_stream() -> AsyncIterator[list[StreamingChatMessageContent]]:
        async for parts in stream:
            yield [
                StreamingChatMessageContent(role=p.role, content=str(p).upper(), choice_index=p.choice_index)
                for p in parts
            ]

    context.result = FunctionResult(function=context.result.function, value=upper_stream())


def answer() -> ChatMessageContent:
    return ChatMessageContent(role=AuthorRole.ASSISTANT, content=ANSWER_TEXT)


def tool_call() -> ChatMessageContent:
    call = FunctionCallContent(id="call_1", name="math-add", arguments='{"a": 1, "b": 2}')
    return ChatMessageContent(role=AuthorRole.ASSISTANT, items=[call])


ASK = KernelFunctionFromPrompt(function_name="ask", prompt="{{$input}}")


def kernel_with(responses: Sequence[Callable[[], ChatMessageContent]], filters: Sequence[Any], tools: bool) -> Kernel:
    kernel = Kernel()
    kernel.add_service(service(responses))
    if tools:
        kernel.add_plugin(MathPlugin(), "math")
    for flt in filters:
        kernel.add_filter(FilterTypes.FUNCTION_INVOCATION, flt)
    return kernel


def fake_of(kernel: Kernel) -> FakeChat:
    """The kernel's fake chat service."""
    found: Any = kernel.get_service("fake")
    check(isinstance(found, FakeChat), f"the kernel's 'fake' service is {found!r}")
    return found  # type: ignore[no-any-return]


def arguments(tools: bool) -> KernelArguments:
    if tools:
        settings = PromptExecutionSettings(function_choice_behavior=FunctionChoiceBehavior.Auto())
        return KernelArguments(settings=settings, input=QUESTION)
    return KernelArguments(input=QUESTION)


def build_agent() -> Kernel:
    """One agent with a tool and one layer (what the footprint probe builds)."""
    return kernel_with([tool_call, answer], [passthrough], tools=True)


async def turn(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    probe = kernel_with([answer], [counting(seen), counting(seen)], tools=False)
    out = await probe.invoke(ASK, arguments(False))
    check(str(out) == ANSWER_TEXT and seen == ["chat", "chat"], f"semantic kernel turn: {out}, {seen}")
    kernel = kernel_with([answer], [passthrough] * n, tools=False)
    args = arguments(False)
    out = await kernel.invoke(ASK, args)
    check(str(out) == ANSWER_TEXT, f"semantic kernel turn N={n}: {out}")
    invoke = kernel.invoke
    return lambda: invoke(ASK, args)


async def tool_round(n: int) -> Callable[[], Awaitable[Any]]:
    seen: list[str] = []
    probe = kernel_with([tool_call, answer], [counting(seen)], tools=True)
    out = await probe.invoke(ASK, arguments(True))
    check(
        str(out) == ANSWER_TEXT and seen == ["chat", "tool"] and fake_of(probe).calls == 2,
        f"semantic kernel tool round: {out}, {seen}",
    )
    kernel = kernel_with([tool_call, answer], [passthrough] * n, tools=True)
    args = arguments(True)
    out = await kernel.invoke(ASK, args)
    check(str(out) == ANSWER_TEXT, f"semantic kernel tool round N={n}: {out}")
    invoke = kernel.invoke
    return lambda: invoke(ASK, args)


def stream_consumer(kernel: Kernel) -> Callable[[], Awaitable[str]]:
    args = arguments(False)

    async def consume() -> str:
        parts: list[str] = []
        append = parts.append
        async for chunk in kernel.invoke_stream(ASK, args):
            for part in chunk:
                append(str(part))
        return "".join(parts)

    return consume


async def scenarios(timer: Timer) -> dict[str, Any]:
    bare = kernel_with([answer], [], tools=False)
    fake_of(bare).tokens = STREAM_TOKENS
    transformed = kernel_with([answer], [upper], tools=False)
    fake_of(transformed).tokens = STREAM_TOKENS
    return await run_scenarios(
        "semantic-kernel",
        f"semantic-kernel {version('semantic-kernel')}",
        "bench_semantic_kernel",
        timer,
        turn=turn,
        tool_round=tool_round,
        stream=(
            stream_consumer(bare),
            stream_consumer(transformed),
            "kernel.invoke_stream(prompt function); FUNCTION_INVOCATION filter wrapping context.result.value",
        ),
        mechanism="N FUNCTION_INVOCATION filters on Kernel; await kernel.invoke(prompt function)",
        notes=[
            "a function-invocation filter wraps the prompt function once per turn (both LLM calls of a "
            "tool round) plus each tool call: 2 passes per layer in a tool round, not 3",
        ],
    )


if __name__ == "__main__":
    main(scenarios)
