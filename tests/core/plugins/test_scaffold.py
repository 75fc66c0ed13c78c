"""``beamfilter new plugin``: the files it writes, the names it refuses, and generated code
that ruff passes as written for every combination of options (the real install, tests and
mypy --strict of a generated plugin are in test_scaffold_install.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from beamfilter_core._cli import main
from beamfilter_core._scaffold import PluginPlan, plan_plugin, render_plugin, write_plugin
from beamfilter_core.errors import ConfigError


def test_the_cli_writes_the_package_in_the_example_layout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["new", "plugin", "echo"]) == 0
    out, err = capsys.readouterr()
    root = tmp_path / "beamfilter-echo"
    written = sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())
    assert written == [
        ".github/workflows/ci.yml",
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "src/beamfilter_echo/__init__.py",
        "src/beamfilter_echo/_filters.py",
        "src/beamfilter_echo/py.typed",
        "tests/conftest.py",
        "tests/test_echo.py",
    ]
    assert err == ""
    assert out.startswith(f"wrote beamfilter-echo (9 files) in {root}\n  .github/workflows/ci.yml\n")
    assert out.endswith(
        "next, in that folder (docs/publishing.md walks through each step):\n"
        "  python -m venv .venv && . .venv/bin/activate\n"
        "  python -m pip install 'beamfilter-core>=0.1,<0.2'\n"
        "  python -m pip install -e '.[test]'\n"
        "  python -m pytest && python -m mypy && python -m ruff check .\n"
        "  beamfilter plugins check beamfilter-echo\n"
    )
    pyproject = (root / "pyproject.toml").read_text(encoding="utf-8")
    assert '[project.entry-points.beamfilter]\necho = "beamfilter_echo"\n' in pyproject
    assert 'dependencies = ["beamfilter-core>=0.1,<0.2"]' in pyproject
    assert "def anyio_backend() -> str:" in (root / "tests/conftest.py").read_text(encoding="utf-8")
    # name is the core's option: the generated schema does not declare it
    filters = (root / "src/beamfilter_echo/_filters.py").read_text(encoding="utf-8")
    assert '"properties": {"note": {"type": "string", "default": ""}}' in filters
    assert '"name"' not in filters


def test_a_store_brings_the_memory_package(tmp_path: Path) -> None:
    files = render_plugin(plan_plugin("vault", toolset="keys", store="vault+kv"))
    assert sorted(files) == [
        ".github/workflows/ci.yml",
        ".gitignore",
        "README.md",
        "pyproject.toml",
        "src/beamfilter_vault/__init__.py",
        "src/beamfilter_vault/_store.py",
        "src/beamfilter_vault/_tools.py",
        "src/beamfilter_vault/py.typed",
        "tests/conftest.py",
        "tests/test_vault.py",
    ]
    assert 'dependencies = ["beamfilter-core>=0.1,<0.2", "beamfilter-memory>=0.1,<0.2"]' in files["pyproject.toml"]
    assert 'python -m pip install "beamfilter-core>=0.1,<0.2" "beamfilter-memory>=0.1,<0.2"' in files["README.md"]
    assert 'SCHEME: Final = "vault+kv"' in files["src/beamfilter_vault/_store.py"]
    assert "class VaultKvStore(StoreBase):" in files["src/beamfilter_vault/_store.py"]


def test_an_existing_folder_is_never_overwritten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "mine"
    target.mkdir()
    (target / "keep.txt").write_text("mine", encoding="utf-8")
    assert main(["new", "plugin", "echo", "--directory", str(target)]) == 2
    assert capsys.readouterr().err == (
        f"beamfilter new: {target} already exists and is not empty; choose another folder with --directory.\n"
    )
    assert [p.name for p in target.iterdir()] == ["keep.txt"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["Echo"],
            "the plugin name is 'Echo'; use 1 to 24 lower-case letters, digits and underscores, starting with a "
            "letter, and not a Python keyword (e.g. 'shout' or 'sign_off').",
        ),
        (
            ["echo", "--filter", "ok", "--filter", "class"],
            "--filter #2 is 'class'; use 1 to 24 lower-case letters, digits and underscores, starting with a "
            "letter, and not a Python keyword (e.g. 'shout' or 'sign_off').",
        ),
        (["echo", "--filter", "a", "--filter", "a"], "--filter 'a' is given twice; each filter needs its own name."),
        (
            ["echo", "--toolset", "t", "--filter", "t_tools"],
            "--filter t_tools would clash with the toolset's factory t_tools; rename one.",
        ),
        (
            ["echo", "--store", "My_DB"],
            "--store is 'My_DB'; give a URL scheme of 1 to 24 characters: lower-case letters, digits, '+', '-' or "
            "'.', starting with a letter (e.g. 'mydb' for mydb://...).",
        ),
        (
            ["a" * 25],
            f"the plugin name is {'a' * 25!r}; use 1 to 24 lower-case letters, digits and underscores, starting "
            "with a letter, and not a Python keyword (e.g. 'shout' or 'sign_off').",
        ),
    ],
)
def test_unusable_names_are_refused(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["new", "plugin", *argv, "--directory", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == f"beamfilter new: {message}\n"
    assert not (tmp_path / "out").exists()


def test_plan_plugin_raises_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"^the plugin name is 'with-dash'; use 1 to 24"):
        plan_plugin("with-dash")


LONGEST = "a" * 24


@pytest.mark.parametrize(
    "plan",
    [
        plan_plugin("echo"),
        plan_plugin("tools_only", toolset="helper"),
        plan_plugin("store_only", store="kv"),
        plan_plugin(LONGEST, [LONGEST, LONGEST[:23] + "b", LONGEST[:23] + "c"], LONGEST, LONGEST[:22] + "-z"),
    ],
    ids=["one-filter", "toolset", "store", "longest-names"],
)
def test_generated_code_is_ruff_clean_as_written(plan: PluginPlan, tmp_path: Path) -> None:
    root = tmp_path / "plugin"
    write_plugin(plan, root)
    for command in (["check", "--no-cache", "."], ["format", "--check", "--no-cache", "."]):
        done = subprocess.run(
            [sys.executable, "-m", "ruff", *command], cwd=root, capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
@pytest.mark.packages
def test_every_option_generates_a_plugin_whose_tests_and_mypy_pass(tmp_path: Path) -> None:
    """Filters, a toolset and a store at once (the store needs beamfilter-memory, so this
    runs in the development environment, the plugin installed as pip would: package and
    dist-info on the path)."""
    plan = plan_plugin("every", ["first", "second"], toolset="helper", store="every+kv")
    root = tmp_path / "beamfilter-every"
    write_plugin(plan, root)
    site = tmp_path / "site"
    (site / "beamfilter_every-0.1.0.dist-info").mkdir(parents=True)
    (site / "beamfilter_every-0.1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: beamfilter-every\nVersion: 0.1.0\n", encoding="utf-8"
    )
    (site / "beamfilter_every-0.1.0.dist-info" / "entry_points.txt").write_text(
        "[beamfilter]\nevery = beamfilter_every\n", encoding="utf-8"
    )
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("BEAMFILTER_", "PYTHON", "MYPY"))}
    environ["PYTHONPATH"] = os.pathsep.join([str(site), str(root / "src")])
    tested = subprocess.run(
        [sys.executable, "-m", "pytest", "-q"], cwd=root, env=environ, capture_output=True, text=True, check=False
    )
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert tested.stdout.strip().splitlines()[-1].startswith("16 passed")
    typed = subprocess.run(
        [sys.executable, "-m", "mypy", "--cache-dir", str(tmp_path / "mypy-cache")],
        cwd=root,
        env=environ,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (typed.returncode, typed.stdout.strip()) == (0, "Success: no issues found in 6 source files"), typed.stdout
