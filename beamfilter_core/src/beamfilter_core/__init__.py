"""beamfilter-core: composable around filters for LLM agents.

Build a :class:`Kernel` from a chat model, tools and an ordered list of filters, then
run turns. See the docs in ``docs/`` for the five scopes and how to write a filter.
"""

from __future__ import annotations

import typing as _typing

from . import errors
from ._chain import CompiledChain
from ._filter import Filter, FilterLike, MemoryRole, PersistHook, TokenTransform
from ._heal import heal_tool_calls
from ._hook_types import (
    ChatHook,
    ChatNext,
    FilterState,
    GateHook,
    GateNext,
    IterationHook,
    IterationNext,
    TokenFlush,
    TokenStep,
    ToolHook,
    ToolNext,
    TurnHook,
    TurnNext,
)
from ._imports import config_import
from ._kernel import CancelToken, Kernel
from ._lazy import lazy_exports
from ._messages import ContentPart, Message, Reasoning, ToolCall, Usage, utf8_safe
from ._models._base import ChatModel
from ._models._scripted import ScriptedModel
from ._records import (
    ChatRequest,
    ChatResponse,
    Decision,
    GateRequest,
    IterationRequest,
    IterationResult,
    PauseState,
    ToolFailure,
    ToolRequest,
    ToolResult,
    TurnRequest,
    TurnResult,
)
from ._secrets import mask_credentials
from ._streaming import Event, RunFinished, TextDelta, ToolCallFinished, ToolCallStarted
from ._tools import Tool, tool
from ._toolsets import Toolset

if _typing.TYPE_CHECKING:
    from ._config import BuiltConfig, build_config, read_config
    from ._hookspecs import hookimpl
    from ._models._anthropic import AnthropicChatModel
    from ._models._azure import AzureOpenAIChatModel
    from ._models._bedrock import BedrockChatModel
    from ._models._gemini import GeminiChatModel
    from ._models._local import LocalModel
    from ._models._openai import OpenAIChatModel
    from ._options import options_schema
    from ._registry import PluginInfo, Registered, Registry, StaticEntryPoint, list_plugins
    from ._serde import converter
    from ._specs import (
        BuildContext,
        CommandSpec,
        FilterSpec,
        ModelSpec,
        PresetSpec,
        SectionSpec,
        StoreSpec,
        ToolsetSpec,
    )

__version__ = "0.1.0"

__all__ = [
    "AnthropicChatModel",
    "AzureOpenAIChatModel",
    "BedrockChatModel",
    "BuildContext",
    "BuiltConfig",
    "CancelToken",
    "ChatHook",
    "ChatModel",
    "ChatNext",
    "ChatRequest",
    "ChatResponse",
    "CommandSpec",
    "CompiledChain",
    "ContentPart",
    "Decision",
    "Event",
    "Filter",
    "FilterLike",
    "FilterSpec",
    "FilterState",
    "GateHook",
    "GateNext",
    "GateRequest",
    "GeminiChatModel",
    "IterationHook",
    "IterationNext",
    "IterationRequest",
    "IterationResult",
    "Kernel",
    "LocalModel",
    "MemoryRole",
    "Message",
    "ModelSpec",
    "OpenAIChatModel",
    "PauseState",
    "PersistHook",
    "PluginInfo",
    "PresetSpec",
    "Reasoning",
    "Registered",
    "Registry",
    "RunFinished",
    "ScriptedModel",
    "SectionSpec",
    "StaticEntryPoint",
    "StoreSpec",
    "TextDelta",
    "TokenFlush",
    "TokenStep",
    "TokenTransform",
    "Tool",
    "ToolCall",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolFailure",
    "ToolHook",
    "ToolNext",
    "ToolRequest",
    "ToolResult",
    "Toolset",
    "ToolsetSpec",
    "TurnHook",
    "TurnNext",
    "TurnRequest",
    "TurnResult",
    "Usage",
    "__version__",
    "build_config",
    "config_import",
    "converter",
    "errors",
    "heal_tool_calls",
    "hookimpl",
    "lazy_exports",
    "list_plugins",
    "mask_credentials",
    "options_schema",
    "read_config",
    "tool",
    "utf8_safe",
]

# Imported on first use, to keep ``import beamfilter_core`` fast: httpx and pluggy, and
# the plugin specs and options schemas (eight attrs classes) that Kernel(...) and a turn
# never need (bench/RESULTS.md, import time).
_LAZY = {
    "options_schema": ("._options", "options_schema"),
    **{name: ("._specs", name) for name in ("BuildContext", "CommandSpec", "FilterSpec", "ModelSpec")},
    **{name: ("._specs", name) for name in ("PresetSpec", "SectionSpec", "StoreSpec", "ToolsetSpec")},
    "converter": ("._serde", "converter"),
    **{name: ("._config", name) for name in ("BuiltConfig", "build_config", "read_config")},
    "AnthropicChatModel": ("._models._anthropic", "AnthropicChatModel"),
    "GeminiChatModel": ("._models._gemini", "GeminiChatModel"),
    "LocalModel": ("._models._local", "LocalModel"),
    "OpenAIChatModel": ("._models._openai", "OpenAIChatModel"),
    "AzureOpenAIChatModel": ("._models._azure", "AzureOpenAIChatModel"),
    "BedrockChatModel": ("._models._bedrock", "BedrockChatModel"),
    "hookimpl": ("._hookspecs", "hookimpl"),
    "PluginInfo": ("._registry", "PluginInfo"),
    "Registered": ("._registry", "Registered"),
    "Registry": ("._registry", "Registry"),
    "StaticEntryPoint": ("._registry", "StaticEntryPoint"),
    "list_plugins": ("._registry", "list_plugins"),
}


def __getattr__(name: str) -> _typing.Any:
    target = _LAZY.get(name)
    if target is None:
        msg = f"module 'beamfilter_core' has no attribute {name!r}"
        raise AttributeError(msg)
    from importlib import import_module

    value = getattr(import_module(target[0], __name__), target[1])
    globals()[name] = value
    return value
