"""Kernels of durable turns, rebuilt in any worker from a config reference.

A reference is a path to a ``beamfilter.toml`` or ``"package.module:attribute"`` naming a
:class:`Kernel` or a function returning one (for kernels whose tools are given in code).
The kernel gets the ``durable_steps`` filter (last, unless the config places it) and its
memory filters get a :class:`DurableStore`; nothing about it is pickled.
"""

from __future__ import annotations

import importlib
import os
import sys
from typing import TYPE_CHECKING, Any

from beamfilter_core import Filter, Kernel
from beamfilter_core.errors import ConfigError

from ._steps import STEPS_FILTER, durable_steps

if TYPE_CHECKING:
    from ._backend import DurableBackend

__all__ = ["config_folder", "config_reference", "durable_kernel", "kernel_from_reference"]


def _is_file(config: Any) -> bool:
    return isinstance(config, os.PathLike) or (
        isinstance(config, str) and (config.endswith(".toml") or os.path.isfile(config))
    )


def config_folder(config: Any) -> str | None:
    """The folder of a config file (its ``kernel`` module is imported from there first), or
    None for a ``module:attribute`` reference."""
    return os.path.dirname(os.path.abspath(str(os.fspath(config)))) if _is_file(config) else None


def config_reference(config: Any) -> str:
    """The reference a worker rebuilds ``config``'s kernel from (an absolute TOML path, or
    ``module:attribute`` as given)."""
    if _is_file(config):
        return os.path.abspath(str(os.fspath(config)))
    if isinstance(config, str) and ":" in config:
        return config
    msg = (
        f"A durable turn needs a config a worker can rebuild by name: a path to a beamfilter.toml "
        f"or 'package.module:attribute' naming a Kernel or a function returning one; got {config!r}."
    )
    raise ConfigError(msg)


def kernel_from_reference(reference: str, folder: str | None = None) -> Kernel:
    """Build the (plain) kernel a reference names; a ``module:attribute`` is imported with
    ``folder`` (the config file's) first on the import path, as ``[[tools]]`` modules are."""
    if reference.endswith(".toml") or ":" not in reference or os.path.isfile(reference):
        return Kernel.from_config(reference)
    module_name, _, attribute = reference.partition(":")
    added = folder is not None and folder not in sys.path
    if added:
        sys.path.insert(0, str(folder))
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        where = f" (looked in {folder} and on sys.path)" if folder else ""
        msg = f"The durable config reference {reference!r} cannot be imported{where}: {type(exc).__name__}: {exc}."
        raise ConfigError(msg) from exc
    finally:
        if added:
            sys.path.remove(str(folder))
    kernel = target() if callable(target) and not isinstance(target, Kernel) else target
    if not isinstance(kernel, Kernel):
        msg = f"The durable config reference {reference!r} gave {kernel!r}; it must name a Kernel or return one."
        raise ConfigError(msg)
    return kernel


def _with_durable_store(flt: Filter, backend: DurableBackend) -> Filter:
    if flt.memory is None:
        return flt  # keeps no conversations
    from ._store import DurableStore

    return flt.memory.rebuild(DurableStore(flt.memory.store, backend))


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
    if not kernel.has_pause_key:
        # Pauses of a durable turn are resumed by whichever worker runs the turn then: sign
        # them with the engine's shared secret rather than this process's random one.
        durable = durable.derive(pause_key=backend.pause_secret)
    return durable
