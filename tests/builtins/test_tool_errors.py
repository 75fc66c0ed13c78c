"""tool_errors: tool exceptions become concise results; tracebacks go to the log."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from beamfilter_builtins import tool_errors_filter
from beamfilter_builtins._tool_errors import SPEC
from beamfilter_core import (
    ChatResponse,
    Filter,
    Kernel,
    ScriptedModel,
    ToolCall,
    ToolRequest,
    TurnResult,
    tool,
)
from beamfilter_core.errors import ConfigError, LimitExceeded
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


@tool
def divide(a: int, b: int) -> float:
    """Divide."""
    return a / b


@tool
async def fetch(url: str) -> str:
    """Fetch a URL."""
    raise ConnectionError(f"cannot reach {url}")


@tool
def secret(name: str) -> str:
    """Read a secret."""
    raise PermissionError("")


def script(*calls: ToolCall) -> ScriptedModel:
    return ScriptedModel([ChatResponse.tool_calls(*calls), "done"])


def tool_texts(result: TurnResult) -> list[Any]:
    return [m.content for m in result.messages if m.role == "tool"]


async def test_exceptions_become_concise_results_with_hints(stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    model = script(
        ToolCall("divide", {"a": 1, "b": 0}, "c1"),
        ToolCall("fetch", {"url": "http://x"}, "c2"),
        ToolCall("secret", {"name": "k"}, "c3"),
    )
    kernel = Kernel(model, tools=[divide, fetch, secret], filters=[tool_errors_filter()])
    with caplog.at_level(logging.ERROR, logger="beamfilter.tool_errors"):
        result, streamed = await run_turn(kernel, "go", stream)
    assert tool_texts(result) == [
        "Tool 'divide' failed: ZeroDivisionError: division by zero (Check the arguments, then call again with "
        "corrected values or answer without this tool.)",
        "Tool 'fetch' failed: ConnectionError: cannot reach http://x (This may be temporary; you may try the same "
        "call again once.)",
        "Tool 'secret' failed: PermissionError (This is not allowed; do not retry, tell the user instead.)",
    ]
    assert "Traceback" not in "".join(map(str, tool_texts(result)))
    records = [r for r in caplog.records if r.name == "beamfilter.tool_errors"]
    assert sorted(r.getMessage() for r in records) == [
        "tool 'divide' raised (call c1)",
        "tool 'fetch' raised (call c2)",
        "tool 'secret' raised (call c3)",
    ]
    assert all(r.exc_info is not None for r in records)
    assert result.text == "done"
    if stream:
        assert streamed == "done"


async def test_failure_kinds_match_the_exception() -> None:
    seen: list[tuple[str, str]] = []

    async def spy(request: ToolRequest, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        result = await call_next(request)
        seen.append((request.tool.name, result.error.kind))
        return result

    model = script(
        ToolCall("divide", {"a": 1, "b": 0}), ToolCall("fetch", {"url": "u"}), ToolCall("secret", {"name": "k"})
    )
    kernel = Kernel(
        model, tools=[divide, fetch, secret], filters=[Filter("spy", around_tool=spy), tool_errors_filter()]
    )
    await kernel.run("go")
    assert sorted(seen) == [("divide", "semantic"), ("fetch", "transient"), ("secret", "permission")]


def short(exc: BaseException, request: ToolRequest) -> str:
    return f"{request.tool.name}({request.arguments['a']}/{request.arguments['b']}) is undefined"


async def test_per_tool_formatter_by_import_path_and_long_messages_are_cut() -> None:
    @tool
    def noisy() -> str:
        """Raise a long error."""
        raise RuntimeError("x" * 500)

    model = script(ToolCall("divide", {"a": 7, "b": 0}), ToolCall("noisy", {}))
    flt = tool_errors_filter(max_length=30, hints={"semantic": ""}, formatters={"divide": f"{__name__}:short"})
    result = await Kernel(model, tools=[divide, noisy], filters=[flt]).run("go")
    assert tool_texts(result) == ["divide(7/0) is undefined", "Tool 'noisy' failed: RuntimeError: " + "x" * 27 + "..."]


async def test_errors_of_inner_filters_are_caught_but_limits_pass() -> None:
    async def broken(request: ToolRequest, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        raise KeyError("slot")

    kernel = Kernel(
        script(ToolCall("divide", {"a": 4, "b": 2})),
        tools=[divide],
        filters=[tool_errors_filter(), Filter("broken", around_tool=broken)],
    )
    result = await kernel.run("go")
    assert str(tool_texts(result)[0]).startswith("Tool 'divide' failed: KeyError: 'slot' (")

    async def limit(request: ToolRequest, state: dict[str, Any], call_next: Callable[..., Awaitable[Any]]) -> Any:
        raise LimitExceeded("too many", limit="x", value=2, maximum=1)

    kernel = Kernel(
        script(ToolCall("divide", {"a": 4, "b": 2})),
        tools=[divide],
        filters=[tool_errors_filter(), Filter("limit", around_tool=limit)],
    )
    with pytest.raises(LimitExceeded, match="too many"):
        await kernel.run("go")


async def test_successful_calls_are_untouched() -> None:
    result = await Kernel(
        script(ToolCall("divide", {"a": 9, "b": 3})), tools=[divide], filters=[tool_errors_filter()]
    ).run("go")
    assert tool_texts(result) == ["3.0"]


def test_bad_options() -> None:
    with pytest.raises(ConfigError) as caught:
        tool_errors_filter(formatter="no_colon_here")
    assert str(caught.value) == (
        "tool_errors_filter(formatter='no_colon_here') is invalid; give a callable or an import path such as "
        "'mypackage.module:function'."
    )
    with pytest.raises(ConfigError) as caught:
        tool_errors_filter(formatters={"divide": "json:nothing_here"})
    assert str(caught.value) == (
        "tool_errors_filter(formatters['divide']='json:nothing_here'): module 'json' has no attribute 'nothing_here'."
    )


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("tool_errors", ("tool",))


async def test_a_tool_raising_timeout_error_itself_becomes_a_transient_result() -> None:
    # Without a tool timeout the kernel lets a TimeoutError raised by the tool escape;
    # tool_errors catches it inside the wrapper.
    @tool
    async def slow_api() -> str:
        """Call a slow API."""
        raise TimeoutError("upstream took too long")

    model = script(ToolCall("slow_api", {}))
    result = await Kernel(model, tools=[slow_api], filters=[tool_errors_filter()]).run("go")
    assert tool_texts(result) == [
        "Tool 'slow_api' failed: TimeoutError: upstream took too long (This may be temporary; you may try the same "
        "call again once.)"
    ]


def test_unknown_hint_kinds_are_rejected() -> None:
    with pytest.raises(ConfigError) as caught:
        tool_errors_filter(hints={"fatal": "give up"})
    assert str(caught.value) == (
        "tool_errors_filter(hints=...) has unknown kinds ['fatal']; use transient, semantic or permission."
    )
