"""Exponential backoff with jitter, shared by ``tool_retry`` and ``model_retry``."""

from __future__ import annotations

import random
from typing import Any

import attrs

#: The options schema of a backoff, shared by the retry filters' specs.
BACKOFF_OPTIONS: dict[str, Any] = {
    "max_retries": {"type": "integer", "minimum": 0},
    "initial_delay": {"type": "number", "minimum": 0},
    "max_delay": {"type": "number", "minimum": 0},
    "multiplier": {"type": "number", "minimum": 1},
    "jitter": {"type": "boolean"},
}


@attrs.frozen(slots=True)
class Backoff:
    """Delays ``initial * multiplier**attempt``, capped at ``maximum``.

    With ``jitter`` each delay is drawn uniformly from ``[delay / 2, delay]`` ("equal
    jitter"), so concurrent clients spread out but never retry immediately.
    """

    initial: float = 1.0
    maximum: float = 30.0
    multiplier: float = 2.0
    jitter: bool = True

    @classmethod
    def from_options(cls, initial: float, maximum: float, multiplier: float, jitter: bool) -> Backoff:
        """A backoff from options already checked against :data:`BACKOFF_OPTIONS`."""
        return cls(float(initial), float(maximum), float(multiplier), bool(jitter))

    def delay(self, attempt: int) -> float:
        """Seconds to wait before retry number ``attempt`` (0 for the first retry)."""
        base = min(self.maximum, self.initial * self.multiplier**attempt)
        if self.jitter:
            return random.uniform(base / 2, base)  # jitter, not cryptography
        return base
