"""beamfilter-durable: durable turns on DBOS Transact.

A turn runs as a workflow with a deterministic id; each LLM call and each tool call is a
step. A turn survives its process, resumes on any worker, never repeats a completed step,
and a paused turn waits in the database for its decision. See docs/durable.md.
"""

from __future__ import annotations

from ._backend import DurableBackend, StepSlot, TurnInfo
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
    "TurnInfo",
    "__version__",
    "config_reference",
    "durable_kernel",
    "durable_steps",
    "idempotency_key",
    "kernel_from_reference",
    "shutdown",
]
