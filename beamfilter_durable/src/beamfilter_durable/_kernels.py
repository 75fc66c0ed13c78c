"""Kernels of durable turns, rebuilt in any worker from a config reference.

A reference is a path to a ``beamfilter.toml`` or ``"package.module:attribute"`` naming a
:class:`Kernel` or a function returning one (for kernels whose tools are given in code).
The kernel gets the ``durable_steps`` filter (last, unless the config places it) and its
memory filters get a :class:`DurableStore`; nothing about it is pickled.
"""

from __future__ import annotations

import importlib
import os
from typing import TYPE_CHECKING, Any

from beamfilter_core import Filter, Kernel
from beamfilter_core.errors import ConfigError

from ._steps import STEPS_FILTER, durable_steps

if TYPE_CHECKING:
    from ._backend import DurableBackend

__all__ = ["config_reference", "durable_kernel", "kernel_from_reference"]


def config_reference(config: Any) -> str:
    """The reference a worker rebuilds ``config``'s kernel from (an absolute TOML path, or
    ``module:attribute`` as given)."""
    if isinstance(config, os.PathLike) or (
        isinstance(config, str) and (config.endswith(".toml") or os.path.isfile(config))
    ):
        return os.path.abspath(os.fspath(config))
    if isinstance(config, str) and ":" in config:
        return config
    msg = (
        f"A durable turn needs a config a worker can rebuild by name: a path to a beamfilter.toml "
        f"or 'package.module:attribute' naming a Kernel or a function returning one; got {config!r}."
    )
    raise ConfigError(msg)


def kernel_from_reference(reference: str) -> Kernel:
    """Build the (plain) kernel a reference names."""
    if reference.endswith(".toml") or ":" not in reference or os.path.isfile(reference):
        return Kernel.from_config(reference)
    module_name, _, attribute = reference.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        msg = f"The durable config reference {reference!r} cannot be imported: {type(exc).__name__}: {exc}."
        raise ConfigError(msg) from exc
    kernel = target() if callable(target) and not isinstance(target, Kernel) else target
    if not isinstance(kernel, Kernel):
        msg = f"The durable config reference {reference!r} gave {kernel!r}; it must name a Kernel or return one."
        raise ConfigError(msg)
    return kernel


_MEMORY_MODULE = "beamfilter_memory._filter"


def _with_durable_store(flt: Filter, backend: DurableBackend) -> Filter:
    store = flt.extras.get("store")
    if store is None or "window" not in flt.extras or getattr(flt.around_turn, "__module__", "") != _MEMORY_MODULE:
        return flt  # not the memory filter
    from beamfilter_memory import memory_filter

    from ._store import DurableStore

    return memory_filter(DurableStore(store, backend), window=flt.extras["window"], name=flt.name)


def durable_kernel(kernel: Kernel, backend: DurableBackend) -> Kernel:
    """``kernel`` with its LLM and tool calls as steps and its memory stores durable."""
    filters = [_with_durable_store(f, backend) for f in kernel.filters]
    placed = [i for i, f in enumerate(filters) if f.name == STEPS_FILTER]
    steps = durable_steps(backend)
    if placed:
        filters[placed[0]] = steps  # the config chose where the step boundary lies
    else:
        filters.append(steps)
    durable = kernel.with_filters(filters)
    if not kernel._pause_keys.configured:
        # Pauses of a durable turn are resumed by whichever worker runs the turn then: sign
        # them with the engine's shared secret rather than this process's random one.
        from beamfilter_core._pause import PauseKeys

        durable = durable._derived(pause_keys=PauseKeys(backend.pause_secret))
    return durable
