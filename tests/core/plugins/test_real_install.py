"""A real install: beamfilter-core, the example plugin beamfilter-shout and the broken
beamfilter-broken are built as wheels and pip-installed into a fresh virtual environment
(no system site-packages). Then the ``beamfilter`` command of that environment lists
them, a config enables the plugin's filters by name, a run applies them, and the example
package's own test suite passes there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import fresh_venv as make_venv
from _support import run_clean

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = [ROOT / "beamfilter_core", ROOT / "examples" / "beamfilter-shout", ROOT / "examples" / "beamfilter-broken"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_venv(tmp_path_factory.mktemp("real-install"), PACKAGES)


def test_the_fresh_venv_is_isolated(fresh_venv: Path) -> None:
    done = run_clean(
        fresh_venv / "bin" / "python", "-c", "import beamfilter_core, sys; print(beamfilter_core.__file__, sys.prefix)"
    )
    assert done.returncode == 0, done.stderr
    module, prefix = done.stdout.split()
    assert module.startswith(str(fresh_venv))  # installed from the wheel, not the source tree
    assert prefix == str(fresh_venv)
    builtins = run_clean(fresh_venv / "bin" / "python", "-I", "-c", "import beamfilter_builtins")
    assert builtins.returncode == 1  # only core and the example plugins are installed


def test_plugins_lists_the_example_and_the_broken_plugin(fresh_venv: Path) -> None:
    done = run_clean(fresh_venv / "bin" / "beamfilter", "plugins", "--json")
    assert done.returncode == 0, done.stderr
    plugins = {p["name"]: p for p in json.loads(done.stdout)["plugins"]}
    assert sorted(plugins) == ["broken", "core", "shout"]
    shout = plugins["shout"]
    assert (shout["status"], shout["distribution"], shout["version"], shout["filters"]) == (
        "loaded",
        "beamfilter-shout",
        "0.1.0",
        ["shout", "sign_off"],
    )
    broken = plugins["broken"]
    assert (broken["status"], broken["distribution"], broken["version"]) == ("failed", "beamfilter-broken", "0.0.1")
    assert broken["error"] == "ModuleNotFoundError: No module named 'beamfilter_missing_dependency'"
    text = run_clean(fresh_venv / "bin" / "beamfilter", "plugins")
    assert "\nbroken  [failed]  beamfilter-broken 0.0.1\n" in text.stdout
    assert "\nshout  [loaded]  beamfilter-shout 0.1.0\n" in text.stdout


def test_a_config_enables_the_plugin_filters_and_a_run_applies_them(fresh_venv: Path, tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["hello from the plugin"]\n\n'
        '[[filters]]\nuse = "sign_off"\ntext = "-- bye"\n\n'
        '[[filters]]\nuse = "shout:shout"\n',
        encoding="utf-8",
    )
    done = run_clean(fresh_venv / "bin" / "beamfilter", "run", config, "hi")
    assert done.returncode == 0, done.stderr
    # the stream, upper-cased by the token transform, then the sign-off the turn filter
    # added after streaming: the final answer is what the user sees
    assert done.stdout == "HELLO FROM THE PLUGIN\n-- bye\n"
    assert done.stderr.startswith("beamfilter plugin 'broken' from beamfilter-broken 0.0.1 failed to load")
    as_json = run_clean(fresh_venv / "bin" / "beamfilter", "run", config, "hi", "--json")
    assert json.loads(as_json.stdout)["message"]["content"] == "HELLO FROM THE PLUGIN\n-- bye"
    chain = run_clean(fresh_venv / "bin" / "beamfilter", "chain", config)
    assert "\nturn\n  └─ sign_off (shout:sign_off)\n     └─ [the tool loop]\n" in chain.stdout
    assert "[model tokens] → shout (shout:shout, answer) → [output]" in chain.stdout


def test_strict_mode_fails_on_the_broken_plugin_and_disable_recovers(fresh_venv: Path, tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text('[model]\nuse = "scripted"\nscript = ["ok"]\n', encoding="utf-8")
    strict = run_clean(fresh_venv / "bin" / "beamfilter", "run", config, "hi", env={"BEAMFILTER_STRICT_PLUGINS": "1"})
    assert strict.returncode == 2
    assert "  - model.use: beamfilter plugin 'broken' from beamfilter-broken 0.0.1 failed to load" in strict.stderr
    config.write_text('[model]\nuse = "scripted"\nscript = ["ok"]\n[plugins]\ndisable = ["broken"]\n', encoding="utf-8")
    recovered = run_clean(
        fresh_venv / "bin" / "beamfilter", "run", config, "hi", env={"BEAMFILTER_STRICT_PLUGINS": "1"}
    )
    assert (recovered.returncode, recovered.stdout, recovered.stderr) == (0, "ok\n", "")


def test_the_example_package_tests_pass_in_the_fresh_venv(fresh_venv: Path) -> None:
    tests = ROOT / "examples" / "beamfilter-shout"
    done = run_clean(fresh_venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", cwd=tests)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].startswith("6 passed")
