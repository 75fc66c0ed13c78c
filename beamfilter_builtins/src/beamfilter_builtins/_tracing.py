"""``tracing``: OpenTelemetry spans for every scope, with GenAI semantic conventions.

Spans (outermost first; they nest through the OpenTelemetry context):

- ``invoke_agent beamfilter`` per turn: ``gen_ai.operation.name=invoke_agent``, the
  status, iterations, tool calls and token usage of the result;
- ``beamfilter.iteration`` per round: index, remaining budget, status;
- ``chat <model>`` per LLM call: ``gen_ai.operation.name=chat``, ``gen_ai.request.model``,
  ``gen_ai.usage.input_tokens``/``output_tokens``, ``gen_ai.response.finish_reasons``;
- ``execute_tool <name>`` per tool call: ``gen_ai.tool.name``, ``gen_ai.tool.call.id``;
  a failed result sets ``error.type`` to its kind and the span status to ERROR.

An exception marks the span ERROR, is recorded as an event and propagates. Needs the
``otel`` extra (``pip install beamfilter-builtins[otel]``); without OpenTelemetry the
filter does nothing and warns once.
"""

from __future__ import annotations

import warnings
from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Filter,
    FilterSpec,
    IterationRequest,
    IterationResult,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
    options_schema,
)

__all__ = ["SPEC", "tracing_filter"]

_warned = False


def _model_name(model_name: str | None, build: BuildContext | None) -> str | None:
    if model_name:
        return model_name
    model = build.model if build is not None else None
    for attribute in ("model", "model_name", "name"):
        value = getattr(model, attribute, None)
        if isinstance(value, str) and value:
            return value
    return None


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model_name": {"type": "string"},
        "provider_name": {"type": "string"},
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def tracing_filter(
    *,
    tracer_provider: Any = None,
    model_name: str | None = None,
    provider_name: str | None = None,
    build: BuildContext | None = None,
    name: str = "tracing",
) -> Filter:
    """Emit OpenTelemetry spans for turns, rounds, LLM calls and tool calls.

    Args:
        tracer_provider: The OpenTelemetry ``TracerProvider`` (default: the global one).
        model_name: ``gen_ai.request.model`` when the request options carry no
            ``model`` (default: the kernel model's ``model``/``name`` attribute).
        provider_name: ``gen_ai.provider.name`` (e.g. ``"openai"``), when known.
        build: Given by ``Kernel.from_config``.
        name: The filter's name.

    Returns:
        A filter with hooks on all four scopes, or one without hooks (and a single
        ``RuntimeWarning``) when OpenTelemetry is not installed.
    """
    global _warned
    try:
        from opentelemetry import trace
        from opentelemetry.trace import SpanKind, Status, StatusCode
    except ImportError:
        if not _warned:
            _warned = True
            warnings.warn(
                "beamfilter tracing is disabled: OpenTelemetry is not installed "
                "(pip install 'beamfilter-builtins[otel]').",
                RuntimeWarning,
                stacklevel=2,
            )
        return Filter(name)

    tracer = trace.get_tracer("beamfilter", tracer_provider=tracer_provider)
    default_model = _model_name(model_name, build)
    base: dict[str, Any] = {"gen_ai.provider.name": provider_name} if provider_name else {}

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        attributes = {**base, "gen_ai.operation.name": "invoke_agent", "beamfilter.turn.resume": request.resume}
        span_name = "invoke_agent beamfilter"
        with tracer.start_as_current_span(span_name, kind=SpanKind.INTERNAL, attributes=attributes) as span:
            result = await call_next(request)
            usage = result.usage
            span.set_attributes(
                {
                    "beamfilter.turn.status": result.status,
                    "beamfilter.turn.iterations": result.iterations,
                    "beamfilter.turn.tool_calls": result.tool_calls_made,
                    "gen_ai.usage.input_tokens": usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": usage.completion_tokens,
                }
            )
            if result.blocked_by:
                span.set_attribute("beamfilter.turn.blocked_by", result.blocked_by)
            return result

    async def around_iteration(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        attributes = {"beamfilter.iteration.index": request.index, "beamfilter.iteration.remaining": request.remaining}
        with tracer.start_as_current_span("beamfilter.iteration", attributes=attributes) as span:
            result = await call_next(request)
            span.set_attribute("beamfilter.iteration.status", result.status)
            return result

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        model = request.options.get("model") or default_model or "unknown"
        attributes = {
            **base,
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": str(model),
            "beamfilter.chat.messages": len(request.messages),
            "beamfilter.chat.tools": len(request.tools),
        }
        with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attributes) as span:
            response = await call_next(request)
            if response.finish_reason:
                span.set_attribute("gen_ai.response.finish_reasons", (response.finish_reason,))
            usage = response.usage
            if usage is not None:
                span.set_attribute("gen_ai.usage.input_tokens", usage.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", usage.completion_tokens)
            calls = response.message.tool_calls
            if calls:
                span.set_attribute("beamfilter.chat.tool_calls", tuple(call.name for call in calls))
            return response

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        tool_name = request.tool.name
        attributes = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": tool_name,
            "gen_ai.tool.call.id": request.call_id,
            "gen_ai.tool.type": "function",
        }
        with tracer.start_as_current_span(f"execute_tool {tool_name}", attributes=attributes) as span:
            result = await call_next(request)
            error = result.error
            if error is not None:
                span.set_attribute("error.type", error.kind)
                span.set_status(Status(StatusCode.ERROR, error.message[:200]))
            return result

    return Filter(
        name,
        around_turn=around_turn,
        around_iteration=around_iteration,
        around_chat=around_chat,
        around_tool=around_tool,
    )


SPEC = FilterSpec(
    "tracing",
    tracing_filter,
    OPTIONS,
    "OpenTelemetry spans per turn, round, LLM call and tool call (GenAI semantic conventions).",
    ("turn", "iteration", "chat", "tool"),
)
