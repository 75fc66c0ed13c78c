"""The Kernel: a chat model, tools and an ordered filter list, compiled once."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

from ._chain import CompiledChain, blame, raised_by
from ._filter import Scope, normalise_all
from ._kernel_options import KERNEL_OPTIONS
from ._lazy import lazy_module
from ._messages import Message, as_messages
from ._options import options_schema
from ._pause import PauseKeys, check_bound, check_decisions, check_pause, restore_filter_state, unseal, verify
from ._plan import Gate, Plan, Settings, compile_plan, index_tools
from ._records import Decision, PauseState, TurnRequest, TurnResult
from ._run import _Run
from ._streaming import Channel, Event, RunFinished, TextDelta, pipeline
from ._tools import Tool, make_tool
from ._toolsets import Toolset
from .errors import AlreadyResumedError, ConfigError, ResumeError

if TYPE_CHECKING:
    import asyncio
else:
    # asyncio is the one heavy module beamfilter_core can import late (see bench/RESULTS.md)
    asyncio = lazy_module("asyncio", globals())

if TYPE_CHECKING:
    from ._models._base import ChatModel


@runtime_checkable
class PauseLedger(Protocol):
    """Remembers which pauses were resumed: ``claim_pause`` is True once per pause id.

    Every store of beamfilter_memory is one (``Kernel(pause_ledger=open_store(url))``);
    with it, a pause resumes exactly once even without the memory filter.
    """

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed; False if it already was (atomic)."""
        ...


class CancelToken:
    """Cancels a run from outside: the run ends with ``status == "cancelled"``.

    Example::

        token = CancelToken()
        task = asyncio.create_task(kernel.run("...", cancel=token))
        token.cancel()
        assert (await task).status == "cancelled"
    """

    def __init__(self) -> None:
        self._cancelled = False
        self._waiters: list[asyncio.Future[None]] = []

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancelled

    def cancel(self) -> None:
        """Cancel every run using this token (safe to call more than once)."""
        self._cancelled = True
        for waiter in self._waiters:
            if not waiter.done():
                waiter.get_loop().call_soon_threadsafe(_settle, waiter)

    async def _race(self, work: Awaitable[TurnResult], cancelled: Callable[[], TurnResult]) -> TurnResult:
        if self._cancelled:
            if asyncio.iscoroutine(work):
                work.close()
            return cancelled()
        task = asyncio.ensure_future(work)
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            task.cancel()
            raise
        finally:
            self._waiters.remove(waiter)
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        return cancelled()


