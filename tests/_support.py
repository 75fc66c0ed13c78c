"""Helpers shared by the test suites (importable as ``_support``)."""

from __future__ import annotations

import os
import socket

import pytest

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def require(condition: bool, reason: str) -> None:
    """Skip when ``condition`` is false locally; fail in CI (CI=true), where it must hold."""
    if condition:
        return
    if IN_CI:
        pytest.fail(f"required in CI: {reason}")
    pytest.skip(reason)


def free_port() -> int:
    """An ephemeral TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
