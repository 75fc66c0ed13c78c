"""``memory://``: an in-process store for tests, notebooks and single-process demos."""

from __future__ import annotations

from collections.abc import Sequence

from beamfilter_core import Message, PauseState
from beamfilter_core.errors import StoreError

from ._base import (
    KEEP_PAUSE,
    Fact,
    PauseChange,
    check_append,
    check_conversation_id,
    check_facts,
    check_limit,
    check_pause_id,
    check_user_id,
    decode_all,
    decode_pause,
    encode_pause,
    stored_pause_id,
)


class InMemoryStore:
    """Conversations in a dict of this process, gone when it exits.

    Messages are kept encoded, like the durable stores keep them, so what is loaded is a
    copy that later changes to the original objects cannot reach. Safe for many
    concurrent runs in one event loop (no method awaits between reading and writing).

    Example::

        store = InMemoryStore()
        kernel = Kernel(model, filters=[memory_filter(store)])
    """

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._messages: dict[str, list[str]] = {}
        self._pauses: dict[str, str] = {}
        self._resumed: set[str] = set()  # the pause ledger
        # user id -> subject -> text; dict order is save order (a replaced fact moves last).
        self._facts: dict[str, dict[str, str]] = {}
        self._closed = False

    def __repr__(self) -> str:
        return f"InMemoryStore({len(self._messages)} conversations)"

    def _check_open(self) -> None:
        if self._closed:
            msg = f"{self!r} is closed; open a new store (stores cannot be reopened)."
            raise StoreError(msg)

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order (the last ``limit``, never starting on a tool result)."""
        self._check_open()
        cid = check_conversation_id(conversation_id)
        limit = check_limit(limit)
        rows: list[str] = self._messages.get(cid, [])
        if limit is not None:
            rows = rows[-limit:]
        return decode_all(rows, cid, limit is not None)

    async def append(
        self, conversation_id: str, messages: Sequence[Message], *, pause: PauseChange = KEEP_PAUSE
    ) -> None:
        """Store ``messages`` (and the pause change) at once."""
        self._check_open()
        checked = check_append(conversation_id, messages, pause)
        if checked is None:
            return
        cid, rows, change = checked
        if rows:
            self._messages.setdefault(cid, []).extend(rows)
        if change is None:
            self._pauses.pop(cid, None)
        elif change is not KEEP_PAUSE:
            self._pauses[cid] = change

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation and its pause state."""
        self._check_open()
        cid = check_conversation_id(conversation_id)
        self._messages.pop(cid, None)
        self._pauses.pop(cid, None)

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store the conversation's paused run."""
        self._check_open()
        self._pauses[check_conversation_id(conversation_id)] = encode_pause(pause)

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        self._check_open()
        cid = check_conversation_id(conversation_id)
        text = self._pauses.get(cid)
        return None if text is None else decode_pause(text, f"of conversation {cid!r}")

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run."""
        self._check_open()
        self._pauses.pop(check_conversation_id(conversation_id), None)

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Load and forget the conversation's paused run, at once (only the one with ``pause_id``)."""
        self._check_open()
        cid = check_conversation_id(conversation_id)
        wanted = None if pause_id is None else check_pause_id(pause_id)
        text = self._pauses.get(cid)
        if text is None or (wanted is not None and stored_pause_id(text) != wanted):
            return None
        del self._pauses[cid]
        return decode_pause(text, f"of conversation {cid!r}")

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed; True the first time only."""
        self._check_open()
        pid = check_pause_id(pause_id)
        if pid in self._resumed:
            return False
        self._resumed.add(pid)
        return True

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts``, each replacing the user's fact on its subject."""
        self._check_open()
        uid = check_user_id(user_id)
        checked = check_facts(facts)
        if not checked:
            return
        stored = self._facts.setdefault(uid, {})
        for fact in checked:
            stored.pop(fact.subject, None)
            stored[fact.subject] = fact.text

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        self._check_open()
        stored = self._facts.get(check_user_id(user_id), {})
        return [Fact(subject, text) for subject, text in stored.items()]

    async def clear_facts(self, user_id: str) -> None:
        """Forget the user's facts."""
        self._check_open()
        self._facts.pop(check_user_id(user_id), None)

    async def aclose(self) -> None:
        """Drop everything; later calls raise StoreError."""
        self._closed = True
        self._messages.clear()
        self._pauses.clear()
        self._resumed.clear()
        self._facts.clear()
