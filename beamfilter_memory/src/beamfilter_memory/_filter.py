"""The memory filter: conversations kept in a store, one atomic commit per turn.

How a run is mirrored (see docs/memory.md):

- The turn hook loads the stored history once per turn, runs the turn, then commits the
  turn's new messages (entry, every round, tool results, the final answer) in **one**
  store transaction. A turn that raises or is cancelled commits nothing. A paused turn
  commits its messages so far together with its :class:`PauseState`.
- The chat hook replaces each prompt by: system messages of the request, the stored
  history, then this turn's messages so far. It maps the in-run transcript by position,
  so a re-run iteration (the kernel drops the failed attempt) and a re-entering turn
  filter inside memory (whose history is the run so far) never duplicate a message.
- A resume takes its pause from the store (compare-and-swap on its id); a new turn whose
  conversation ends with calls awaiting a decision takes that pause to abandon it, or is
  refused with ``ConversationBusyError`` when none is stored (a resume is in flight).
  What the resumed calls did is recorded as they finish (``_journal.py``): a failed
  resume gives its pause back and never runs a call twice.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from beamfilter_core import (
    BuildContext,
    ChatRequest,
    ChatResponse,
    Filter,
    MemoryRole,
    Message,
    PauseState,
    TurnRequest,
    TurnResult,
    heal_tool_calls,
    options_schema,
)
from beamfilter_core.errors import AlreadyResumedError, ConversationBusyError

from ._journal import Journal
from ._options import MEMORY_OPTIONS
from ._stores import resolve_store
from ._stores._base import KEEP_PAUSE, STORE_METHODS, ChatStore, PauseChange, check_conversation_id

DEFAULT_STORE = "sqlite:///beamfilter.db"

#: The result given to tool calls that awaited a decision when a new turn started instead.
ABANDONED_CALL_TEXT = "not run: the conversation went on before a decision on this call was made"

_CID = "conversation_id"


def _unanswered(history: list[Message]) -> list[str]:
    """The ids of the calls of a trailing assistant message that have no result."""
    start = len(history) - 1
    while start >= 0 and history[start].role == "tool":
        start -= 1
    if start < 0 or not history[start].tool_calls:
        return []
    answered = {m.tool_call_id for m in history[start + 1 :]}
    return [call.id for call in history[start].tool_calls if call.id not in answered]


def _heal_tail(history: list[Message]) -> tuple[Message, ...]:
    """Results for the calls of a trailing assistant message that were never answered
    (what can be appended to the stored conversation)."""
    start = len(history) - 1
    while start >= 0 and history[start].role == "tool":
        start -= 1
    if start < 0 or not history[start].tool_calls:
        return ()  # the common case: the conversation ends on an answer
    healed = heal_tool_calls(history[start:], ABANDONED_CALL_TEXT)
    return () if healed is None else healed[len(history) - start :]


@options_schema(MEMORY_OPTIONS, owner="memory")
def memory_filter(
    store: str | ChatStore = DEFAULT_STORE,
    *,
    window: int | None = None,
    name: str = "memory",
    build: BuildContext | None = None,
) -> Filter:
    """The memory filter: keeps each conversation (by ``context["conversation_id"]``) in ``store``.

    Put it **first** in the filter list, so that every retry and re-entry happens inside it.
    Without a ``conversation_id`` in the run context it passes through and stores nothing.
    The kernel's system prompt and system messages are never stored.

    Args:
        store: a store URL (``memory://``, ``sqlite:///path.db`` — the default is
            ``sqlite:///beamfilter.db`` in the working directory —, ``postgresql://...``,
            ``redis://...``) or a :class:`ChatStore` object.
        window: send only the last ``window`` stored messages to the model (never starting
            on a tool result); the store keeps everything. None sends all.
        name: the filter's name in the chain.
        build: given by ``Kernel.from_config``; a store URL whose scheme is not one of
            this package's is then looked up among the stores other plugins register.

    Returns:
        A :class:`Filter` with the store in ``extras["store"]`` and in ``resources`` (closed
        by ``Kernel.aclose()``) and a ``load_pause``, so
        ``kernel.resume(conversation_id=..., decisions=...)`` finds a paused run on any worker.

    Example::

        kernel = Kernel(model, filters=[memory_filter("sqlite:///chats.db", window=50)])
        await kernel.run("Hi, I'm Ada", context={"conversation_id": "ada"})
    """
    chat_store: ChatStore = resolve_store(store, build, owner="memory", kind="ChatStore", methods=STORE_METHODS)
    load = chat_store.load
    append = chat_store.append
    journal = Journal(chat_store)

    async def give_back(cid: str, taken: PauseState) -> None:
        # Nothing of the turn was stored: the pause is pending again, unless a call of it
        # started and its outcome could not be recorded (approving again could run it twice).
        if await journal.settle(taken):
            await chat_store.save_pause(cid, taken)

    async def around_turn(
        request: TurnRequest, state: dict[str, Any], call_next: Callable[[TurnRequest], Awaitable[TurnResult]]
    ) -> TurnResult:
        cid = request.context.get(_CID)
        if cid is None:
            state.clear()
            return await call_next(request)
        cid = check_conversation_id(cid)
        resumed = request.resume
        history = await load(cid, window)
        taken: PauseState | None = None
        healed: tuple[Message, ...] = ()
        if resumed:
            # Claim exactly the pause being resumed (compare-and-swap on its id): of two
            # workers resuming it at once, one goes on, the other stops here; a stale state
            # never takes, clears or replaces a newer pause.
            wanted = request.pause.pause_id if request.pause is not None else None
            taken = await chat_store.take_pause(cid, wanted) if wanted else await chat_store.take_pause(cid)
            if taken is None:
                shown = f"pause {wanted!r} of " if wanted else "the paused run of "
                msg = (
                    f"already resumed: {shown}conversation {cid!r} is no longer pending (another worker "
                    "resumed it, or a newer turn answered its calls); nothing ran."
                )
                raise AlreadyResumedError(msg)
            # The paused part of the run is stored already: this turn's messages start after it.
            offset = len(taken.messages)
        else:
            # An outer re-entry passes the committed transcript as history.
            offset = len(request.history)
            healed = _heal_tail(history)
            if healed:
                # A new turn instead of a decision abandons the stored pause: take it (the
                # same compare-and-swap a resume makes), so the two never both go on.
                taken = await chat_store.take_pause(cid)
                if taken is None:
                    raise ConversationBusyError(_busy(cid, _unanswered(history)))
                # a call an earlier, failed resume of it ran keeps what it did, not "not run"
                done = await journal.recorded(taken, starting=False)
                if done:
                    healed = tuple(
                        m.replace(content=done[m.tool_call_id].content) if m.tool_call_id in done else m for m in healed
                    )
        state[_CID] = cid
        state["history"] = (*history, *healed)
        state["offset"] = offset
        try:
            result = await call_next(request)
        except BaseException:
            if taken is not None:  # nothing of the turn was stored: the pause is pending again
                await give_back(cid, taken)
            raise
        status = result.status
        if status == "cancelled":
            if taken is not None:
                await give_back(cid, taken)
            return result
        if offset <= len(result.messages):
            new = [m for m in result.messages[offset:] if m.role != "system"]
        else:  # an inner filter answered with a shorter transcript than the run's
            new = [result.message] if result.message is not None else []
        pause: PauseChange
        if status == "paused" and result.pause is not None:
            pause = result.pause
        elif healed:
            pause = None
        else:
            pause = KEEP_PAUSE
        await append(cid, [*healed, *new], pause=pause)
        if taken is not None:
            # outlives the row: the same pause inserted again is never taken again
            await journal.consume(cid, taken)
        return result

    async def around_chat(
        request: ChatRequest, state: dict[str, Any], call_next: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        if _CID not in state:
            return await call_next(request)
        messages = request.messages
        offset: int = state["offset"]
        # The in-run transcript past ``offset`` is this turn so far; the kernel has already
        # dropped a re-run round's failed attempt from it, so nothing is sent twice.
        prompt = [m for m in messages if m.role == "system"]
        prompt.extend(state["history"])
        prompt.extend(m for m in messages[offset:] if m.role != "system")
        return await call_next(request.replace(messages=tuple(prompt)))

    async def load_pause(conversation_id: str) -> PauseState | None:
        return await chat_store.load_pause(conversation_id)

    return Filter(
        name,
        around_turn=around_turn,
        around_chat=around_chat,
        load_pause=load_pause,
        resources=(chat_store,),
        memory=MemoryRole(chat_store, rebuild=lambda other: memory_filter(other, window=window, name=name)),
        extras={"store": chat_store, "window": window, "journal": journal},
    )


def _busy(cid: str, calls: list[str]) -> str:
    return (
        f"Conversation {cid!r} is busy: its last tool calls ({', '.join(calls)}) have no results yet and no "
        "paused run is stored, so a resume of them is in flight (or the worker running it died). Nothing ran; "
        "send the message again once the resume has finished."
    )
