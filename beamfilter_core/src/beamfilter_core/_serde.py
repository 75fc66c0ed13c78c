"""The cattrs converter that turns messages, records and pause states into JSON and back."""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, TypeVar

import cattrs
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from ._messages import ContentPart, Message, Reasoning, ToolCall
from ._records import ChatRequest
from ._tools import Tool

T = TypeVar("T")

converter = cattrs.Converter(omit_if_default=False)


def _unstructure_mapping(value: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _plain(item) for key, item in value.items()}


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return _unstructure_mapping(value)
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    return converter.unstructure(value) if hasattr(value, "__attrs_attrs__") else value


def _unstructure_content(content: Any) -> Any:
    if content is None or isinstance(content, str):
        return content
    return [converter.unstructure(part) for part in content]


def _structure_content(value: Any) -> str | tuple[ContentPart, ...] | None:
    if value is None or isinstance(value, str):
        return value
    return tuple(converter.structure(part, ContentPart) for part in value)


def _unstructure_message(message: Message) -> dict[str, Any]:
    data: dict[str, Any] = {"role": message.role, "content": _unstructure_content(message.content)}
    if message.tool_calls:
        data["tool_calls"] = [converter.unstructure(call) for call in message.tool_calls]
    if message.tool_call_id is not None:
        data["tool_call_id"] = message.tool_call_id
    if message.name is not None:
        data["name"] = message.name
    if message.reasoning:
        data["reasoning"] = [
            {"provider": item.provider, "text": item.text, "data": _plain(item.data)} for item in message.reasoning
        ]
    return data


def _structure_message(data: Mapping[str, Any], _: Any) -> Message:
    return Message(
        data["role"],
        _structure_content(data.get("content")),
        tuple(converter.structure(call, ToolCall) for call in data.get("tool_calls", ())),
        data.get("tool_call_id"),
        data.get("name"),
        tuple(
            Reasoning(r["provider"], r.get("text", ""), dict(r.get("data") or {})) for r in data.get("reasoning", ())
        ),
    )


def _unstructure_call(call: ToolCall) -> dict[str, Any]:
    data: dict[str, Any] = {"id": call.id, "name": call.name, "arguments": _plain(call.arguments)}
    if call.raw_arguments is not None:
        data["raw_arguments"] = call.raw_arguments
    return data


def _structure_call(data: Mapping[str, Any], _: Any) -> ToolCall:
    return ToolCall(data["name"], dict(data.get("arguments") or {}), data["id"], data.get("raw_arguments"))


def _unstructure_tool(tool: Tool) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "parameters": tool.parameters}


def _structure_tool(data: Mapping[str, Any], _: Any) -> Tool:
    return Tool.declaration(data["name"], data.get("description", ""), data.get("parameters") or {})


converter.register_unstructure_hook(Message, _unstructure_message)
converter.register_structure_hook(Message, _structure_message)
converter.register_unstructure_hook(ToolCall, _unstructure_call)
converter.register_structure_hook(ToolCall, _structure_call)
converter.register_unstructure_hook(Tool, _unstructure_tool)
converter.register_structure_hook(Tool, _structure_tool)
converter.register_unstructure_hook(MappingProxyType, _unstructure_mapping)
converter.register_unstructure_hook_func(
    lambda cls: cls in (Mapping, Mapping[str, Any], dict[str, Any]), _unstructure_mapping
)
converter.register_structure_hook_func(
    lambda cls: cls in (Mapping[str, Any], Mapping[str, Any] | None), lambda value, _: value
)
converter.register_structure_hook(
    str | Mapping[str, Any] | None,  # ChatRequest.tool_choice
    lambda value, _: value,
)

# A request's model override is a live object, not data.
converter.register_unstructure_hook(
    ChatRequest, make_dict_unstructure_fn(ChatRequest, converter, model=override(omit=True))
)
converter.register_structure_hook(
    ChatRequest, make_dict_structure_fn(ChatRequest, converter, model=override(omit=True))
)


def unstructure(value: Any) -> Any:
    """Turn an attrs record into plain JSON-compatible data."""
    return converter.unstructure(value)


def structure(data: Any, cls: type[T]) -> T:
    """Build a ``cls`` record from plain data."""
    return converter.structure(data, cls)


def dumps(value: Any) -> str:
    """Serialise a record to JSON text."""
    return json.dumps(converter.unstructure(value), ensure_ascii=False)


def loads(text: str | bytes, cls: type[T]) -> T:
    """Deserialise JSON text written by :func:`dumps` into ``cls``."""
    return converter.structure(json.loads(text), cls)
