"""Shared test configuration (helpers live in ``tests/_support.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
#: the folders of the packages' own tests (noxfile.PACKAGES): the gate runs each of them in
#: a venv holding only the core and that package, and the rest of the suite (`nox -s cross`)
#: in the project's .venv with every package
PACKAGE_TEST_FOLDERS = frozenset({"core", "builtins", "memory", "durable"})


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark a package's own tests ``isolated`` unless they need the sibling packages."""
    for item in items:
        try:
            folder = item.path.resolve().relative_to(TESTS).parts[0]
        except ValueError:  # a test outside tests/ (the example plugins' own)
            continue
        if folder in PACKAGE_TEST_FOLDERS and item.get_closest_marker("packages") is None:
            item.add_marker(pytest.mark.isolated)
