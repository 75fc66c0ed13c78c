"""The ``ChatStore`` protocol and what every store shares: encoding, checks, windows."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, Protocol, runtime_checkable

from beamfilter_core import Message, PauseState, converter, mask_credentials, utf8_safe
from beamfilter_core.errors import ConfigError, StoreError


class _Keep(enum.Enum):
    KEEP = "KEEP"

    def __repr__(self) -> str:
        return "KEEP_PAUSE"


#: Default of ``append(..., pause=...)``: leave the stored pause state as it is.
KEEP_PAUSE: Final = _Keep.KEEP

#: What ``append(..., pause=...)`` accepts: a state to save, ``None`` to clear, or KEEP_PAUSE.
PauseChange = PauseState | None | _Keep


@dataclasses.dataclass(frozen=True, slots=True)
class Fact:
    """One durable fact about a user: ``subject`` keys it (a newer fact on the same
    subject replaces the older one), ``text`` is what a model is told.

    Example::

        Fact("name", "The user's name is Ada.")
    """

    subject: str
    text: str


class PendingPause(NamedTuple):
    """A paused run waiting in a store: its conversation and its state
    (what :meth:`StoreBase.pending_pauses` lists)."""

    conversation_id: str
    pause: PauseState


@runtime_checkable
class FactStore(Protocol):
    """Long-term facts per user (the ``long_term_memory`` filter), kept apart from
    conversations. Every store of this package implements it next to :class:`ChatStore`.

    Facts are keyed by user id and subject; :meth:`load_facts` returns them oldest first
    (the order of their last save), so the last ones are the most recent.

    Example::

        await store.save_facts("ada", [Fact("name", "The user's name is Ada.")])
        assert await store.load_facts("ada") == [Fact("name", "The user's name is Ada.")]
    """

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts`` in one transaction; each replaces a stored fact on its subject
        and becomes the most recent (within ``facts`` the last one per subject wins)."""
        ...

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        ...

    async def clear_facts(self, user_id: str) -> None:
        """Forget every fact of the user (no error when there is none)."""
        ...


@runtime_checkable
class ChatStore(FactStore, Protocol):
    """Where the memory filter keeps conversations: messages in order, and pause states
    (and, as a :class:`FactStore`, the long-term facts of users).

    Every method is async and keyed by a conversation id (a non-empty ``str``).
    :meth:`append` is one transaction: all of its messages (and its pause change) are
    stored, or none. Stores connect lazily, on first use; :meth:`aclose` releases them.

    Example::

        store = open_store("sqlite:///chats.db")
        await store.append("c1", [Message.user("hi"), Message.assistant("hello")])
        assert [m.text for m in await store.load("c1")] == ["hi", "hello"]
        await store.aclose()
    """

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order; with ``limit``, only the last ``limit`` of them,
        never starting on a tool result (whose call would be cut off)."""
        ...

    async def append(
        self, conversation_id: str, messages: Sequence[Message], *, pause: PauseChange = KEEP_PAUSE
    ) -> None:
        """Store ``messages`` after the existing ones, and optionally save (a
        :class:`PauseState`) or clear (``None``) the pause, all in one transaction."""
        ...

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation: its messages and its pause state."""
        ...

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store ``pause`` as the conversation's paused run (replacing any older one)."""
        ...

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        ...

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run (no error when there is none)."""
        ...

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Atomically load and forget the conversation's paused run: of several workers
        resuming the same pause at once, exactly one gets it (the others get None).

        With ``pause_id``, a compare-and-swap: only a stored pause with that id is taken;
        a newer pause is left in place (and None returned)."""
        ...

    async def aclose(self) -> None:
        """Release connections, threads and pools (the store may not be used after)."""
        ...


STORE_METHODS: Final = (
    "load",
    "append",
    "clear",
    "save_pause",
    "load_pause",
    "clear_pause",
    "take_pause",
    "aclose",
)


FACT_METHODS: Final = ("save_facts", "load_facts", "clear_facts")


def check_user_id(user_id: Any) -> str:
    """Return ``user_id`` if it is a non-empty str, else raise ConfigError."""
    if type(user_id) is str and user_id:
        if utf8_safe(user_id) is user_id:
            return user_id
        msg = f"user_id {user_id!r} holds lone surrogates (undecodable bytes) and cannot be stored."
        raise ConfigError(msg)
    msg = (
        f"user_id is {user_id!r} (a {type(user_id).__name__}); "
        "give a non-empty str, e.g. context={'user_id': 'user-42'}."
    )
    raise ConfigError(msg)


