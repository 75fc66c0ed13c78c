"""Shared test configuration (helpers live in ``tests/_support.py``)."""

from __future__ import annotations

import pytest


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
