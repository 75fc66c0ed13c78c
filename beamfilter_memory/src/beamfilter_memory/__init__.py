"""beamfilter-memory: the memory filter and its stores.

- :func:`memory_filter` keeps each conversation (``context["conversation_id"]``) in a
  store, committing every turn atomically; put it first in the filter list.
- Stores implement :class:`ChatStore`: :class:`InMemoryStore` (``memory://``),
  :class:`SQLiteStore` (``sqlite:///path.db``, the embedded default),
  :class:`PostgresStore` (``postgresql://...``) and :class:`RedisStore` (``redis://...``).
  :func:`open_store` builds one from its URL. A new store subclasses :class:`StoreBase`
  (a few primitives) and is registered with a ``StoreSpec`` (docs/stores.md).
- :func:`long_term_memory_filter` keeps durable :class:`Fact` values about each user
  (``context["user_id"]``) in any of these stores (:class:`FactStore`) and tells the
  model the relevant ones.
"""

from __future__ import annotations

from ._filter import ABANDONED_CALL_TEXT, DEFAULT_STORE, memory_filter
from ._journal import INTERRUPTED_CALL_TEXT
from ._long_term import DEFAULT_EXTRACT_PROMPT, DEFAULT_HEADER, DEFAULT_RULES, long_term_memory_filter
from ._stores import STORE_SPECS, migrate, open_store
from ._stores._base import KEEP_PAUSE, ChatStore, Fact, FactStore, PendingPause, trim_window
from ._stores._memory import InMemoryStore
from ._stores._postgres import PostgresStore
from ._stores._redis import RedisStore
from ._stores._sqlite import SQLiteStore
from ._stores._store import StoreBase

__version__ = "0.1.0"

__all__ = [
    "ABANDONED_CALL_TEXT",
    "DEFAULT_EXTRACT_PROMPT",
    "DEFAULT_HEADER",
    "DEFAULT_RULES",
    "DEFAULT_STORE",
    "INTERRUPTED_CALL_TEXT",
    "KEEP_PAUSE",
    "STORE_SPECS",
    "ChatStore",
    "Fact",
    "FactStore",
    "InMemoryStore",
    "PendingPause",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "StoreBase",
    "__version__",
    "long_term_memory_filter",
    "memory_filter",
    "migrate",
    "open_store",
    "trim_window",
]
