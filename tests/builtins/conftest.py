"""Fixtures shared by the built-in filter tests."""

from __future__ import annotations

import pytest


@pytest.fixture(params=[False, True], ids=["complete", "stream"])
def stream(request: pytest.FixtureRequest) -> bool:
    """Run each test once with ``kernel.run`` and once with ``kernel.run_stream``."""
    return bool(request.param)
