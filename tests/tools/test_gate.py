"""The gate (noxfile.py, ./run test): which session runs which tests, and the coverage lines."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PACKAGE_TEST_FOLDERS

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("noxfile_under_test", ROOT / "noxfile.py")
assert _spec is not None
assert _spec.loader is not None
noxfile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(noxfile)


def test_the_package_sessions_and_the_isolated_marker_name_the_same_folders() -> None:
    folders = {folder.removeprefix("tests/") for _extras, folder in noxfile.PACKAGES.values()}
    assert folders == PACKAGE_TEST_FOLDERS
    assert noxfile.nox.options.sessions == ["lint", "typecheck", "cross", "tests", "alone", "unit", "coverage"]


def test_each_distribution_is_installed_alone_with_each_extra_it_declares() -> None:
    assert {name: noxfile.declared_extras(name) for name in (*noxfile.PACKAGES, "beamfilter_server", "beamfilter")} == {
        "beamfilter_core": ["bedrock", "local"],
        "beamfilter_builtins": ["embeddings", "mcp", "otel"],
        "beamfilter_memory": ["postgres", "redis"],
        "beamfilter_durable": ["memory", "postgres"],
        "beamfilter_server": [],
        "beamfilter": ["durable", "server"],
    }
    plugins = [
        {"name": "core", "status": "loaded", "error": None},
        {"name": "durable", "status": "failed", "error": "ModuleNotFoundError: No module named 'beamfilter_memory'"},
        {"name": "server", "status": "blocked", "error": "not listed in BEAMFILTER_PLUGINS"},
    ]
    listing = json.dumps({"core_version": "0.1.0", "plugins": plugins})
    assert noxfile.sibling_folders("beamfilter_durable", "memory") == ["./beamfilter_memory"]
    assert noxfile.sibling_folders("beamfilter_durable", "postgres") == []
    assert noxfile.sibling_folders("beamfilter", "server") == ["./beamfilter_server"]
    assert noxfile.failed_plugins(listing) == ["durable: ModuleNotFoundError: No module named 'beamfilter_memory'"]


def _collected(*args: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    return [line for line in out.splitlines() if "::" in line]


@pytest.mark.slow
def test_cross_takes_only_what_the_package_sessions_leave() -> None:
    # a package's own test is `isolated` (its package session runs it) ...
    chain = _collected("tests/core/test_chain.py")
    assert chain
    assert _collected("tests/core/test_chain.py", "-m", "not isolated") == []
    # ... one marked `packages` is not (cross runs it), nor is any test outside the package folders
    needs_siblings = _collected("tests/core/test_presets.py", "-m", "packages")
    assert needs_siblings
    assert _collected("tests/core/test_presets.py", "-m", "packages and isolated") == []
    assert _collected("tests/e2e", "-m", "isolated") == []


def test_the_coverage_summary_names_totals_floor_and_the_least_covered() -> None:
    report = {
        "totals": {"percent_covered": 91.26, "covered_lines": 900, "num_statements": 960, "covered_branches": 300,
                   "num_branches": 355},
        "files": {
            "a.py": {"summary": {"percent_covered": 99.0}},
            "b.py": {"summary": {"percent_covered": 50.04}},
            "c.py": {"summary": {"percent_covered": 75.5}},
        },
    }  # fmt: skip
    assert noxfile.coverage_summary(report, 90.0, worst=2) == [
        "coverage 91.3 % (floor 90.0 %): lines 900/960, branches 300/355",
        "least covered modules (all of them: .venv/bin/coverage report --rcfile=pyproject.toml):",
        "   50.0 %  b.py",
        "   75.5 %  c.py",
    ]


def _private_modules(package: str) -> set[str]:
    folder = ROOT / package / "src" / package
    names = {p.stem if p.is_file() else p.name for p in folder.iterdir() if p.name.startswith("_")}
    return {f"{package}.{name}" for name in names if not name.startswith("__")}


def _banned(config: Path) -> set[str]:
    import tomllib

    data = tomllib.loads(config.read_text(encoding="utf-8"))
    return set(data["tool"]["ruff"]["lint"]["flake8-tidy-imports"]["banned-api"])


def test_every_private_module_of_core_and_memory_is_banned_outside_its_package() -> None:
    core, memory = _private_modules("beamfilter_core"), _private_modules("beamfilter_memory")
    assert "beamfilter_core._kernel" in core
    assert "beamfilter_memory._stores" in memory
    assert _banned(ROOT / "pyproject.toml") == core | memory  # builtins, durable, server
    assert _banned(ROOT / "beamfilter_core" / "pyproject.toml") == memory  # the core may import its own
    assert _banned(ROOT / "beamfilter_memory" / "pyproject.toml") == core
