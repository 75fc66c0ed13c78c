"""API and reviewer keys: compared in constant time, never logged or echoed."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from collections.abc import Sequence

__all__ = ["KeyRing", "basic_password", "bearer", "client_id"]


class KeyRing:
    """A set of keys, kept as SHA-256 digests so a comparison takes the same time for keys
    of any length and every key is compared (no early exit on the first match)."""

    __slots__ = ("_digests",)

    def __init__(self, keys: Sequence[str]) -> None:
        self._digests = tuple(hashlib.sha256(key.encode()).digest() for key in keys)

    def __repr__(self) -> str:
        return f"KeyRing({len(self._digests)} keys)"

    @property
    def open(self) -> bool:
        """True when no key is configured: every request is let in."""
        return not self._digests

    def accepts(self, key: str | None) -> bool:
        """True when ``key`` is one of the keys (always True for an open ring)."""
        return not self._digests or self.identify(key) is not None

    def identify(self, key: str | None) -> str | None:
        """The client id of ``key`` when it is one of the keys (:func:`client_id`), else None.
        Every key is compared, so the time taken does not tell which one matched."""
        if key is None or not self._digests:
            return None
        given = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        found: bytes | None = None
        for digest in self._digests:
            if hmac.compare_digest(given, digest):
                found = digest
        return None if found is None else _client_id(found)


def _client_id(digest: bytes) -> str:
    return "key-" + hashlib.sha256(b"beamfilter-client:" + digest).hexdigest()[:16]


def client_id(key: str) -> str:
    """The id a client key gets in conversation ids, the inbox and the log: a digest that
    does not give the key back (``key-`` and 16 hex digits).

    Example::

        assert client_id("sk-example-gateway-key-0123").startswith("key-")
    """
    return _client_id(hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest())


def bearer(header: str | None) -> str | None:
    """The key of an ``Authorization: Bearer KEY`` header, or None."""
    if not header:
        return None
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    return key.strip()


def basic_password(header: str | None) -> tuple[str, str] | None:
    """``(user, password)`` of an ``Authorization: Basic ...`` header, or None."""
    if not header:
        return None
    scheme, _, encoded = header.partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    return (user, password) if colon else None
