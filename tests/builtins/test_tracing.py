"""tracing: OpenTelemetry spans per scope, checked with the in-memory span exporter."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import beamfilter_builtins._tracing as tracing_module
from beamfilter_builtins import tracing_filter
from beamfilter_builtins._tracing import SPEC
from beamfilter_core import (
    BuildContext,
    ChatResponse,
    Kernel,
    ScriptedModel,
    ToolCall,
    Usage,
    tool,
)
from beamfilter_core.errors import ScriptExhaustedError
from beamfilter_core.testing import collect_stream

pytestmark = pytest.mark.anyio


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    return tracer_provider


@tool
def add(a: int, b: int) -> int:
    """Add."""
    return a + b


@tool
def broken() -> str:
    """Always fails."""
    raise ValueError("nope")


def by_name(spans: Any) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_spans_nest_and_carry_genai_attributes(exporter: InMemorySpanExporter, stream: bool) -> None:
    first = ChatResponse.tool_calls(ToolCall("add", {"a": 2, "b": 3}, "c1"), ToolCall("broken", {}, "c2"))
    first = first.replace(usage=Usage(10, 4, 14))
    model = ScriptedModel([first, ChatResponse.from_text("5", usage=Usage(20, 1, 21))])
    flt = tracing_filter(tracer_provider=provider(exporter), model_name="gpt-test", provider_name="openai")
    kernel = Kernel(model, tools=[add, broken], filters=[flt])
    if stream:
        text, _ = await collect_stream(kernel.run_stream("2+3?"))
        assert text == "5"
    else:
        assert (await kernel.run("2+3?")).text == "5"
    spans = exporter.get_finished_spans()
    assert sorted(span.name for span in spans) == [
        "beamfilter.iteration",
        "beamfilter.iteration",
        "chat gpt-test",
        "chat gpt-test",
        "execute_tool add",
        "execute_tool broken",
        "invoke_agent beamfilter",
    ]
    named = by_name(spans)
    turn = named["invoke_agent beamfilter"]
    assert turn.parent is None
    assert dict(turn.attributes or {}) == {
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "invoke_agent",
        "beamfilter.turn.resume": False,
        "beamfilter.turn.status": "completed",
        "beamfilter.turn.iterations": 2,
        "beamfilter.turn.tool_calls": 2,
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 5,
    }
    iterations = [s for s in spans if s.name == "beamfilter.iteration"]
    assert all(s.parent is not None and s.parent.span_id == turn.context.span_id for s in iterations)
    assert [dict(s.attributes or {})["beamfilter.iteration.status"] for s in iterations] == ["continue", "completed"]
    chats = [s for s in spans if s.name == "chat gpt-test"]
    assert dict(chats[0].attributes or {}) == {
        "gen_ai.provider.name": "openai",
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": "gpt-test",
        "beamfilter.chat.messages": 1,
        "beamfilter.chat.tools": 2,
        "gen_ai.response.finish_reasons": ("tool_calls",),
        "gen_ai.usage.input_tokens": 10,
        "gen_ai.usage.output_tokens": 4,
        "beamfilter.chat.tool_calls": ("add", "broken"),
    }
    assert chats[0].parent is not None
    assert chats[0].parent.span_id == iterations[0].context.span_id
    tool_add, tool_broken = named["execute_tool add"], named["execute_tool broken"]
    assert dict(tool_add.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "add",
        "gen_ai.tool.call.id": "c1",
        "gen_ai.tool.type": "function",
    }
    assert tool_add.status.status_code is StatusCode.UNSET
    assert tool_add.parent is not None
    assert tool_add.parent.span_id == iterations[0].context.span_id
    assert tool_broken.status.status_code is StatusCode.ERROR
    assert tool_broken.status.description == "Tool 'broken' failed: ValueError: nope"
    assert dict(tool_broken.attributes or {})["error.type"] == "semantic"


async def test_exceptions_mark_spans_as_errors(exporter: InMemorySpanExporter) -> None:
    kernel = Kernel(ScriptedModel([]), filters=[tracing_filter(tracer_provider=provider(exporter))])
    with pytest.raises(ScriptExhaustedError):
        await kernel.run("hi")
    named = by_name(exporter.get_finished_spans())
    chat = named["chat unknown"]
    assert chat.status.status_code is StatusCode.ERROR
    assert [event.name for event in chat.events] == ["exception"]
    assert named["invoke_agent beamfilter"].status.status_code is StatusCode.ERROR


async def test_model_name_comes_from_options_or_build(exporter: InMemorySpanExporter) -> None:
    class Named(ScriptedModel):
        model = "local-7b"

    flt = tracing_filter(tracer_provider=provider(exporter), build=BuildContext(model=Named(["a"])))
    await Kernel(Named(["a"]), filters=[flt]).run("hi")
    await Kernel(ScriptedModel(["b"]), filters=[flt], options={"model": "gpt-x"}).run("hi")
    names = [s.name for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    assert names == ["chat local-7b", "chat gpt-x"]


async def test_without_opentelemetry_the_filter_is_a_no_op_with_one_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setattr(tracing_module, "_warned", False)
    with pytest.warns(RuntimeWarning) as warned:
        first, second = tracing_filter(), tracing_filter()
    assert [str(w.message) for w in warned] == [
        "beamfilter tracing is disabled: OpenTelemetry is not installed (pip install 'beamfilter-builtins[otel]')."
    ]
    assert first.scopes == second.scopes == ()
    result = await Kernel(ScriptedModel(["ok"]), filters=[first]).run("hi")
    assert result.text == "ok"


def test_spec() -> None:
    assert (SPEC.name, tuple(SPEC.scopes)) == ("tracing", ("turn", "iteration", "chat", "tool"))
