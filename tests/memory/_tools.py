"""The tools and the gate of the memory tests (and of ``_worker.py``, which imports this
module from its own folder): a weather lookup, a sensitive money transfer, and a gate that
pauses every call it is asked about."""

from __future__ import annotations

from typing import Any

from beamfilter_core import Decision, Tool, ToolCall, tool

#: Signs the pause a ``_worker.py`` process makes; the test that resumes it uses the same key.
PAUSE_KEY = "crash-test-pause-key-0123"


@tool
def weather(city: str) -> str:
    """Weather of a city."""
    return f"sunny in {city}"


@tool(sensitive=True)
def transfer(amount: int) -> str:
    """Move money."""
    return f"moved {amount}"


def recorded_transfer(ran: list[int]) -> Tool:
    """The ``transfer`` tool, each run appending its amount to ``ran``."""

    @tool(sensitive=True)
    def transfer(amount: int) -> str:
        """Move money."""
        ran.append(amount)
        return f"moved {amount}"

    return transfer


def pause_gate(call: ToolCall, tool: Any, context: Any) -> Decision:
    """The kernel gate that pauses every sensitive call for a human."""
    return Decision.pause("needs a human")
