"""``beamfilter plugins check``: a plugin made by ``beamfilter new plugin`` checks clean, and
breaking each checked property in turn makes the check report it, in these exact words.

A plugin is "installed" the way pip installs one: its package and a ``.dist-info`` folder
(METADATA, entry_points.txt) in a site folder on ``sys.path``; importlib.metadata finds
it there like any installed distribution. Each case uses its own plugin name, so no
module is shared between cases.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from beamfilter_core._cli import main
from beamfilter_core._plugin_check import check_distribution
from beamfilter_core._scaffold import plan_plugin, render_plugin
from beamfilter_core.errors import ConfigError


def install(site: Path, name: str, files: dict[str, str], entry_points: dict[str, str] | None = None) -> str:
    """Put a generated plugin's package and its dist-info into ``site``; return its distribution name."""
    plan = plan_plugin(name)
    for relative, text in files.items():
        if relative.startswith("src/"):
            path = site / relative.removeprefix("src/")
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    info = site / f"{plan.module}-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {plan.dist}\nVersion: 0.1.0\n", encoding="utf-8")
    points = entry_points or {name: plan.module}
    lines = "".join(f"{key} = {value}\n" for key, value in points.items())
    (info / "entry_points.txt").write_text(f"[beamfilter]\n{lines}", encoding="utf-8")
    importlib.invalidate_caches()
    return plan.dist


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    before = set(sys.modules)
    yield folder
    for module in set(sys.modules) - before:
        if module.startswith("beamfilter_chk"):
            del sys.modules[module]


