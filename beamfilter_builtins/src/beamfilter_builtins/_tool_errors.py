"""``tool_errors``: any exception a tool raises becomes a short, model-readable result.

The kernel already turns a tool exception into ``"Tool 'x' failed: ValueError: ..."``.
This filter goes further: it catches the exception itself (by running the tool through
a thin wrapper), logs the full traceback on the ``beamfilter.tool_errors`` logger, and
gives the model ``"<Type>: <message> (hint)"`` cut to ``max_length`` characters, with a
hint per failure kind. A per-tool ``formatters`` entry (or a global ``formatter``) may
write the text instead. Exceptions raised by filters inside this one are caught too,
except :class:`~beamfilter_core.errors.LimitError` (a run limit must stop the run).
"""

from __future__ import annotations

import contextvars
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal

import attrs

from beamfilter_core import Filter, FilterSpec, Tool, ToolRequest, ToolResult, options_schema
from beamfilter_core.errors import ConfigError, LimitError

from ._callables import resolve_callable
from ._options import IMPORT_PATH

__all__ = ["DEFAULT_HINTS", "SPEC", "classify", "tool_errors_filter"]

_log = logging.getLogger("beamfilter.tool_errors")

#: The hint appended for each failure kind.
DEFAULT_HINTS: Mapping[str, str] = {
    "transient": "This may be temporary; you may try the same call again once.",
    "semantic": "Check the arguments, then call again with corrected values or answer without this tool.",
    "permission": "This is not allowed; do not retry, tell the user instead.",
}

#: ``formatter(exc, request) -> str``: the text the model reads for this exception.
Formatter = Callable[[BaseException, ToolRequest], str]


Kind = Literal["transient", "semantic", "permission"]


def classify(exc: BaseException) -> Kind:
    """The failure kind of ``exc``: transient, permission or semantic (same rule as the kernel)."""
    if isinstance(exc, TimeoutError | ConnectionError):
        return "transient"
    if isinstance(exc, PermissionError):
        return "permission"
    return "semantic"


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "max_length": {"type": "integer", "minimum": 20},
        "hints": {
            "type": "object",
            # unknown kinds are refused by the factory, with the kinds to use
            "properties": {kind: {"type": "string"} for kind in DEFAULT_HINTS},
        },
        "formatter": IMPORT_PATH,
        "formatters": {
            "type": "object",
            "additionalProperties": IMPORT_PATH,
            "x-hint": "a mapping of tool name to formatter",
        },
        "name": {"type": "string"},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def tool_errors_filter(
    *,
    max_length: int = 300,
    hints: Mapping[str, str] | None = None,
    formatter: Formatter | str | None = None,
    formatters: Mapping[str, Formatter | str] | None = None,
    name: str = "tool_errors",
) -> Filter:
    """Turn tool exceptions into concise error results; tracebacks go to the log only.

    Args:
        max_length: Longest exception message kept (longer ones end in ``"..."``).
        hints: Hint text per kind, merged over :data:`DEFAULT_HINTS` (``""`` drops one).
        formatter: ``formatter(exc, request) -> str`` for every tool, or an import path
            ``"package.module:function"``.
        formatters: Per-tool formatters by tool name (take precedence over ``formatter``).
        name: The filter's name.

    Returns:
        A tool-scope filter.
    """
    where = "tool_errors_filter"
    limit = max_length
    unknown = sorted(set(hints or {}) - set(DEFAULT_HINTS))
    if unknown:
        msg = f"{where}(hints=...) has unknown kinds {unknown}; use transient, semantic or permission."
        raise ConfigError(msg)
    hint_text = {**DEFAULT_HINTS, **(hints or {})}
    default = resolve_callable(formatter, option="formatter", owner=where) if formatter is not None else None
    per_tool = {
        tool: resolve_callable(function, option=f"formatters[{tool!r}]", owner=where)
        for tool, function in (formatters or {}).items()
    }

    def describe(exc: BaseException, request: ToolRequest) -> ToolResult:
        kind = classify(exc)
        _log.error("tool %r raised (call %s)", request.tool.name, request.call_id, exc_info=exc)
        custom = per_tool.get(request.tool.name, default)
        if custom is not None:
            return ToolResult.failure(kind, str(custom(exc, request)))
        detail = str(exc).strip().replace("\n", " ")
        if len(detail) > limit:
            detail = detail[: limit - 3] + "..."
        text = f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__
        hint = hint_text.get(kind)
        if hint:
            text = f"{text} ({hint})"
        return ToolResult.failure(kind, f"Tool {request.tool.name!r} failed: {text}")

    # One wrapped Tool per original tool (tools compare by identity). The wrapper finds
    # the request of its call in a ContextVar: asyncio.to_thread copies the context, so
    # this works for sync tools in worker threads too.
    wrapped: dict[Tool, Tool] = {}
    current: contextvars.ContextVar[ToolRequest] = contextvars.ContextVar(f"{name}_request")

    def wrap(tool: Tool) -> Tool:
        fn = tool.fn
        assert fn is not None  # checked by the caller

        if tool.is_async:

            async def run_async(**arguments: Any) -> Any:
                try:
                    return await fn(**arguments)
                except Exception as exc:  # noqa: BLE001  # any tool error becomes a result
                    return describe(exc, current.get())

            target: Callable[..., Any] = run_async
        else:

            def run_sync(**arguments: Any) -> Any:
                try:
                    return fn(**arguments)
                except Exception as exc:  # noqa: BLE001  # any tool error becomes a result
                    return describe(exc, current.get())

            target = run_sync
        functools.update_wrapper(target, fn)
        return attrs.evolve(tool, fn=target)

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        tool = request.tool
        outer = request
        reset = None
        if tool.fn is not None:
            replacement = wrapped.get(tool)
            if replacement is None:
                replacement = wrapped[tool] = wrap(tool)
            reset = current.set(request)
            request = request.replace(tool=replacement)
        try:
            return await call_next(request)
        except LimitError:
            raise
        except Exception as exc:  # noqa: BLE001  # errors of inner filters too
            return describe(exc, outer)
        finally:
            if reset is not None:
                current.reset(reset)

    return Filter(name, around_tool=around_tool)


SPEC = FilterSpec(
    "tool_errors",
    tool_errors_filter,
    OPTIONS,
    "Turn tool exceptions into concise model-readable errors (type, message, hint); tracebacks to logs.",
    ("tool",),
)
