"""One rule for relative paths in a config: they are taken from the config file's folder,
whatever the current folder is, for every option that holds one; ``beamfilter chain``
prints each as resolved."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from beamfilter_core import Kernel
from beamfilter_core._config import build_config
from beamfilter_core._paths import Place


def _project(tmp_path: Path) -> tuple[Path, Path]:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    (project / "logs").mkdir()
    (project / "skills").mkdir()
    (project / "skills" / "weather.md").write_text("---\nname: weather\ndescription: the weather\n---\nSay sunny.\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    config = project / "beamfilter.toml"
    config.write_text(
        textwrap.dedent("""
        [model]
        use = "scripted"
        script = ["ok"]

        [[filters]]
        use = "trajectory"
        path = "logs/turns.jsonl"

        [[filters]]
        use = "skills"
        folder = "skills"

        [[filters]]
        use = "tool_policy"
        rules = [{ tool = "read", kind = "path", roots = ["./data", "~/shared", "/srv/abs"], base = "data" }]
        """)
    )
    return config, elsewhere


def test_every_path_option_is_taken_from_the_config_s_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config, elsewhere = _project(tmp_path)
    project = config.parent
    monkeypatch.chdir(elsewhere)
    built = build_config(str(config))
    home = str(Path("~/shared").expanduser())
    assert built.config_dir == str(project)
    assert built.places == (
        Place("filters[0].path", "logs/turns.jsonl", f"{project}/logs/turns.jsonl"),
        Place("filters[1].folder", "skills", f"{project}/skills"),
        Place("filters[2].rules[0].roots[0]", "./data", f"{project}/data"),
        Place("filters[2].rules[0].roots[1]", "~/shared", home),
        Place("filters[2].rules[0].roots[2]", "/srv/abs", "/srv/abs"),
        Place("filters[2].rules[0].base", "data", f"{project}/data"),
    )
    policy = built.kernel.filters[2].extras["policy"]
    # a relative argument is judged from base = the config's ./data, not from the current folder
    assert policy.check("read", {"path": "notes.txt"}) is None
    assert policy.check("read", {"path": "../beamfilter.toml"}).reason == (
        f"the path resolves to '{project}/beamfilter.toml', outside the allowed roots "
        f"({project}/data, {home}, /srv/abs)"
    )
    assert built.kernel.run_sync("hi").text == "ok"
    assert (project / "logs" / "turns.jsonl").exists()
    assert list(elsewhere.iterdir()) == []


def test_without_base_a_relative_argument_is_judged_from_the_config_s_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    config = project / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n'
        '[[filters]]\nuse = "tool_policy"\nrules = [{ tool = "read", kind = "path", roots = ["./data"] }]\n'
    )
    monkeypatch.chdir(project)
    policy = Kernel.from_config(str(config)).filters[0].extras["policy"]
    assert policy.check("read", {"path": "./data/x.txt"}) is None
    # the first root is no longer the base: "secret/x" is the config folder's secret, outside ./data
    assert policy.check("read", {"path": "secret/x.txt"}).reason == (
        f"the path resolves to '{project}/secret/x.txt', outside the allowed roots ({project}/data)"
    )


def test_a_dict_config_keeps_relative_paths_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    built = build_config(
        {"model": {"use": "scripted", "script": ["ok"]}, "filters": [{"use": "trajectory", "path": "t.jsonl"}]}
    )
    assert built.config_dir is None
    assert built.places == ()


def test_chain_prints_the_resolved_places_from_another_folder(tmp_path: Path) -> None:
    config, elsewhere = _project(tmp_path)
    project = config.parent
    done = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "chain", "../project/beamfilter.toml"],
        capture_output=True, text=True, timeout=120, cwd=elsewhere, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    start = lines.index(f"paths (relative ones are taken from {project})")
    home = str(Path("~/shared").expanduser())
    assert lines[start : start + 8] == [
        f"paths (relative ones are taken from {project})",
        f"  filters[0].path: logs/turns.jsonl -> {project}/logs/turns.jsonl",
        f"  filters[1].folder: skills -> {project}/skills",
        f"  filters[2].rules[0].roots[0]: ./data -> {project}/data",
        f"  filters[2].rules[0].roots[1]: ~/shared -> {home}",
        "  filters[2].rules[0].roots[2]: /srv/abs -> /srv/abs",
        f"  filters[2].rules[0].base: data -> {project}/data",
        "",
    ]


@pytest.mark.packages
def test_a_relative_sqlite_store_is_in_the_config_s_folder(tmp_path: Path) -> None:
    pytest.importorskip("beamfilter_memory")
    project = tmp_path / "project"
    project.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for name, store in (("given.toml", 'store = "sqlite:///chats.db"\n'), ("default.toml", "")):
        config = project / name
        config.write_text(f'[model]\nuse = "scripted"\nscript = ["ok"]\n\n[[filters]]\nuse = "memory"\n{store}')
        done = subprocess.run(
            [sys.executable, "-m", "beamfilter_core", "run", str(config), "hi", "--json", "--conversation-id", "c1"],
            capture_output=True, text=True, timeout=120, cwd=elsewhere, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        assert json.loads(done.stdout)["text"] == "ok"
    assert sorted(p.name for p in project.iterdir() if p.suffix == ".db") == ["beamfilter.db", "chats.db"]
    assert list(elsewhere.iterdir()) == []
    chain = subprocess.run(
        [sys.executable, "-m", "beamfilter_core", "chain", str(project / "given.toml")],
        capture_output=True, text=True, timeout=120, cwd=elsewhere, check=False,
    )  # fmt: skip
    assert f"  filters[0].store: sqlite:///chats.db -> sqlite:///{project}/chats.db" in chain.stdout.splitlines()


def test_a_local_model_path_is_a_place_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    (project / "models").mkdir(parents=True)
    (project / "models" / "tiny.gguf").write_bytes(b"GGUF")
    config = project / "beamfilter.toml"
    config.write_text('[model]\nuse = "local"\nmodel_path = "models/tiny.gguf"\n')
    monkeypatch.chdir(tmp_path)
    built = build_config(str(config))
    assert built.places == (Place("model.model_path", "models/tiny.gguf", f"{project}/models/tiny.gguf"),)
    assert str(built.kernel.model.model_path) == f"{project}/models/tiny.gguf"


def test_a_python_tool_s_relative_path_is_judged_from_the_current_folder_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "data").mkdir(parents=True)
    config = project / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n'
        '[[filters]]\nuse = "tool_policy"\nrules = [{ tool = "read", kind = "path", roots = ["./data"] }]\n'
    )
    policy = Kernel.from_config(str(config)).filters[0].extras["policy"]
    monkeypatch.chdir(project)
    assert policy.check("read", {"path": "data/x.txt"}) is None
    # from another folder, an in-process tool would open ./data/x.txt there: outside the root
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert policy.check("read", {"path": "data/x.txt"}).reason == (
        f"the path resolves to '{elsewhere}/data/x.txt', outside the allowed roots ({project}/data)"
    )
    # a tool that says where it resolves relative paths (an MCP server) is judged from there only
    assert policy.check("read", {"path": "data/x.txt"}, str(project)) is None
    # an explicit base is the user's word: judged from it alone
    based = (
        Kernel.from_config(
            {
                "model": {"use": "scripted", "script": ["ok"]},
                "filters": [
                    {
                        "use": "tool_policy",
                        "rules": [
                            {"tool": "read", "kind": "path", "roots": [str(project / "data")], "base": str(project)}
                        ],
                    }
                ],
            }
        )
        .filters[0]
        .extras["policy"]
    )
    assert based.check("read", {"path": "data/x.txt"}) is None
