"""beamfilter-builtins: the built-in filters, registered through the ``beamfilter`` entry point group."""

from __future__ import annotations

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
