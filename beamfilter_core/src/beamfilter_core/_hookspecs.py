"""The hooks a beamfilter plugin may implement (pluggy project name ``beamfilter``).

A plugin is a module named by an entry point in the ``beamfilter`` group; it marks its
functions with ``@hookimpl`` (imported from ``beamfilter_core``). Each hook returns a
list of records; the chain order never comes from plugins, only from the config list.
"""

from __future__ import annotations

import pluggy

from ._specs import CommandSpec, FilterSpec, ModelSpec, PresetSpec, SectionSpec, StoreSpec, ToolsetSpec

PROJECT = "beamfilter"
hookspec = pluggy.HookspecMarker(PROJECT)
#: Marks a plugin's hook implementations: ``@hookimpl def beamfilter_register_filters(): ...``
hookimpl = pluggy.HookimplMarker(PROJECT)


@hookspec
def beamfilter_register_filters() -> list[FilterSpec]:  # type: ignore[empty-body]
    """Return the filters this plugin provides."""


@hookspec
def beamfilter_register_stores() -> list[StoreSpec]:  # type: ignore[empty-body]
    """Return the memory stores this plugin provides."""


@hookspec
def beamfilter_register_models() -> list[ModelSpec]:  # type: ignore[empty-body]
    """Return the chat model providers this plugin provides."""


@hookspec
def beamfilter_register_presets() -> list[PresetSpec]:  # type: ignore[empty-body]
    """Return the presets (named bundles of filters) this plugin provides."""


@hookspec
def beamfilter_register_sections() -> list[SectionSpec]:  # type: ignore[empty-body]
    """Return the top-level config sections this plugin reads (``[durable]``...)."""


@hookspec
def beamfilter_register_commands() -> list[CommandSpec]:  # type: ignore[empty-body]
    """Return the ``beamfilter`` sub-commands this plugin adds (``beamfilter durable ...``)."""


@hookspec
def beamfilter_register_tools() -> list[ToolsetSpec]:  # type: ignore[empty-body]
    """Return the toolsets this plugin provides (enabled as ``[[tools]] use = "NAME"``)."""
