"""beamfilter-builtins: the built-in filters, registered through the ``beamfilter`` entry point group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from beamfilter_core import lazy_exports

if TYPE_CHECKING:
    from ._approval import approval_filter
    from ._budget import budget_filter
    from ._call_limits import call_limits_filter
    from ._compaction import compaction_filter
    from ._concurrency_limit import concurrency_limit_filter
    from ._fallback import fallback_filter
    from ._heal_dangling import heal_dangling_filter
    from ._hold_release import hold_release_filter
    from ._logging import logging_filter
    from ._loop_guard import loop_guard_filter
    from ._model_retry import model_retry_filter
    from ._pii import pii_filter
    from ._rag import Document, InMemoryRetriever, Retriever, rag_filter
    from ._re_reading import re_reading_filter
    from ._redact import redact_filter
    from ._safeguard import safeguard_filter
    from ._sandbox import SandboxResult, run_sandboxed
    from ._sandboxed_shell import ShellToolset
    from ._schema_validation import schema_validation_filter, schema_validator
    from ._skills import BM25SkillRouter, Skill, SkillRouter, load_skills, parse_skill, skills_filter
    from ._title import ChatStoreTitles, InMemoryTitleStore, TitleStore, heuristic_title, title_filter
    from ._tool_embedding import EmbeddingToolIndex, HybridToolIndex
    from ._tool_errors import tool_errors_filter
    from ._tool_lexical import BM25ToolIndex
    from ._tool_output_guard import tool_output_guard_filter
    from ._tool_policy import tool_policy_filter
    from ._tool_retry import tool_retry_filter
    from ._tool_search import RegexToolIndex, ToolIndex, tool_search_filter
    from ._tracing import tracing_filter
    from ._trajectory import load_trajectory, read_trajectory, responses_of, trajectory_filter
    from ._validation import validation_filter

__version__ = "0.1.0"

__all__ = [
    "BM25SkillRouter",
    "BM25ToolIndex",
    "ChatStoreTitles",
    "Document",
    "EmbeddingToolIndex",
    "HybridToolIndex",
    "InMemoryRetriever",
    "InMemoryTitleStore",
    "RegexToolIndex",
    "Retriever",
    "SandboxResult",
    "ShellToolset",
    "Skill",
    "SkillRouter",
    "TitleStore",
    "ToolIndex",
    "approval_filter",
    "budget_filter",
    "call_limits_filter",
    "compaction_filter",
    "concurrency_limit_filter",
    "fallback_filter",
    "heal_dangling_filter",
    "heuristic_title",
    "hold_release_filter",
    "load_skills",
    "load_trajectory",
    "logging_filter",
    "loop_guard_filter",
    "model_retry_filter",
    "parse_skill",
    "pii_filter",
    "rag_filter",
    "re_reading_filter",
    "read_trajectory",
    "redact_filter",
    "responses_of",
    "run_sandboxed",
    "safeguard_filter",
    "schema_validation_filter",
    "schema_validator",
    "skills_filter",
    "title_filter",
    "tool_errors_filter",
    "tool_output_guard_filter",
    "tool_policy_filter",
    "tool_retry_filter",
    "tool_search_filter",
    "tracing_filter",
    "trajectory_filter",
    "validation_filter",
    "__version__",
]

# Imported on first use: the plugin's entry point lives in this package, and listing
# commands or plugins should not import every filter (bench/bench_cold_start.py).
_LAZY = {
    "approval_filter": "._approval",
    "budget_filter": "._budget",
    "call_limits_filter": "._call_limits",
    "compaction_filter": "._compaction",
    "concurrency_limit_filter": "._concurrency_limit",
    "fallback_filter": "._fallback",
    "heal_dangling_filter": "._heal_dangling",
    "hold_release_filter": "._hold_release",
    "logging_filter": "._logging",
    "loop_guard_filter": "._loop_guard",
    "model_retry_filter": "._model_retry",
    "pii_filter": "._pii",
    "Document": "._rag",
    "InMemoryRetriever": "._rag",
    "Retriever": "._rag",
    "rag_filter": "._rag",
    "re_reading_filter": "._re_reading",
    "redact_filter": "._redact",
    "safeguard_filter": "._safeguard",
    "SandboxResult": "._sandbox",
    "run_sandboxed": "._sandbox",
    "ShellToolset": "._sandboxed_shell",
    "schema_validation_filter": "._schema_validation",
    "schema_validator": "._schema_validation",
    "BM25SkillRouter": "._skills",
    "Skill": "._skills",
    "SkillRouter": "._skills",
    "load_skills": "._skills",
    "parse_skill": "._skills",
    "skills_filter": "._skills",
    "ChatStoreTitles": "._title",
    "InMemoryTitleStore": "._title",
    "TitleStore": "._title",
    "heuristic_title": "._title",
    "title_filter": "._title",
    "EmbeddingToolIndex": "._tool_embedding",
    "HybridToolIndex": "._tool_embedding",
    "tool_errors_filter": "._tool_errors",
    "BM25ToolIndex": "._tool_lexical",
    "tool_output_guard_filter": "._tool_output_guard",
    "tool_policy_filter": "._tool_policy",
    "tool_retry_filter": "._tool_retry",
    "RegexToolIndex": "._tool_search",
    "ToolIndex": "._tool_search",
    "tool_search_filter": "._tool_search",
    "tracing_filter": "._tracing",
    "load_trajectory": "._trajectory",
    "read_trajectory": "._trajectory",
    "responses_of": "._trajectory",
    "trajectory_filter": "._trajectory",
    "validation_filter": "._validation",
}

__getattr__ = lazy_exports(__name__, globals(), _LAZY)
