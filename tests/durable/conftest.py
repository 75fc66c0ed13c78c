"""Fixtures of the durable tests (defined in ``_helpers.py``)."""

from __future__ import annotations

from durable._helpers import local
from memory._servers import postgres_url

__all__ = ["local", "postgres_url"]
