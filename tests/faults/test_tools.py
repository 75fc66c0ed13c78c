"""Tool faults: a tool that raises, hangs past its timeout, returns something that is not
JSON, or returns a huge text. Each failure becomes a typed :class:`ToolResult` failure that
the model reads (never an exception out of the run), and the turn is stored whole.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from faults._faults import CID, kernel, sqlite_store

from beamfilter_builtins import tool_output_guard_filter
from beamfilter_core import ChatResponse, Filter, Kernel, Message, ScriptedModel, ToolCall, ToolResult, tool

pytestmark = pytest.mark.anyio


class Spy:
    """An around_tool filter that records what each tool call produced."""

    def __init__(self) -> None:
        self.results: list[ToolResult] = []

    async def around_tool(self, request: Any, state: dict[str, Any], call_next: Any) -> ToolResult:
        result: ToolResult = await call_next(request)
        self.results.append(result)
        return result

    def filter(self) -> Filter:
        return Filter("spy", around_tool=self.around_tool)


async def one_call(tmp_path: Path, the_tool: Any, arguments: dict[str, Any], **options: Any) -> tuple[ToolResult, Any]:
    """A turn that calls ``the_tool`` once, then answers; returns the tool result and the stored turn."""
    spy = Spy()
    call = ToolCall(the_tool.name, arguments, "call_1")
    model = ScriptedModel([ChatResponse.tool_calls(call), "Handled."])
    store = sqlite_store(tmp_path)
    try:
        k = kernel(model, store, tools=[the_tool], **options)
        k = k.with_filters([*k.filters, spy.filter()])
        result = await k.run("go", context={"conversation_id": CID})
        assert result.text == "Handled."
        (answer,) = spy.results
        # The model read exactly what the tool result says.
        assert model.requests[1].messages[-1] == Message.tool("call_1", answer.content, the_tool.name)
        stored = await store.load(CID)
        assert stored == list(result.messages)
        return answer, stored
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    ("exc", "kind", "text"),
    [
        (ValueError("no such city"), "semantic", "Tool 'broken' failed: ValueError: no such city"),
        (PermissionError("read-only"), "permission", "Tool 'broken' failed: PermissionError: read-only"),
        (ConnectionError("reset"), "transient", "Tool 'broken' failed: ConnectionError: reset"),
        (TimeoutError("upstream"), "transient", "Tool 'broken' failed: TimeoutError: upstream"),
    ],
)
async def test_a_raising_tool_is_a_typed_failure_the_model_reads(
    tmp_path: Path, exc: Exception, kind: str, text: str
) -> None:
    @tool
    def broken(city: str) -> str:
        """Always fails."""
        raise exc

    answer, stored = await one_call(tmp_path, broken, {"city": "Oslo"})
    assert answer.content == text
    assert answer.error is not None
    assert (answer.error.kind, answer.error.message) == (kind, text)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]


async def test_an_async_tool_hanging_past_its_timeout_is_cancelled(tmp_path: Path) -> None:
    cancelled = asyncio.Event()

    @tool(timeout=0.2)
    async def slow(city: str) -> str:
        """Never answers."""
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    started = time.monotonic()
    answer, _ = await one_call(tmp_path, slow, {"city": "Oslo"})
    assert time.monotonic() - started < 5
    assert answer.content == "Tool 'slow' timed out after 0.2 s."
    assert answer.error is not None
    assert answer.error.kind == "transient"
    assert cancelled.is_set()


async def test_the_kernel_tool_timeout_applies_to_a_hanging_sync_tool(tmp_path: Path) -> None:
    release = threading.Event()

    @tool
    def blocking(city: str) -> str:
        """Blocks its worker thread until released."""
        release.wait(30)
        return "late"

    started = time.monotonic()
    try:
        answer, _ = await one_call(tmp_path, blocking, {"city": "Oslo"}, tool_timeout=0.2)
    finally:
        release.set()  # a thread cannot be cancelled: let it finish
    assert time.monotonic() - started < 5
    assert answer.content == "Tool 'blocking' timed out after 0.2 s."


@pytest.mark.parametrize(("value", "type_name"), [(object(), "object"), ({"when": {1, 2}}, "dict"), (b"\xff", "bytes")])
async def test_a_non_serialisable_return_value_is_a_semantic_failure(
    tmp_path: Path, value: Any, type_name: str
) -> None:
    @tool
    def odd(city: str) -> Any:
        """Returns something that is not JSON."""
        return value

    answer, _ = await one_call(tmp_path, odd, {"city": "Oslo"})
    text = (
        f"Tool 'odd' returned a {type_name}, which is not JSON-serialisable; "
        "the tool should return a str, JSON data or a ToolResult."
    )
    assert answer.content == text
    assert answer.error is not None
    assert answer.error.kind == "semantic"


async def test_a_huge_output_reaches_the_model_and_the_store_whole_without_a_guard(tmp_path: Path) -> None:
    # The kernel itself does not cut tool output: 5 MB goes through unchanged.
    huge = "0123456789" * 500_000

    @tool
    def dump(city: str) -> str:
        """Returns 5 MB."""
        return huge

    answer, stored = await one_call(tmp_path, dump, {"city": "Oslo"})
    assert answer.content == huge
    assert stored[2].content == huge


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"max_chars": 1000}, "x" * 1000 + "\n[... 4999000 of 5000000 characters cut by tool_output_guard ...]"),
        (
            {"max_chars": 100, "keep_tail": 10, "truncation_marker": " <cut {omitted}> "},
            "x" * 90 + " <cut 4999900> " + "x" * 10,
        ),
    ],
)
async def test_a_huge_output_is_cut_with_a_marker_by_tool_output_guard(
    tmp_path: Path, options: dict[str, Any], expected: str
) -> None:
    @tool
    def dump(city: str) -> str:
        """Returns 5 MB."""
        return "x" * 5_000_000

    call = ToolCall("dump", {"city": "Oslo"}, "call_1")
    model = ScriptedModel([ChatResponse.tool_calls(call), "Handled."])
    store = sqlite_store(tmp_path)
    try:
        config = {
            "model": {"use": "scripted", "script": ["unused"]},
            "filters": [{"use": "memory", "store": store.url}, {"use": "tool_output_guard", **options}],
        }
        k = Kernel.from_config(config, model=model, tools=[dump])
        await k.run("go", context={"conversation_id": CID})
        assert model.requests[1].messages[-1].content == expected
        assert (await store.load(CID))[2].content == expected
    finally:
        await store.aclose()


async def test_a_secret_across_the_cut_is_masked_before_cutting(tmp_path: Path) -> None:
    secret = "sk-" + "A" * 30

    @tool
    def leak(city: str) -> str:
        """Returns a secret where the cut falls."""
        return "y" * 90 + secret + " " + "z" * 99

    answer_text = "y" * 90 + "[REDACTED]" + "\n[... 100 of 200 characters cut by tool_output_guard ...]"
    call = ToolCall("leak", {"city": "Oslo"}, "call_1")
    model = ScriptedModel([ChatResponse.tool_calls(call), "Handled."])
    k = Kernel(model, tools=[leak], filters=[tool_output_guard_filter(max_chars=100)])
    await k.run("go")
    seen = str(model.requests[1].messages[-1].content)
    assert seen == answer_text
    assert "sk-" not in seen