def _settle(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _no_running_loop(method: str, instead: str) -> None:
    """Refuse a ``*_sync`` call inside a running event loop, before any coroutine exists
    (so no "coroutine was never awaited" warning follows the error)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    from .errors import RunningLoopError

    msg = (
        f"Kernel.{method}() was called inside a running event loop (Jupyter, or async code), "
        f"where it cannot start its own; use `await kernel.{instead}(...)` there instead."
    )
    raise RunningLoopError(msg)


class Kernel:
    """A chat model, tools and filters, compiled into one onion per scope.

    Filters run in list order (first = outermost). The chains are compiled here, once;
    use :meth:`with_filters` for a kernel with other filters. ``max_iterations``,
    ``tool_timeout``, ``system_prompt``, ``options``, ``pause_key``, ``transient_context``
    and ``unsafe_unsigned_pauses`` are the ``[kernel]`` options of a config, and a value
    given here is checked against the same schema (a :class:`ConfigError` names it).

    Example::

        kernel = Kernel(model=ScriptedModel(["Hi!"]), filters=[Filter("trace", around_chat=trace)])
        result = kernel.run_sync("Hello")
    """

    # the options a config's [kernel] table also sets are checked against their one schema
    @options_schema(KERNEL_OPTIONS, owner="Kernel")
    def __init__(
        self,
        model: ChatModel,
        tools: Iterable[Tool | Toolset | Callable[..., Any]] = (),
        filters: Iterable[Any] = (),
        *,
        max_iterations: int = 10,
        tool_timeout: float | None = None,
        gate: Gate | None = None,
        system_prompt: str | None = None,
        options: Mapping[str, Any] | None = None,
        check_returns: bool = False,
        pause_key: str | bytes | None = None,
        pause_ledger: PauseLedger | None = None,
        transient_context: Iterable[str] = (),
        unsafe_unsigned_pauses: bool = False,
    ) -> None:
        if not (callable(getattr(model, "complete", None)) and callable(getattr(model, "stream", None))):
            msg = f"Kernel(model={model!r}) needs a ChatModel with async complete() and stream() methods."
            raise ConfigError(msg)
        if gate is not None and not callable(gate):
            msg = f"Kernel(gate={gate!r}) must be a callable (call, tool, context) -> Decision."
            raise ConfigError(msg)
        self._settings = Settings(
            model=model,
            max_iterations=max_iterations,
            tool_timeout=float(tool_timeout) if tool_timeout is not None else None,
            gate=gate,
            system_prompt=system_prompt,
            options=dict(options or {}),
            check_returns=check_returns,
            # pauses: signed with keys derived from pause_key (see docs/approvals.md)
            pause_keys=PauseKeys(pause_key),
            transient_context=tuple(transient_context),
        )
        if pause_ledger is not None and not callable(getattr(pause_ledger, "claim_pause", None)):
            msg = f"Kernel(pause_ledger={pause_ledger!r}) needs an object with async claim_pause(pause_id) -> bool."
            raise ConfigError(msg)
        self.pause_ledger = pause_ledger
        #: Accept pause states without a signature (forgeable: only for states you make yourself).
        self.unsafe_unsigned_pauses = unsafe_unsigned_pauses
        given: list[Tool] = []
        toolsets: list[Toolset] = []
        for item in tools:
            if isinstance(item, Toolset):
                if item.static:
                    given.extend(item._tools)
                else:
                    toolsets.append(item)
            else:
                given.append(item if isinstance(item, Tool) else make_tool(item))
        self._given_tools = tuple((tool, "the kernel's tools") for tool in given)
        #: Toolsets opened before the first run (once per event loop) and closed by aclose().
        self._toolsets: tuple[Toolset, ...] = tuple(toolsets)
        self._opened_tools: tuple[tuple[Tool, str], ...] = ()
        self._opening: tuple[asyncio.AbstractEventLoop, asyncio.Task[None]] | None = None
        self._filters = normalise_all(filters)
        self._compile()

    def _compile(self) -> None:
        # the one place a plan is made: at construction, with_filters, and when toolsets open
        self._plan: Plan = compile_plan(self._settings, self._filters, (*self._given_tools, *self._opened_tools))

    # -- settings (read-only: a kernel is compiled once) --------------------------------

    @property
    def model(self) -> ChatModel:
        """The chat model."""
        return self._settings.model  # type: ignore[no-any-return]

    @property
    def max_iterations(self) -> int:
        """At most this many model calls per run."""
        return self._settings.max_iterations

    @property
    def tool_timeout(self) -> float | None:
        """Seconds a tool call may take (a tool's own ``timeout`` wins); None: no limit."""
        return self._settings.tool_timeout

    @property
    def gate(self) -> Gate | None:
        """``Kernel(gate=...)``: the innermost layer of the gate scope, or None."""
        return self._settings.gate

    @property
    def system_prompt(self) -> str | None:
        """The system prompt sent with each model call, or None."""
        return self._settings.system_prompt

    @property
    def options(self) -> Mapping[str, Any]:
        """Model options sent with each model call."""
        return self._settings.options

    @property
    def check_returns(self) -> bool:
        """Check what every filter layer returns (names the filter that returned a wrong
        type, at the cost of one check per layer); meant for tests and debugging."""
        return self._settings.check_returns

    @property
    def transient_context(self) -> tuple[str, ...]:
        """Context keys a pause does not keep."""
        return self._settings.transient_context

    @classmethod
    def from_config(
        cls,
        config: Any,
        *,
        registry: Any = None,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        **overrides: Any,
    ) -> Kernel:
        """Build a kernel from a TOML file path or a config dict (see docs/configuration.md).

        Filters are enabled by name; their options are validated when the kernel is
        built, and every problem is reported at once in one :class:`ConfigError`.
        """
        from ._config import kernel_from_config

        return kernel_from_config(config, registry=registry, tools=tools, **overrides)

    # -- introspection ------------------------------------------------------------------

    @property
    def filters(self) -> tuple[Any, ...]:
        """The filters, in order (normalised :class:`Filter` values)."""
        return tuple(item.filter for item in self._filters)

    @property
    def tools(self) -> tuple[Tool, ...]:
        """The registered tools."""
        return self._plan.tool_list

    def chain(self, scope: Scope) -> CompiledChain:
        """The compiled chain of ``scope`` (``turn``, ``iteration``, ``chat``, ``tool`` or ``gate``)."""
        return self._plan.chains[scope]

    def derive(
        self,
        *,
        tools: Sequence[Tool] = (),
        options: Mapping[str, Any] | None = None,
        pause_key: str | bytes | None = None,
    ) -> Kernel:
        """A kernel sharing this one's model, filters, compiled chains, toolsets and stores,
        with more ``tools``, other model ``options`` or another ``pause_key`` (None keeps
        each as it is). Nothing is compiled or opened again, so it is cheap per request:
        the gateway adds a client's declared tools this way, and durable turns give a
        kernel without a pause key the engine's shared secret.

        Raises:
            ConfigError: ``pause_key`` is shorter than 16 characters.
        """
        clone = object.__new__(Kernel)
        clone.__dict__.update(self.__dict__)
        changes: dict[str, Any] = {}
        if options is not None:
            changes["options"] = dict(options)
        if pause_key is not None:
            changes["pause_keys"] = PauseKeys(pause_key)
        plan = self._plan
        if changes:
            clone._settings = attrs.evolve(self._settings, **changes)
            plan = attrs.evolve(plan, settings=clone._settings)
        if tools:
            clone._given_tools = (*self._given_tools, *((tool, "the kernel's tools") for tool in tools))
            by_name = index_tools((*clone._given_tools, *self._opened_tools), self._filters)
            plan = attrs.evolve(plan, tools=by_name, tool_list=tuple(by_name.values()))
        clone._plan = plan
        return clone

    @property
    def _pause_keys(self) -> PauseKeys:
        return self._settings.pause_keys

    @property
    def has_pause_key(self) -> bool:
        """Whether pauses are signed with a configured ``pause_key`` (else a per-process
        secret: a pause can then be resumed only in the process that made it)."""
        return self._settings.pause_keys.configured

    def with_filters(self, filters: Iterable[Any]) -> Kernel:
        """A new kernel with the same model, tools and settings and other filters."""
        clone = object.__new__(Kernel)
        clone.__dict__.update(self.__dict__)
        clone._filters = normalise_all(filters)
        clone._compile()
        return clone

    async def start(self) -> None:
        """Open the kernel's toolsets (an MCP server starts, its tools are listed).

        :meth:`run` and :meth:`resume` call it before their first model call; call it
        yourself to see :attr:`tools` before a run. Once per event loop: a later
        ``run_sync`` (a new loop) opens them again.

        Raises:
            ToolsetError: a toolset could not be opened (a server did not start).
        """
        if not self._toolsets:
            return
        loop = asyncio.get_running_loop()
        opening = self._opening
        if opening is None or opening[0] is not loop or (opening[1].done() and opening[1].exception() is not None):
            opening = (loop, loop.create_task(self._open_toolsets()))
            self._opening = opening
        await asyncio.shield(opening[1])

    async def _open_toolsets(self) -> None:
        from .errors import ToolsetError

        opened: list[tuple[Tool, str]] = []
        for toolset in self._toolsets:
            try:
                tools = await toolset.open()
            except ToolsetError:
                raise
            except Exception as exc:
                msg = f"The toolset {toolset.name!r} could not be opened: {type(exc).__name__}: {exc}"
                raise ToolsetError(msg, toolset=toolset.name) from exc
            opened.extend((tool, f"toolset {toolset.name!r}") for tool in tools)
        self._opened_tools = tuple(opened)
        self._compile()

    async def aclose(self) -> None:
        """Close what the kernel holds open: its toolsets (MCP servers stop), its model's
        connections and each filter's ``resources`` (e.g. the memory filter's store).

        Calls ``aclose()`` once on each toolset, on the model if it has one and on each
        object of the filters' ``resources``; call it on the event loop that used them.
        """
        seen: set[int] = set()
        opening, self._opening = self._opening, None
        if opening is not None and not opening[1].done():
            opening[1].cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await opening[1]
        for resource in (*self._toolsets, self.model, *(r for item in self._filters for r in item.filter.resources)):
            close = getattr(resource, "aclose", None)
            if close is not None and id(resource) not in seen:
                seen.add(id(resource))
                await close()

    def __repr__(self) -> str:
        names = ", ".join(item.filter.name for item in self._filters)
        return f"Kernel(model={self.model!r}, tools={len(self._plan.tool_list)}, filters=[{names}])"

    # -- running ------------------------------------------------------------------------

    async def _execute(self, run: _Run, request: TurnRequest) -> TurnResult:
        try:
            return await run.execute(request)
        except Exception as exc:
            # a hook is named by its place in its chain, a token transform by its place
            # in its pipeline (_chain.raised_by)
            name = raised_by(exc, run.plan.pipelines)
            if name is None:
                raise
            raised = blame(exc, name)
            if raised is exc:
                raise
            raise raised from exc

    async def run(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnResult:
        """Run one turn: the tool loop until the model answers, pauses or is cancelled."""
        messages = as_messages(input)
        if self._toolsets:
            await self.start()
        run = _Run(self._plan, context, cancel=cancel)
        return await self._execute(run, TurnRequest(messages=messages, context=run.view))

    def run_sync(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnResult:
        """:meth:`run` from synchronous code (starts an event loop).

        Raises:
            RunningLoopError: called where an event loop already runs (Jupyter, async
                code): ``await kernel.run(...)`` there instead.
        """
        _no_running_loop("run_sync", "run")
        return asyncio.run(self.run(input, context=context, cancel=cancel))

    def run_stream(
        self,
        input: str | Message | Sequence[Message],
        *,
        context: Mapping[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> AsyncIterator[Event]:
        """Run one turn, yielding text deltas and tool events; the last event is
        :class:`RunFinished` with the :class:`TurnResult`."""
        messages = as_messages(input)
        if self._toolsets:
            return self._started_stream(messages, context, cancel)
        channel = Channel()
        run = _Run(self._plan, context, sink=channel.push_text, emit=channel.push, cancel=cancel)
        return self._pump(channel, run, TurnRequest(messages=messages, context=run.view))

    async def _started_stream(
        self, messages: tuple[Message, ...], context: Mapping[str, Any] | None, cancel: CancelToken | None
    ) -> AsyncGenerator[Event, None]:
        await self.start()
        channel = Channel()
        run = _Run(self._plan, context, sink=channel.push_text, emit=channel.push, cancel=cancel)
        async for event in self._pumped(channel, run, TurnRequest(messages=messages, context=run.view)):
            yield event

    async def _pumped(self, channel: Channel, run: _Run, request: TurnRequest) -> AsyncGenerator[Event, None]:
        # _pump from inside another generator, closed with it
        pump = self._pump(channel, run, request)
        try:
            async for event in pump:
                yield event
        finally:
            await pump.aclose()

    async def _pump(self, channel: Channel, run: _Run, request: TurnRequest) -> AsyncGenerator[Event, None]:
        task = asyncio.ensure_future(self._execute(run, request))
        task.add_done_callback(lambda _: channel.close())
        try:
            # Drain the channel here: no nested async generator per streamed token.
            items = channel.items
            popleft = items.popleft
            while True:
                while items:
                    yield popleft()
                if channel.closed:
                    break
                await channel.wait()
            result = task.result()
            if not run.streamed and result.status == "completed" and result.text:
                # The answer came from a filter or from return_direct tools, not from a
                # streamed model call: deliver it too, so streamed text == returned text.
                out: list[str] = []
                push, flush = pipeline(run.plan.stream_transforms, out.append)
                push(result.text)
                if flush is not None:
                    flush()
                for text in out:
                    yield TextDelta(text)
            yield RunFinished(result)
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # -- resuming -----------------------------------------------------------------------

    async def _pause_for(self, pause: PauseState | str | None, conversation_id: str | None) -> PauseState:
        if pause is not None:
            if not isinstance(pause, str | bytes):
                return pause
            try:
                return PauseState.from_json(pause)
            except Exception as exc:  # noqa: BLE001  # json or cattrs: not a state this kernel wrote
                shown = type(exc).__name__
                msg = f"Cannot resume: the text given as the pause state is not a PauseState's JSON ({shown})."
                raise ResumeError(msg) from None
        if conversation_id is None:
            msg = "Kernel.resume needs a pause state, or conversation_id= with a memory filter that saved one."
            raise ResumeError(msg)
        loaders = [item.filter.load_pause for item in self._filters if item.filter.load_pause is not None]
        for load in loaders:
            found = load(conversation_id)
            if inspect.isawaitable(found):
                found = await found
            if found is not None:
                return found  # type: ignore[no-any-return]
        msg = (
            f"No paused run is stored for conversation {conversation_id!r}"
            + ("" if loaders else " (no filter of this kernel stores pauses; add the memory filter)")
            + "."
        )
        raise ResumeError(msg)

    async def _prepare_resume(
        self,
        pause: PauseState | str | None,
        decisions: Mapping[str, Decision | str] | None,
        conversation_id: str | None,
        context: Mapping[str, Any] | None,
        cancel: CancelToken | None,
        channel: Channel | None = None,
    ) -> tuple[_Run, TurnRequest]:
        """The run and first turn request of a resume (streamed into ``channel`` if given).

        Loads, verifies and checks everything before anything runs; the pause is claimed
        last, so a refused resume leaves it resumable.
        """
        if self._toolsets:
            await self.start()
        plan = self._plan
        state = await self._pause_for(pause, conversation_id)
        keys = plan.settings.pause_keys
        verify(state, keys, allow_unsigned=self.unsafe_unsigned_pauses)
        check_pause(state)
        checked = check_decisions(state, {} if decisions is None else decisions, plan.tools)
        kept = unseal(keys, state.pause_id, state.filter_state) if state.filter_state is not None else {}
        if kept:
            restore_filter_state(plan.filters, [{} for _ in plan.filters], kept)  # names checked before claiming
        merged = dict(state.context)
        if conversation_id is not None:
            merged["conversation_id"] = conversation_id
        merged.update(context or {})
        check_bound(state, merged.get("conversation_id"))
        ledger = self.pause_ledger
        if ledger is not None and not await ledger.claim_pause(state.pause_id):
            msg = f"already resumed: pause {state.pause_id!r} was resumed before; nothing ran."
            raise AlreadyResumedError(msg)
        sink, emit = (channel.push_text, channel.push) if channel is not None else (None, None)
        journal = next(
            (j for j in (item.filter.extras.get("journal") for item in self._filters) if j is not None), None
        )
        run = _Run(
            plan, merged, sink=sink, emit=emit, cancel=cancel, resume=(state, checked), restored=kept, journal=journal
        )
        return run, TurnRequest(messages=(), context=run.view, resume=True, pause=state)

    async def resume(
        self,
        pause: PauseState | str | None = None,
        decisions: Mapping[str, Decision | str] | None = None,
        *,
        conversation_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> TurnResult:
        """Continue a paused run with exactly one decision for each awaited call.

        Goes through the turn chain with ``request.resume == True`` (and ``request.pause``)
        on the first entry. ``pause`` may be a :class:`PauseState` or its JSON text; or
        give ``conversation_id=`` to resume the pause a memory filter stored for it. See
        docs/approvals.md for what is checked before anything runs.
        """
        run, request = await self._prepare_resume(pause, decisions, conversation_id, context, cancel)
        return await self._execute(run, request)

    def resume_sync(
        self,
        pause: PauseState | str | None = None,
        decisions: Mapping[str, Decision | str] | None = None,
        *,
        conversation_id: str | None = None,
        context: Mapping[str, Any] | None = None,
    ) -> TurnResult:
        """:meth:`resume` from synchronous code.

        Raises:
            RunningLoopError: called where an event loop already runs: ``await kernel.resume(...)``.
        """
        _no_running_loop("resume_sync", "resume")
        return asyncio.run(self.resume(pause, decisions, conversation_id=conversation_id, context=context))

    async def resume_stream(
        self,
        pause: PauseState | str | None = None,
        decisions: Mapping[str, Decision | str] | None = None,
        *,
        conversation_id: str | None = None,
        context: Mapping[str, Any] | None = None,
        cancel: CancelToken | None = None,
    ) -> AsyncGenerator[Event, None]:
        """:meth:`resume`, streaming events like :meth:`run_stream`: the resumed run's
        text deltas and tool events, then :class:`RunFinished` with its result.

        Everything :meth:`resume` checks is checked when iteration starts, before the
        first event: a refused resume raises from the first ``__anext__`` and runs nothing.

        Example::

            async for event in kernel.resume_stream(paused.pause, {"c1": "approve"}):
                if isinstance(event, TextDelta):
                    print(event.text, end="")
        """
        channel = Channel()
        run, request = await self._prepare_resume(pause, decisions, conversation_id, context, cancel, channel)
        async for event in self._pumped(channel, run, request):
            yield event
