"""``Idempotency-Key``: a retried request attaches to the turn its first attempt started.

A client whose timeout is shorter than its ``Beamfilter-Wait`` (or whose connection drops)
retries; without a key each attempt would run a turn of its own, and a sensitive call would
wait in the inbox once per attempt. With the same key (and the same body) a retry awaits
the first attempt's turn instead: one turn, one pause, and every attempt gets its answer.

Keys are per client key and per worker process, kept for ``ttl`` seconds (at most ``keep``
of them); a key whose turn failed or was cut off is forgotten, so the next retry runs anew.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Generic, TypeVar

from beamfilter_core.errors import GatewayError

__all__ = ["IDEMPOTENCY_HEADER", "IdempotencyKeys", "fingerprint", "idempotency_key"]

#: The request header naming a request's idempotency key.
IDEMPOTENCY_HEADER = "idempotency-key"
_KEY = re.compile(r"[\x21-\x7e]{1,255}")
T = TypeVar("T")


def idempotency_key(headers: Mapping[str, str]) -> str | None:
    """The request's ``Idempotency-Key`` (1 to 255 visible ASCII characters), or None."""
    value = headers.get(IDEMPOTENCY_HEADER)
    if value is None:
        return None
    if not _KEY.fullmatch(value):
        msg = f"header Idempotency-Key is {value[:40]!r}; send 1 to 255 visible ASCII characters (a UUID)."
        raise GatewayError(msg, status=400, param="Idempotency-Key")
    return value


def fingerprint(body: Any) -> str:
    """A digest of a request body: a key reused with another body is refused."""
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class IdempotencyKeys(Generic[T]):
    """The turns started under each ``(client, key)``: futures of what they ended with."""

    def __init__(self, ttl: float = 3600.0, keep: int = 10_000) -> None:
        self._ttl = ttl
        self._keep = keep
        self._turns: OrderedDict[tuple[str | None, str], tuple[str, float, asyncio.Future[T]]] = OrderedDict()

    def __repr__(self) -> str:
        return f"IdempotencyKeys({len(self._turns)} keys)"

    def __len__(self) -> int:
        return len(self._turns)

    def find(self, client: str | None, key: str, digest: str) -> asyncio.Future[T] | None:
        """The turn started under the key, or None. Raises 422 when the key came with another body."""
        self._expire()
        found = self._turns.get((client, key))
        if found is None:
            return None
        if found[0] != digest:
            msg = "Idempotency-Key was used with another request body; send a new key for a new request."
            raise GatewayError(msg, status=422, code="idempotency_key_reused", param="Idempotency-Key")
        return found[2]

    def start(self, client: str | None, key: str, digest: str, turn: asyncio.Future[T]) -> None:
        """Remember ``turn`` under the key; it is forgotten when it fails or is cancelled."""
        slot = (client, key)
        self._turns[slot] = (digest, time.monotonic(), turn)
        while len(self._turns) > self._keep:
            self._turns.popitem(last=False)

        def forget(done: asyncio.Future[T]) -> None:
            if (done.cancelled() or done.exception() is not None) and self._turns.get(slot, (None, 0, None))[2] is done:
                del self._turns[slot]

        turn.add_done_callback(forget)

    def _expire(self) -> None:
        now = time.monotonic()
        while self._turns:
            slot, (_, since, _) = next(iter(self._turns.items()))
            if now - since <= self._ttl:
                break
            del self._turns[slot]
