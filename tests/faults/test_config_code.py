"""A config file is code: what ``beamfilter chain`` runs, and what blocking a plugin holds.

``validate = "package.module:function"`` imports a module; an inspection command must not,
and a module of a blocked plugin cannot be reached by a dotted path either.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from beamfilter_core import Kernel
from beamfilter_core._cli import main
from beamfilter_core.errors import ConfigError

SIDE_EFFECT = """
from pathlib import Path
Path(__file__).with_name("imported.marker").write_text("ran")

def check(result):
    return None
"""


@pytest.fixture
def evil(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A module that leaves a marker file when imported; yields the marker's path."""
    (tmp_path / "evil_on_import.py").write_text(SIDE_EFFECT, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path / "imported.marker"
    sys.modules.pop("evil_on_import", None)


def _config(tmp_path: Path, validate: str, extra: str = "") -> Path:
    path = tmp_path / "beamfilter.toml"
    path.write_text(
        f'{extra}[model]\nuse = "scripted"\nscript = ["hi"]\n\n'
        f'[[filters]]\nuse = "validation"\nvalidate = "{validate}"\n',
        encoding="utf-8",
    )
    return path


def test_chain_imports_nothing_a_config_names_and_says_so(
    evil: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, "evil_on_import:check")
    assert main(["chain", str(config)]) == 0
    captured = capsys.readouterr()
    assert not evil.exists()
    assert "evil_on_import" not in sys.modules
    assert captured.err == "note: not imported (chain runs no code a config names): evil_on_import\n"
    assert "└─ validation (builtins:validation)" in captured.out
    # running the config does import it: a config file is code
    assert main(["run", str(config), "hello"]) == 0
    assert evil.read_text() == "ran"


def test_the_zen_of_python_is_not_printed_by_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.modules.pop("this", None)
    assert main(["chain", str(_config(tmp_path, "this:s"))]) == 0
    captured = capsys.readouterr()
    assert "Beautiful is better than ugly" not in captured.out + captured.err
    assert "this" not in sys.modules


def test_chain_imports_no_tools_module_either(evil: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sys.modules.pop("this", None)
    config = tmp_path / "tools.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["hi"]\n\n'
        '[[tools]]\nuse = "this:s"\n\n[[tools]]\nuse = "evil_on_import:check"\n',
        encoding="utf-8",
    )
    assert main(["chain", str(config)]) == 0
    captured = capsys.readouterr()
    assert "Beautiful is better than ugly" not in captured.out + captured.err
    assert "this" not in sys.modules
    assert not evil.exists()
    assert "evil_on_import" not in sys.modules
    assert captured.err == "note: not imported (chain runs no code a config names): this, evil_on_import\n"


def test_a_tools_path_into_a_disabled_plugin_is_refused(tmp_path: Path) -> None:
    config = tmp_path / "tools.toml"
    config.write_text(
        '[plugins]\ndisable = ["memory"]\n\n[model]\nuse = "scripted"\nscript = ["hi"]\n\n'
        '[[tools]]\nuse = "beamfilter_memory._stores:open_store"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config)
    assert caught.value.problems == (
        "tools[0].use: The module 'beamfilter_memory._stores' belongs to the plugin 'memory', which is blocked "
        "(disabled by Registry(disable=...)); a config cannot import it by path either.",
    )


@pytest.mark.parametrize(
    "path",
    [
        "beamfilter_memory:memory_filter",
        "beamfilter_memory._filter:memory_filter",
        "beamfilter_memory._stores:open_store",
    ],
)
def test_a_dotted_path_into_a_disabled_plugin_is_refused(path: str, tmp_path: Path) -> None:
    config = _config(tmp_path, path, extra='[plugins]\ndisable = ["memory"]\n\n')
    module = path.partition(":")[0]
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config(config)
    assert caught.value.problems == (
        f"filters[0]: The module {module!r} belongs to the plugin 'memory', which is blocked "
        "(disabled by Registry(disable=...)); a config cannot import it by path either.",
    )


def test_blocking_with_beamfilter_plugins_holds_for_dotted_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BEAMFILTER_PLUGINS", "builtins")
    config = _config(tmp_path, "beamfilter_memory._stores:open_store")
    assert main(["run", str(config), "hello"]) == 2
    err = capsys.readouterr().err
    assert err.endswith(
        "  - filters[0]: The module 'beamfilter_memory._stores' belongs to the plugin 'memory', which is blocked "
        "(not listed in BEAMFILTER_PLUGINS); a config cannot import it by path either.\n"
    )


def test_a_module_of_an_allowed_plugin_may_still_be_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAMFILTER_PLUGINS", "builtins,memory")
    kernel = Kernel.from_config(_config(tmp_path, "beamfilter_builtins._text:preview"))
    assert [f.name for f in kernel.filters] == ["validation"]
