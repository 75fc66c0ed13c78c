"""beamfilter-builtins: the built-in filters, registered through the ``beamfilter`` entry point group."""

from __future__ import annotations

from ._call_limits import call_limits_filter
from ._compaction import compaction_filter
from ._fallback import fallback_filter
from ._heal_dangling import heal_dangling_filter
from ._loop_guard import loop_guard_filter
from ._model_retry import model_retry_filter
from ._pii import pii_filter
from ._tool_errors import tool_errors_filter
from ._tool_retry import tool_retry_filter
from ._tracing import tracing_filter

__version__ = "0.1.0"

__all__ = [
    "call_limits_filter",
    "compaction_filter",
    "fallback_filter",
    "heal_dangling_filter",
    "loop_guard_filter",
    "model_retry_filter",
    "pii_filter",
    "tool_errors_filter",
    "tool_retry_filter",
    "tracing_filter",
    "__version__",
]
