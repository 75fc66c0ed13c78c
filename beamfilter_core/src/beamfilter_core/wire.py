"""The OpenAI Chat Completions wire as data, for plugins that speak it (``beamfilter serve``
answers in it): a :class:`~beamfilter_core.Message` as a ``messages[]`` entry, and a
completion's JSON as a :class:`~beamfilter_core.ChatResponse`.

Sans-IO: no HTTP, no client. The model providers of the core use the same functions.
"""

from __future__ import annotations

from ._models._wire import message_to_json, parse_completion, parse_usage

__all__ = ["message_to_json", "parse_completion", "parse_usage"]
