"""The ``durable_steps`` filter: each LLM call and each tool call of a durable turn is a step.

It sits at the chat and tool scopes. Filters *outside* it (listed before it; by default all
of them, since the runner appends it last) run in the workflow and are replayed on
recovery; filters *inside* it (listed after it) run inside the step and are recorded with
it. Outside a durable turn's workflow it passes everything through.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from beamfilter_core import ChatRequest, ChatResponse, Filter, ToolRequest, ToolResult, converter

if TYPE_CHECKING:
    from ._backend import DurableBackend, StepSlot

__all__ = ["IDEMPOTENCY_KEY", "STEPS_FILTER", "durable_steps", "idempotency_key"]

#: The name of the filter, and of the context key a tool reads its idempotency key from.
STEPS_FILTER = "durable_steps"
IDEMPOTENCY_KEY = "idempotency_key"
_SLOTS = "slots"


def idempotency_key(context: Mapping[str, Any]) -> str | None:
    """The stable key of the tool call running with ``context`` (its step's id), or None
    outside a durable turn. The same call re-run after a crash gets the same key: write the
    side effect keyed by it (``INSERT ... ON CONFLICT DO NOTHING``) to make it happen once.

    Example::

        @tool
        def pay(amount: int, context: dict) -> str:
            ledger.pay_once(idempotency_key(context), amount)
            return "paid"
    """
    value = context.get(IDEMPOTENCY_KEY)
    return value if isinstance(value, str) else None


def durable_steps(backend: DurableBackend | None = None, *, name: str = STEPS_FILTER) -> Filter:
    """The step boundary of durable turns on ``backend``. The durable runner appends it
    (innermost) unless the config lists ``use = "durable_steps"`` where the boundary should
    be; as listed in a config (no backend yet) it passes everything through."""

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        if backend is None or backend.current_turn() is None:
            return await call_next(request)

        async def call() -> dict[str, Any]:
            # Streaming runs deliver tokens from inside the step: a replayed step streams nothing.
            return converter.unstructure(await call_next(request))  # type: ignore[no-any-return]

        recorded = await backend.take_step().run("beamfilter.chat", call)
        response = converter.structure(recorded, ChatResponse)
        # Take the step positions of this response's tool calls now, in call order: the
        # batch may run in parallel, and recovery must find each result at the same place.
        slots: dict[str, StepSlot] = state.setdefault(_SLOTS, {})
        slots.clear()
        for tool_call in response.message.tool_calls:
            slots[tool_call.id] = backend.take_step()
        return response

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        turn = backend.current_turn() if backend is not None else None
        if backend is None or turn is None:
            return await call_next(request)
        slots: dict[str, StepSlot] = state.setdefault(_SLOTS, {})
        # A call an outer filter retries, or one the model did not ask for, takes the next position.
        slot = slots.pop(request.call_id, None) or backend.take_step()
        key = f"{turn}:{slot.step_id}"
        keyed = request.replace(context=MappingProxyType({**request.context, IDEMPOTENCY_KEY: key}))

        async def call() -> dict[str, Any]:
            return converter.unstructure(await call_next(keyed))  # type: ignore[no-any-return]

        recorded = await slot.run(f"beamfilter.tool:{request.tool.name}", call)
        return converter.structure(recorded, ToolResult)

    return Filter(name, around_chat=around_chat, around_tool=around_tool)