def check_facts(facts: Any) -> list[Fact]:
    """``facts`` with one fact per subject (the last one wins, in its position), or
    ConfigError naming the bad item."""
    if isinstance(facts, str | bytes | Mapping) or not isinstance(facts, Iterable):
        msg = f"save_facts(facts={facts!r}) is a {type(facts).__name__}; give a list of beamfilter_memory.Fact values."
        raise ConfigError(msg)
    latest: dict[str, Fact] = {}
    for index, item in enumerate(tuple(facts)):
        if type(item) is not Fact or type(item.subject) is not str or not item.subject or type(item.text) is not str:
            msg = (
                f"save_facts(facts[{index}]) is {item!r}; give beamfilter_memory.Fact(subject, text) "
                "values with a non-empty subject str and a text str."
            )
            raise ConfigError(msg)
        if utf8_safe(item.subject) is not item.subject or utf8_safe(item.text) is not item.text:
            # lone surrogates become U+FFFD, as in messages: no backend stores them as UTF-8
            item = Fact(utf8_safe(item.subject), utf8_safe(item.text))
        latest.pop(item.subject, None)  # moves a repeated subject to its last position
        latest[item.subject] = item
    return list(latest.values())


def check_conversation_id(conversation_id: Any) -> str:
    """Return ``conversation_id`` if it is a non-empty str, else raise ConfigError.

    An id holding lone surrogates is refused rather than repaired like message text:
    two ids that differ only there would otherwise name one conversation.
    """
    if type(conversation_id) is str and conversation_id:
        if utf8_safe(conversation_id) is conversation_id:
            return conversation_id
        msg = (
            f"conversation_id {conversation_id!r} holds lone surrogates (undecodable bytes) "
            "and cannot be stored; decode it properly or encode it (e.g. as hex)."
        )
        raise ConfigError(msg)
    msg = (
        f"conversation_id is {conversation_id!r} (a {type(conversation_id).__name__}); "
        "give a non-empty str, e.g. context={'conversation_id': 'user-42'}."
    )
    raise ConfigError(msg)


def check_limit(limit: Any) -> int | None:
    """Return ``limit`` if it is None or a positive int, else raise ConfigError."""
    if limit is None or (type(limit) is int and limit > 0):
        return limit
    msg = f"load(limit={limit!r}) is invalid; give a positive number of messages or None for all."
    raise ConfigError(msg)


def check_messages(messages: Any) -> tuple[Message, ...]:
    """Return ``messages`` as a tuple of Message, or raise ConfigError naming the bad item."""
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        msg = (
            f"append(messages={messages!r}) is a {type(messages).__name__}; "
            "give a list of beamfilter_core.Message values."
        )
        raise ConfigError(msg)
    items = tuple(messages)
    for index, item in enumerate(items):
        if type(item) is not Message:
            msg = (
                f"append(messages[{index}]) is {item!r} (a {type(item).__name__}); "
                "stores keep beamfilter_core.Message values only."
            )
            raise ConfigError(msg)
    return items


# Looked up once: per-message dispatch through the converter costs more than the work.
_UNSTRUCTURE = converter.get_unstructure_hook(Message)
_STRUCTURE = converter.get_structure_hook(Message)
_DUMPS = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_LOADS = json.JSONDecoder().decode


def encode(message: Message) -> str:
    """One message as compact JSON text (the core converter's form).

    Lone surrogates (text read with ``surrogateescape``) become U+FFFD, the rule the
    model request follows too: no backend can store them as UTF-8.
    """
    return utf8_safe(_DUMPS(_UNSTRUCTURE(message)))


def decode(text: str | bytes, where: str) -> Message:
    """A message from its stored JSON text; fields this version does not know are ignored
    (the stored row itself is never rewritten, so they are kept)."""
    try:
        return _STRUCTURE(_LOADS(text if isinstance(text, str) else text.decode()), Message)  # type: ignore[no-any-return]
    except Exception as exc:  # json or cattrs: the row is not a message we can read
        msg = f"Cannot read the stored message {where}: {type(exc).__name__}: {exc}"
        raise StoreError(msg) from exc


def encode_pause(pause: PauseState) -> str:
    """A pause state as JSON text."""
    if type(pause) is not PauseState:
        msg = f"save_pause(pause={pause!r}) needs a beamfilter_core.PauseState (from a paused TurnResult)."
        raise ConfigError(msg)
    return pause.to_json()


def decode_pause(text: str | bytes, where: str) -> PauseState:
    """A pause state from its stored JSON text."""
    try:
        return PauseState.from_json(text)
    except Exception as exc:  # json or cattrs
        msg = f"Cannot read the stored pause state {where}: {type(exc).__name__}: {exc}"
        raise StoreError(msg) from exc


def consumed_key(pause: PauseState) -> str:
    """The key of a pause's consumed record: the digest of its signed state (its id and its
    signature, which covers everything else), so only that very pause matches it."""
    signed = f"{pause.pause_id}\0{pause.signature or ''}".encode(errors="surrogatepass")
    return "consumed:" + hashlib.sha256(signed).hexdigest()