def check(dist: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    code = main(["plugins", "check", dist])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out


def test_a_generated_plugin_checks_clean(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plan = plan_plugin("chk_clean", ["first", "second"], toolset="helper")
    dist = install(site, "chk_clean", render_plugin(plan))
    assert check(dist, capsys) == (
        0,
        "beamfilter-chk-clean 0.1.0: ok (plugin 'chk_clean': filter 'first', filter 'second', toolset 'helper')\n",
    )


Edit = Callable[[dict[str, str], str], None]


def _edit(path: str, old: str, new: str) -> Edit:
    def apply(files: dict[str, str], module: str) -> None:
        key = path.format(module=module)
        assert old in files[key], (key, old)
        files[key] = files[key].replace(old, new, 1)

    return apply


def _both(first: Edit, second: Edit) -> Edit:
    def apply(files: dict[str, str], module: str) -> None:
        first(files, module)
        second(files, module)

    return apply


def _drop(path: str) -> Edit:
    def apply(files: dict[str, str], module: str) -> None:
        del files[path.format(module=module)]

    return apply


INIT = "src/{module}/__init__.py"
FILTERS = "src/{module}/_filters.py"

# case -> (how the generated plugin is broken, the problem the check reports)
BROKEN: dict[str, tuple[Edit, str]] = {
    "import": (
        _edit(INIT, "from __future__ import annotations\n", "from __future__ import annotations\n\nimport chk_gone\n"),
        "entry point 'chk_import = beamfilter_chk_import': importing it fails: "
        "ModuleNotFoundError: No module named 'chk_gone'",
    ),
    "signature": (
        _edit(INIT, "def beamfilter_register_filters()", "def beamfilter_register_filters(config)"),
        "entry point 'chk_signature = beamfilter_chk_signature': beamfilter_register_filters(config) does not "
        "match the hook beamfilter_register_filters(), which passes no arguments; remove its parameters.",
    ),
    "hook_name": (
        _edit(INIT, "def beamfilter_register_filters()", "def beamfilter_register_filter()"),
        "entry point 'chk_hook_name = beamfilter_chk_hook_name': beamfilter_register_filter is marked @hookimpl "
        "but beamfilter has no hook named 'beamfilter_register_filter'. Did you mean 'beamfilter_register_filters'?",
    ),
    "unmarked": (
        _edit(INIT, "@hookimpl\ndef beamfilter_register_filters", "def beamfilter_register_filters"),
        "entry point 'chk_unmarked = beamfilter_chk_unmarked': beamfilter_register_filters is named like a hook "
        "but is not marked @hookimpl (from beamfilter_core import hookimpl), so beamfilter never calls it.",
    ),
    "summary": (
        _edit(INIT, 'summary="appends a note to every completed answer"', 'summary=""'),
        "filter 'chk_summary': has no summary; give a one-line summary (summary=...), shown by "
        "`beamfilter plugins` and in config errors.",
    ),
    "scopes": (
        _edit(INIT, '            scopes=("turn",),\n', ""),
        "filter 'chk_scopes': declares no scopes; list the scopes its filter uses, e.g. scopes=(\"turn\",).",
    ),
    "schema": (
        _both(
            _edit(FILTERS, "@options_schema(NOTE_OPTIONS)\n", ""),
            _edit(INIT, "NOTE_OPTIONS,\n            summary", '{"type": "object"},\n            summary'),
        ),
        "filter 'chk_schema': has no options schema, so any option is accepted and a misspelt one is silently "
        'ignored; give options_schema={"type": "object", "properties": {...}, "additionalProperties": False}.',
    ),
    "invalid_schema": (
        _edit(FILTERS, '"type": "object",', '"type": "objekt",'),
        "filter 'chk_invalid_schema': options_schema is not a valid JSON schema (fastjsonschema: Unknown type).",
    ),
    "default": (
        _edit(FILTERS, '{"type": "string", "default": ""}', '{"type": "string", "default": 3}'),
        "filter 'chk_default': the option 'note' defaults to 3 (the schema's default), which fails its own "
        "schema: note must be string.",
    ),
    "factory_default": (
        _edit(FILTERS, '{"type": "string", "default": ""}', '{"enum": ["quiet", "loud"]}'),
        "filter 'chk_factory_default': the option 'note' defaults to '' (the default of chk_factory_default()), "
        "which fails its own schema: note must be one of ['quiet', 'loud'].",
    ),
    "factory": (
        _edit(FILTERS, '    """The ``chk_factory`` filter', '    raise RuntimeError("no API key")\n    """The'),
        "filter 'chk_factory': building it with default options fails: filters[0]: 'chk_factory:chk_factory' "
        "could not be built: RuntimeError: no API key",
    ),
    "py_typed": (
        _drop("src/{module}/py.typed"),
        "entry point 'chk_py_typed = beamfilter_chk_py_typed': the package 'beamfilter_chk_py_typed' has no "
        "py.typed file, so mypy ignores its type hints for your users; add an empty "
        "src/beamfilter_chk_py_typed/py.typed.",
    ),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_each_broken_property_is_reported(case: str, site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    name = f"chk_{case}"
    files = render_plugin(plan_plugin(name))
    edit, problem = BROKEN[case]
    edit(files, f"beamfilter_{name}")
    dist = install(site, name, files)
    code, out = check(dist, capsys)
    assert code == 1
    head, *problems = out.splitlines()
    assert head == f"{dist} 0.1.0: 1 problem"
    assert len(problems) == 1, out
    assert problems[0] == f"  - {problem}"


def test_every_problem_is_reported_at_once(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = render_plugin(plan_plugin("chk_all", ["first", "second"]))
    for case in ("summary", "default", "py_typed"):
        BROKEN[case][0](files, "beamfilter_chk_all")
    files["src/beamfilter_chk_all/__init__.py"] = files["src/beamfilter_chk_all/__init__.py"].replace(
        '            scopes=("turn",),\n', "", 2
    )
    dist = install(site, "chk_all", files)
    code, out = check(dist, capsys)
    assert code == 1
    assert out.splitlines() == [
        "beamfilter-chk-all 0.1.0: 6 problems",
        "  - entry point 'chk_all = beamfilter_chk_all': the package 'beamfilter_chk_all' has no py.typed file, so "
        "mypy ignores its type hints for your users; add an empty src/beamfilter_chk_all/py.typed.",
        "  - filter 'first': has no summary; give a one-line summary (summary=...), shown by `beamfilter plugins` "
        "and in config errors.",
        "  - filter 'first': declares no scopes; list the scopes its filter uses, e.g. scopes=(\"turn\",).",
        "  - filter 'first': the option 'note' defaults to 3 (the schema's default), which fails its own schema: "
        "note must be string.",
        "  - filter 'second': declares no scopes; list the scopes its filter uses, e.g. scopes=(\"turn\",).",
        "  - filter 'second': the option 'note' defaults to 3 (the schema's default), which fails its own schema: "
        "note must be string.",
    ]


@pytest.mark.packages  # its plugins' stores come from the scaffold, which builds on beamfilter-memory
def test_names_other_installed_plugins_use_are_reported(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(site, "chk_first", render_plugin(plan_plugin("chk_first", ["shared"], store="chkdb")))
    # the second distribution reuses the filter name, the store scheme and the plugin name
    files = render_plugin(plan_plugin("chk_second", ["shared"], store="chkdb"))
    dist = install(
        site, "chk_second", files, {"chk_second": "beamfilter_chk_second", "chk_first": "beamfilter_chk_second"}
    )
    code, out = check(dist, capsys)
    assert code == 1
    first = "the plugin 'chk_first' (beamfilter-chk-first)"
    assert out.splitlines() == [
        "beamfilter-chk-second 0.1.0: 3 problems",
        f"  - filter 'shared': {first} provides a filter of the same name; users who install both must write "
        "use = 'chk_second:shared'. Rename it unless that is intended.",
        f"  - store 'chkdb': the URL scheme 'chkdb' is also served by {first}; rename the scheme.",
        "  - entry point 'chk_first = beamfilter_chk_second': the plugin name 'chk_first' is also used by "
        "beamfilter-chk-first; only one of the two loads when both are installed, so rename your entry point.",
    ]


def test_an_unknown_distribution_is_a_usage_error(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    install(site, "chk_known", render_plugin(plan_plugin("chk_known")))
    assert main(["plugins", "check", "beamfilter-chk-knwn"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith(
        "beamfilter plugins: No distribution named 'beamfilter-chk-knwn' is installed in this environment. "
        "Did you mean 'beamfilter-chk-known'? Install it first (pip install -e . in its folder); installed "
        "plugin distributions: "
    )
    with pytest.raises(ConfigError, match="No distribution named 'nothing-like-it' is installed"):
        check_distribution("nothing-like-it")


def test_a_distribution_without_entry_points(site: Path, capsys: pytest.CaptureFixture[str]) -> None:
    info = site / "plain_lib-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: plain-lib\nVersion: 1.0\n", encoding="utf-8")
    importlib.invalidate_caches()
    assert check("plain-lib", capsys) == (
        1,
        "plain-lib 1.0: 1 problem\n  - plain-lib declares no entry point in the 'beamfilter' group; add "
        '[project.entry-points.beamfilter] NAME = "your_module" to pyproject.toml and reinstall.\n',
    )
