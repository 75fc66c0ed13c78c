"""The proof of ``beamfilter new plugin``: a generated plugin, built as a wheel and installed
with beamfilter-core (also a wheel) into a fresh virtual environment, passes its own tests
there, ``mypy --strict`` and ruff, ``beamfilter plugins check``, and a config enables its
filters and toolset by name. Nothing is edited between generating and checking.

The environment is built once per test session; pip resolves the core's dependencies from
what ``./run setup`` already fetched (its cache or the configured index).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from _support import fresh_venv, run_clean

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def generated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the generated plugin's folder, the fresh venv holding its wheel and beamfilter-core's)."""
    root = tmp_path_factory.mktemp("authoring")
    plugin = root / "beamfilter-greeter"
    made = run_clean(
        sys.executable,
        "-m",
        "beamfilter_core",
        "new",
        "plugin",
        "greeter",
        "--filter",
        "greet",
        "--filter",
        "stamp",
        "--toolset",
        "helper",
        "--directory",
        plugin,
    )
    assert made.returncode == 0, made.stderr
    env_dir = fresh_venv(root, [ROOT / "beamfilter_core", plugin])
    return plugin, env_dir


def test_the_generated_tests_pass_in_a_fresh_venv(generated: tuple[Path, Path]) -> None:
    plugin, env_dir = generated
    done = run_clean(env_dir / "bin" / "python", "-m", "pytest", "-q", cwd=plugin)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("13 passed")
    # the plugin ran from the wheel in the venv, not from the source folder
    where = run_clean(env_dir / "bin" / "python", "-c", "import beamfilter_greeter; print(beamfilter_greeter.__file__)")
    assert where.stdout.startswith(str(env_dir))


def test_the_generated_package_passes_mypy_strict_and_ruff(generated: tuple[Path, Path]) -> None:
    plugin, env_dir = generated
    # mypy of the test tools, reading the packages installed in the fresh venv
    typed = run_clean(
        sys.executable,
        "-m",
        "mypy",
        "--python-executable",
        env_dir / "bin" / "python",
        "--cache-dir",
        plugin.parent / "mypy-cache",
        cwd=plugin,
    )
    assert (typed.returncode, typed.stdout.strip()) == (0, "Success: no issues found in 5 source files"), typed.stdout
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        linted = run_clean(sys.executable, "-m", "ruff", *command, cwd=plugin)
        assert linted.returncode == 0, linted.stdout + linted.stderr


def test_plugins_check_finds_nothing(generated: tuple[Path, Path]) -> None:
    _, env_dir = generated
    done = run_clean(env_dir / "bin" / "beamfilter", "plugins", "check", "beamfilter-greeter")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == (
        "beamfilter-greeter 0.1.0: ok (plugin 'greeter': filter 'greet', filter 'stamp', toolset 'helper')\n"
    )
    everything = run_clean(env_dir / "bin" / "beamfilter", "plugins", "check")
    assert (everything.returncode, everything.stdout) == (0, done.stdout)


def test_a_config_enables_the_new_filters_by_name(generated: tuple[Path, Path], tmp_path: Path) -> None:
    _, env_dir = generated
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["hello"]\n\n'
        '[[filters]]\nuse = "greet"\nnote = "-- greeted"\n\n'
        '[[filters]]\nuse = "greeter:stamp"\nname = "stamped"\nnote = "-- stamped"\n\n'
        '[[tools]]\nuse = "helper"\ngreeting = "Hi"\n',
        encoding="utf-8",
    )
    done = run_clean(env_dir / "bin" / "beamfilter", "run", config, "hi")
    assert (done.returncode, done.stdout, done.stderr) == (0, "hello\n-- stamped\n-- greeted\n", "")
    chain = run_clean(env_dir / "bin" / "beamfilter", "chain", config)
    assert "\nturn\n  └─ greet (greeter:greet)\n     └─ stamped (greeter:stamp)\n" in chain.stdout
