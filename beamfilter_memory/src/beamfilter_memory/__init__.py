"""beamfilter-memory: the memory filter and its stores.

- :func:`memory_filter` keeps each conversation (``context["conversation_id"]``) in a
  store, committing every turn atomically; put it first in the filter list.
- Stores implement :class:`ChatStore`: :class:`InMemoryStore` (``memory://``),
  :class:`SQLiteStore` (``sqlite:///path.db``, the embedded default),
  :class:`PostgresStore` (``postgresql://...``) and :class:`RedisStore` (``redis://...``).
  :func:`open_store` builds one from its URL.
- :func:`long_term_memory_filter` keeps durable :class:`Fact` values about each user
  (``context["user_id"]``) in any of these stores (:class:`FactStore`) and tells the
  model the relevant ones.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._filter import ABANDONED_CALL_TEXT, DEFAULT_STORE, memory_filter
from ._long_term import DEFAULT_EXTRACT_PROMPT, DEFAULT_HEADER, DEFAULT_RULES, long_term_memory_filter
from ._stores import migrate, open_store
from ._stores._base import KEEP_PAUSE, ChatStore, Fact, FactStore, trim_window
from ._stores._memory import InMemoryStore
from ._stores._sqlite import SQLiteStore

if TYPE_CHECKING:
    from ._stores._postgres import PostgresStore
    from ._stores._redis import RedisStore

__version__ = "0.1.0"

__all__ = [
    "ABANDONED_CALL_TEXT",
    "DEFAULT_EXTRACT_PROMPT",
    "DEFAULT_HEADER",
    "DEFAULT_RULES",
    "DEFAULT_STORE",
    "KEEP_PAUSE",
    "ChatStore",
    "Fact",
    "FactStore",
    "InMemoryStore",
    "PostgresStore",
    "RedisStore",
    "SQLiteStore",
    "__version__",
    "long_term_memory_filter",
    "memory_filter",
    "migrate",
    "open_store",
    "trim_window",
]

# psycopg and redis are optional extras: import their stores on first use only.
_LAZY = {
    "PostgresStore": "._stores._postgres",
    "RedisStore": "._stores._redis",
}


def __getattr__(name: str) -> Any:
    target = _LAZY.get(name)
    if target is None:
        msg = f"module 'beamfilter_memory' has no attribute {name!r}"
        raise AttributeError(msg)
    from importlib import import_module

    value = getattr(import_module(target, __name__), name)
    globals()[name] = value
    return value
