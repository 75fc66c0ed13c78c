"""Resuming a pause: checking the state and its decisions before anything runs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ._records import Decision, PauseState
from .errors import ConfigError, ResumeError

if TYPE_CHECKING:
    from ._messages import ToolCall
    from ._tools import Tool


def as_decision(value: Any, where: str) -> Decision:
    """``value`` as a Decision (also ``"approve"``, ``"reject"``, ``"pause"``, True, False)."""
    if isinstance(value, Decision):
        return value
    if value == "approve" or value == "reject" or value == "pause":  # narrows for mypy
        return Decision(value)
    if value is True:
        return Decision("approve")
    if value is False:
        return Decision("reject")
    msg = (
        f"{where} is {value!r}; give a Decision (Decision.approve(), Decision.reject(reason), "
        "Decision.reply(text), Decision.pause()) or one of 'approve', 'reject', 'pause'."
    )
    raise ConfigError(msg)


def check_pause(pause: PauseState) -> None:
    """Refuse a pause state whose parts contradict each other (ResumeError naming them)."""
    ids = [call.id for call in pause.calls]
    problems = []
    if len(set(ids)) != len(ids):
        problems.append(f"its calls repeat an id ({', '.join(ids)})")
    last = pause.messages[-1] if pause.messages else None
    if last is None or last.role != "assistant" or last.tool_calls != pause.calls:
        problems.append("its calls are not the tool calls of its last assistant message")
    known = set(ids)
    if not pause.awaiting:
        problems.append("it awaits no call")
    strays = [i for i in (*pause.awaiting, *pause.decided) if i not in known]
    if strays:
        problems.append(f"it names calls it does not hold: {', '.join(strays)}")
    both = sorted(set(pause.awaiting) & set(pause.decided))
    if both:
        problems.append(f"calls both decided and awaiting a decision: {', '.join(both)}")
    if len(set(pause.awaiting)) != len(pause.awaiting):
        problems.append("it awaits a call twice")
    if problems:
        msg = "Cannot resume: the pause state is inconsistent: " + "; ".join(problems) + "."
        raise ResumeError(msg)


def check_decisions(pause: PauseState, decisions: Any, tools: Mapping[str, Tool] | None = None) -> dict[str, Decision]:
    """Validate the decisions given to resume ``pause``: exactly one per awaited call.

    Any other id (a call the gate already decided, a call that never awaited, an unknown
    id), a missing decision, a value that is no decision, or approved arguments that break
    the tool's schema raise :class:`ResumeError` naming the call; nothing runs.
    """
    if not isinstance(decisions, Mapping):
        msg = f"Cannot resume: decisions is {decisions!r}; give a mapping of call id -> Decision."
        raise ResumeError(msg)
    awaiting = set(pause.awaiting)
    calls = {call.id: call for call in pause.calls}
    problems = []
    for call_id in decisions:
        if call_id in awaiting:
            continue
        if call_id in pause.decided:
            problems.append(
                f"call {call_id!r} was decided before the pause ({pause.decided[call_id].kind}); that is final"
            )
        elif call_id in calls:
            problems.append(f"call {call_id!r} did not await a decision")
        else:
            problems.append(f"call {call_id!r} is not in this pause")
    missing = [call_id for call_id in pause.awaiting if call_id not in decisions]
    if missing:
        problems.append(f"no decision for awaited calls: {', '.join(missing)}")
    checked: dict[str, Decision] = {}
    for call_id, value in decisions.items():
        if call_id not in awaiting:
            continue
        try:
            decision = as_decision(value, f"decisions[{call_id!r}]")
        except ConfigError as exc:
            problems.append(str(exc).rstrip("."))
            continue
        if decision.kind == "pause":
            problems.append(f"decisions[{call_id!r}] is 'pause'; at resume give approve, reject or reply")
            continue
        if decision.kind == "approve" and decision.arguments is not None:
            problem = _check_arguments(calls[call_id], decision.arguments, tools)
            if problem is not None:
                problems.append(f"decisions[{call_id!r}]: {problem}")
                continue
        checked[call_id] = decision
    if problems:
        msg = "Cannot resume: " + "; ".join(problems) + f". Awaited calls: {', '.join(pause.awaiting)}."
        raise ResumeError(msg)
    return checked


def _check_arguments(call: ToolCall, arguments: Any, tools: Mapping[str, Tool] | None) -> str | None:
    if not isinstance(arguments, Mapping) or not all(isinstance(key, str) for key in arguments):
        return f"the approved arguments {arguments!r} are not a mapping of argument names"
    tool = tools.get(call.name) if tools is not None else None
    validate = tool.validate if tool is not None else None
    if validate is None:
        return None
    try:
        validate(dict(arguments))
    except Exception as exc:  # noqa: BLE001  # fastjsonschema.JsonSchemaValueException, imported lazily
        detail = getattr(exc, "message", str(exc))
        return f"the approved arguments break the schema of tool {call.name!r}: {detail}"
    return None
