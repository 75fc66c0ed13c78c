"""``trajectory``: record each turn as JSON Lines; replay a recording into a ScriptedModel."""

from __future__ import annotations

import base64
import gzip
import itertools
import json
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from beamfilter_core import (
    BuildContext,
    ChatResponse,
    Filter,
    FilterSpec,
    IterationRequest,
    IterationResult,
    Message,
    ScriptedModel,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
    converter,
    options_schema,
)
from beamfilter_core.errors import ConfigError

from ._callables import call_maybe_async, resolve_callable
from ._options import IMPORT_PATH

__all__ = ["SPEC", "load_trajectory", "read_trajectory", "responses_of", "trajectory_filter"]

_GZIP_KEY = "$gzip"


def _encoder(max_chars: int | None, compress: str) -> Callable[[Any], Any]:
    """Shorten every string longer than ``max_chars``: cut with a marker, or gzip+base64."""

    def encode(value: Any) -> Any:
        if isinstance(value, str):
            if max_chars is None or len(value) <= max_chars:
                return value
            if compress == "gzip":
                packed = base64.b64encode(gzip.compress(value.encode("utf-8"), mtime=0)).decode("ascii")
                return {_GZIP_KEY: packed}
            return f"{value[:max_chars]}…[truncated {len(value) - max_chars} chars]"
        if isinstance(value, Mapping):
            return {key: encode(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [encode(item) for item in value]
        return value

    return encode


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if set(value) == {_GZIP_KEY}:
            return gzip.decompress(base64.b64decode(value[_GZIP_KEY])).decode("utf-8")
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


def _messages(messages: Iterable[Message]) -> list[Any]:
    return [converter.unstructure(message) for message in messages]


OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "minLength": 1, "x-path": True},
        "callback": {**IMPORT_PATH, "pattern": "^[A-Za-z_][\\w.]*:[\\w.]+$"},
        "max_chars": {"type": "integer", "minimum": 1},
        "compress": {"enum": ["truncate", "gzip"]},
        "name": {"type": "string", "minLength": 1},
    },
    "anyOf": [{"required": ["path"]}, {"required": ["callback"]}],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def trajectory_filter(
    path: str | None = None,
    *,
    callback: Callable[[dict[str, Any]], Any] | str | None = None,
    max_chars: int | None = None,
    compress: str = "truncate",
    build: BuildContext | None = None,
    name: str = "trajectory",
) -> Filter:
    """A turn + iteration + tool filter that records what happens in each turn.

    One JSON object per event, written as a line to ``path`` (appended; one write per
    line) and/or passed to ``callback(record)`` (sync or async). Every record has
    ``event``, ``turn`` (a number, from 1, unique for the filter), ``conversation_id``
    and ``t`` (Unix time). Events, in order: ``turn_start`` (``messages``, ``history``
    length, ``resume``); per round ``iteration`` (``index``, ``status``, ``messages``,
    ``blocked_by``, ``ms``); per tool call ``tool`` (``call_id``, ``name``, ``arguments``,
    ``content``, ``error``, ``ms``); ``turn_end`` (``status``, ``text``, ``blocked_by``,
    ``usage``, ``messages`` the new part of the transcript, ``ms``). Filter decisions
    show as ``blocked_by`` and as the messages filters wrote.

    Args:
        path: the JSON Lines file (created if missing).
        callback: called with each record, or an import path ``"package.module:function"``.
        max_chars: strings longer than this are compressed (default: never).
        compress: ``"truncate"`` (cut, with ``…[truncated N chars]``) or ``"gzip"``
            (``{"$gzip": base64}``, restored by :func:`read_trajectory`).
        build: given by ``Kernel.from_config`` (a relative ``path`` is relative to the config file).
        name: the filter's name.
    """
    where = "trajectory_filter"
    if path is None and callback is None:
        msg = f"{where}: give path= (a JSON Lines file) or callback= (called with each record)."
        raise ConfigError(msg)
    sink = resolve_callable(callback, option="callback", owner=where) if callback is not None else None
    encode = _encoder(max_chars, compress)
    target = Path(path) if path is not None else None
    if target is not None and not target.is_absolute() and build is not None and build.config_dir:
        target = Path(build.config_dir) / target
    lock = threading.Lock()
    counter = itertools.count(1)

    async def emit(state: dict[str, Any], event: str, **fields: Any) -> None:
        record = encode(
            {"event": event, "turn": state["turn"], "conversation_id": state["cid"], "t": time.time(), **fields}
        )
        if target is not None:
            line = json.dumps(record, ensure_ascii=False) + "\n"
            with lock, target.open("a", encoding="utf-8") as handle:
                handle.write(line)
        if sink is not None:
            await call_maybe_async(sink, record)

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        state["turn"] = next(counter)  # a re-entry by an outer filter (validation...) is a new turn record
        cid = request.context.get("conversation_id")
        state["cid"] = cid if isinstance(cid, str) else None
        started = time.perf_counter()
        await emit(
            state,
            "turn_start",
            messages=_messages(request.messages),
            history=len(request.history),
            resume=request.resume,
        )
        result = await call_next(request)
        usage = result.usage
        await emit(
            state,
            "turn_end",
            status=result.status,
            text=result.text,
            blocked_by=result.blocked_by,
            usage=[usage.prompt_tokens, usage.completion_tokens, usage.total_tokens],
            messages=_messages(result.messages[len(request.history) :]),
            ms=round((time.perf_counter() - started) * 1000, 3),
        )
        return result

    async def around_iteration(
        request: IterationRequest,
        state: dict[str, Any],
        call_next: Callable[[IterationRequest], Awaitable[IterationResult]],
    ) -> IterationResult:
        started = time.perf_counter()
        result = await call_next(request)
        if "turn" in state:
            await emit(
                state,
                "iteration",
                index=request.index,
                status=result.status,
                messages=_messages(result.messages),
                blocked_by=result.blocked_by,
                ms=round((time.perf_counter() - started) * 1000, 3),
            )
        return result

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        started = time.perf_counter()
        result = await call_next(request)
        if "turn" in state:
            await emit(
                state,
                "tool",
                call_id=request.call_id,
                name=request.tool.name,
                arguments=dict(request.arguments),
                content=result.content,
                error=result.error.kind if result.error is not None else None,
                ms=round((time.perf_counter() - started) * 1000, 3),
            )
        return result

    return Filter(name, around_turn=around_turn, around_iteration=around_iteration, around_tool=around_tool)


