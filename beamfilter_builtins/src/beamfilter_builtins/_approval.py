"""``approval``: ask ``approve(name, arguments)`` before any tool marked ``sensitive`` runs."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import Decision, Filter, FilterSpec, ToolRequest, ToolResult
from beamfilter_core.errors import ConfigError

from ._callables import call_maybe_async, resolve_callable

__all__ = ["DEFAULT_REJECTION", "SPEC", "approval_filter"]

#: ``{tool}`` is the tool's name, ``{reason}`` the approver's reason (or "").
DEFAULT_REJECTION = "The user rejected this call to the sensitive tool {tool!r}{reason}. Do not retry it."


def approval_filter(
    approve: Callable[[str, dict[str, Any]], Any] | str,
    *,
    rejection: str = DEFAULT_REJECTION,
    name: str = "approval",
) -> Filter:
    """A tool filter that asks ``approve`` before each call of a ``sensitive`` tool.

    ``approve(name, arguments)`` (sync or async) returns ``True``/``False`` or a
    :class:`~beamfilter_core.Decision`: ``Decision.approve(arguments)`` may change the
    arguments, ``Decision.reject(reason)`` names a reason, ``Decision.reply(text)``
    answers in place of the tool. A rejection is an ordinary tool result (a
    ``permission`` failure) that the model reads; the tool never runs and writes
    nothing. Tools not marked sensitive never reach the approver.

    For a human in the loop use the kernel's ``gate`` (pause and resume) instead: tool
    filters run concurrently for parallel calls and cannot pause the run.

    Args:
        approve: the approver, or an import path ``"package.module:function"``.
        rejection: the text the model reads on a rejection (``{tool}``, ``{reason}``).
        name: the filter's name.
    """
    approver = resolve_callable(approve, option="approve", owner="approval_filter")
    if not isinstance(rejection, str):
        msg = f"approval_filter(rejection={rejection!r}): give a string."
        raise ConfigError(msg)

    def rejected(tool: str, reason: str | None) -> ToolResult:
        text = rejection.format(tool=tool, reason=f": {reason}" if reason else "")
        return ToolResult.failure("permission", text)

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        tool = request.tool
        if not tool.sensitive:
            return await call_next(request)
        verdict = await call_maybe_async(approver, tool.name, dict(request.arguments))
        if verdict is True:
            return await call_next(request)
        if verdict is False or verdict is None:
            return rejected(tool.name, None)
        if isinstance(verdict, Decision):
            if verdict.kind == "approve":
                if verdict.arguments is not None:
                    request = request.replace(arguments=verdict.arguments, raw_arguments=None)
                return await call_next(request)
            if verdict.kind == "reject":
                return rejected(tool.name, verdict.message)
            if verdict.kind == "reply":
                return ToolResult(verdict.message or "")
        msg = (
            f"approval_filter: approve({tool.name!r}, ...) returned {verdict!r}; return True, False, "
            "Decision.approve(), Decision.reject(reason) or Decision.reply(text) (pausing needs the kernel gate)."
        )
        raise ConfigError(msg)

    return Filter(name, around_tool=around_tool)


SPEC = FilterSpec(
    "approval",
    approval_filter,
    {
        "type": "object",
        "properties": {
            "approve": {"type": "string", "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$"},
            "rejection": {"type": "string"},
            "name": {"type": "string", "minLength": 1},
        },
        "required": ["approve"],
        "additionalProperties": False,
    },
    "Asks approve(name, arguments) before a sensitive tool runs; a rejection is a tool result.",
    ("tool",),
)
