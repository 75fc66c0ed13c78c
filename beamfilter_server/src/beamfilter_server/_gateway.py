"""The gateway: one request, one turn through the config's onion.

Framework-free: :mod:`._app` turns HTTP into calls of :class:`Gateway` and its answers
(plain dicts, or chunks for a stream) back into HTTP. Where pauses wait is the
:class:`~._board.PauseBoard`'s business (this process's inbox, or a store every worker
shares); what a client reads is :class:`~._answers.Answers`'.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

import attrs

from beamfilter_core import Decision, Kernel, Message, PauseState, RunFinished, TextDelta
from beamfilter_core.errors import AlreadyResumedError, ConfigError, GatewayError, ResumeError
from beamfilter_core.secrets import escape_controls

from ._answers import Answers, error_for, stream_transforms
from ._board import LocalBoard, PauseBoard, SharedBoard, unknown_pause, wait_for
from ._client_tools import ClientCalls, client_tools_filter, current_calls, recording_gates, with_client_tools
from ._idempotency import IdempotencyKeys
from ._inbox import Entry, Outcome
from ._options import ServerOptions
from ._shared import POLL_SECONDS, SharedPauses, already_decided, recorded_error, shared_store
from ._wire import ChatCall, chunk, completion_chunks, parse_tool, tool_call_deltas

__all__ = ["CONVERSATION_HEADER", "WAIT_HEADER", "Caller", "Gateway", "check_reviewers", "seconds"]

logger = logging.getLogger("beamfilter.server")

#: The request header naming the conversation (else the body's ``user`` field).
CONVERSATION_HEADER = "beamfilter-conversation"
#: The request header asking to wait up to N seconds for a paused turn's decision.
WAIT_HEADER = "beamfilter-wait"
_CONVERSATION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@/-]{0,199}")
#: The run-context key of what a resume on another worker needs from the request.
CONTEXT_KEY = "gateway"
_DECIDED = ("completed", "failed")
#: What a started turn ends with: its outcome, and its inbox entry when it paused.
Started = tuple[Outcome, Entry | None]


@attrs.frozen(slots=True)
class Caller:
    """Who sent a request: the client key's id and the conversation id it named."""

    client: str | None = None
    conversation: str | None = None

    @property
    def conversation_id(self) -> str | None:
        """The id the turn runs under: scoped to the client key, so another key never
        reads or continues it."""
        if self.conversation is None or self.client is None:
            return self.conversation
        return f"{self.client}:{self.conversation}"


def seconds(raw: str, where: str, limit: float, param: str | None = None) -> float:
    """A number of seconds from 0 to ``limit``; anything else (``nan``, ``inf``, negative,
    larger than ``limit``, not a number) is a 400 naming ``where``."""
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value <= limit):
        msg = f"{where} is {raw[:30]!r}; send a number of seconds from 0 to {limit:g} (max_wait)."
        raise GatewayError(msg, status=400, param=param or where)
    return value


def can_pause(kernel: Kernel) -> list[str]:
    """The names of the filters that can pause a turn (a gate hook), and the kernel's gate."""
    names = [item.name for item in kernel.filters if getattr(item, "around_gate", None) is not None]
    return [*names, "Kernel(gate=...)"] if kernel.gate is not None else names


def check_reviewers(kernel: Kernel, options: ServerOptions) -> None:
    """Refuse a gateway whose turns can pause but that names no reviewer, or whose client
    keys could decide: clients never approve their own calls."""
    pausing = can_pause(kernel)
    if pausing and not options.inbox_keys:
        msg = (
            f"[server] inbox_keys is missing, and {', '.join(pausing)} can pause turns for a human decision. "
            'Give the reviewers\' keys as inbox_keys = [{ "$env" = "REVIEWER_KEY" }]; client keys '
            "(api_keys) never decide."
        )
        raise ConfigError(msg)
    if set(options.inbox_keys) & set(options.api_keys):
        msg = "[server] inbox_keys and api_keys share a key; give reviewers keys of their own."
        raise ConfigError(msg)


def _meta(pause: PauseState) -> dict[str, Any]:
    found = pause.context.get(CONTEXT_KEY)
    return found if isinstance(found, dict) else {}


def _date(entry: Entry) -> Entry:
    """Date the entry by its request (carried in the pause), the same on every worker."""
    since = _meta(entry.pause).get("since")
    if isinstance(since, int | float):
        entry.created = float(since)
    return entry


