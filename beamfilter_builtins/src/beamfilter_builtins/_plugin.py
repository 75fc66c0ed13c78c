"""Entry-point module of beamfilter-builtins: registers every built-in filter.

Each filter module exposes ``SPEC``, a :class:`beamfilter_core.FilterSpec`.
"""

from __future__ import annotations

from importlib import import_module

from beamfilter_core import FilterSpec, PresetSpec, ToolsetSpec, hookimpl

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
    "_skills",
    "_budget",
    "_trajectory",
    "_title",
)


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    """Return the specs of every built-in filter."""
    return [import_module(f"beamfilter_builtins.{name}").SPEC for name in (*_CONTENT_MODULES, *_OPERATIONS_MODULES)]


#: Presets: named, versioned bundles of built-ins, enabled as ``use = "preset:production"``.
PRESETS: tuple[PresetSpec, ...] = (
    PresetSpec(
        "production",
        "1",
        [
            {"use": "tool_errors"},
            {"use": "heal_dangling"},
            {"use": "pii"},
            {"use": "tool_policy"},
            {"use": "loop_guard"},
            {"use": "call_limits", "max_model_calls": 25},
            {"use": "tool_retry"},
            {"use": "model_retry"},
            {"use": "tracing"},
        ],
        "Hardened defaults: tool errors as data, healed history, PII masking, tool policy, loop guard, limits, "
        "retries, tracing.",
    ),
    PresetSpec(
        "development",
        "1",
        [{"use": "logging"}, {"use": "trajectory", "path": "trajectory.jsonl"}],
        "Logs every call and records each turn to trajectory.jsonl.",
    ),
)


@hookimpl
def beamfilter_register_presets() -> list[PresetSpec]:
    """Return the built-in presets."""
    return list(PRESETS)


@hookimpl
def beamfilter_register_tools() -> list[ToolsetSpec]:
    """Return the built-in toolsets (``mcp``, whose SDK is imported only when one is built;
    ``shell``, the sandboxed shell)."""
    from ._mcp import SPEC
    from ._sandboxed_shell import SPEC as SHELL

    return [SPEC, SHELL]
