"""Shared test configuration: the anyio backend and the CI rule for peers and services."""

from __future__ import annotations

import os

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def require(condition: bool, reason: str) -> None:
    """Skip when ``condition`` is false locally; fail in CI (CI=true), where it must hold."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)
