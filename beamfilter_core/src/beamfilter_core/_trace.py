"""``beamfilter run --trace``: one line before and one after every filter's hook.

Each configured filter's hooks are wrapped, so the lines show the onion as it runs: the
scope, the filter, what it received, what it changed on the way in (the request it passed
on) and on the way out (the response it returned), whether it short-circuited or called
the inner layers more than once, and how long it took. The facts are those the
``logging`` built-in records; core cannot import that plugin, so the wrapper lives here.
A token transform (``redact`` on the stream) gets one line at the end of each stream: how
much text went in and out and how many places it changed (each redaction is one).
"""

from __future__ import annotations

import difflib
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol

import attrs

from ._filter import SCOPES, Filter, TokenTransform, normalise
from ._messages import Message
from ._records import ChatResponse, IterationResult, ToolResult, TurnResult
from ._tools import Tool

__all__ = ["traced_filters"]

Next = Callable[[Any], Awaitable[Any]]


class Lines(Protocol):
    """Where trace lines go: a text stream (stderr) or anything with write and flush."""

    def write(self, text: str, /) -> int: ...

    def flush(self) -> None: ...


_CUT = 60
_WORDS = re.compile(r"\w+|\s+|[^\w\s]")


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CUT else text[: _CUT - 1] + "…"


def _last_text(messages: tuple[Message, ...]) -> str:
    return _cut(messages[-1].text) if messages else ""


def describe_request(scope: str, request: Any) -> str:
    """The facts of a request, on one line."""
    if scope == "turn":
        resume = ", resume" if request.resume else ""
        return f"{len(request.messages)} new message(s){resume}: {_last_text(request.messages)!r}"
    if scope == "iteration":
        return f"round {request.index}, {request.remaining} model call(s) left"
    if scope == "chat":
        return f"{len(request.messages)} message(s), {len(request.tools)} tool(s)"
    return f"{request.tool.name}({_cut(str(dict(request.arguments)))})"


def describe_response(response: Any) -> str:
    """The facts of a response, on one line."""
    if isinstance(response, TurnResult):
        blocked = f", blocked by {response.blocked_by}" if response.blocked_by else ""
        return f"{response.status}{blocked}: {_cut(response.text)!r}"
    if isinstance(response, IterationResult):
        return response.status
    if isinstance(response, ChatResponse):
        calls = [call.name for call in response.message.tool_calls]
        return f"calls {', '.join(calls)}" if calls else f"{_cut(response.text)!r}"
    if isinstance(response, ToolResult):
        state = "ok" if response.ok else f"failed ({response.error.kind})" if response.error else "failed"
        return f"{state}: {_cut(response.content)!r}"
    return _cut(repr(response))


def _changed_fields(before: Any, after: Any) -> list[str]:
    if type(before) is not type(after) or not attrs.has(type(before)):
        return ["the whole value"]
    return [f.name for f in attrs.fields(type(before)) if not _same(getattr(before, f.name), getattr(after, f.name))]


def _same(old: Any, new: Any) -> bool:
    if isinstance(old, Tool) and isinstance(new, Tool):  # tools compare by identity; a copy is the same tool
        return old.definition == new.definition and old.fn is new.fn
    return bool(old == new)


def _request_change(scope: str, before: Any, after: Any) -> str | None:
    """What a filter changed in the request it passed on, or None when nothing did."""
    fields = _changed_fields(before, after)
    if not fields:
        return None
    if "messages" in fields and len(before.messages) != len(after.messages):
        return f"messages {len(before.messages)} -> {len(after.messages)}"
    if "messages" in fields:
        return f"message text {_last_text(before.messages)!r} -> {_last_text(after.messages)!r}"
    if "arguments" in fields:
        return f"arguments -> {_cut(str(dict(after.arguments)))}"
    if fields == ["tool"] and before.tool.definition == after.tool.definition:
        return "the tool's function is wrapped"
    return ", ".join(fields)


def _response_change(before: Any, after: Any) -> str:
    texts = isinstance(before, TurnResult | ChatResponse) and isinstance(after, TurnResult | ChatResponse)
    if texts and before.text != after.text:
        return f"answer {_cut(before.text)!r} -> {_cut(after.text)!r}"
    if isinstance(before, ToolResult) and isinstance(after, ToolResult) and before.content != after.content:
        return f"result {_cut(before.content)!r} -> {_cut(after.content)!r}"
    return describe_response(after)


