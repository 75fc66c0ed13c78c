"""``approval``: ask ``approve(name, arguments)`` at the gate before any ``sensitive`` tool runs;
without an approver, every sensitive call waits for a human."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import Decision, Filter, FilterSpec, GateRequest, ToolCall, options_schema
from beamfilter_core.errors import ConfigError

from ._callables import call_maybe_async, resolve_callable
from ._options import IMPORT_PATH

__all__ = ["DEFAULT_REJECTION", "HUMAN_REASON", "SPEC", "approval_filter"]

#: ``{tool}`` is the tool's name, ``{reason}`` the approver's reason (or "").
DEFAULT_REJECTION = "The user rejected this call to the sensitive tool {tool!r}{reason}. Do not retry it."
#: Why the run paused when no approver is given (``{tool}`` is the tool's name).
HUMAN_REASON = "{tool!r} is a sensitive tool: a human decides"


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {**IMPORT_PATH, "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$"},
        "rejection": {"type": "string"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def approval_filter(
    approve: Callable[[str, dict[str, Any]], Any] | str | None = None,
    *,
    rejection: str = DEFAULT_REJECTION,
    name: str = "approval",
) -> Filter:
    """A gate filter that asks ``approve`` before each call of a ``sensitive`` tool.

    ``approve(name, arguments)`` (sync or async) returns ``True``/``False`` or a
    :class:`~beamfilter_core.Decision`: ``Decision.approve(arguments)`` may change the
    arguments, ``Decision.reject(reason)`` names a reason, ``Decision.reply(text)``
    answers in place of the tool, ``Decision.pause(reason)`` stops the run until a human
    decides (see docs/approvals.md). A rejection is an ordinary tool result (a
    ``permission`` failure) that the model reads; the tool never runs and writes nothing.
    Tools not marked sensitive never reach the approver. An approved call still goes to
    the inner gate layers (later filters, then ``Kernel(gate=...)``).

    Without ``approve`` every call of a sensitive tool pauses the run for a human (the
    pause's reason is :data:`HUMAN_REASON`), so a config file alone can put a human in
    front of writes.

    Args:
        approve: the approver, or an import path ``"package.module:function"``; None
            (the default) pauses every sensitive call for a human.
        rejection: the text the model reads on a rejection (``{tool}``, ``{reason}``).
        name: the filter's name.
    """
    approver = None if approve is None else resolve_callable(approve, option="approve", owner="approval_filter")

    def rejected(tool: str, reason: str | None) -> Decision:
        return Decision.reject(reason, result=rejection.format(tool=tool, reason=f": {reason}" if reason else ""))

    async def around_gate(
        request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
    ) -> Decision:
        tool = request.tool
        if not tool.sensitive:
            return await call_next(request)
        call = request.call
        if approver is None:
            # the call as this layer saw it: what the reviewer is shown and approves, even
            # when an outer gate layer rewrote the model's arguments
            return Decision.pause(HUMAN_REASON.format(tool=tool.name), arguments=call.arguments)
        verdict = await call_maybe_async(approver, tool.name, dict(call.arguments))
        if verdict is True:
            return await call_next(request)
        if verdict is False or verdict is None:
            return rejected(tool.name, None)
        if isinstance(verdict, Decision):
            kind = verdict.kind
            if kind == "approve":
                if verdict.arguments is not None:
                    request = request.replace(call=ToolCall(call.name, dict(verdict.arguments), call.id))
                return await call_next(request)
            if kind == "reject":
                return rejected(tool.name, verdict.message)
            if kind == "pause":
                return Decision.pause(verdict.message, arguments=call.arguments)
            if kind == "reply":
                return verdict
        msg = (
            f"approval_filter: approve({tool.name!r}, ...) returned {verdict!r}; return True, False, "
            "Decision.approve(), Decision.reject(reason), Decision.reply(text) or Decision.pause(reason)."
        )
        raise ConfigError(msg)

    return Filter(name, around_gate=around_gate)


SPEC = FilterSpec(
    "approval",
    approval_filter,
    OPTIONS,
    "Asks approve(name, arguments) at the gate before a sensitive tool runs (without one: pauses for a human).",
    ("gate",),
)
