"""Approvals in a run: the gate scope (its chain and terminal, and what it says about a
round's tool calls), the pause it makes, and the resume that continues a paused turn.

Kept apart from :mod:`._run`, which keeps the turn loop and calls in here at three points:
:func:`ask_gate` for each batch of calls (a run without a gate stops at its first test),
:func:`make_pause` when a call is awaited, :func:`resume_turn` for a resumed turn. Each
function works on one ``_Run`` (its plan, bound chains, loop state and batch runner);
``_run`` is imported for type checking only, so there is no import cycle.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ._chain import passed_through
from ._messages import ToolCall
from ._pause import as_decision, check_context, save_filter_state, seal, sign
from ._records import Decision, GateRequest, PauseState, ToolResult, TurnResult

if TYPE_CHECKING:
    from ._plan import Gate
    from ._run import _Run


@runtime_checkable
class Journal(Protocol):
    """Where a resume records each call's outcome, keyed by pause id and call id (the
    memory filter's store: ``Filter.extras["journal"]``). A resume that failed after a
    tool ran, and is resumed again, continues from the recorded result."""

    async def recorded(self, pause: PauseState) -> dict[str, ToolResult]:
        """The outcomes recorded for ``pause``'s calls, by call id (the batch starts after)."""
        ...

    def starting(self, pause: PauseState, call_id: str) -> None:
        """One call of the resumed batch starts (its outcome is unknown until recorded)."""
        ...

    async def record(self, pause: PauseState, call_id: str, result: ToolResult) -> None:
        """Record one call's outcome (the first record of a call wins)."""
        ...


# -- the gate scope ------------------------------------------------------------------------


async def _approve(request: GateRequest) -> Decision:
    """The gate terminal: approve, with the arguments an outer gate layer may have set."""
    return Decision(kind="approve", arguments=request.call.arguments)


def gate_chain(run: _Run) -> Callable[[GateRequest], Awaitable[Decision]]:
    """Bind ``run``'s gate chain (on first use: many turns call no tool)."""
    plan = run.plan
    terminal = _kernel_gate(plan.settings.gate) if plan.settings.gate is not None else _approve
    run.gate = gate = plan.chains["gate"].bind(run.states, terminal, plan.settings.check_returns)
    return gate


def _kernel_gate(gate: Gate) -> Callable[[GateRequest], Awaitable[Decision]]:
    """The gate terminal of ``Kernel(gate=gate)``: the innermost gate layer, asked for
    sensitive tools only."""

    async def terminal(request: GateRequest) -> Decision:
        try:
            call = request.call
            if not request.tool.sensitive:
                return Decision(kind="approve", arguments=call.arguments)
            value = gate(call, request.tool, request.context)
            if inspect.isawaitable(value):
                value = await value
            decision = as_decision(value, f"The gate's decision for call {call.id!r} ({call.name})")
            if decision.arguments is None and decision.kind in ("approve", "pause"):
                # keep what an outer layer set: it runs, or the reviewer is shown it
                return Decision(kind=decision.kind, arguments=call.arguments, message=decision.message)
            return decision
        except Exception as exc:
            passed_through(exc)  # the model's, a tool's or the loop's own error
            raise

    return terminal


async def ask_gate(
    run: _Run, calls: Sequence[ToolCall]
) -> tuple[dict[str, Decision], list[str], str | None, Sequence[ToolCall]]:
    """Ask the gate chain about ``calls``: the decided calls, the awaited ones, the first
    pause reason, and ``calls`` with each awaited call as the pausing layer saw it (an
    outer layer may have rewritten it: the reviewer approves what the gate was shown)."""
    decided: dict[str, Decision] = {}
    awaiting: list[str] = []
    reason: str | None = None
    if not run.plan.gated:
        return decided, awaiting, reason, calls
    gate = run.gate or gate_chain(run)
    tools = run.tools
    view = run.view
    shown: list[ToolCall] | None = None
    for index, call in enumerate(calls):
        tool = tools.get(call.name)
        if tool is None:
            continue  # answered as an unknown tool; nothing to decide
        value = await gate(GateRequest(call=call, tool=tool, context=view))
        decision = as_decision(value, f"The gate chain's decision for call {call.id!r} ({call.name})")
        kind = decision.kind
        if kind == "pause":
            awaiting.append(call.id)
            reason = reason or decision.message
            seen = decision.arguments
            if seen is not None and seen is not call.arguments and seen != call.arguments:
                shown = shown or list(calls)
                shown[index] = ToolCall(call.name, dict(seen), call.id)
        elif kind != "approve" or (decision.arguments is not None and decision.arguments is not call.arguments):
            decided[call.id] = decision
    return decided, awaiting, reason, calls if shown is None else tuple(shown)


# -- pausing -------------------------------------------------------------------------------


