"""Integration tests of the tool loop through the public API (issue 2, contract 8)."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from beamfilter_core import (
    ChatResponse,
    Filter,
    Kernel,
    Message,
    ScriptedModel,
    ToolCall,
    ToolRequest,
    ToolResult,
    tool,
)
from beamfilter_core.errors import FilterError, ToolDefinitionError


def _tool_messages(result: Any) -> list[Message]:
    return [m for m in result.messages if m.role == "tool"]


def test_calls_of_one_round_run_concurrently() -> None:
    @tool
    async def nap(i: int) -> int:
        """Sleep 100 ms."""
        await asyncio.sleep(0.1)
        return i

    calls = [ToolCall("nap", {"i": i}, f"c{i}") for i in range(10)]
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(*calls), "done"]), tools=[nap])
    started = time.perf_counter()
    result = kernel.run_sync("go")
    elapsed = time.perf_counter() - started
    assert elapsed < 0.3, f"10 x 100 ms tools took {elapsed:.3f} s"
    assert [m.content for m in _tool_messages(result)] == [str(i) for i in range(10)]
    assert [m.tool_call_id for m in _tool_messages(result)] == [f"c{i}" for i in range(10)]
    assert result.tool_calls_made == 10


def test_sync_tools_run_in_worker_threads_concurrently() -> None:
    main_thread = threading.get_ident()
    threads: list[int] = []

    @tool
    def block(i: int) -> int:
        """Blocking sleep."""
        threads.append(threading.get_ident())
        time.sleep(0.1)
        return i

    calls = [ToolCall("block", {"i": i}) for i in range(6)]
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(*calls), "done"]), tools=[block])
    started = time.perf_counter()
    kernel.run_sync("go")
    # one after another would take 0.6 s
    assert time.perf_counter() - started < 0.4
    assert main_thread not in threads
    assert len(threads) == 6


def test_serial_tool_forces_the_batch_in_order() -> None:
    order: list[str] = []

    @tool
    async def slow(label: str) -> str:
        """Slow."""
        await asyncio.sleep(0.05)
        order.append(label)
        return label

    @tool(serial=True)
    async def fast(label: str) -> str:
        """Fast and serial."""
        order.append(label)
        return label

    calls = [ToolCall("slow", {"label": "1"}), ToolCall("fast", {"label": "2"}), ToolCall("slow", {"label": "3"})]
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(*calls), "done"]), tools=[slow, fast])
    kernel.run_sync("go")
    assert order == ["1", "2", "3"]


def test_writes_fold_in_call_order_and_failed_writes_are_dropped() -> None:
    seen: list[Any] = []

    @tool
    async def put(value: str, delay: float) -> ToolResult:
        """Write."""
        await asyncio.sleep(delay)
        return ToolResult("ok", writes={"slot": value, value: True})

    @tool
    async def broken() -> ToolResult:
        """Fails after writing."""
        return ToolResult.failure("semantic", "nope").replace(writes={"slot": "broken"})

    @tool
    def read(context: Any) -> str:
        """Read the context."""
        seen.append(dict(context))
        return "read"

    calls = [
        ToolCall("put", {"value": "first", "delay": 0.05}),
        ToolCall("put", {"value": "second", "delay": 0.0}),
        ToolCall("broken", {}),
    ]
    model = ScriptedModel([ChatResponse.tool_calls(*calls), ChatResponse.tool_calls(ToolCall("read", {})), "done"])
    kernel = Kernel(model, tools=[put, broken, read])
    kernel.run_sync("go", context={"start": 1})
    # "second" completed first but folds after "first"; "broken" wrote nothing
    assert seen == [{"start": 1, "slot": "second", "first": True, "second": True}]


def test_tools_see_a_read_only_snapshot() -> None:
    @tool
    def mutate(context: Any) -> str:
        """Try to write the context."""
        context["x"] = 1
        return "unreachable"

    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(ToolCall("mutate", {})), "done"]), tools=[mutate])
    result = kernel.run_sync("go")
    (message,) = _tool_messages(result)
    assert message.content == (
        "Tool 'mutate' failed: TypeError: 'mappingproxy' object does not support item assignment"
    )


def test_timeout_is_a_transient_error_visible_to_tool_filters() -> None:
    seen: list[Any] = []

    @tool(timeout=0.05)
    async def hang() -> str:
        """Hangs."""
        await asyncio.sleep(5)
        return "never"

    async def watch(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        result = await call_next(request)
        seen.append(result.error)
        return result

    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("hang", {})), "done"]),
        tools=[hang],
        filters=[Filter("watch", around_tool=watch)],
    )
    started = time.perf_counter()
    result = kernel.run_sync("go")
    assert time.perf_counter() - started < 1.0
    assert seen[0].kind == "transient"
    assert seen[0].message == "Tool 'hang' timed out after 0.05 s."
    assert result.text == "done"


def test_kernel_default_timeout_applies_when_tool_has_none() -> None:
    @tool
    async def hang() -> str:
        """Hangs."""
        await asyncio.sleep(5)
        return "never"

    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("hang", {})), "done"]), tools=[hang], tool_timeout=0.05
    )
    (message,) = _tool_messages(kernel.run_sync("go"))
    assert message.content == "Tool 'hang' timed out after 0.05 s."


def test_model_mistakes_become_semantic_errors_and_the_loop_goes_on() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    bad_json = ToolCall.from_json("add", '{"a": 1, "b": ', "c1")
    unknown = ToolCall("subtract", {"a": 1}, "c2")
    bad_schema = ToolCall("add", {"a": "one", "b": 2}, "c3")
    good = ToolCall("add", {"a": 1, "b": 2}, "c4")
    model = ScriptedModel([ChatResponse.tool_calls(bad_json, unknown, bad_schema, good), "recovered"])
    kernel = Kernel(model, tools=[add])
    result = kernel.run_sync("go")
    assert result.status == "completed"
    assert result.text == "recovered"
    contents = [m.content for m in _tool_messages(result)]
    assert contents == [
        "Arguments for tool 'add' are not a JSON object: '{\"a\": 1, \"b\": '. "
        "Call the tool again with a JSON object of arguments.",
        "Unknown tool 'subtract'. Available tools: add. Call one of these.",
        "Invalid arguments for tool 'add': data.a must be integer. Fix them and call again.",
        "3",
    ]
    # the model saw these results in its second call
    assert [m.content for m in model.requests[1].messages if m.role == "tool"] == contents


def test_tool_exceptions_are_classified() -> None:
    @tool
    def flaky(kind: str) -> str:
        """Raise."""
        if kind == "conn":
            raise ConnectionError("reset")
        if kind == "perm":
            raise PermissionError("denied")
        raise ValueError("bad value")

    seen: list[Any] = []

    async def watch(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        result = await call_next(request)
        seen.append((result.error.kind, result.content))
        return result

    calls = [ToolCall("flaky", {"kind": k}) for k in ("conn", "perm", "value")]
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(*calls), "ok"]), tools=[flaky], filters=[Filter("w", around_tool=watch)]
    )
    kernel.run_sync("go")
    assert sorted(seen) == [
        ("permission", "Tool 'flaky' failed: PermissionError: denied"),
        ("semantic", "Tool 'flaky' failed: ValueError: bad value"),
        ("transient", "Tool 'flaky' failed: ConnectionError: reset"),
    ]


def test_return_direct_only_when_all_marked_and_none_failed() -> None:
    @tool(return_direct=True)
    def final(text: str) -> str:
        """Answer directly."""
        if text == "fail":
            raise ValueError("boom")
        return text

    @tool
    def other() -> str:
        """Not direct."""
        return "other"

    direct = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("final", {"text": "a"}), ToolCall("final", {"text": "b"}))]),
        tools=[final, other],
    )
    result = direct.run_sync("go")
    assert result.return_direct is True
    assert result.text == "a\nb"
    assert result.iterations == 1

    mixed = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("final", {"text": "a"}), ToolCall("other", {})), "model"]),
        tools=[final, other],
    )
    assert mixed.run_sync("go").text == "model"

    failed = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("final", {"text": "fail"})), "model"]), tools=[final]
    )
    result = failed.run_sync("go")
    assert (result.text, result.return_direct) == ("model", False)


def test_non_serialisable_tool_value_is_a_semantic_error() -> None:
    @tool
    def weird() -> Any:
        """Returns an object."""
        return object()

    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(ToolCall("weird", {})), "ok"]), tools=[weird])
    (message,) = _tool_messages(kernel.run_sync("go"))
    assert message.content == (
        "Tool 'weird' returned a object, which is not JSON-serialisable; "
        "the tool should return a str, JSON data or a ToolResult."
    )


def test_tool_schema_comes_from_type_hints() -> None:
    from typing import Literal

    @tool
    def search(
        query: str, limit: int = 5, mode: Literal["fast", "deep"] = "fast", tags: list[str] | None = None
    ) -> str:
        """Search the index.

        Longer text that is not part of the description.
        """
        return query

    assert search.description == "Search the index."
    assert search.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer"},
            "mode": {"enum": ["fast", "deep"]},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}]},
        },
        "required": ["query"],
        "additionalProperties": False,
    }


def test_bad_tool_declarations_are_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Tool 'f' has timeout='5s'; give a positive number"):

        @tool(timeout="5s")  # type: ignore[arg-type]
        def f() -> None:
            """F."""

    @tool
    def g() -> None:
        """G."""

    @tool(name="g")
    def other_g() -> None:
        """Another G."""

    with pytest.raises(
        ToolDefinitionError, match=r"Two tools are named 'g' \(the kernel's tools and the kernel's tools\)"
    ):
        Kernel(ScriptedModel([]), tools=[g, other_g])
    with pytest.raises(ToolDefinitionError, match=r"Two tools are named 'g' \(the kernel's tools and filter 'f'\)"):
        Kernel(ScriptedModel([]), tools=[g], filters=[Filter("f", tools=[other_g])])


def test_a_tool_raising_timeout_error_itself_is_a_transient_error() -> None:
    @tool
    def upstream() -> str:
        """Calls a slow service."""
        raise TimeoutError("upstream took too long")

    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(ToolCall("upstream", {})), "ok"]), tools=[upstream])
    (message,) = _tool_messages(kernel.run_sync("go"))
    assert message.content == "Tool 'upstream' failed: TimeoutError: upstream took too long"


def test_a_chat_filter_can_route_one_call_to_another_model() -> None:
    backup = ScriptedModel(["from backup"])

    async def route(request: Any, state: dict[str, Any], call_next: Any) -> Any:
        return await call_next(request.replace(model=backup))

    primary = ScriptedModel([])
    kernel = Kernel(primary, filters=[Filter("route", around_chat=route)])
    assert kernel.run_sync("go").text == "from backup"
    assert (len(primary.requests), len(backup.requests)) == (0, 1)


def test_filters_can_provide_tools() -> None:
    @tool
    def lookup(term: str) -> str:
        """Look a term up."""
        return f"{term}: found"

    provider = Filter("provider", tools=[lookup])
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("lookup", {"term": "x"})), "done"])
    kernel = Kernel(model, filters=[provider])
    assert [t.name for t in kernel.tools] == ["lookup"]
    result = kernel.run_sync("go")
    assert [m.content for m in _tool_messages(result)] == ["x: found"]
    assert [t.name for t in model.requests[0].tools] == ["lookup"]
    # with other filters the provided tool goes away
    assert kernel.with_filters([]).tools == ()


def test_a_failing_call_cancels_the_rest_of_its_batch() -> None:
    finished: list[str] = []

    @tool
    async def slow() -> str:
        """Slow."""
        await asyncio.sleep(0.5)
        finished.append("slow")
        return "late"

    @tool
    def quick() -> str:
        """Quick."""
        return "now"

    async def explode_on_quick(request: ToolRequest, state: dict[str, Any], call_next: Any) -> ToolResult:
        if request.tool.name == "quick":
            raise RuntimeError("filter bug")
        return await call_next(request)

    async def main() -> None:
        kernel = Kernel(
            ScriptedModel([ChatResponse.tool_calls(ToolCall("slow", {}), ToolCall("quick", {})), "x"]),
            tools=[slow, quick],
            filters=[Filter("exploder", around_tool=explode_on_quick)],
        )
        with pytest.raises(FilterError, match="Filter 'exploder' raised RuntimeError: filter bug"):
            await kernel.run("go")
        await asyncio.sleep(0.7)

    started = time.perf_counter()
    asyncio.run(main())
    assert time.perf_counter() - started < 1.5
    assert finished == []  # the slow sibling was cancelled, not left running
