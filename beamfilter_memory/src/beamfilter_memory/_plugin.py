"""Entry-point module of beamfilter-memory (its hook implementations)."""

from __future__ import annotations

from beamfilter_core import CommandSpec, FilterSpec, StoreSpec, hookimpl

from ._command import configure_command, run_command
from ._filter import memory_filter
from ._long_term import long_term_memory_filter
from ._options import LONG_TERM_OPTIONS, MEMORY_OPTIONS
from ._stores import STORE_SPECS


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    """The ``memory`` filter."""
    return [
        FilterSpec(
            "memory",
            memory_filter,
            MEMORY_OPTIONS,
            "Keeps each conversation (context conversation_id) in a store; put it first.",
            scopes=("turn", "chat"),
        )
    ]


# A second implementation of the same hook (pluggy's ``specname``): one function per filter.
@hookimpl(specname="beamfilter_register_filters")
def beamfilter_register_long_term_filters() -> list[FilterSpec]:
    """The ``long_term_memory`` filter."""
    return [
        FilterSpec(
            "long_term_memory",
            long_term_memory_filter,
            LONG_TERM_OPTIONS,
            "Durable facts about each user (context user_id) in a store, told to the model every turn.",
            scopes=("turn", "chat"),
        )
    ]


@hookimpl
def beamfilter_register_stores() -> list[StoreSpec]:
    """The ``memory://``, ``sqlite:///``, ``postgresql://`` and ``redis://`` stores."""
    return list(STORE_SPECS)


@hookimpl
def beamfilter_register_commands() -> list[CommandSpec]:
    """``beamfilter memory migrate URL``."""
    return [CommandSpec("memory", configure_command, run_command, "memory store maintenance (migrate)")]
