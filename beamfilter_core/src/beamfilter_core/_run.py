"""One run of a kernel: the tool loop, and the terminals of the chat, tool, iteration and
turn scopes.

A ``_Run`` takes the kernel's :class:`~._plan.Plan` as its only input, binds the plan's
compiled chains to its terminals (the tool and gate chains on their first use), then
drives rounds: each round is one pass of the iteration chain, whose terminal makes one
LLM call through the chat chain, asks the gate chain about the calls and runs the batch
through the tool chain. Whatever leaves a terminal is marked as raised by no filter
(:func:`._chain.passed_through`), so a layer only blames its own hook. The gate scope
and its terminal, pausing and resuming live in :mod:`._approvals`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NoReturn

from ._approvals import ask_gate, make_pause, resume_turn
from ._chain import passed_through
from ._filter import SCOPE_SPECS, Scope
from ._heal import heal_tool_calls
from ._lazy import lazy_module
from ._messages import Message, ToolCall, Usage
from ._pause import restore_filter_state
from ._records import (
    ChatRequest,
    ChatResponse,
    Decision,
    GateRequest,
    IterationRequest,
    IterationResult,
    PauseState,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
)
from ._streaming import ToolCallFinished, ToolCallStarted, apply_to_text, pipeline
from ._tools import busy_message, start_sync_call
from .errors import ConfigError, MaxIterationsExceeded

if TYPE_CHECKING:
    import asyncio
else:
    # asyncio is the one heavy module beamfilter_core can import late (see bench/RESULTS.md)
    asyncio = lazy_module("asyncio", globals())

if TYPE_CHECKING:
    from ._approvals import Journal
    from ._kernel import CancelToken
    from ._plan import Plan
    from ._streaming import Sink
    from ._tools import Tool

_CANCELLED_TOOL_TEXT = "cancelled: the run was cancelled before this tool call finished"


def _classify(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError | ConnectionError):
        return "transient"
    if isinstance(exc, PermissionError):
        return "permission"
    return "semantic"


_encode = json.JSONEncoder(ensure_ascii=False).encode  # json.dumps builds a new encoder per call


def _to_result(tool: Tool, value: Any) -> ToolResult:
    if type(value) is ToolResult:
        return value
    if isinstance(value, str):
        return ToolResult(value)
    try:
        return ToolResult(_encode(value))
    except (TypeError, ValueError):
        message = (
            f"Tool {tool.name!r} returned a {type(value).__name__}, which is not JSON-serialisable; "
            "the tool should return a str, JSON data or a ToolResult."
        )
        return ToolResult.failure("semantic", message)


_NO_USAGE = Usage()  # frozen: one shared zero value


def unique_calls(calls: Sequence[ToolCall], *sent: Sequence[Message]) -> tuple[ToolCall, ...] | None:
    """``calls`` with every id made unique within the run and the messages ``sent`` (the
    prompt, which may hold a stored conversation), or None when they already are.

    A provider may repeat an id (in one answer or from round to round) or leave it empty;
    a decision names one id, so it must never cover two calls. The first use keeps its id,
    later ones get ``<id>_2``, ``<id>_3``... (``call_2``... for an empty id).
    """
    seen: set[Any] = {call.id for messages in sent for message in messages for call in message.tool_calls}
    if len(calls) == 1:
        call_id = calls[0].id
        if call_id and call_id not in seen and type(call_id) is str:
            return None  # the common case: nothing to rename
    else:
        ids = [call.id for call in calls]
        if seen.isdisjoint(ids) and len(set(ids)) == len(ids) and all(type(i) is str and i for i in ids):
            return None
    add = seen.add
    fixed: list[ToolCall] = []
    for call in calls:
        call_id = call.id
        if not isinstance(call_id, str) or not call_id or call_id in seen:
            base = call_id if isinstance(call_id, str) and call_id else "call"
            number = 2
            while f"{base}_{number}" in seen:
                number += 1
            call = ToolCall(call.name, call.arguments, f"{base}_{number}", call.raw_arguments)
        add(call.id)
        fixed.append(call)
    return tuple(fixed)


class _Loop:
    """The state of one pass through the tool loop (a turn-terminal call)."""

    __slots__ = (
        "entered",
        "llm_calls",
        "remaining",
        "round_base",
        "round_context",
        "tool_calls_made",
        "transcript",
        "usage",
    )

    def __init__(self, transcript: list[Message], remaining: int) -> None:
        self.transcript = transcript
        self.remaining = remaining
        self.llm_calls = 0
        self.tool_calls_made = 0
        self.usage = _NO_USAGE
        self.round_base = 0
        self.round_context: dict[str, Any] | None = None
        # False while no pass of the current round reached the iteration terminal
        self.entered = False


class _Run:
    """Bound chains and mutable state for one ``run``/``resume`` call."""

    def __init__(
        self,
        plan: Plan,
        context: Mapping[str, Any] | None,
        *,
        sink: Sink | None = None,
        emit: Callable[[Any], None] | None = None,
        cancel: CancelToken | None = None,
        resume: tuple[PauseState, dict[str, Decision]] | None = None,
        restored: Mapping[str, Any] | None = None,
        journal: Journal | None = None,
    ) -> None:
        self.plan = plan
        self.model = plan.settings.model
        self.tools = plan.tools
        self.context: dict[str, Any] = dict(context) if context else {}
        self.view: Mapping[str, Any] = MappingProxyType(self.context)
        self.sink = sink
        self.emit = emit
        self.cancel = cancel
        self.pending_resume = resume
        self.journal = journal
        # True when the current round's model call streamed text to the consumer
        self.streamed = False
        # the tool calls the model boundary last made unique (skips a second check)
        self.checked_calls: tuple[ToolCall, ...] = ()
        # set by the turn terminal (a new turn or a resumed one), before anything reads it
        self.loop: _Loop
        self.states = states = [{} if new is None else new() for new in plan.state_factories]
        if restored:
            restore_filter_state(plan.filters, states, restored)
        chains = plan.chains
        check = plan.settings.check_returns
        self.chat = chains["chat"].bind(
            states, self._chat_stream_terminal if sink is not None else self._chat_terminal, check
        )
        self.iteration = chains["iteration"].bind(states, self._iteration_terminal, check)
        self.turn = chains["turn"].bind(states, self._turn_terminal, check)
        # bound on first use (many turns call no tool): _tool_chain() and _approvals.gate_chain()
        self.tool: Callable[[ToolRequest], Awaitable[ToolResult]] | None = None
        self.gate: Callable[[GateRequest], Awaitable[Decision]] | None = None

    def _tool_chain(self) -> Callable[[ToolRequest], Awaitable[ToolResult]]:
        plan = self.plan
        self.tool = tool = plan.chains["tool"].bind(self.states, self._tool_terminal, plan.settings.check_returns)
        return tool

    # -- chat ---------------------------------------------------------------------------

    async def _chat_terminal(self, request: ChatRequest) -> ChatResponse:
        try:
            if request.system is not None:
                request = request.replace(messages=(Message("system", request.system), *request.messages))
            model = request.model if request.model is not None else self.model
            response: ChatResponse = await model.complete(request)
            if response.message.tool_calls:
                response = self._unique_ids(response, request.messages)
            answer = self.plan.answer_transforms
            if answer and response.message.content is not None:
                text = apply_to_text(answer, response.message.text)
                response = response.replace(message=response.message.replace(content=text))
            return response
        except Exception as exc:
            passed_through(exc)  # the model's, a tool's or the loop's own error
            raise

    async def _chat_stream_terminal(self, request: ChatRequest) -> ChatResponse:
        try:
            if request.system is not None:
                request = request.replace(messages=(Message("system", request.system), *request.messages))
            plan = self.plan
            assert self.sink is not None  # set for streaming runs only
            push, flush = pipeline(plan.stream_transforms, self.sink)
            answer = plan.answer_transforms
            collected: list[str] | None = None
            if answer:
                collected = []
                tee_list = collected
                deliver = push

                def tee(token: str) -> None:
                    tee_list.append(token)
                    deliver(token)

                push, answer_flush = pipeline(answer, tee)
                stream_flush = flush

                def flush_all() -> None:
                    if answer_flush is not None:
                        answer_flush()
                    if stream_flush is not None:
                        stream_flush()

                flush = flush_all
            model = request.model if request.model is not None else self.model
            response: ChatResponse = await model.stream(request, push)
            if response.message.tool_calls:
                response = self._unique_ids(response, request.messages)
            if flush is not None:
                flush()
            if response.message.content:
                self.streamed = True
            if collected is not None and response.message.content is not None:
                response = response.replace(message=response.message.replace(content="".join(collected)))
            return response
        except Exception as exc:
            passed_through(exc)  # the model's, a tool's or the loop's own error
            raise

    def _unique_ids(self, response: ChatResponse, prompt: Sequence[Message]) -> ChatResponse:
        # at the model boundary, so every chat filter already sees the ids the run uses
        message = response.message
        calls = message.tool_calls
        fixed = unique_calls(calls, self.loop.transcript, prompt)
        if fixed is None:
            self.checked_calls = calls
            return response
        self.checked_calls = fixed
        return response.replace(message=message.replace(tool_calls=fixed))

    # -- tools --------------------------------------------------------------------------

    async def _tool_terminal(self, request: ToolRequest) -> ToolResult:
        try:
            tool = request.tool
            if request.raw_arguments is not None and not request.arguments:
                text = request.raw_arguments
                shown = text if len(text) <= 200 else text[:200] + "..."
                return ToolResult.failure(
                    "semantic",
                    f"Arguments for tool {tool.name!r} are not a JSON object: {shown!r}. "
                    "Call the tool again with a JSON object of arguments.",
                )
            fn = tool.fn
            if fn is None:
                return ToolResult.failure("semantic", f"Tool {tool.name!r} is declared but has no implementation.")
            arguments = dict(request.arguments)
            validate = tool.validate
            if validate is not None:
                try:
                    validate(arguments)
                except Exception as exc:  # noqa: BLE001  # fastjsonschema.JsonSchemaValueException, imported lazily
                    detail = getattr(exc, "message", str(exc))
                    return ToolResult.failure(
                        "semantic", f"Invalid arguments for tool {tool.name!r}: {detail}. Fix them and call again."
                    )
            if tool.takes_context:
                arguments["context"] = request.context
            timeout = tool.timeout if tool.timeout is not None else self.plan.settings.tool_timeout
            try:
                if tool.is_async:
                    pending: Awaitable[Any] = fn(**arguments)
                else:
                    started = start_sync_call(fn, arguments)
                    if started is None:
                        return ToolResult.failure("transient", busy_message(tool.name))
                    pending = started
                value = await (asyncio.wait_for(pending, timeout) if timeout is not None else pending)
            except TimeoutError as exc:
                if timeout is None:  # the tool itself raised TimeoutError
                    return ToolResult.failure("transient", f"Tool {tool.name!r} failed: TimeoutError: {exc}")
                return ToolResult.failure("transient", f"Tool {tool.name!r} timed out after {timeout:g} s.")
            except Exception as exc:  # noqa: BLE001  # any tool failure is data for the model
                kind = _classify(exc)
                return ToolResult.failure(kind, f"Tool {tool.name!r} failed: {type(exc).__name__}: {exc}")  # type: ignore[arg-type]
            return _to_result(tool, value)
        except Exception as exc:
            passed_through(exc)
            raise

    async def _run_one(
        self, call: ToolCall, snapshot: Mapping[str, Any], decision: Decision | None, approved: bool = False
    ) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "none"
            return ToolResult.failure(
                "semantic", f"Unknown tool {call.name!r}. Available tools: {names}. Call one of these."
            )
        arguments = call.arguments
        if decision is not None:
            kind = decision.kind
            if kind == "reject":
                if decision.result is not None:
                    return ToolResult.failure("permission", decision.result)
                reason = f": {decision.message}" if decision.message else "."
                return ToolResult.failure("permission", f"The call to {call.name!r} was rejected{reason}")
            if kind == "reply":
                return ToolResult(content=decision.message or "")
            if decision.arguments is not None:
                arguments = decision.arguments
        emit = self.emit
        if emit is not None:
            emit(ToolCallStarted(call))
        same = arguments is call.arguments
        request = ToolRequest(
            tool=tool,
            arguments=arguments,
            call_id=call.id,
            context=snapshot,
            raw_arguments=call.raw_arguments if same else None,
            approved=approved and same,
        )
        result = await (self.tool or self._tool_chain())(request)
        if type(result) is not ToolResult:
            self._wrong_type("tool", result)
        if emit is not None:
            emit(ToolCallFinished(call, result))
        return result

    async def _run_batch(
        self,
        calls: Sequence[ToolCall],
        decided: Mapping[str, Decision],
        approved: frozenset[str] = frozenset(),
        run_one: Callable[[ToolCall, Mapping[str, Any], Decision | None, bool], Awaitable[ToolResult]] | None = None,
    ) -> list[ToolResult]:
        snapshot = MappingProxyType(dict(self.context))
        one = run_one or self._run_one
        if len(calls) == 1:
            call = calls[0]
            return [await one(call, snapshot, decided.get(call.id), call.id in approved)]
        tools = self.tools
        if any(t.serial for t in (tools.get(c.name) for c in calls) if t is not None):
            return [await one(call, snapshot, decided.get(call.id), call.id in approved) for call in calls]
        tasks = [asyncio.ensure_future(one(c, snapshot, decided.get(c.id), c.id in approved)) for c in calls]
        try:
            return list(await asyncio.gather(*tasks))
        except BaseException:
            # a failing call (a filter bug, a cancelled run) must not leave its siblings running
            for task in tasks:
                task.cancel()
            raise

    def _after_batch(self, calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> IterationResult:
        loop = self.loop
        loop.tool_calls_made += len(calls)
        context = self.context
        messages = []
        direct = True
        tools = self.tools
        for call, result in zip(calls, results, strict=True):
            messages.append(Message("tool", result.content, tool_call_id=call.id, name=call.name))
            if result.error is None:
                if result.writes:
                    context.update(result.writes)
                tool = tools.get(call.name)
                if tool is None or not tool.return_direct:
                    direct = False
            else:
                direct = False
        if direct:
            loop.transcript.extend(messages)
            text = "\n".join(r.content for r in results)
            answer = self.plan.answer_transforms
            final = Message("assistant", apply_to_text(answer, text) if answer else text)
            return IterationResult(status="completed", messages=(final,), return_direct=True)
        return IterationResult(status="continue", messages=tuple(messages))

    # -- iteration ----------------------------------------------------------------------

    async def _iteration_terminal(self, request: IterationRequest) -> IterationResult:
        try:
            loop = self.loop
            loop.entered = True
            transcript = loop.transcript
            del transcript[loop.round_base :]  # a re-run replaces the previous attempt
            if loop.round_context is not None:
                self.context.clear()
                self.context.update(loop.round_context)
            transcript.extend(request.messages)
            if loop.remaining <= 0:
                maximum = self.plan.settings.max_iterations
                msg = (
                    f"The run needed more than max_iterations={maximum} LLM calls; "
                    "raise max_iterations or stop the model from calling tools forever (e.g. loop_guard)."
                )
                raise MaxIterationsExceeded(msg, messages=transcript, max_iterations=maximum)
            loop.round_context = dict(self.context)
            loop.remaining -= 1
            loop.llm_calls += 1
            plan = self.plan
            settings = plan.settings
            chat_request = ChatRequest(
                messages=tuple(transcript),
                tools=plan.tool_list,
                options=settings.options,
                context=self.view,
                delta=request.messages,
                system=settings.system_prompt,
            )
            response = await self.chat(chat_request)
            if type(response) is not ChatResponse:
                self._wrong_type("chat", response)
            if response.usage is not None:
                loop.usage = loop.usage + response.usage
            message = response.message
            calls = message.tool_calls
            if not calls:
                return IterationResult(status="completed", messages=(message,))
            # checked at the model boundary already, unless a chat filter answered in its place
            fixed = None if calls is self.checked_calls else unique_calls(calls, transcript)
            if fixed is not None:
                calls = fixed
                message = message.replace(tool_calls=fixed)
            transcript.append(message)
            decided, awaiting, reason, shown = await ask_gate(self, calls)
            if awaiting:
                if shown is not calls:  # the pause holds the calls as the gate was shown them
                    transcript[-1] = message.replace(tool_calls=tuple(shown))
                return IterationResult(status="paused", pause=make_pause(self, shown, decided, awaiting, reason))
            results = await self._run_batch(calls, decided)
            return self._after_batch(calls, results)
        except Exception as exc:
            passed_through(exc)  # the model's, a tool's or the loop's own error
            raise

    def _wrong_type(self, scope: Scope, value: Any) -> NoReturn:
        names = self.plan.chains[scope].names
        spec = SCOPE_SPECS[scope]
        where = (
            f"the {scope} chain (filters, outermost first: {', '.join(names)})" if names else f"the {scope} terminal"
        )
        msg = (
            f"{where} returned {value!r} (a {type(value).__name__}); "
            f"{spec.hook} hooks must return a {spec.returns.__name__}."
        )
        raise ConfigError(msg)

    # -- turn ---------------------------------------------------------------------------

    async def _drive(self, delta: tuple[Message, ...]) -> TurnResult:
        loop = self.loop
        iteration = self.iteration
        view = self.view
        index = 0
        while True:
            loop.round_base = len(loop.transcript)
            loop.round_context = None
            loop.entered = False
            self.streamed = False
            result = await iteration(
                IterationRequest(messages=delta, context=view, index=index, remaining=loop.remaining)
            )
            if type(result) is not IterationResult:
                self._wrong_type("iteration", result)
            status = result.status
            if status == "continue":
                delta = result.messages
                index += 1
                continue
            if not loop.entered:
                # a filter ended the round without the terminal: its delta still belongs to the transcript
                loop.transcript.extend(delta)
            if status == "completed":
                loop.transcript.extend(result.messages)
                final = result.messages[-1] if result.messages else None
                return TurnResult(
                    status="completed",
                    message=final,
                    messages=tuple(loop.transcript),
                    tool_calls_made=loop.tool_calls_made,
                    iterations=loop.llm_calls,
                    usage=loop.usage,
                    blocked_by=result.blocked_by,
                    return_direct=result.return_direct,
                )
            if status == "paused":
                pause = result.pause
                messages = pause.messages if pause is not None else tuple(loop.transcript)
                return TurnResult(
                    status="paused",
                    messages=messages,
                    tool_calls_made=loop.tool_calls_made,
                    iterations=loop.llm_calls,
                    usage=loop.usage,
                    pause=pause,
                    blocked_by=result.blocked_by,
                )
            return self._cancelled()

    def _resumed_loop(self, pause: PauseState) -> _Loop:
        """The loop state ``pause`` saved (:func:`._approvals.make_pause`), as the run's loop."""
        loop = self.loop = _Loop(list(pause.messages), pause.remaining)
        loop.tool_calls_made = pause.tool_calls_made
        loop.llm_calls = pause.iterations
        loop.usage = pause.usage
        return loop

    def _cancelled(self) -> TurnResult:
        loop = self.loop
        healed = heal_tool_calls(loop.transcript, _CANCELLED_TOOL_TEXT) or tuple(loop.transcript)
        return TurnResult(
            status="cancelled",
            messages=healed,
            tool_calls_made=loop.tool_calls_made,
            iterations=loop.llm_calls,
            usage=loop.usage,
        )

    async def _turn_terminal(self, request: TurnRequest) -> TurnResult:
        try:
            if request.context is not self.view:
                self.context = dict(request.context)
                self.view = MappingProxyType(self.context)
            pending = self.pending_resume
            if pending is not None:
                self.pending_resume = None  # one-shot: later entries start fresh loops
                # the loop state first: a token cancelled before the work starts ends the
                # turn from it, the paused calls answered as cancelled
                self._resumed_loop(pending[0])
                work = resume_turn(self, *pending)
            else:
                self.loop = _Loop([*request.history], self.plan.settings.max_iterations)
                work = self._drive(request.messages)
            cancel = self.cancel
            if cancel is None:
                return await work
            return await cancel._race(work, self._cancelled)
        except Exception as exc:
            passed_through(exc)  # the model's, a tool's or the loop's own error
            raise

    async def execute(self, request: TurnRequest) -> TurnResult:
        try:
            result = await self.turn(request)
        finally:
            # The bound chains end in this run's bound methods: a reference cycle that
            # only the cyclic GC would free. Unbinding lets refcounting free the run now.
            del self.chat, self.iteration, self.turn, self.tool, self.gate
        if type(result) is not TurnResult:
            self._wrong_type("turn", result)
        return result
