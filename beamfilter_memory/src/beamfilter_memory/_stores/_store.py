"""``StoreBase``: the :class:`ChatStore` protocol written once, over a backend's primitives.

A backend (SQLite, PostgreSQL, Redis, memory://, or a third-party store) implements a few
``_``-methods that move already-checked, already-encoded data; :class:`StoreBase` does the
rest the same way for every backend: id, limit, message, pause and fact checks (a bad
argument writes nothing), JSON encoding and decoding, windows that never start on a tool
result, the closed state, and backend failures turned into a ``StoreError`` that names the
store (credentials masked), the action and the conversation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

from beamfilter_core import Message, PauseState, mask_credentials
from beamfilter_core.errors import BeamfilterError, ConfigError, StoreError

from ._base import (
    KEEP_PAUSE,
    Fact,
    PauseChange,
    PendingPause,
    _Keep,
    check_append,
    check_conversation_id,
    check_facts,
    check_limit,
    check_pause_id,
    check_user_id,
    consumed_key,
    decode_all,
    decode_outcome,
    decode_pause,
    encode_outcome,
    encode_pause,
    store_failure,
    stored_pause_id,
)

__all__ = ["Rows", "StoreBase"]

_T = TypeVar("_T")

#: What a backend reads back: message rows as the JSON text (or its UTF-8 bytes) it was given.
Rows = Sequence[str] | Sequence[bytes]


#: The primitives a backend must implement (``_close`` and ``_migrate`` are optional).
_PRIMITIVES = ("_read", "_write", "_read_pause", "_take_pause", "_claim", "_save_facts", "_load_facts", "_clear_facts")
#: Optional, all or none: what lets several workers share pauses (``shares_pauses``).
_SHARED_PAUSE_PRIMITIVES = ("_list_pauses", "_put_outcome", "_get_outcome")


class StoreBase:
    """Base class of a store: subclass it, implement the primitives, register a ``StoreSpec``.

    The public methods (``load``, ``append``, ``take_pause``, ``save_facts``...) are the
    :class:`ChatStore` protocol and are not overridden. A backend implements:

    - ``_read(cid, limit)``: the conversation's message rows in order (only the last
      ``limit`` when it is not None);
    - ``_write(cid, rows, pause, clear=False)``: in **one** transaction, delete the
      conversation's messages and pause when ``clear``, add ``rows`` after the stored ones,
      then apply ``pause`` (JSON text to store, None to delete, ``KEEP_PAUSE`` to leave);
    - ``_read_pause(cid)``: the stored pause text, or None;
    - ``_take_pause(cid, pause_id)``: atomically return and delete the stored pause text;
      with a ``pause_id``, only if the stored pause has that id (:meth:`pause_id_of`; else
      None, deleting nothing);
    - ``_claim(pause_id)``: record the id as resumed; True the first time only;
    - ``_save_facts(uid, facts)`` (one transaction; each fact replaces the one on its
      subject and becomes the most recent), ``_load_facts(uid)`` (``(subject, text)``
      pairs, oldest first), ``_clear_facts(uid)``;
    - ``_close()``: release connections (called once); ``_migrate()`` if it has a schema.

    Optional, all three or none (:attr:`shares_pauses`; a gateway's workers then share
    their approvals inbox):

    - ``_list_pauses(limit)``: ``(cid, pause text)`` of every stored pause, ordered by
      conversation id (the first ``limit`` when it is not None);
    - ``_put_outcome(pause_id, text, first)``: store the outcome text of a decided pause
      (replacing any); with ``first``, only when none is stored (True when it was stored:
      the compare-and-swap that lets one reviewer win); ``text`` None deletes it;
    - ``_get_outcome(pause_id)``: the stored outcome text, or None.

    Every argument a primitive gets is checked already: ids are non-empty ``str`` without
    lone surrogates, rows are JSON text. Whatever a primitive raises becomes a
    ``StoreError`` (a ``BeamfilterError`` it raises itself is passed on unchanged).

    Example::

        class DictStore(StoreBase):
            def __init__(self, url: str = "dict://") -> None:
                super().__init__(url)
                self.rows: dict[str, list[str]] = {}
            async def _read(self, cid, limit):
                return self.rows.get(cid, [])[-limit if limit else 0 :]
            ...
    """

    #: True when the backend has tables to create (``migrate`` runs ``_migrate``).
    has_schema: ClassVar[bool] = False

    def __init__(self, url: str) -> None:
        missing = [name for name in _PRIMITIVES if getattr(type(self), name) is getattr(StoreBase, name)]
        if missing:
            msg = (
                f"{type(self).__name__} does not implement {', '.join(missing)}: a StoreBase subclass "
                f"implements every primitive ({', '.join(_PRIMITIVES)}); see docs/stores.md."
            )
            raise ConfigError(msg)
        shared = [name for name in _SHARED_PAUSE_PRIMITIVES if getattr(type(self), name) is getattr(StoreBase, name)]
        if shared and len(shared) < len(_SHARED_PAUSE_PRIMITIVES):
            msg = (
                f"{type(self).__name__} does not implement {', '.join(shared)}: the shared-pause primitives "
                f"({', '.join(_SHARED_PAUSE_PRIMITIVES)}) come all together or not at all; see docs/stores.md."
            )
            raise ConfigError(msg)
        self.url = url
        self._closed = False

    def __repr__(self) -> str:
        return f"{type(self).__name__}({mask_credentials(self.url)!r})"

    # -- primitives: a backend implements these ----------------------------------------------

    async def _read(self, cid: str, limit: int | None) -> Rows:
        raise NotImplementedError

    async def _write(self, cid: str, rows: Sequence[str], pause: str | _Keep | None, *, clear: bool = False) -> None:
        raise NotImplementedError

    async def _read_pause(self, cid: str) -> str | bytes | None:
        raise NotImplementedError

    async def _take_pause(self, cid: str, pause_id: str | None) -> str | bytes | None:
        raise NotImplementedError

    async def _claim(self, pause_id: str) -> bool:
        raise NotImplementedError

    async def _save_facts(self, uid: str, facts: list[Fact]) -> None:
        raise NotImplementedError

    async def _load_facts(self, uid: str) -> Sequence[tuple[str, str]]:
        raise NotImplementedError

    async def _clear_facts(self, uid: str) -> None:
        raise NotImplementedError

    async def _list_pauses(self, limit: int | None) -> Sequence[tuple[str, str | bytes]]:
        raise NotImplementedError

    async def _put_outcome(self, pause_id: str, text: str | None, first: bool) -> bool:
        raise NotImplementedError

    async def _get_outcome(self, pause_id: str) -> str | bytes | None:
        raise NotImplementedError

    async def _close(self) -> None:
        """Release connections, threads and pools."""

    async def _migrate(self) -> None:
        """Create the tables now (only called when ``has_schema``)."""

    @staticmethod
    def pause_id_of(text: str | bytes) -> str | None:
        """The ``pause_id`` of stored pause text, or None when it has none or cannot be read
        (what ``_take_pause`` compares with the id asked for; a corrupt row never matches)."""
        return stored_pause_id(text)

    # -- what every store shares --------------------------------------------------------------

    def _closed_error(self) -> StoreError:
        return StoreError(f"{self!r} is closed; open a new store (stores cannot be reopened).")

    def _failed(self, exc: Exception, action: str, cid: str | None) -> StoreError:
        """What a primitive raised, as a StoreError naming the store, ``action`` and the id."""
        return store_failure(repr(self), action, cid, exc)

    async def _guarded(self, call: Awaitable[_T], action: str, cid: str | None) -> _T:
        """Await a primitive: the backend's own typed errors pass as they are, anything
        else becomes the StoreError of :meth:`_failed`."""
        try:
            return await call
        except BeamfilterError:
            raise
        except Exception as exc:
            raise self._failed(exc, action, cid) from exc

    async def migrate(self) -> bool:
        """Create the store's tables now instead of on first use (idempotent; safe from
        several workers at once). False when the store has no schema (memory://, Redis)."""
        if self._closed:
            raise self._closed_error()
        if not self.has_schema:
            return False
        await self._guarded(self._migrate(), "creating the schema", None)
        return True

    async def load(self, conversation_id: str, limit: int | None = None) -> list[Message]:
        """The stored messages in order; with ``limit``, only the last ``limit`` of them,
        never starting on a tool result (whose call would be cut off)."""
        if self._closed:
            raise self._closed_error()
        cid = check_conversation_id(conversation_id)
        limit = check_limit(limit)
        rows = await self._guarded(self._read(cid, limit), "load", cid)
        return decode_all(rows, cid, limit is not None)

    async def append(
        self, conversation_id: str, messages: Sequence[Message], *, pause: PauseChange = KEEP_PAUSE
    ) -> None:
        """Store ``messages`` after the existing ones and apply the pause change (a
        :class:`PauseState` to save, None to clear, ``KEEP_PAUSE``), in one transaction."""
        if self._closed:
            raise self._closed_error()
        checked = check_append(conversation_id, messages, pause)
        if checked is None:
            return
        cid, rows, change = checked
        await self._guarded(self._write(cid, rows, change), "append", cid)

    async def clear(self, conversation_id: str) -> None:
        """Forget the conversation: its messages and its pause state (one transaction)."""
        await self._change("clear", conversation_id, None, clear=True)

    async def save_pause(self, conversation_id: str, pause: PauseState) -> None:
        """Store ``pause`` as the conversation's paused run (replacing any older one)."""
        if self._closed:
            raise self._closed_error()
        cid = check_conversation_id(conversation_id)
        await self._change("save_pause", cid, encode_pause(pause))

    async def clear_pause(self, conversation_id: str) -> None:
        """Forget the conversation's paused run (no error when there is none)."""
        await self._change("clear_pause", conversation_id, None)

    async def _change(self, action: str, conversation_id: str, pause: str | None, *, clear: bool = False) -> None:
        if self._closed:
            raise self._closed_error()
        cid = check_conversation_id(conversation_id)
        await self._guarded(self._write(cid, (), pause, clear=clear), action, cid)

    async def load_pause(self, conversation_id: str) -> PauseState | None:
        """The conversation's paused run, or None."""
        if self._closed:
            raise self._closed_error()
        cid = check_conversation_id(conversation_id)
        text = await self._guarded(self._read_pause(cid), "load_pause", cid)
        return None if text is None else decode_pause(text, f"of conversation {cid!r}")

    async def take_pause(self, conversation_id: str, pause_id: str | None = None) -> PauseState | None:
        """Atomically load and forget the conversation's paused run: of several workers
        resuming the same pause at once, exactly one gets it (the others get None).

        With ``pause_id``, a compare-and-swap: only a stored pause with that id is taken;
        a newer pause is left in place (and None returned)."""
        if self._closed:
            raise self._closed_error()
        cid = check_conversation_id(conversation_id)
        wanted = None if pause_id is None else check_pause_id(pause_id)
        text = await self._guarded(self._take_pause(cid, wanted), "take_pause", cid)
        if not text:
            return None
        pause = decode_pause(text, f"of conversation {cid!r}")
        if self.shares_pauses:
            # a pause resumed (or abandoned) before and inserted again: taken, never given
            key = consumed_key(pause)
            if await self._guarded(self._get_outcome(key), "take_pause (consumed record)", cid) is not None:
                return None
        return pause

    async def claim_pause(self, pause_id: str) -> bool:
        """Record ``pause_id`` as resumed (the kernel's pause ledger); True the first time only."""
        if self._closed:
            raise self._closed_error()
        pid = check_pause_id(pause_id)
        return await self._guarded(self._claim(pid), f"claim_pause for pause {pid!r}", None)

    # -- pauses shared by several workers (optional primitives) -------------------------

    @property
    def shares_pauses(self) -> bool:
        """True when the store lists its pending pauses and keeps their outcomes
        (:meth:`pending_pauses`, :meth:`save_outcome`, :meth:`load_outcome`)."""
        return type(self)._list_pauses is not StoreBase._list_pauses

    def _check_shares(self, action: str) -> None:
        if self._closed:
            raise self._closed_error()
        if not self.shares_pauses:
            msg = (
                f"{self!r} cannot {action}: {type(self).__name__} does not implement the shared-pause "
                "primitives (_list_pauses, _put_outcome, _get_outcome); use a store that does "
                "(sqlite, postgresql, redis, memory) or add them (docs/stores.md)."
            )
            raise ConfigError(msg)

    async def pending_pauses(self, limit: int | None = None) -> list[PendingPause]:
        """Every stored pause (of any worker), ordered by conversation id; with ``limit``,
        the first ``limit`` of them."""
        self._check_shares("list pending pauses")
        if limit is not None and (type(limit) is not int or limit <= 0):
            msg = f"pending_pauses(limit={limit!r}) is invalid; give a positive number of pauses or None for all."
            raise ConfigError(msg)
        rows = await self._guarded(self._list_pauses(limit), "pending_pauses", None)
        return [PendingPause(cid, decode_pause(text, f"of conversation {cid!r}")) for cid, text in rows]

    async def save_outcome(self, pause_id: str, outcome: Mapping[str, Any] | None, *, first: bool = False) -> bool:
        """Keep what became of a decided pause (a JSON object) for any worker to read; None
        forgets it. With ``first``, a compare-and-swap: stored only when no outcome is, so
        of several workers deciding one pause exactly one gets True."""
        self._check_shares("save a pause outcome")
        pid = check_pause_id(pause_id)
        if outcome is None and first:
            msg = f"save_outcome({pid!r}, None, first=True) is invalid; first=True needs an outcome to store."
            raise ConfigError(msg)
        text = None if outcome is None else encode_outcome(outcome)
        return await self._guarded(self._put_outcome(pid, text, first), f"save_outcome for pause {pid!r}", None)

    async def load_outcome(self, pause_id: str) -> dict[str, Any] | None:
        """The outcome kept for ``pause_id``, or None."""
        self._check_shares("load a pause outcome")
        pid = check_pause_id(pause_id)
        text = await self._guarded(self._get_outcome(pid), f"load_outcome for pause {pid!r}", None)
        return None if text is None else decode_outcome(text, f"of pause {pid!r}")

    async def save_facts(self, user_id: str, facts: Sequence[Fact]) -> None:
        """Store ``facts`` in one transaction; each replaces a stored fact on its subject
        and becomes the most recent (within ``facts`` the last one per subject wins)."""
        if self._closed:
            raise self._closed_error()
        uid = check_user_id(user_id)
        checked = check_facts(facts)
        if not checked:
            return
        await self._guarded(self._save_facts(uid, checked), f"save_facts for user {uid!r}", None)

    async def load_facts(self, user_id: str) -> list[Fact]:
        """The user's facts, oldest first."""
        if self._closed:
            raise self._closed_error()
        uid = check_user_id(user_id)
        rows = await self._guarded(self._load_facts(uid), f"load_facts for user {uid!r}", None)
        return [Fact(subject, text) for subject, text in rows]

    async def clear_facts(self, user_id: str) -> None:
        """Forget every fact of the user (no error when there is none)."""
        if self._closed:
            raise self._closed_error()
        uid = check_user_id(user_id)
        await self._guarded(self._clear_facts(uid), f"clear_facts for user {uid!r}", None)

    async def aclose(self) -> None:
        """Release connections, threads and pools (idempotent; the store refuses work after)."""
        if self._closed:
            return
        self._closed = True
        await self._close()


def check_store_methods(store: Any, methods: Sequence[str]) -> list[str]:
    """The names in ``methods`` that ``store`` does not have as callables."""
    return [name for name in methods if not callable(getattr(store, name, None))]
