"""``logging``: one structured log record before and after each call, with its duration.

Logged text (user input, tool arguments and results, answers, errors) goes through the
secret rules ``redact`` uses before it is written, unless ``redact=False``: a log is
read by more people, and kept longer, than the conversation it records.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from beamfilter_core import ChatResponse, Filter, FilterSpec, IterationResult, ToolResult, TurnResult, options_schema
from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import select_rules

from ._redactor import Redactor
from ._text import joined_text
from ._text import preview as _preview

__all__ = ["SPEC", "logging_filter"]

_SCOPES = ("turn", "iteration", "chat", "tool")
Next = Callable[[Any], Awaitable[Any]]


def _level(value: int | str) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str):
        number = logging.getLevelName(value.upper())
        if isinstance(number, int):
            return number
    msg = f"logging_filter(level={value!r}): give a logging level such as 'DEBUG' or 'INFO'."
    raise ConfigError(msg)


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "logger": {"type": "string", "minLength": 1},
        "level": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
        "preview": {
            "anyOf": [{"type": "integer", "minimum": 0}, {"type": "null"}],
            "x-hint": "a number of characters >= 0 or None",
        },
        "scopes": {
            "type": "array",
            "items": {"enum": list(_SCOPES)},
            "minItems": 1,
            "x-hint": f"a list of scopes; choose among {', '.join(_SCOPES)}",
        },
        "redact": {"type": "boolean"},
        "redact_exclude": {"type": "array", "items": {"type": "string", "minLength": 1}},
        "emails": {"type": "boolean"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


@options_schema(OPTIONS, style="colon")
def logging_filter(
    *,
    logger: str | logging.Logger = "beamfilter",
    level: int | str = "DEBUG",
    preview: int | None = 200,
    scopes: Iterable[str] = _SCOPES,
    redact: bool = True,
    redact_exclude: Iterable[str] = (),
    emails: bool = False,
    name: str = "logging",
) -> Filter:
    """Log one record before and one after every call on the scopes it wraps.

    Each record carries ``record.beamfilter``, a dict with ``scope``, ``phase``
    (``before``/``after``/``error``) and the facts of the call (message counts, tool
    names, status, finish reason, ``duration_ms`` after the call); long text is cut to
    ``preview`` characters. Results are never changed. Put it first to see everything;
    further in, it sees only what reaches its layer.

    Args:
        logger: a logger or its name (default ``beamfilter``).
        level: the level of the records (default DEBUG).
        preview: cut text to this many characters (None: no cut).
        scopes: which of turn, iteration, chat, tool to log (default all).
        redact: hide secrets in logged text with the default secret rules (default True).
        redact_exclude: names of secret rules to switch off, e.g. ``["jwt"]``.
        emails: also hide e-mail addresses in logged text.
        name: the filter's name.
    """
    log = logger if isinstance(logger, logging.Logger) else logging.getLogger(logger)
    number = _level(level)
    chosen = tuple(dict.fromkeys(scopes))
    unknown = [s for s in chosen if s not in _SCOPES]
    if unknown or not chosen:
        msg = f"logging_filter(scopes={list(chosen)!r}): choose among {', '.join(_SCOPES)}."
        raise ConfigError(msg)
    limit = preview
    rules = select_rules("logging_filter", list(redact_exclude), emails) if redact else []
    redactor = Redactor(rules, cache_size=0, where="logging_filter") if rules else None
    # Redact before cutting (a cut must not leave half a secret that no rule matches),
    # but only as much as the preview shows plus the longest secret a rule can match.
    margin = None if redactor is None or limit is None else limit + redactor.limit + 1

    def cut(text: str) -> str:
        if redactor is None:
            return _preview(text, limit)
        if margin is not None and len(text) > margin:
            return _preview(redactor.redact(text[:margin]), limit)
        return _preview(redactor.redact(text), limit)

    def describe_request(scope: str, request: Any) -> dict[str, Any]:
        if scope == "turn":
            return {
                "messages": len(request.messages),
                "resume": request.resume,
                "text": cut(joined_text(request.messages)),
            }
        if scope == "iteration":
            return {"index": request.index, "messages": len(request.messages), "remaining": request.remaining}
        if scope == "chat":
            return {"messages": len(request.messages), "tools": len(request.tools), "tool_choice": request.tool_choice}
        return {"tool": request.tool.name, "call_id": request.call_id, "arguments": cut(str(dict(request.arguments)))}

    def describe_response(scope: str, response: Any) -> dict[str, Any]:
        if isinstance(response, TurnResult):
            return {"status": response.status, "iterations": response.iterations, "text": cut(response.text)}
        if isinstance(response, IterationResult):
            return {"status": response.status, "messages": len(response.messages)}
        if isinstance(response, ChatResponse):
            calls = [call.name for call in response.message.tool_calls]
            facts: dict[str, Any] = {"finish_reason": response.finish_reason}
            if calls:
                facts["tool_calls"] = calls
            else:
                facts["text"] = cut(response.text)
            return facts
        if isinstance(response, ToolResult):
            facts = {"ok": response.ok, "content": cut(response.content)}
            if response.error is not None:
                facts["error_kind"] = response.error.kind
            return facts
        return {"response": cut(repr(response))}

    def emit(scope: str, phase: str, facts: dict[str, Any]) -> None:
        details = " ".join(f"{key}={value!r}" for key, value in facts.items())
        log.log(
            number, "%s %s %s", scope, phase, details, extra={"beamfilter": {"scope": scope, "phase": phase, **facts}}
        )

    def make(scope: str) -> Callable[[Any, dict[str, Any], Next], Awaitable[Any]]:
        async def hook(request: Any, state: dict[str, Any], call_next: Next) -> Any:
            enabled = log.isEnabledFor(number)
            if not enabled:
                return await call_next(request)
            emit(scope, "before", describe_request(scope, request))
            started = time.perf_counter()
            try:
                response = await call_next(request)
            except BaseException as exc:
                took = round((time.perf_counter() - started) * 1000, 3)
                emit(scope, "error", {"error": f"{type(exc).__name__}: {cut(str(exc))}", "duration_ms": took})
                raise
            took = round((time.perf_counter() - started) * 1000, 3)
            emit(scope, "after", {**describe_response(scope, response), "duration_ms": took})
            return response

        hook.__name__ = f"log_{scope}"
        return hook

    hooks: dict[str, Any] = {f"around_{scope}": make(scope) for scope in chosen}
    return Filter(name, **hooks)


SPEC = FilterSpec(
    "logging",
    logging_filter,
    OPTIONS,
    "Logs a structured record before and after every call (logger 'beamfilter'), with durations.",
    _SCOPES,
)
