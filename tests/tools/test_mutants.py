"""tools/mutants.py: module names, the covering tests a mutant runs, and the score."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("mutants_tool", ROOT / "tools" / "mutants.py")
assert _spec is not None
assert _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants_tool"] = mutants
_spec.loader.exec_module(mutants)


@pytest.mark.parametrize(
    "spec",
    [
        "beamfilter_core._chain",
        "_chain",
        "beamfilter_core/_chain.py",
        "beamfilter_core/src/beamfilter_core/_chain.py",
    ],
)
def test_a_module_is_found_by_dotted_name_short_name_or_path(spec: str) -> None:
    module = mutants.find_module(spec)
    assert module.name == "beamfilter_core._chain"
    assert module.path == Path("beamfilter_core/src/beamfilter_core/_chain.py")
    assert module.package == "beamfilter_core"


def test_a_nested_module_keeps_its_package_path() -> None:
    module = mutants.find_module("_retry")
    assert module.name == "beamfilter_core._models._retry"


def test_an_unknown_or_ambiguous_name_says_what_matched() -> None:
    with pytest.raises(SystemExit, match=r"module 'no_such_module' matches 0 source files \(none\)"):
        mutants.find_module("no_such_module")
    with pytest.raises(SystemExit, match=r"matches [2-9]\d* source files .*__init__\.py"):
        mutants.find_module("__init__")


SOURCE = """\
LIMIT = 3


def f(x):
    if x > LIMIT:
        return (
            x - 1
        )
    return x
"""
TABLE = {
    "lines": {"1": [], "4": [], "5": ["t.py::a", "t.py::b"], "6": ["t.py::b"], "9": ["t.py::a"]},
    "all": ["t.py::a", "t.py::b", "t.py::c"],
}


def test_a_mutant_runs_the_tests_that_execute_its_statement() -> None:
    mutated = SOURCE.replace("x > LIMIT", "x >= LIMIT")
    assert mutants.covering_tests(SOURCE, mutated, TABLE) == ["t.py::a", "t.py::b"]
    # a change on a continuation line runs the tests of the whole statement (line 6)
    assert mutants.covering_tests(SOURCE, SOURCE.replace("x - 1", "x + 1"), TABLE) == ["t.py::b"]


def test_a_line_run_only_at_import_runs_every_test_of_the_module() -> None:
    mutated = SOURCE.replace("LIMIT = 3", "LIMIT = 4")
    assert mutants.covering_tests(SOURCE, mutated, TABLE) == ["t.py::a", "t.py::b", "t.py::c"]


def test_a_line_no_test_executes_has_no_covering_tests() -> None:
    table = {"lines": {"1": []}, "all": []}
    assert mutants.covering_tests(SOURCE, SOURCE.replace("return x", "return None"), table) is None


def test_the_score_leaves_out_listed_equivalents_and_reports_stale_ones() -> None:
    module = mutants.find_module("beamfilter_core._chain")
    found = [
        mutants.Mutant(5, "op", "if x > LIMIT:", "if x >= LIMIT:", "survived"),
        mutants.Mutant(5, "op", "if x > LIMIT:", "if not x > LIMIT:", "killed"),
        mutants.Mutant(9, "op", "return x", "return None", "not executed"),
        mutants.Mutant(1, "op", "LIMIT = 3", "LIMIT = 4", "killed"),
        mutants.Mutant(1, "op", "LIMIT = 3", "LIMIT = 2", "timeout"),
    ]
    equivalents = {
        ("beamfilter_core._chain", "if x > LIMIT:", "if x >= LIMIT:"): "x is never 3",
        ("beamfilter_core._chain", "LIMIT = 3", "LIMIT = 4"): "wrongly listed",
    }
    report = mutants.score(module, found, equivalents).splitlines()
    assert report == [
        "beamfilter_core._chain: 75.0 % caught (3 of 4 non-equivalent mutants; 1 equivalent, 1 survived, 0 errors)",
        "  survived  _chain.py:9  return x  ->  return None  [not executed]",
        "  listed as equivalent but caught: _chain.py:1  LIMIT = 4",
    ]


def test_the_equivalents_file_parses_and_names_known_modules(tmp_path: Path) -> None:
    listed = mutants.load_equivalents()
    for module, original, mutant in listed:
        assert mutants.find_module(module).name == module
        assert original
        assert mutant
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nmodule = "m"\noriginal = " a "\nmutant = "b"\nreason = "r"\n')
    assert mutants.load_equivalents(path) == {("m", "a", "b"): "r"}


def test_confirm_reruns_a_survivor_against_the_whole_tests_and_records_it_caught(tmp_path: Path) -> None:
    import os

    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import MutationSpec, TestOutcome, WorkerOutcome, WorkItem, WorkResult

    module = tmp_path / "mod.py"
    module.write_text("def below_two(x):\n    return x < 2\n")
    (tmp_path / "test_mod.py").write_text("from mod import below_two\n\ndef test_two():\n    assert not below_two(2)\n")
    operator = "core/ReplaceComparisonOperator_Lt_LtE"
    session = tmp_path / "session.sqlite"
    with use_db(str(session), WorkDB.Mode.create) as db:
        spec = MutationSpec(module, operator, 0, (2, 11), (2, 16))
        db.add_work_item(WorkItem("job", [spec]))
        db.set_result("job", WorkResult(WorkerOutcome.NORMAL, output="", test_outcome=TestOutcome.SURVIVED))
    survivor = mutants.Mutant(2, operator, "return x < 2", "return x <= 2", "survived")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    mutants.confirm([survivor], session, tmp_path, env, ["test_mod.py", "-p", "no:cacheprovider"], 120.0)
    with use_db(str(session), WorkDB.Mode.open) as db:
        ((_, result),) = list(db.completed_work_items)
    assert result.test_outcome == TestOutcome.KILLED
    assert result.output == "killed by the whole test folders"
    assert result.worker_outcome == WorkerOutcome.NORMAL
    assert module.read_text() == "def below_two(x):\n    return x < 2\n"  # the mutation is undone
