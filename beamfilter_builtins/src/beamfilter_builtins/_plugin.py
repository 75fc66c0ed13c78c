"""Entry-point module of beamfilter-builtins: registers every built-in filter.

Each filter module exposes ``SPEC``, a :class:`beamfilter_core.FilterSpec`.
"""

from __future__ import annotations

from importlib import import_module

from beamfilter_core import FilterSpec, hookimpl

# Filters that shape content and control flow.
_CONTENT_MODULES: tuple[str, ...] = (
    "_logging",
    "_safeguard",
    "_approval",
    "_validation",
    "_schema_validation",
    "_redact",
    "_hold_release",
    "_tool_search",
    "_re_reading",
    "_rag",
)
# Filters for reliability and operations.
_OPERATIONS_MODULES: tuple[str, ...] = (
    "_pii",
    "_loop_guard",
    "_call_limits",
    "_tool_retry",
    "_model_retry",
    "_fallback",
    "_tool_errors",
    "_heal_dangling",
    "_compaction",
    "_tracing",
    "_tool_policy",
    "_tool_output_guard",
    "_concurrency_limit",
)


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    """Return the specs of every built-in filter."""
    return [import_module(f"beamfilter_builtins.{name}").SPEC for name in (*_CONTENT_MODULES, *_OPERATIONS_MODULES)]
