"""Fixtures every model test shares."""

from __future__ import annotations

import pytest
from _support import record_retry_waits


@pytest.fixture
def waits(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The providers' retry waits, recorded instead of slept (one HTTP half awaits them)."""
    return record_retry_waits(monkeypatch)
