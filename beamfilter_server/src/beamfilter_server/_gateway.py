"""The gateway: one request, one turn through the config's onion.

Framework-free: :mod:`._app` turns HTTP into calls of :class:`Gateway` and its answers
(plain dicts, or chunks for a stream) back into HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any

from beamfilter_core import Decision, Kernel, Message, RunFinished, TextDelta
from beamfilter_core.errors import (
    AlreadyResumedError,
    BeamfilterError,
    FilterError,
    GatewayError,
    LimitError,
    ProviderConnectionError,
    ProviderHTTPError,
    ProviderTimeoutError,
    RateLimitError,
    ResumeError,
)

from ._client_tools import ClientCalls, client_tools_filter, current_calls, with_client_tools
from ._inbox import Entry, Inbox, Outcome
from ._options import ServerOptions
from ._wire import ChatCall, chunk, completion, tool_call_deltas

__all__ = ["CONVERSATION_HEADER", "WAIT_HEADER", "Gateway"]

logger = logging.getLogger("beamfilter.server")

#: The request header naming the conversation (else the body's ``user`` field).
CONVERSATION_HEADER = "beamfilter-conversation"
#: The request header asking to wait up to N seconds for a paused turn's decision.
WAIT_HEADER = "beamfilter-wait"
_CONVERSATION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}$")


def error_for(exc: BaseException) -> GatewayError:
    """The HTTP error a failed turn answers with; nothing of a secret or a stack trace."""
    if isinstance(exc, GatewayError):
        return exc
    if isinstance(exc, RateLimitError):
        return GatewayError("The upstream model is rate limited; retry later.", status=429, type="rate_limit_error")
    if isinstance(exc, ProviderTimeoutError):
        return GatewayError("The upstream model timed out.", status=504, type="server_error", code="upstream_timeout")
    if isinstance(exc, ProviderHTTPError | ProviderConnectionError):
        name = type(exc).__name__
        msg = f"The upstream model failed ({name}); see the gateway's log."
        return GatewayError(msg, status=502, type="server_error", code="upstream_error")
    if isinstance(exc, LimitError):
        return GatewayError(str(exc), status=429, type="limit_exceeded", code=type(exc).__name__)
    if isinstance(exc, FilterError):
        msg = f"The filter {exc.filter_name!r} failed; see the gateway's log."
        return GatewayError(msg, status=500, type="server_error", code="filter_error")
    if isinstance(exc, AlreadyResumedError):
        return GatewayError("already decided: this pause was decided before.", status=409, code="already_decided")
    if isinstance(exc, ResumeError):
        return GatewayError(str(exc), status=400, code="bad_decision")
    name = type(exc).__name__ if isinstance(exc, BeamfilterError) else "an internal error"
    return GatewayError(f"The turn failed ({name}); see the gateway's log.", status=500, type="server_error")


def _text_of(messages: tuple[Message, ...]) -> str | None:
    for message in reversed(messages):
        if message.role == "assistant":
            return message.content if isinstance(message.content, str) else None
    return None


async def _chain(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    if first is not None:
        yield first
    async for item in rest:
        yield item


class Gateway:
    """The config's kernel behind the OpenAI wire, with the inbox of its paused turns."""

    def __init__(self, kernel: Kernel, options: ServerOptions) -> None:
        self.options = options
        self.kernel = kernel.with_filters([*kernel.filters, client_tools_filter()])
        #: With a memory filter the conversation lives in its store: a request with a
        #: conversation id sends only its new messages as the turn's input.
        self.remembers = any(f.load_pause is not None for f in kernel.filters)
        self.inbox = Inbox()
        self._tasks: set[asyncio.Task[None]] = set()
        self.closing = False

    def __repr__(self) -> str:
        return f"Gateway({self.kernel!r}, {self.options!r})"

    # -- requests -----------------------------------------------------------------------

    def conversation(self, headers: Mapping[str, str], call: ChatCall) -> str | None:
        value = headers.get(CONVERSATION_HEADER)
        where = "header Beamfilter-Conversation"
        if value is None:
            value, where = call.user, "user"
        if value is None:
            return None
        if not _CONVERSATION.match(value):
            msg = (
                f"{where} is {value[:60]!r}; send 1 to 200 letters, digits or _.:@/- (starting with a letter or digit)."
            )
            raise GatewayError(msg, status=400, param=where)
        return value

    def wait_seconds(self, headers: Mapping[str, str]) -> float:
        raw = headers.get(WAIT_HEADER)
        if raw is None:
            return 0.0
        try:
            seconds = float(raw)
        except ValueError:
            seconds = -1.0
        if not seconds >= 0:
            msg = f"header Beamfilter-Wait is {raw[:30]!r}; send a number of seconds."
            raise GatewayError(msg, status=400, param="Beamfilter-Wait")
        return min(seconds, self.options.max_wait)

    def check_model(self, call: ChatCall) -> None:
        if call.model != self.options.model_name:
            msg = f"The model {call.model[:100]!r} does not exist; this gateway serves {self.options.model_name!r}."
            raise GatewayError(msg, status=404, code="model_not_found", param="model")

    def _input(self, call: ChatCall, conversation_id: str | None) -> tuple[Message, ...]:
        if conversation_id is None or not self.remembers:
            return call.messages
        # The store holds the conversation: the turn's input is what came after the last
        # assistant message (the new user message, or the client's tool results).
        messages = call.messages
        last = max((i for i, m in enumerate(messages) if m.role == "assistant"), default=-1)
        system = tuple(m for m in messages[: last + 1] if m.role == "system")
        return (*system, *messages[last + 1 :])

    def _prepare(self, call: ChatCall, conversation_id: str | None) -> tuple[Kernel, tuple[Message, ...], ClientCalls]:
        if self.closing:
            msg = "The gateway is shutting down; retry on another instance."
            raise GatewayError(msg, status=503)
        self.check_model(call)
        kernel = self.kernel
        if call.tools or call.options:
            kernel = with_client_tools(kernel, call.tools, dict(call.options))
        messages = self._input(call, conversation_id)
        if not messages:
            msg = "The request ends with an assistant message; send the next user message or tool results."
            raise GatewayError(msg, status=400, param="messages")
        return kernel, messages, ClientCalls(frozenset(t.name for t in call.tools))

    async def complete(self, call: ChatCall, conversation_id: str | None, wait: float) -> tuple[int, dict[str, Any]]:
        """A non-streamed request: its HTTP status and JSON body."""
        kernel, messages, calls = self._prepare(call, conversation_id)
        token = current_calls.set(calls)
        try:
            result = await kernel.run(messages, context=self._context(conversation_id))
        finally:
            current_calls.reset(token)
        outcome = Outcome(result, calls)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        if result.status == "paused":
            entry = self._park(outcome, kernel, call.model, conversation_id)
            outcome = await self._await_decision(entry, wait) or outcome
        return self.render(outcome, completion_id, call.model)

    def _context(self, conversation_id: str | None) -> dict[str, Any]:
        return {"conversation_id": conversation_id} if conversation_id is not None else {}

    def _park(self, outcome: Outcome, kernel: Kernel, model: str, conversation_id: str | None) -> Entry:
        pause = outcome.result.pause
        assert pause is not None  # status "paused" always carries its state
        entry = Entry(pause, conversation_id, kernel, model, outcome.calls.names)
        self.inbox.add(entry)
        logger.info("turn paused: pause %s awaits %s", pause.pause_id, ", ".join(pause.awaiting))
        return entry

    async def _await_decision(self, entry: Entry, wait: float) -> Outcome | None:
        """The outcome of the decided turn, or None when ``wait`` passes first. A resumed
        turn that pauses again waits on, for what is left of ``wait``."""
        deadline = time.monotonic() + wait
        while wait > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(max(0.0, deadline - time.monotonic())):
                    await entry.done.wait()
            if not entry.done.is_set():
                return None
            if entry.error is not None:
                raise error_for(entry.error)
            outcome = entry.outcome
            if outcome is None:  # the gateway is closing
                msg = "The gateway is shutting down."
                raise GatewayError(msg, status=503)
            if outcome.result.status != "paused" or outcome.result.pause is None:
                return outcome
            again = self.inbox.get(outcome.result.pause.pause_id)
            if again is None:
                return outcome
            entry = again
        return None

    # -- answers ------------------------------------------------------------------------

    def pause_info(self, entry_or_pause: Any) -> dict[str, Any]:
        pause = entry_or_pause
        calls = {c.id: c for c in pause.calls}
        base = self.options.public_url or ""
        return {
            "status": "paused",
            "pause_id": pause.pause_id,
            "reason": pause.reason,
            "awaiting": [
                {"id": i, "name": calls[i].name, "arguments": dict(calls[i].arguments)} for i in pause.awaiting
            ],
            "inbox": f"{base}/inbox#pause-{pause.pause_id}",
            "poll": f"{base}/v1/pauses/{pause.pause_id}",
        }

    def _pause_text(self, info: dict[str, Any]) -> str:
        names = ", ".join(a["name"] for a in info["awaiting"])
        why = f" ({info['reason']})" if info["reason"] else ""
        return (
            f"Paused: {names} waits for a human decision{why}. Pause {info['pause_id']}; "
            f"decide at {info['inbox']}; the outcome is at {info['poll']}."
        )

    def _final(self, outcome: Outcome) -> tuple[Message, str, dict[str, Any]]:
        """The answer's message, finish reason and ``beamfilter`` extras."""
        result, calls = outcome.result, outcome.calls
        extra: dict[str, Any] = {}
        if calls.refused:
            extra["refused"] = list(calls.refused)
        if result.blocked_by:
            extra["blocked_by"] = result.blocked_by
        if result.status == "paused" and result.pause is not None:
            info = self.pause_info(result.pause)
            extra.update(info)
            return Message("assistant", self._pause_text(info)), "paused", extra
        if result.status == "cancelled":
            msg = "The turn was cancelled (the gateway is shutting down)."
            raise GatewayError(msg, status=503)
        if calls.handed:
            text = _text_of(result.messages)
            return Message("assistant", text, tuple(calls.handed)), "tool_calls", extra
        message = result.message
        if message is None or message.role != "assistant":
            message = Message("assistant", result.text)
        finish = "content_filter" if result.blocked_by else "stop"
        return Message("assistant", message.content, ()), finish, extra

    def _check_size(self, message: Message) -> None:
        size = len(message.text) + sum(len(c.arguments_json) for c in message.tool_calls)
        if size > self.options.max_answer_chars:
            msg = f"The answer is longer than max_answer_chars={self.options.max_answer_chars}."
            raise GatewayError(msg, status=502, type="server_error", code="answer_too_large")

    def render(self, outcome: Outcome, completion_id: str, model: str) -> tuple[int, dict[str, Any]]:
        message, finish, extra = self._final(outcome)
        self._check_size(message)
        status = 202 if finish == "paused" else 200
        return status, completion(completion_id, model, message, finish, outcome.result.usage, extra)

    async def stream(
        self, call: ChatCall, conversation_id: str | None, wait: float
    ) -> AsyncIterator[dict[str, Any] | str]:
        """A streamed request: chunks (dicts) and SSE comments (str). The first item is
        produced before the HTTP status is sent, so a turn that fails at once is an error
        status, not a broken stream."""
        kernel, messages, calls = self._prepare(call, conversation_id)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = call.model
        limit = self.options.max_answer_chars
        sent = 0
        iterator = aiter(kernel.run_stream(messages, context=self._context(conversation_id)))
        # The turn's task starts at the first event and copies the request's client calls
        # from this context; the status line goes out only after that event.
        token = current_calls.set(calls)
        try:
            first = await anext(iterator)
        except StopAsyncIteration:
            first = None
        finally:
            current_calls.reset(token)
        yield chunk(completion_id, model, created, {"role": "assistant", "content": ""})
        outcome: Outcome | None = None
        async for event in _chain(first, iterator):
            if type(event) is TextDelta:
                sent += len(event.text)
                if sent > limit:
                    msg = f"The answer is longer than max_answer_chars={limit}."
                    raise GatewayError(msg, status=502, type="server_error", code="answer_too_large")
                yield chunk(completion_id, model, created, {"content": event.text})
            elif type(event) is RunFinished:
                outcome = Outcome(event.result, calls)
        assert outcome is not None  # run_stream always ends with RunFinished
        if outcome.result.status == "paused":
            entry = self._park(outcome, kernel, call.model, conversation_id)
            if wait > 0:
                yield f"waiting up to {wait:g} s for the decision on pause {entry.pause_id}"
                decided = await self._await_decision(entry, wait)
                if decided is not None:
                    outcome = decided
                    text = "" if decided.calls.handed else (decided.result.text or "")
                    if text and decided.result.status == "completed":
                        yield chunk(completion_id, model, created, {"content": text})
        message, finish, extra = self._final(outcome)
        delta: dict[str, Any] = {}
        if finish == "paused":
            delta["content"] = message.text
        if message.tool_calls:
            self._check_size(message)
            delta["tool_calls"] = tool_call_deltas(message.tool_calls)
        yield chunk(completion_id, model, created, delta, finish, extra=extra)
        if call.include_usage:
            yield chunk(completion_id, model, created, {}, usage=outcome.result.usage, empty=True)

    # -- decisions ----------------------------------------------------------------------

    def decide(self, pause_id: str, decisions: dict[str, Decision], reviewer: str) -> Entry:
        """Take the pause for ``reviewer`` and resume its turn in the background.

        Raises:
            GatewayError: 404 for an unknown pause, 409 ``already decided`` for one decided before.
        """
        entry = self.inbox.get(pause_id)
        if entry is None:
            msg = f"No pause {pause_id[:80]!r} is known here."
            raise GatewayError(msg, status=404, code="unknown_pause")
        taken = self.inbox.take(pause_id, reviewer)
        if taken is None:
            who = f" by {entry.decided_by}" if entry.decided_by else ""
            msg = f"already decided{who}: pause {pause_id} is no longer pending."
            raise GatewayError(msg, status=409, code="already_decided")
        taken.decisions = {key: value.kind for key, value in decisions.items()}
        task = asyncio.get_running_loop().create_task(self._resume(taken, decisions))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return taken

    async def _resume(self, entry: Entry, decisions: dict[str, Decision]) -> None:
        calls = ClientCalls(entry.tool_names)
        current_calls.set(calls)
        try:
            result = await entry.kernel.resume(
                entry.pause, decisions, context=None, conversation_id=entry.conversation_id
            )
        except AlreadyResumedError as exc:  # another worker resumed it: its outcome is there
            self.inbox.finish(entry, None, exc)
            return
        except ResumeError as exc:
            # refused before anything ran (edited arguments that break the tool's schema...):
            # the pause is pending again, with the reason shown in the inbox
            logger.warning("decision on pause %s refused: %s", entry.pause_id, exc)
            entry.refusal = str(exc)
            self.inbox.give_back(entry)
            return
        except BaseException as exc:
            logger.exception("resumed turn of pause %s failed", entry.pause_id)
            self.inbox.finish(entry, None, exc)
            if not isinstance(exc, Exception):
                raise
            return
        outcome = Outcome(result, calls)
        if result.status == "paused":
            self._park(outcome, entry.kernel, entry.model, entry.conversation_id)
        self.inbox.finish(entry, outcome, None)
        logger.info("pause %s decided by %s: %s", entry.pause_id, entry.decided_by, result.status)

    def poll(self, pause_id: str) -> dict[str, Any]:
        entry = self.inbox.get(pause_id)
        if entry is None:
            msg = f"No pause {pause_id[:80]!r} is known here."
            raise GatewayError(msg, status=404, code="unknown_pause")
        body: dict[str, Any] = {"object": "beamfilter.pause", "id": pause_id, "status": entry.status}
        if entry.decided_by is not None:
            body["decided_by"] = entry.decided_by
        if entry.refusal is not None:
            body["refusal"] = entry.refusal
        if entry.status == "failed" and entry.error is not None:
            body["error"] = {"message": str(error_for(entry.error))}
        if entry.outcome is not None:
            _status, answer = self.render(entry.outcome, f"chatcmpl-{uuid.uuid4().hex}", entry.model)
            body["completion"] = answer
        return body

    async def aclose(self, grace: float) -> None:
        """Let decided turns finish up to ``grace`` seconds, cancel the rest, close the kernel
        (its stores, MCP servers and model connections)."""
        self.closing = True
        tasks = set(self._tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=grace)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=5)
        self.inbox.close()
        await self.kernel.aclose()
        logger.info("gateway closed: its stores, toolsets and model connections")