def _wrap(flt: Filter, scope: str, hook: Any, depth: int, out: Lines, clock: Callable[[], float]) -> Any:
    pad = "  " * depth
    name = flt.name

    def write(line: str) -> None:
        out.write(f"{pad}{line}\n")
        out.flush()

    async def traced(request: Any, state: dict[str, Any], call_next: Next) -> Any:
        passed: list[Any] = []
        returned: list[Any] = []

        async def inner(changed: Any) -> Any:
            passed.append(changed)
            response = await call_next(changed)
            returned.append(response)
            return response

        write(f"-> {scope} {name}: {describe_request(scope, request)}")
        started = clock()
        try:
            response = await hook(request, state, inner)
        except BaseException as exc:
            took = (clock() - started) * 1000
            write(f"<- {scope} {name}: raised {type(exc).__name__}: {_cut(str(exc))} ({took:.1f} ms)")
            raise
        took = (clock() - started) * 1000
        changes: list[str] = []
        if not passed:
            changes.append("short-circuited: the inner layers were not called")
        else:
            if len(passed) > 1:
                changes.append(f"called the inner layers {len(passed)} times")
            changed = None if passed[0] is request else _request_change(scope, request, passed[0])
            if changed is not None:
                changes.append(f"changed the request ({changed})")
            if returned and response is not returned[-1] and response != returned[-1]:
                changes.append(f"changed the response ({_response_change(returned[-1], response)})")
        summary = "; ".join(changes) or "no change"
        write(f"<- {scope} {name}: {describe_response(response)} [{summary}] ({took:.1f} ms)")
        return response

    return traced


def changes(before: str, after: str) -> int:
    """How many places ``after`` differs from ``before``: runs of words replaced, removed or
    added (compared word by word, so a redacted key is one change, not one per letter)."""
    if before == after:
        return 0
    matcher = difflib.SequenceMatcher(None, _WORDS.findall(before), _WORDS.findall(after), autojunk=False)
    return sum(1 for tag, *_ in matcher.get_opcodes() if tag != "equal")


def _wrap_token(flt: Filter, transform: TokenTransform, depth: int, out: Lines) -> TokenTransform:
    """``transform`` noting what went in and out of one stream, with a line at its end."""
    pad = "  " * depth
    label = f"token {flt.name} ({transform.applies_to})"

    def init() -> dict[str, Any]:
        return {"inner": transform.new_state(), "in": [], "out": []}

    def step(token: str, state: dict[str, Any]) -> tuple[Sequence[str], dict[str, Any]]:
        tokens, state["inner"] = transform.step(token, state["inner"])
        state["in"].append(token)
        state["out"].extend(tokens)
        return tokens, state

    def flush(state: dict[str, Any]) -> Sequence[str]:
        tail = list(transform.flush(state["inner"])) if transform.flush is not None else []
        before, after = "".join(state["in"]), "".join(state["out"]) + "".join(tail)
        count = changes(before, after)
        if count:
            # the text as it went in is not shown: what a transform removes may be a secret
            what = f"{len(before)} -> {len(after)} characters, {count} change(s): now {_cut(after)!r}"
        else:
            what = f"{len(before)} characters [no change]"
        out.write(f"{pad}-- {label}: {what}\n")
        out.flush()
        return tail

    return TokenTransform(step, init=init, flush=flush, applies_to=transform.applies_to)


def traced_filters(filters: Iterable[Any], out: Lines, clock: Callable[[], float] = time.perf_counter) -> list[Filter]:
    """The filters with every hook wrapped to write its before/after lines to ``out``
    (indented by the filter's place in the onion), and every token transform its line."""
    wrapped: list[Filter] = []
    for depth, item in enumerate(filters):
        flt = normalise(item, depth).filter
        hooks = {
            f"around_{scope}": _wrap(flt, scope, hook, depth, out, clock)
            for scope in SCOPES
            if (hook := flt.hook(scope)) is not None
        }
        token = _wrap_token(flt, flt.token, depth, out) if flt.token is not None else None
        wrapped.append(attrs.evolve(flt, **hooks, token=token))
    return wrapped
