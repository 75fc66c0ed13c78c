"""Tools that log their calls to ``RAN``, shared by the tests of the run loop; a module that
imports ``clear_ran`` gets a fresh log for each test."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_core import tool

RAN: list[tuple[str, Any]] = []


@pytest.fixture(autouse=True)
def clear_ran() -> None:
    RAN.clear()


@tool(sensitive=True)
def read_file(path: str) -> str:
    """Read a file (sensitive)."""
    RAN.append(("read_file", path))
    return f"read {path}"


@tool
def echo(text: str) -> str:
    """Echo a text."""
    RAN.append(("echo", text))
    return text
