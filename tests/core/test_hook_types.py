"""The public hook types are precise: a fully annotated plugin passes ``mypy --strict`` with no
ignores, and mypy rejects a hook with the wrong request, response or token state."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

import beamfilter_core
from beamfilter_core import Filter, Kernel, ScriptedModel, TokenStep, TokenTransform

GOOD = """
from collections.abc import Sequence

from beamfilter_core import (
    ChatHook, ChatNext, ChatRequest, ChatResponse, Decision, Filter, FilterState, GateHook, GateNext,
    GateRequest, IterationHook, IterationNext, IterationRequest, IterationResult, TokenFlush, TokenStep,
    TokenTransform, ToolHook, ToolNext, ToolRequest, ToolResult, TurnHook, TurnNext, TurnRequest, TurnResult,
)


async def turn(request: TurnRequest, state: FilterState, call_next: TurnNext) -> TurnResult:
    result = await call_next(request.replace(context={"checked": True}))
    return result.replace(blocked_by=None)


async def iteration(request: IterationRequest, state: FilterState, call_next: IterationNext) -> IterationResult:
    return (await call_next(request)).replace(return_direct=False)


async def chat(request: ChatRequest, state: FilterState, call_next: ChatNext) -> ChatResponse:
    response = await call_next(request.replace(tools=()))
    return response.replace(message=response.message.replace(content=response.text.strip()))


async def tool(request: ToolRequest, state: FilterState, call_next: ToolNext) -> ToolResult:
    return (await call_next(request.replace(arguments={}))).replace(content="ok")


async def gate(request: GateRequest, state: FilterState, call_next: GateNext) -> Decision:
    return Decision.reject("no") if request.call.name == "rm" else await call_next(request.replace(context={}))


def count(token: str, seen: int) -> tuple[Sequence[str], int]:
    return (token,), seen + len(token)


def done(seen: int) -> Sequence[str]:
    return (f" [{seen}]",)


turn_hook: TurnHook = turn
iteration_hook: IterationHook = iteration
chat_hook: ChatHook = chat
tool_hook: ToolHook = tool
gate_hook: GateHook = gate
step: TokenStep[int] = count
flush: TokenFlush[int] = done
FILTER = Filter(
    "typed",
    around_turn=turn_hook,
    around_iteration=iteration_hook,
    around_chat=chat_hook,
    around_tool=tool_hook,
    around_gate=gate_hook,
    token=TokenTransform(step, init=0, flush=flush),
)
"""

BAD = """
from collections.abc import Sequence

from beamfilter_core import ChatHook, ChatNext, ChatRequest, FilterState, TokenStep, TurnResult


async def chat(request: ChatRequest, state: FilterState, call_next: ChatNext) -> TurnResult:
    return TurnResult("completed")


def count(token: str, seen: str) -> tuple[Sequence[str], str]:
    return (token,), seen


async def confused(request: ChatRequest, state: FilterState, call_next: ChatNext) -> TurnResult:
    return (await call_next(request)).replace(finish_reason="stop")


chat_hook: ChatHook = chat
step: TokenStep[int] = count
"""


@pytest.mark.slow
def test_mypy_strict_accepts_typed_hooks_and_rejects_wrong_ones(tmp_path: Path) -> None:
    (tmp_path / "good_plugin.py").write_text(GOOD, encoding="utf-8")
    (tmp_path / "bad_plugin.py").write_text(BAD, encoding="utf-8")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--strict",
            "--no-error-summary",
            "--hide-error-context",
            "--no-pretty",
            "--cache-dir",
            str(tmp_path / "cache"),
            "good_plugin.py",
            "bad_plugin.py",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    errors = [line.split(": error: ")[0] + ": " + line.split(": error: ")[1] for line in done.stdout.splitlines()]
    assert errors == [
        'bad_plugin.py:16: Incompatible return value type (got "ChatResponse", expected "TurnResult")  [return-value]',
        "bad_plugin.py:19: Incompatible types in assignment (expression has type "
        '"Callable[[ChatRequest, dict[str, Any], Callable[[ChatRequest], Awaitable[ChatResponse]]], '
        'Coroutine[Any, Any, TurnResult]]", variable has type "Callable[[ChatRequest, dict[str, Any], '
        'Callable[[ChatRequest], Awaitable[ChatResponse]]], Awaitable[ChatResponse]]")  [assignment]',
        "bad_plugin.py:20: Incompatible types in assignment (expression has type "
        '"Callable[[str, str], tuple[Sequence[str], str]]", variable has type '
        '"Callable[[str, int], tuple[Sequence[str], int]]")  [assignment]',
    ], done.stdout + done.stderr


def test_the_hook_types_are_exported_and_usable_at_runtime() -> None:
    names = {"ChatHook", "ChatNext", "FilterState", "GateHook", "GateNext", "IterationHook", "IterationNext"}
    names |= {"TokenFlush", "TokenStep", "ToolHook", "ToolNext", "TurnHook", "TurnNext"}
    assert names <= set(beamfilter_core.__all__)

    def shout(token: str, state: int) -> tuple[Sequence[str], int]:
        return (token.upper(),), state + 1

    step: TokenStep[int] = shout
    kernel = Kernel(ScriptedModel(["hi there"]), filters=[Filter("loud", token=TokenTransform(step, init=0))])
    assert kernel.run_sync("x").text == "hi there"  # applies_to="stream": the answer is unchanged
