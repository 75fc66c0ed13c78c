"""Every built-in and memory filter (and the mcp and shell toolsets) declares its options once: the
spec's JSON schema is the one its factory checks Python calls against."""

from __future__ import annotations

import pytest

from beamfilter_core import Registry
from beamfilter_core._options import declared_schema


@pytest.mark.packages  # counts the memory filters too
def test_every_spec_schema_is_its_factory_schema() -> None:
    registry = Registry()
    specs = [
        item
        for item in (*registry.filters(), *registry.toolsets())
        if item.plugin in ("builtins", "memory") and item.name != "durable_steps"
    ]
    names = sorted(item.name for item in specs)
    assert len(names) == 31, names  # 27 built-in filters, 2 memory filters, the mcp and shell toolsets
    undeclared = [item.name for item in specs if declared_schema(item.spec.factory) is not item.spec.options_schema]
    assert undeclared == []