def check_pause_id(pause_id: Any) -> str:
    """Return ``pause_id`` if it is a non-empty str, else raise ConfigError."""
    if type(pause_id) is str and pause_id:
        return pause_id
    msg = f"pause_id is {pause_id!r}; give the pause_id of a PauseState (a non-empty str)."
    raise ConfigError(msg)


def encode_outcome(outcome: Any) -> str:
    """A pause outcome (a JSON object) as compact JSON text, or ConfigError naming the value."""
    if not isinstance(outcome, Mapping) or not all(type(key) is str for key in outcome):
        msg = f"save_outcome(outcome={outcome!r:.80}) needs a dict with str keys (a JSON object), or None to forget it."
        raise ConfigError(msg)
    try:
        return utf8_safe(_DUMPS(dict(outcome)))
    except (TypeError, ValueError, RecursionError) as exc:  # a value JSON cannot hold
        msg = f"save_outcome(outcome={outcome!r:.80}) is not JSON: {exc}; give str, numbers, lists and dicts only."
        raise ConfigError(msg) from None


def decode_outcome(text: str | bytes, where: str) -> dict[str, Any]:
    """A pause outcome from its stored JSON text."""
    try:
        found = _LOADS(text if isinstance(text, str) else text.decode())
    except (ValueError, RecursionError) as exc:
        msg = f"Cannot read the stored outcome {where}: {type(exc).__name__}: {exc}"
        raise StoreError(msg) from exc
    if not isinstance(found, dict):
        msg = f"Cannot read the stored outcome {where}: it is a JSON {type(found).__name__}, not an object."
        raise StoreError(msg)
    return found


def stored_pause_id(text: str | bytes) -> str | None:
    """The ``pause_id`` of a stored pause state's JSON text (None if it has none)."""
    try:
        found = _LOADS(text if isinstance(text, str) else text.decode()).get("pause_id")
    except (ValueError, AttributeError, RecursionError):  # not JSON, not an object, too deep
        return None
    return found if isinstance(found, str) else None


def decode_all(rows: Sequence[Any], conversation_id: str, trim: bool) -> list[Message]:
    """Decode rows in order; with ``trim``, drop leading tool results (a window's cut).

    The rows are parsed as one JSON array (one parser call instead of one per row); if
    that fails, each row is parsed alone so the error names the row that is broken.
    """
    out: list[Message] | None = None
    if rows:
        try:
            if isinstance(rows[0], str):
                data = _LOADS("[" + ",".join(rows) + "]")
            else:
                data = json.loads(b"[" + b",".join(rows) + b"]")
            if len(data) == len(rows):
                structure = _STRUCTURE
                out = [structure(item, Message) for item in data]
        except Exception:  # noqa: BLE001  # re-parsed row by row below, to name the broken row
            out = None
        if out is None:
            out = [
                decode(row, f"at position {index} of conversation {conversation_id!r}")
                for index, row in enumerate(rows)
            ]
    else:
        out = []
    return trim_window(out) if trim else out


def trim_window(messages: list[Message]) -> list[Message]:
    """Drop tool results at the head: their assistant call was cut off by a window."""
    start = 0
    end = len(messages)
    while start < end and messages[start].role == "tool":
        start += 1
    return messages[start:] if start else messages


def check_pause_change(pause: Any) -> str | _Keep | None:
    """Encode an ``append(pause=...)`` argument: JSON text, None (clear) or KEEP_PAUSE."""
    if pause is KEEP_PAUSE or pause is None:
        return pause
    return encode_pause(pause)


def check_append(
    conversation_id: str, messages: Sequence[Message], pause: Any
) -> tuple[str, list[str], str | _Keep | None] | None:
    """Check and encode an append before anything is written (a bad item writes nothing).

    Returns the conversation id, the encoded messages and the pause change, or None when
    the append would change nothing.
    """
    cid = check_conversation_id(conversation_id)
    rows = [encode(message) for message in check_messages(messages)]
    change = check_pause_change(pause)
    if not rows and change is KEEP_PAUSE:
        return None
    return cid, rows, change


def check_loop(store: object, bound: asyncio.AbstractEventLoop | None) -> asyncio.AbstractEventLoop:
    """The running loop; StoreError if ``store``'s connections belong to another loop."""
    loop = asyncio.get_running_loop()
    if bound is None or bound is loop:
        return loop
    msg = (
        f"{store!r} was first used in another event loop; its connections belong to that loop. "
        "Run every turn in one event loop (one asyncio.run(main()) around the program, not "
        "kernel.run_sync per turn), or open one store per loop."
    )
    raise StoreError(msg)


def store_failure(store: str, action: str, conversation_id: str | None, exc: BaseException) -> StoreError:
    """A StoreError that says what failed, where, and why."""
    target = f" for conversation {conversation_id!r}" if conversation_id is not None else ""
    # a driver's message may quote the connection string: credentials become ***
    msg = mask_credentials(f"{store}: {action}{target} failed: {type(exc).__name__}: {exc}")
    error = StoreError(msg)
    error.__cause__ = exc
    return error
