"""Plugins that are wrong on purpose, shared by the registry tests and the plugin fault tests."""

from __future__ import annotations

from beamfilter_core import FilterSpec, hookimpl


class Misspelt:
    """A plugin whose one hook is misspelt (``beamfilter_register_filterz``): pluggy refuses it."""

    @hookimpl
    def beamfilter_register_filterz(self) -> list[FilterSpec]:
        return []
