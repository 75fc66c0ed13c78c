"""The core's own plugin: the ``openai``, ``local`` and ``scripted`` model providers.

Registered through the ``beamfilter`` entry point group (``core``) like any third-party
plugin. The model classes are imported inside the factories, so a provider whose module
or optional dependency is missing fails only when a config uses it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

from ._hookspecs import hookimpl
from ._specs import BuildContext, ModelSpec

_OPENAI_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "base_url": {"type": "string", "minLength": 1},
        "api_key": {"type": "string"},
        "api_key_env": {"type": "string", "minLength": 1},
        "options": {"type": "object"},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "deadline": {"type": "number", "exclusiveMinimum": 0},
        "max_retries": {"type": "integer", "minimum": 0},
        "max_event_chars": {"type": "integer", "minimum": 1},
        "max_answer_chars": {"type": "integer", "minimum": 1},
        "max_argument_chars": {"type": "integer", "minimum": 1},
        "api": {"enum": ["chat", "responses"]},
    },
    "required": ["model"],
    "additionalProperties": False,
}

# Azure: the OpenAI options less model/api/base_url's default, plus the deployment's address.
_AZURE_SCHEMA: dict[str, Any] = {
    **_OPENAI_SCHEMA,
    "properties": {
        **{k: v for k, v in _OPENAI_SCHEMA["properties"].items() if k not in ("model", "api")},
        "deployment": {"type": "string", "minLength": 1},
        "api_version": {"type": "string", "minLength": 1},
    },
    "required": ["deployment", "base_url"],
}

_BEDROCK_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model": {"type": "string", "minLength": 1},
        "region": {"type": "string", "minLength": 1},
        "base_url": {"type": "string", "minLength": 1},
        "profile": {"type": "string", "minLength": 1},
        "cache_points": {"type": "boolean"},
        "api_key": {"type": "string"},
        "api_key_env": {"type": "string", "minLength": 1},
        "options": {"type": "object"},
        **{k: _OPENAI_SCHEMA["properties"][k] for k in ("timeout", "deadline", "max_retries")},
        **{k: _OPENAI_SCHEMA["properties"][k] for k in ("max_answer_chars", "max_argument_chars")},
    },
    "required": ["model"],
    "additionalProperties": False,
}

_LOCAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "model_path": {"type": ["string", "null"], "x-path": True},
        "options": {"type": "object"},
        "n_ctx": {"type": "integer", "minimum": 256},
        "threads": {"type": "integer", "minimum": 1},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "progress": {"type": "boolean"},
    },
    "additionalProperties": False,
}

_SCRIPTED_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "script": {
            "type": "array",
            "items": {
                "anyOf": [
                    {"type": "string"},
                    {
                        "type": "object",
                        "properties": {
                            "text": {"type": "string"},
                            "tool_calls": {
                                "type": "array",
                                "minItems": 1,
                                "items": {
                                    "type": "object",
                                    "properties": {
                                        "name": {"type": "string", "minLength": 1},
                                        "arguments": {"type": "object"},
                                        "id": {"type": "string", "minLength": 1},
                                    },
                                    "required": ["name"],
                                    "additionalProperties": False,
                                },
                            },
                        },
                        "required": ["tool_calls"],
                        "additionalProperties": False,
                    },
                ]
            },
            "minItems": 1,
        },
        "chunk": {"type": "integer", "minimum": 1},
        "token_delay": {"type": "number", "minimum": 0},
        "repeat": {"type": "boolean"},
    },
    "required": ["script"],
    "additionalProperties": False,
}


# The native providers share the HTTP options of ``openai`` (not api_key_env's default).
_NATIVE_OPTIONS: dict[str, Any] = {k: v for k, v in _OPENAI_SCHEMA["properties"].items() if k != "api"}
_ANTHROPIC_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_NATIVE_OPTIONS,
        "max_tokens": {"type": "integer", "minimum": 1},
        "cache_control": {"type": ["boolean", "object"]},
    },
    "required": ["model"],
    "additionalProperties": False,
}
_GEMINI_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": dict(_NATIVE_OPTIONS),
    "required": ["model"],
    "additionalProperties": False,
}


def anthropic_model(**options: Any) -> Any:
    """An :class:`~beamfilter_core.AnthropicChatModel` (Anthropic's Messages API)."""
    from ._models._anthropic import AnthropicChatModel

    return AnthropicChatModel(**options)


def gemini_model(**options: Any) -> Any:
    """A :class:`~beamfilter_core.GeminiChatModel` (Gemini's generateContent API)."""
    from ._models._gemini import GeminiChatModel

    return GeminiChatModel(**options)


def openai_model(**options: Any) -> Any:
    """An :class:`~beamfilter_core.OpenAIChatModel` (any OpenAI-compatible server)."""
    from ._models._openai import OpenAIChatModel

    return OpenAIChatModel(**options)


def azure_openai_model(**options: Any) -> Any:
    """An :class:`~beamfilter_core.AzureOpenAIChatModel` (chat completions on an Azure OpenAI resource)."""
    from ._models._azure import AzureOpenAIChatModel

    return AzureOpenAIChatModel(**options)


def bedrock_model(**options: Any) -> Any:
    """A :class:`~beamfilter_core.BedrockChatModel` (Converse; extra ``beamfilter-core[bedrock]``)."""
    from ._models._bedrock import BedrockChatModel

    return BedrockChatModel(**options)


def local_model(*, build: BuildContext | None = None, **options: Any) -> Any:
    """The embedded llama.cpp model (extra ``beamfilter-core[local]``).

    A relative ``model_path`` is resolved against the config file's folder.
    """
    from ._models._local import LocalModel  # type: ignore[import-not-found,unused-ignore]

    path = options.get("model_path")
    if isinstance(path, str):
        path = os.path.expanduser(path)
        if build is not None and build.config_dir and not os.path.isabs(path):
            path = os.path.join(build.config_dir, path)
        options["model_path"] = path
    return LocalModel(**options)


def _local_requirements() -> str | None:
    from ._models._local import LocalModel  # type: ignore[import-not-found,unused-ignore]

    return LocalModel.missing()


def _bedrock_requirements() -> str | None:
    if importlib.util.find_spec("botocore") is not None:
        return None
    from ._models._bedrock_wire import missing_botocore

    return str(missing_botocore())


def scripted_model(**options: Any) -> Any:
    """A :class:`~beamfilter_core.ScriptedModel` replaying ``script`` (tests, docs, demos)."""
    from ._messages import ToolCall
    from ._models._scripted import ScriptedModel
    from ._records import ChatResponse

    # a table { tool_calls = [{ name = "...", arguments = {...} }], text = "..." } asks for tools
    script = [
        item
        if isinstance(item, str)
        else ChatResponse.tool_calls(
            *(
                ToolCall(c["name"], c.get("arguments", {}), *([c["id"]] if "id" in c else []))
                for c in item["tool_calls"]
            ),
            text=item.get("text"),
        )
        for item in options.pop("script")
    ]
    return ScriptedModel(script, **options)


@hookimpl
def beamfilter_register_models() -> list[ModelSpec]:
    """The chat model providers shipped with beamfilter-core."""
    return [
        ModelSpec("openai", openai_model, _OPENAI_SCHEMA, "OpenAI-compatible chat completions over HTTP"),
        ModelSpec("anthropic", anthropic_model, _ANTHROPIC_SCHEMA, "Anthropic Messages API (/v1/messages)"),
        ModelSpec("gemini", gemini_model, _GEMINI_SCHEMA, "Gemini generateContent API"),
        ModelSpec("azure_openai", azure_openai_model, _AZURE_SCHEMA, "Azure OpenAI chat completions (a deployment)"),
        ModelSpec(
            "bedrock",
            bedrock_model,
            _BEDROCK_SCHEMA,
            "Amazon Bedrock Converse (extra: bedrock)",
            requirements=_bedrock_requirements,
        ),
        ModelSpec(
            "local",
            local_model,
            _LOCAL_SCHEMA,
            "embedded llama.cpp model (extra: beamfilter-core[local])",
            requirements=_local_requirements,
        ),
        ModelSpec("scripted", scripted_model, _SCRIPTED_SCHEMA, "replays scripted answers (tests, docs, demos)"),
    ]