def _check_owner(pause_id: str, owner: Any, client: str | None) -> None:
    # another client's pause is unknown to this one (its answer is that client's)
    if client is not None and owner != client:
        raise unknown_pause(pause_id)


class Gateway:
    """The config's kernel behind the OpenAI wire, with the board of its paused turns."""

    def __init__(self, kernel: Kernel, options: ServerOptions) -> None:
        check_reviewers(kernel, options)
        self.options = options
        self.kernel = kernel.with_filters([*recording_gates(kernel.filters), client_tools_filter()])
        #: With a memory filter the conversation lives in its store: a request with a
        #: conversation id sends only its new messages as the turn's input.
        self.remembers = any(f.load_pause is not None for f in kernel.filters)
        store = shared_store(kernel)
        self.board: PauseBoard = SharedBoard(SharedPauses(store), self._adopt) if store is not None else LocalBoard()
        self.answers = Answers(options, stream_transforms(kernel))
        self.keys: IdempotencyKeys[Started] = IdempotencyKeys()
        self._tasks: set[asyncio.Task[Any]] = set()
        self.closing = False

    def __repr__(self) -> str:
        return f"Gateway({self.kernel!r}, {self.options!r})"

    # -- requests -----------------------------------------------------------------------

    def caller(self, headers: Mapping[str, str], call: ChatCall, client: str | None) -> Caller:
        """The request's client and conversation (header Beamfilter-Conversation, else ``user``)."""
        value = headers.get(CONVERSATION_HEADER)
        where = "header Beamfilter-Conversation"
        if value is None:
            value, where = call.user, "user"
        if value is not None and not _CONVERSATION.fullmatch(value):
            msg = (
                f"{where} is {value[:60]!r}; send 1 to 200 letters, digits or _.:@/- (starting with a letter or digit)."
            )
            raise GatewayError(msg, status=400, param=where)
        return Caller(client, value)

    def wait_seconds(self, headers: Mapping[str, str]) -> float:
        raw = headers.get(WAIT_HEADER)
        return 0.0 if raw is None else seconds(raw, "header Beamfilter-Wait", self.options.max_wait, "Beamfilter-Wait")

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

    def _context(self, caller: Caller, call: ChatCall, calls: ClientCalls) -> dict[str, Any]:
        # What another worker needs to resume this turn if it pauses: it travels in the
        # (signed) pause state, with the client key's id and the id the client sent, and
        # which filter paused each call (the gates record it in this very dict as they run).
        meta: dict[str, Any] = {"since": time.time(), "paused_by": calls.paused}
        if caller.client is not None:
            meta["client"] = caller.client
        if caller.conversation is not None:
            meta["conversation"] = caller.conversation
        if call.tools:
            meta["tools"] = [tool.definition for tool in call.tools]
        if call.options:
            meta["options"] = dict(call.options)
        context: dict[str, Any] = {CONTEXT_KEY: meta}
        if caller.conversation_id is not None:
            context["conversation_id"] = caller.conversation_id
        return context

    def _track(self, task: asyncio.Task[Any]) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _attached(
        self, caller: Caller, key: str | None, digest: str, start: Callable[[], Coroutine[Any, Any, Started]]
    ) -> Started:
        """Run the turn ``start`` begins, or, for a request retried with the same
        Idempotency-Key, await the turn its first attempt began."""
        if key is None:
            return await start()
        while True:
            found = self.keys.find(caller.client, key, digest)
            if found is None:
                task: asyncio.Task[Started] = asyncio.get_running_loop().create_task(start())
                self._track(task)
                self.keys.start(caller.client, key, digest, task)
                found = task
            try:
                # shielded: the attempt that started the turn may go; the turn stays
                return await asyncio.shield(found)
            except asyncio.CancelledError:
                if found.cancelled() and not _cancelling():
                    continue  # that attempt's turn was cut off (a stream closed): run anew
                raise

    async def complete(
        self, call: ChatCall, caller: Caller, wait: float, key: str | None = None, digest: str = ""
    ) -> tuple[int, dict[str, Any]]:
        """A non-streamed request: its HTTP status and JSON body."""
        kernel, messages, calls = self._prepare(call, caller.conversation_id)

        async def start() -> Started:
            token = current_calls.set(calls)
            try:
                result = await kernel.run(messages, context=self._context(caller, call, calls))
            finally:
                current_calls.reset(token)
            outcome = Outcome(result, calls)
            entry = self._park(outcome, kernel, call.model, caller) if result.status == "paused" else None
            return outcome, entry

        outcome, entry = await self._attached(caller, key, digest, start)
        return await self._answer(outcome, entry, wait, f"chatcmpl-{uuid.uuid4().hex}", call.model)

    async def _answer(
        self, outcome: Outcome, entry: Entry | None, wait: float, completion_id: str, model: str
    ) -> tuple[int, dict[str, Any]]:
        if entry is not None:
            decided = await self._await_decision(entry, wait)
            if isinstance(decided, dict):  # decided on another worker: its answer as it sent it
                return (202 if decided["choices"][0]["finish_reason"] == "paused" else 200), decided
            outcome = decided or outcome
        return self.answers.render(outcome, completion_id, model)

    def _park(self, outcome: Outcome, kernel: Kernel, model: str, caller: Caller) -> Entry:
        pause = outcome.result.pause
        assert pause is not None  # status "paused" always carries its state
        entry = Entry(
            pause, caller.conversation_id, kernel, model, outcome.calls.names, caller.client, caller.conversation
        )
        entry.paused_by = {k: v for k, v in outcome.calls.paused.items() if k in pause.awaiting}
        _date(entry)
        self.board.inbox.add(entry)
        logger.info("turn paused: pause %s awaits %s", pause.pause_id, escape_controls(", ".join(pause.awaiting)))
        return entry

    def _adopt(self, pause: PauseState, conversation_id: str) -> Entry:
        """An entry for a pause another worker made, from what its state carries."""
        meta = _meta(pause)
        raw_tools = meta.get("tools")
        raw_options = meta.get("options")
        tools = tuple(parse_tool(raw, f"tools[{i}]") for i, raw in enumerate(raw_tools or ()))
        options: dict[str, Any] = raw_options if isinstance(raw_options, dict) else {}
        kernel = with_client_tools(self.kernel, tools, options) if tools or options else self.kernel
        client, shown = meta.get("client"), meta.get("conversation")
        paused_by = meta.get("paused_by")
        entry = Entry(
            pause,
            conversation_id,
            kernel,
            self.options.model_name,
            frozenset(tool.name for tool in tools),
            client if isinstance(client, str) else None,
            shown if isinstance(shown, str) else None,
        )
        if isinstance(paused_by, dict):
            entry.paused_by = {k: v for k, v in paused_by.items() if k in pause.awaiting and isinstance(v, dict)}
        return _date(entry)

    async def _await_decision(self, entry: Entry, wait: float) -> Outcome | dict[str, Any] | None:
        """The outcome of the decided turn (its completion when another worker decided it),
        or None when ``wait`` passes first. A resumed turn that pauses again waits on,
        for what is left of ``wait``. A pause decided already answers at once."""
        deadline = time.monotonic() + wait
        current: Entry | None = entry
        pause_id = entry.pause_id
        while True:
            if current is not None and not current.done.is_set():
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                await wait_for(current.done, self.board.step(current, left))
            if current is not None and current.done.is_set():
                outcome = self._local_outcome(current)
                pause = outcome.result.pause
                if outcome.result.status != "paused" or pause is None:
                    return outcome
                current = self.board.inbox.get(pause.pause_id)
                if current is None:
                    return outcome
                pause_id = current.pause_id
                continue
            record = await self.board.decided(pause_id)
            if record is None or record.get("status") not in _DECIDED:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                if current is None:
                    await asyncio.sleep(min(left, POLL_SECONDS))
                continue
            if record["status"] == "failed":
                raise recorded_error(record)
            answer: dict[str, Any] = record["completion"]
            next_id = answer.get("beamfilter", {}).get("pause_id")
            if answer["choices"][0]["finish_reason"] != "paused" or not isinstance(next_id, str):
                return answer
            pause_id, current = next_id, self.board.inbox.get(next_id)

    def _local_outcome(self, entry: Entry) -> Outcome:
        if entry.error is not None:
            raise error_for(entry.error)
        if entry.outcome is None:  # the gateway is closing
            msg = "The gateway is shutting down."
            raise GatewayError(msg, status=503)
        return entry.outcome

    # -- streams ------------------------------------------------------------------------

    async def stream(
        self, call: ChatCall, caller: Caller, wait: float, key: str | None = None, digest: str = ""
    ) -> AsyncIterator[dict[str, Any] | str]:
        """A streamed request: chunks (dicts) and SSE comments (str). The first item is
        produced before the HTTP status is sent, so a turn that fails at once is an error
        status, not a broken stream."""
        kernel, messages, calls = self._prepare(call, caller.conversation_id)
        completion_id = f"chatcmpl-{uuid.uuid4().hex}"
        created = int(time.time())
        model = call.model
        found = self.keys.find(caller.client, key, digest) if key is not None else None
        if found is not None:  # a retry: the first attempt's turn, its answer as chunks
            outcome, entry = await self._attached(caller, key, digest, _never)
            if entry is not None and wait > 0 and not entry.done.is_set():
                yield f"waiting up to {wait:g} s for the decision on pause {entry.pause_id}"
            _, answer = await self._answer(outcome, entry, wait, completion_id, model)
            yield chunk(completion_id, model, created, {"role": "assistant", "content": ""})
            for piece in completion_chunks(answer, completion_id, created, call.include_usage):
                yield piece
            return
        turn: asyncio.Future[Started] = asyncio.get_running_loop().create_future()
        if key is not None:
            self.keys.start(caller.client, key, digest, turn)
        try:
            async for item in self._stream_turn(kernel, messages, calls, call, caller, wait, turn, completion_id):
                yield item
        finally:
            if not turn.done():
                turn.cancel()  # cut off before its end: a retry runs anew

    async def _stream_turn(
        self,
        kernel: Kernel,
        messages: tuple[Message, ...],
        calls: ClientCalls,
        call: ChatCall,
        caller: Caller,
        wait: float,
        turn: asyncio.Future[Started],
        completion_id: str,
    ) -> AsyncIterator[dict[str, Any] | str]:
        created = int(time.time())
        model = call.model
        limit = self.options.max_answer_chars
        sent = 0
        iterator = aiter(kernel.run_stream(messages, context=self._context(caller, call, calls)))
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
        entry = self._park(outcome, kernel, call.model, caller) if outcome.result.status == "paused" else None
        turn.set_result((outcome, entry))
        if entry is not None and wait > 0:
            yield f"waiting up to {wait:g} s for the decision on pause {entry.pause_id}"
            decided = await self._await_decision(entry, wait)
            if isinstance(decided, dict):  # decided on another worker: its answer as chunks
                for item in completion_chunks(decided, completion_id, created, call.include_usage):
                    yield item
                return
            if decided is not None:
                outcome = decided
                # the resumed turn's answer was not streamed: one chunk, in the consumer view
                text = "" if decided.calls.handed else self.answers.view(decided.result.text or "")
                if text and decided.result.status == "completed":
                    yield chunk(completion_id, model, created, {"content": text})
        message, finish, extra = self.answers.final(outcome)
        delta: dict[str, Any] = {}
        if finish == "paused":
            delta["content"] = message.text
        if message.tool_calls:
            self.answers.check_size(message)
            delta["tool_calls"] = tool_call_deltas(message.tool_calls)
        yield chunk(completion_id, model, created, delta, finish, extra=extra)
        if call.include_usage:
            yield chunk(completion_id, model, created, {}, usage=outcome.result.usage, empty=True)

    # -- decisions ----------------------------------------------------------------------

    async def decide(self, pause_id: str, decisions: dict[str, Decision], reviewer: str) -> dict[str, Any]:
        """Take the pause for ``reviewer``, resume its turn, and answer how it ended.

        The resumed turn runs in a task of its own: a reviewer who leaves does not stop it.

        Raises:
            GatewayError: 404 for an unknown pause, 409 ``already decided`` for one decided
                before (on any worker, with a shared store), 422 ``decision_refused`` when the
                decision was refused before anything ran (the pause is pending again).
        """
        taken = await self.board.claim(pause_id, reviewer)
        taken.decisions = {key: value.kind for key, value in decisions.items()}
        task = asyncio.get_running_loop().create_task(self._resume(taken, decisions))
        self._track(task)
        refusal = await asyncio.shield(task)
        if refusal is not None:
            msg = f"The decision was refused: {refusal}"
            raise GatewayError(msg, status=422, code="decision_refused")
        if isinstance(taken.error, AlreadyResumedError):
            raise already_decided(pause_id, None)
        return {"object": "beamfilter.pause", "id": pause_id, **self._body(taken)}

    async def _resume(self, entry: Entry, decisions: dict[str, Decision]) -> str | None:
        """Resume the entry's turn; the refusal when the decision was refused before anything ran."""
        calls = ClientCalls(entry.tool_names)
        current_calls.set(calls)
        try:
            result = await entry.kernel.resume(
                entry.pause, decisions, context=None, conversation_id=entry.conversation_id
            )
        except AlreadyResumedError as exc:  # resumed elsewhere (not through a gateway's inbox)
            self.board.inbox.finish(entry, None, exc)
        except ResumeError as exc:
            # refused before anything ran (edited arguments that break the tool's schema...):
            # the pause is pending again, with the reason shown in the inbox
            logger.warning("decision on pause %s refused: %s", entry.pause_id, exc)
            entry.refusal = str(exc)
            await self.board.release(entry)
            return entry.refusal
        except BaseException as exc:
            logger.exception("resumed turn of pause %s failed", entry.pause_id)
            self.board.inbox.finish(entry, None, exc)
            if not isinstance(exc, Exception):  # cancelled (shutdown): the memory filter gave the pause back
                with contextlib.suppress(Exception):
                    await self.board.release(entry)
                raise
        else:
            outcome = Outcome(result, calls)
            if result.status == "paused":
                self._park(outcome, entry.kernel, entry.model, Caller(entry.client, entry.shown_conversation))
            self.board.inbox.finish(entry, outcome, None)
            logger.info(
                "pause %s decided by %s: %s", entry.pause_id, escape_controls(entry.decided_by or ""), result.status
            )
        try:
            await self.board.record(entry, {**self._body(entry), "client": entry.client})
        except Exception:
            logger.exception("the outcome of pause %s could not be stored", entry.pause_id)
        return None

    def _body(self, entry: Entry) -> dict[str, Any]:
        body: dict[str, Any] = {"status": entry.status}
        if entry.decided_by is not None:
            body["decided_by"] = entry.decided_by
        if entry.refusal is not None:
            body["refusal"] = entry.refusal
        if entry.status == "failed" and entry.error is not None:
            error = error_for(entry.error)
            body["error"] = {"message": str(error), "status": error.status, "type": error.type, "code": error.code}
        if entry.outcome is not None:
            try:
                _status, body["completion"] = self.answers.render(
                    entry.outcome, f"chatcmpl-{uuid.uuid4().hex}", entry.model
                )
            except GatewayError as error:  # cancelled, or an answer over max_answer_chars
                body["status"] = "failed"
                body["error"] = {"message": str(error), "status": error.status, "type": error.type, "code": error.code}
        return body

    async def poll(self, pause_id: str, client: str | None, wait: float) -> dict[str, Any]:
        """The pause's status and, once decided, how its turn ended; waits up to ``wait``
        seconds for the decision. Only the client key that made the pause may read it."""
        deadline = time.monotonic() + wait
        while True:
            body = await self._poll_once(pause_id, client)
            left = deadline - time.monotonic()
            if body["status"] in _DECIDED or left <= 0 or self.closing:
                return {"object": "beamfilter.pause", "id": pause_id, **body}
            entry = self.board.inbox.get(pause_id)
            if entry is None:
                await asyncio.sleep(min(left, POLL_SECONDS))
            else:
                await wait_for(entry.done, self.board.step(entry, left))

    async def _poll_once(self, pause_id: str, client: str | None) -> dict[str, Any]:
        entry = self.board.inbox.get(pause_id)
        if entry is not None and entry.status in _DECIDED:
            _check_owner(pause_id, entry.client, client)
            return self._body(entry)
        record = await self.board.decided(pause_id)
        if record is not None:
            _check_owner(pause_id, record.pop("client", None), client)
            return record
        if entry is not None:
            _check_owner(pause_id, entry.client, client)
            return self._body(entry)
        stored, owner = await self.board.stored_owner(pause_id)
        if not stored:
            raise unknown_pause(pause_id)
        _check_owner(pause_id, owner, client)
        return {"status": "pending"}

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
        self.board.inbox.close()
        await self.kernel.aclose()
        logger.info("gateway closed: its stores, toolsets and model connections")


async def _never() -> Started:  # pragma: no cover - only when the first attempt is cut off in between
    msg = "The first attempt of this request was cut off before its turn ended; send it again."
    raise GatewayError(msg, status=409, code="idempotency_key_in_use")


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


async def _chain(first: Any, rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
    if first is not None:
        yield first
    async for item in rest:
        yield item