def make_pause(
    run: _Run, calls: Sequence[ToolCall], decided: dict[str, Decision], awaiting: list[str], reason: str | None
) -> PauseState:
    """The signed pause of ``run``'s turn, awaiting decisions on ``awaiting`` (its loop
    state comes back with :meth:`._run._Run._resumed_loop`)."""
    loop = run.loop
    plan = run.plan
    keys = plan.settings.pause_keys
    pause_id = uuid.uuid4().hex
    kept = save_filter_state(plan.filters, run.states)
    pause = PauseState(
        messages=tuple(loop.transcript),
        calls=tuple(calls),
        awaiting=tuple(awaiting),
        decided=decided,
        context=check_context(run.context, plan.settings.transient_context),
        remaining=loop.remaining,
        tool_calls_made=loop.tool_calls_made,
        iterations=loop.llm_calls,
        usage=loop.usage,
        reason=reason,
        pause_id=pause_id,
        filter_state=seal(keys, pause_id, kept) if kept else None,
    )
    return sign(pause, keys)


# -- resuming ------------------------------------------------------------------------------


async def resume_turn(run: _Run, pause: PauseState, decisions: dict[str, Decision]) -> TurnResult:
    """Continue the turn ``pause`` stopped: run its batch as decided, then the tool loop."""
    loop = run.loop  # the pause's loop state (:meth:`._run._Run._resumed_loop`)
    # disjoint by check_decisions: what the gate decided before the pause is final
    merged = {**pause.decided, **decisions}
    # approved as paused (an approval without arguments in `decided` is a human's,
    # carried over from a resume whose edit paused again)
    approved = {call_id for call_id, d in merged.items() if d.kind == "approve" and d.arguments is None}
    journal = run.journal
    # what an earlier attempt of this resume recorded is what happened: never run again
    recorded = await journal.recorded(pause) if journal is not None else {}
    calls = pause.calls
    if run.plan.gated:
        edited = [
            call
            for call in calls
            if call.id not in recorded
            and (d := decisions.get(call.id)) is not None
            and d.kind == "approve"
            and d.arguments is not None
        ]
        if edited:
            repaused = await _judge_edits(run, pause, edited, merged)
            if repaused is not None:
                return repaused
    todo = [call for call in calls if call.id not in recorded]
    run_one = _recording(run, journal, pause) if journal is not None else None
    done = await run._run_batch(todo, merged, frozenset(approved), run_one)
    fresh = {call.id: result for call, result in zip(todo, done, strict=True)}
    results = [recorded[call.id] if call.id in recorded else fresh[call.id] for call in calls]
    outcome = run._after_batch(calls, results)
    if outcome.status == "completed":
        loop.transcript.extend(outcome.messages)
        return TurnResult(
            status="completed",
            message=outcome.messages[-1],
            messages=tuple(loop.transcript),
            tool_calls_made=loop.tool_calls_made,
            iterations=loop.llm_calls,
            usage=loop.usage,
            return_direct=True,
        )
    return await run._drive(outcome.messages)


async def _judge_edits(
    run: _Run, pause: PauseState, edited: Sequence[ToolCall], merged: dict[str, Decision]
) -> TurnResult | None:
    """Ask the gate chain again about calls whose arguments the reviewer edited: the
    edit is judged like a model's call. Updates ``merged``; a layer that pauses again
    makes a new pause (returned), and nothing runs."""
    gate = run.gate or gate_chain(run)
    shown = list(pause.calls)
    where = {call.id: index for index, call in enumerate(shown)}
    awaiting: list[str] = []
    reason: str | None = None
    for call in edited:
        tool = run.tools.get(call.name)
        if tool is None:
            continue  # answered as an unknown tool
        changed = ToolCall(call.name, dict(merged[call.id].arguments or {}), call.id)
        value = await gate(GateRequest(call=changed, tool=tool, context=run.view))
        decision = as_decision(value, f"The gate chain's decision for call {call.id!r} ({call.name})")
        seen = decision.arguments if decision.arguments is not None else changed.arguments
        if decision.kind == "pause":
            awaiting.append(call.id)
            reason = reason or decision.message
            shown[where[call.id]] = ToolCall(call.name, dict(seen), call.id)
            del merged[call.id]
        elif decision.kind == "approve":
            merged[call.id] = Decision("approve", seen)
        else:
            merged[call.id] = decision
    if not awaiting:
        return None
    transcript = run.loop.transcript
    transcript[-1] = transcript[-1].replace(tool_calls=tuple(shown))
    decided = {call_id: d for call_id, d in merged.items() if call_id not in awaiting}
    pause = make_pause(run, shown, decided, awaiting, reason)
    loop = run.loop
    return TurnResult(
        status="paused",
        messages=pause.messages,
        tool_calls_made=loop.tool_calls_made,
        iterations=loop.llm_calls,
        usage=loop.usage,
        pause=pause,
    )


def _recording(
    run: _Run, journal: Journal, pause: PauseState
) -> Callable[[ToolCall, Mapping[str, Any], Decision | None, bool], Awaitable[ToolResult]]:
    """``run``'s one-call runner for a resumed batch: each known tool's outcome is recorded
    in ``journal`` (keyed by pause id and call id) before anything else happens."""
    run_one = run._run_one
    tools = run.tools

    async def run_recorded(
        call: ToolCall, snapshot: Mapping[str, Any], decision: Decision | None, approved: bool
    ) -> ToolResult:
        if call.name not in tools:
            return await run_one(call, snapshot, decision, approved)
        journal.starting(pause, call.id)
        result = await run_one(call, snapshot, decision, approved)
        await journal.record(pause, call.id, result)
        return result

    return run_recorded
