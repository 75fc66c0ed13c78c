"""pytest plugin for ``tools/mutants.py``: label the coverage of each test with its node id.

Coverage runs from before pytest starts (``coverage run -m pytest``), so lines executed
while modules are imported are recorded too, under the empty label.
"""

from __future__ import annotations

from collections.abc import Iterator

import coverage
import pytest


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    current = coverage.Coverage.current()
    if current is not None:
        current.switch_context(item.nodeid)
    yield
    if current is not None:
        current.switch_context("")
