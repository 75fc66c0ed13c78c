"""The testing kit: what beamfilter's own tests use, for your filters and plugins.

- :class:`ScriptedModel` replays answers and records requests.
- :func:`trace_filter` records the order in which hooks run.
- :func:`passthrough` is an around hook of any scope that changes nothing.
- :func:`scripted_calls` makes a ScriptedModel that asks for tool calls, then answers.
- :func:`run_turn` runs a turn streaming or not, for tests that check both paths.
- :func:`stream_tokens` and :func:`feed_tokens` drive a token transform without a kernel.
- pytest fixtures ``scripted_model`` and ``make_kernel`` (registered through the
  ``pytest11`` entry point when beamfilter-core is installed).
"""

from __future__ import annotations

from .._models._scripted import ScriptedModel
from ._helpers import (
    collect_stream,
    feed_tokens,
    passthrough,
    run_turn,
    scripted_calls,
    stream_tokens,
    trace_filter,
)

__all__ = [
    "ScriptedModel",
    "collect_stream",
    "feed_tokens",
    "passthrough",
    "run_turn",
    "scripted_calls",
    "stream_tokens",
    "trace_filter",
]
