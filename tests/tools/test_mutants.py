"""tools/mutants.py: module names, the covering tests a mutant runs, and the score."""

from __future__ import annotations

import ast
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
    for module, original, mutant, *function in listed:
        assert mutants.find_module(module).name == module
        assert original
        assert mutant
        if function:  # a def of that module (a misspelt name would never match)
            tree = ast.parse((ROOT / mutants.find_module(module).path).read_text())
            defs = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            assert function == [function[0]]
            assert function[0] in defs
    path = tmp_path / "eq.toml"
    path.write_text('[[equivalent]]\nmodule = "m"\noriginal = " a "\nmutant = "b"\nreason = "r"\n')
    assert mutants.load_equivalents(path) == {("m", "a", "b"): "r"}
    path.write_text('[[equivalent]]\nmodule = "m"\noriginal = "a"\nmutant = "b"\nfunction = "f"\nreason = "r"\n')
    assert mutants.load_equivalents(path) == {("m", "a", "b", "f"): "r"}


SCOPED_SOURCE = """\
def listed(x, limit):
    if x < limit:
        return 1
    return 0


class Holder:
    async def caught(self, x, limit):
        if x < limit:
            return 1
        return 0
"""


def test_an_entry_naming_a_function_covers_only_the_mutants_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the same line text twice in a module: equivalent in one def, caught in the other
    monkeypatch.setattr(mutants, "WORK", tmp_path)
    (tmp_path / "pkg.m").mkdir()
    (tmp_path / "pkg.m" / "original.py").write_text(SCOPED_SOURCE)
    module = mutants.Module("pkg.m", Path("pkg/src/pkg/m.py"), "pkg")
    tree = ast.parse(SCOPED_SOURCE)
    assert [mutants.enclosing_function(tree, line) for line in (1, 2, 5, 7, 9, 10)] == [
        "listed",
        "listed",
        "",
        "",
        "caught",
        "caught",
    ]
    found = [
        mutants.Mutant(2, "op", "if x < limit:", "if x <= limit:", "survived"),
        mutants.Mutant(9, "op", "if x < limit:", "if x <= limit:", "killed"),
        mutants.Mutant(3, "op", "return 1", "return 2", "survived"),
        mutants.Mutant(10, "op", "return 1", "return 2", "survived"),
    ]
    equivalents = {
        ("pkg.m", "if x < limit:", "if x <= limit:", "listed"): "x never equals limit in listed",
        ("pkg.m", "return 1", "return 2", "caught"): "1 and 2 read alike in caught",
        ("pkg.m", "if x < limit:", "if x <= limit:", "caught"): "wrongly listed",
    }
    # line 2 and line 10 are equivalent; line 3 (another def) is not; line 9 was caught after all
    assert mutants.score(module, found, equivalents).splitlines() == [
        "pkg.m: 50.0 % caught (1 of 2 non-equivalent mutants; 2 equivalent, 1 survived, 0 errors)",
        "  survived  m.py:3  return 1  ->  return 2  [survived]",
        "  listed as equivalent but caught: m.py:9  if x <= limit:",
    ]


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


def test_lines_keeps_only_the_mutants_on_those_lines(tmp_path: Path) -> None:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import MutationSpec, WorkerOutcome, WorkItem

    assert mutants.line_numbers(["12", "30-32", "31"]) == {12, 30, 31, 32}
    with pytest.raises(SystemExit, match=r"^--lines 'x-3': give line numbers or ranges like 30-34$"):
        mutants.line_numbers(["x-3"])
    session = tmp_path / "session.sqlite"
    operator = "core/ReplaceComparisonOperator_Lt_LtE"
    with use_db(str(session), WorkDB.Mode.create) as db:
        for job, line in (("a", 2), ("b", 5), ("c", 9)):
            db.add_work_item(WorkItem(job, [MutationSpec(tmp_path / "m.py", operator, 0, (line, 1), (line, 2))]))
    assert mutants.skip_other_lines(session, {5, 9, 40}) == 2
    with use_db(str(session), WorkDB.Mode.open) as db:
        done = {item.job_id: result for item, result in db.completed_work_items}
        pending = sorted(item.job_id for item in db.pending_work_items)
    assert pending == ["b", "c"]
    assert [(job, r.worker_outcome, r.output) for job, r in done.items()] == [
        ("a", WorkerOutcome.SKIPPED, "outside --lines")
    ]


def test_lines_need_exactly_one_module() -> None:
    with pytest.raises(SystemExit, match=r"^--lines numbers the lines of one module; 2 were given$"):
        mutants.main(["_chain", "_streaming", "--lines", "3"])
