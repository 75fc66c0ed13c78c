"""beamfilter-durable: durable turns on DBOS Transact.

A turn runs as a workflow with a deterministic id; each LLM call and each tool call is a
step. A turn survives its process, resumes on any worker, never repeats a completed step,
and a paused turn waits in the database for its decision. See docs/durable.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from beamfilter_core import lazy_exports

if TYPE_CHECKING:
    from ._backend import DurableBackend, StepSlot, TurnInfo
    from ._handle import TurnHandle
    from ._kernels import config_reference, durable_kernel, kernel_from_reference
    from ._options import DEFAULT_DATABASE, DurableOptions, QueueOptions
    from ._runner import DurableRunner
    from ._runtime import shutdown
    from ._steps import IDEMPOTENCY_KEY, STEPS_FILTER, durable_steps, idempotency_key

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_DATABASE",
    "IDEMPOTENCY_KEY",
    "STEPS_FILTER",
    "DurableBackend",
    "DurableOptions",
    "DurableRunner",
    "QueueOptions",
    "StepSlot",
    "TurnHandle",
    "TurnInfo",
    "__version__",
    "config_reference",
    "durable_kernel",
    "durable_steps",
    "idempotency_key",
    "kernel_from_reference",
    "shutdown",
]

# Imported on first use: `beamfilter --help` and `beamfilter plugins` load this package's
# entry point, and should not pay for what only a command or a config section needs.
_LAZY = {
    "DurableBackend": "._backend",
    "StepSlot": "._backend",
    "TurnInfo": "._backend",
    "TurnHandle": "._handle",
    "config_reference": "._kernels",
    "durable_kernel": "._kernels",
    "kernel_from_reference": "._kernels",
    "DEFAULT_DATABASE": "._options",
    "DurableOptions": "._options",
    "QueueOptions": "._options",
    "DurableRunner": "._runner",
    "shutdown": "._runtime",
    "IDEMPOTENCY_KEY": "._steps",
    "STEPS_FILTER": "._steps",
    "durable_steps": "._steps",
    "idempotency_key": "._steps",
}

__getattr__ = lazy_exports(__name__, globals(), _LAZY)