def read_trajectory(path: str | Path) -> list[dict[str, Any]]:
    """The records of a JSON Lines trajectory, gzip-compressed strings restored.

    Raises:
        ConfigError: the file is missing or a line is not JSON (its number is named).
    """
    records: list[dict[str, Any]] = []
    try:
        lines = Path(path).read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        msg = f"read_trajectory: the file {str(path)!r} does not exist."
        raise ConfigError(msg) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            msg = f"read_trajectory: {path}, line {number} is not JSON ({exc}); is it a trajectory file?"
            raise ConfigError(msg) from exc
        records.append(_decode(record))
    return records


def responses_of(records: Iterable[Mapping[str, Any]]) -> list[ChatResponse]:
    """The model's answers, in order: every assistant message of every ``turn_end``."""
    found: list[ChatResponse] = []
    for record in records:
        if record.get("event") != "turn_end":
            continue
        for data in record.get("messages", ()):
            if data.get("role") != "assistant":
                continue
            message = converter.structure(data, Message)
            reason = "tool_calls" if message.tool_calls else "stop"
            found.append(ChatResponse(message, reason))
    return found


def load_trajectory(path: str | Path, **options: Any) -> ScriptedModel:
    """A :class:`ScriptedModel` that answers exactly what the recorded model answered.

    ``options`` go to ``ScriptedModel`` (``chunk``, ``token_delay``). Use it in a
    regression test: run the same inputs through a kernel with this model and compare.
    """
    responses = responses_of(read_trajectory(path))
    if not responses:
        msg = f"load_trajectory: {path} holds no completed turn with an assistant message."
        raise ConfigError(msg)
    return ScriptedModel(responses, **options)


SPEC = FilterSpec(
    "trajectory",
    trajectory_filter,
    OPTIONS,
    "Records each turn (messages, rounds, tool calls, timings, decisions) as JSON Lines; replayable in tests.",
    ("turn", "iteration", "tool"),
)
