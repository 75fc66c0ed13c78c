"""Mutation testing of beamfilter modules, on cosmic-ray, running only the covering tests.

    python tools/mutants.py                          # modules changed vs main
    python tools/mutants.py beamfilter_core._chain _retry --confirm
    nox -s mutants -- beamfilter_core._chain         # the same in a fresh venv
    python tools/mutants.py _partial --lines 160 167-181 --tests tests/builtins/test_redact_partial.py

For each module: copy the working tree to ``.mutants/<module>/tree`` (the real files
are never touched, so an interrupted run leaves nothing mutated), record which tests
execute each line of the module (coverage with one context per test), let cosmic-ray
apply one mutation at a time to the copy, and run only the tests that execute the
mutated line. ``--confirm`` re-runs each survivor against the module's whole test
folders. Survivors listed in ``tools/mutants_equivalents.toml`` (with a reason) are
equivalent mutants and leave the score. See CONTRIBUTING.md.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
WORK = REPO / ".mutants"
EQUIVALENTS = REPO / "tools" / "mutants_equivalents.toml"
PACKAGES = ("beamfilter_core", "beamfilter_builtins", "beamfilter_memory")
#: the test folders whose tests may cover a package's modules
TEST_FOLDERS = {
    "beamfilter_core": ["tests/core", "tests/faults"],
    "beamfilter_builtins": ["tests/builtins"],
    "beamfilter_memory": ["tests/memory"],
}
COMPARISONS = (
    *("Eq_NotEq", "NotEq_Eq", "Is_IsNot", "IsNot_Is"),
    *("Lt_LtE", "LtE_Lt", "Gt_GtE", "GtE_Gt", "Lt_GtE", "GtE_Lt", "Gt_LtE", "LtE_Gt"),
)
#: cosmic-ray operators kept: boundaries and negations of comparisons, and/or, not,
#: True/False, +-1 on numbers, arithmetic swaps, loops run zero times, break/continue,
#: except clauses that stop matching. The rest mostly mutate type annotations (``|``)
#: or duplicate these.
OPERATORS = (
    *(f"core/ReplaceComparisonOperator_{pair}" for pair in COMPARISONS),
    *(f"core/ReplaceBinaryOperator_{pair}" for pair in ("Add_Sub", "Sub_Add", "Mul_Div", "Div_Mul", "Mod_FloorDiv")),
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/ReplaceUnaryOperator_USub_UAdd",
    "core/AddNot",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/NumberReplacer",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/ZeroIterationForLoop",
    "core/ExceptionReplacer",
)
SKIP = {".git", ".venv", ".nox", ".mutants", "__pycache__", ".hypothesis", ".mypy_cache", ".ruff_cache", "node_modules"}
NOT_EXECUTED = "mutants: no test executes the mutated line"
LOST = ("survived", "not executed")


@dataclass(frozen=True)
class Module:
    name: str  # dotted, e.g. beamfilter_core._chain
    path: Path  # relative to the repository
    package: str


@dataclass
class Mutant:
    line: int
    operator: str
    original: str
    mutated: str
    outcome: str  # killed | survived | not executed | timeout | error
    reason: str = ""  # set for an equivalent mutant


def find_module(spec: str) -> Module:
    """``beamfilter_core._chain``, ``_chain``, ``_models/_retry.py`` or a path -> the module."""
    candidates = sorted(p.relative_to(REPO) for pkg in PACKAGES for p in (REPO / pkg / "src").rglob("*.py"))
    wanted = spec.removesuffix(".py").replace(".", "/") if not spec.endswith(".py") else spec.removesuffix(".py")
    hits = [p for p in candidates if str(p.with_suffix("")).endswith(wanted) or p == Path(spec)]
    exact = [p for p in hits if str(p.with_suffix("")).endswith("/" + wanted) or p == Path(spec)]
    hits = exact or hits
    if len(hits) != 1:
        names = ", ".join(map(str, hits)) or "none"
        msg = f"module {spec!r} matches {len(hits)} source files ({names}); give its dotted name"
        raise SystemExit(msg)
    path = hits[0]
    package = path.parts[0]
    dotted = ".".join(path.relative_to(Path(package) / "src").with_suffix("").parts)
    return Module(dotted, path, package)


def changed_modules(base: str) -> list[Module]:
    """Source modules changed on this branch since ``base``, committed or not."""

    def git(*args: str) -> list[str]:
        out = subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout
        return out.split()

    names = {
        *git("diff", "--name-only", f"{base}...HEAD"),
        *git("diff", "--name-only", "HEAD"),
        *git("ls-files", "--others", "--exclude-standard"),
    }
    pattern = re.compile(r"^beamfilter_\w+/src/.+\.py$")
    return [find_module(name) for name in sorted(names) if pattern.match(name) and (REPO / name).exists()]


def _environment(tree: Path, workdir: Path) -> dict[str, str]:
    env = dict(os.environ)
    sources = [str(tree / pkg / "src") for pkg in PACKAGES]
    env["PYTHONPATH"] = os.pathsep.join([*sources, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    env["PYTHONDONTWRITEBYTECODE"] = "1"  # a stale .pyc of a same-sized mutant would hide it
    env["BEAMFILTER_MUTANTS_DIR"] = str(workdir)
    return env


def copy_tree(workdir: Path) -> Path:
    tree = workdir / "tree"
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(REPO, tree, ignore=lambda _dir, names: [n for n in names if n in SKIP], symlinks=True)
    for shared in ("tests/peers/node_modules", ".peers"):  # installed peers: shared, not copied
        if (REPO / shared).exists():
            (tree / shared).symlink_to(REPO / shared)
    return tree


def record_coverage(module: Module, tree: Path, workdir: Path, folders: Sequence[str], env: dict[str, str]) -> None:
    """Write ``lines.json``: line number -> node ids of the tests that execute it
    (none: executed only while importing)."""
    import coverage

    target = tree / module.path
    rc = workdir / "coveragerc"
    rc.write_text(f"[run]\ninclude = {target}\ndata_file = {workdir / '.coverage'}\n")
    command = [sys.executable, "-m", "coverage", "run", f"--rcfile={rc}", "-m", "pytest", "-q"]
    command += ["-p", "_mutants_context"]
    started = time.monotonic()
    env = {**env, "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], str(Path(__file__).parent)])}
    done = subprocess.run([*command, *folders], cwd=tree, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stdout.write(done.stdout[-4000:])
        msg = f"the tests fail on the unmutated tree ({' '.join(folders)}); fix them or pass --tests"
        raise SystemExit(msg)
    data = coverage.CoverageData(basename=str(workdir / ".coverage"))
    data.read()
    by_line: dict[int, list[str]] = {}
    for line, contexts in (data.contexts_by_lineno(str(target)) or {}).items():
        by_line[line] = sorted(c for c in contexts if c)
    every = sorted({i for ids in by_line.values() for i in ids})
    (workdir / "lines.json").write_text(json.dumps({"lines": by_line, "all": every}))
    print(f"  covering tests recorded in {time.monotonic() - started:.0f} s: {len(every)} tests", flush=True)


def _statement_lines(source: str, line: int) -> range:
    """The lines of the innermost statement holding ``line`` (a compound one: its header)."""
    best: ast.stmt | None = None
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if best is None or node.lineno >= best.lineno:
            best = node
    if best is None:
        return range(line, line + 1)
    body = getattr(best, "body", None)
    end = body[0].lineno - 1 if isinstance(body, list) and body else (best.end_lineno or best.lineno)
    return range(best.lineno, max(end, line) + 1)


def covering_tests(original: str, mutated: str, table: dict[str, Any]) -> list[str] | None:
    """Node ids of the tests executing the mutated statement; None if no test does."""
    lines: dict[str, list[str]] = table["lines"]
    changed: set[int] = set()
    matcher = difflib.SequenceMatcher(a=original.splitlines(), b=mutated.splitlines(), autojunk=False)
    for tag, first, last, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(first + 1, max(last, first + 1) + 1))
    ids: set[str] = set()
    executed = False
    for line in changed:
        for number in _statement_lines(original, line):
            found = lines.get(str(number))
            if found is not None:
                executed = True
                ids.update(found or table["all"])  # executed at import: every test of the module
    return sorted(ids) if executed else None


def run_covering_tests(workdir: Path) -> int:
    """cosmic-ray's test command: run the tests that execute the mutated line."""
    import pytest

    meta = json.loads((workdir / "meta.json").read_text())
    table = json.loads((workdir / "lines.json").read_text())
    original = (workdir / "original.py").read_text()
    mutated = Path(meta["target"]).read_text()
    ids = covering_tests(original, mutated, table)
    if ids is None:
        print(NOT_EXECUTED)
        return 0
    return int(pytest.main(["-q", "-x", "--no-header", *ids]))


def mutate(module: Module, args: argparse.Namespace) -> list[Mutant]:
    workdir = WORK / module.name
    workdir.mkdir(parents=True, exist_ok=True)
    for stale in ("session.sqlite", "lines.json", ".coverage"):
        (workdir / stale).unlink(missing_ok=True)
    tree = copy_tree(workdir)
    env = _environment(tree, workdir)
    folders = args.tests or TEST_FOLDERS[module.package]
    target = tree / module.path
    shutil.copyfile(target, workdir / "original.py")
    (workdir / "meta.json").write_text(json.dumps({"target": str(target)}))
    print(f"{module.name}: recording covering tests from {' '.join(folders)}", flush=True)
    record_coverage(module, tree, workdir, folders, env)
    config = workdir / "cosmic-ray.toml"
    test_command = f"{sys.executable} {Path(__file__).resolve()} --run-covering-tests {workdir}"
    keep = "|".join(re.escape(op) for op in OPERATORS)
    config.write_text(
        "[cosmic-ray]\n"
        f"module-path = {json.dumps(str(target))}\n"
        f"timeout = {float(args.timeout)}\n"
        "excluded-modules = []\n"
        f"test-command = {json.dumps(test_command)}\n"
        "[cosmic-ray.distributor]\nname = 'local'\n"
        "[cosmic-ray.filters.operators-filter]\n"
        f"exclude-operators = [{json.dumps(f'^(?!({keep})$)')}]\n"
    )
    session = workdir / "session.sqlite"
    bin_dir = Path(sys.executable).parent
    for step in (
        [str(bin_dir / "cosmic-ray"), "init", str(config), str(session)],
        [str(bin_dir / "cr-filter-operators"), str(session), str(config)],
        [str(bin_dir / "cosmic-ray"), "exec", str(config), str(session)],
    ):
        if step[1] == "exec" and args.lines:
            kept = skip_other_lines(session, line_numbers(args.lines))
            print(f"  {kept} mutants on lines {' '.join(args.lines)}", flush=True)
        started = time.monotonic()
        subprocess.run(step, cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL)
        if step[1] == "exec":
            print(f"  mutants run in {time.monotonic() - started:.0f} s", flush=True)
    mutants = read_session(session, module)
    if args.confirm:
        confirm(mutants, session, tree, env, folders, args.timeout)
        mutants = read_session(session, module)
    if not args.keep:
        shutil.rmtree(tree, ignore_errors=True)
    return mutants


def line_numbers(specs: Sequence[str]) -> set[int]:
    """``--lines 12 30-34`` -> {12, 30, 31, 32, 33, 34}."""
    numbers: set[int] = set()
    for spec in specs:
        first, _, last = spec.partition("-")
        if not first.isdigit() or not (last or first).isdigit():
            msg = f"--lines {spec!r}: give line numbers or ranges like 30-34"
            raise SystemExit(msg)
        numbers.update(range(int(first), int(last or first) + 1))
    return numbers


def skip_other_lines(session: Path, lines: set[int]) -> int:
    """Mark every pending mutant outside ``lines`` skipped (left out of the report);
    returns how many are kept."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    kept = 0
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item in list(db.pending_work_items):
            if item.mutations[0].start_pos[0] in lines:
                kept += 1
            else:
                db.set_result(item.job_id, WorkResult(WorkerOutcome.SKIPPED, output="outside --lines"))
    return kept


def _changed_line(diff: str, sign: str) -> str:
    lines = [line[1:].strip() for line in diff.splitlines() if line.startswith(sign) and not line.startswith(sign * 3)]
    return " / ".join(lines)


def read_session(session: Path, module: Module) -> list[Mutant]:
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome, WorkerOutcome

    mutants = []
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in db.completed_work_items:
            if result.worker_outcome in (WorkerOutcome.SKIPPED, WorkerOutcome.NO_TEST):
                continue
            spec = item.mutations[0]
            output = result.output or ""
            if result.worker_outcome != WorkerOutcome.NORMAL:
                outcome = "error"
            elif result.test_outcome == TestOutcome.KILLED:
                outcome = "timeout" if output == "timeout" else "killed"
            elif result.test_outcome == TestOutcome.SURVIVED:
                outcome = "not executed" if NOT_EXECUTED in output else "survived"
            else:
                outcome = "error"
            diff = result.diff or ""
            original, mutated = _changed_line(diff, "-"), _changed_line(diff, "+")
            mutants.append(Mutant(spec.start_pos[0], spec.operator_name, original, mutated, outcome))
    return sorted(mutants, key=lambda m: (m.line, m.operator))


def confirm(
    mutants: Iterable[Mutant], session: Path, tree: Path, env: dict[str, str], folders: Sequence[str], timeout: float
) -> None:
    """Re-run each survivor against the whole test folders and record the new outcome."""
    import attrs
    from cosmic_ray.mutating import use_mutation
    from cosmic_ray.plugins import get_operator
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import TestOutcome

    lost = {(m.line, m.operator) for m in mutants if m.outcome in LOST}
    command = [sys.executable, "-m", "pytest", "-q", "-x", *folders]
    with use_db(str(session), WorkDB.Mode.open) as db:
        for item, result in list(db.completed_work_items):
            spec = item.mutations[0]
            if (spec.start_pos[0], spec.operator_name) not in lost:
                continue
            with use_mutation(spec.module_path, get_operator(spec.operator_name)(), spec.occurrence):
                try:
                    killed = subprocess.run(command, cwd=tree, env=env, capture_output=True, timeout=timeout).returncode
                except subprocess.TimeoutExpired:
                    killed = True
            if killed:
                print(f"  confirm: line {spec.start_pos[0]} {spec.operator_name} is caught by the whole folders")
                # cosmic-ray's WorkResult is a frozen attrs class: store a changed copy
                output = "killed by the whole test folders"
                caught = attrs.evolve(result, output=output, test_outcome=TestOutcome.KILLED)
                db.set_result(item.job_id, caught)


def load_equivalents(path: Path = EQUIVALENTS) -> dict[tuple[str, ...], str]:
    """(module, original, mutant) -> reason; with the entry's ``function`` last when it
    names one (the entry then covers only the mutants inside that def)."""
    if not path.exists():
        return {}
    entries = tomllib.loads(path.read_text()).get("equivalent", [])
    listed: dict[tuple[str, ...], str] = {}
    for e in entries:
        key = (e["module"], e["original"].strip(), e["mutant"].strip())
        listed[(*key, e["function"]) if "function" in e else key] = e["reason"]
    return listed


def enclosing_function(tree: ast.AST, line: int) -> str:
    """The name of the innermost def of ``tree`` holding ``line`` ("" outside every def)."""
    name, start = "", 0
    for node in ast.walk(tree):
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        if start <= node.lineno <= line <= (node.end_lineno or 0):
            name, start = node.name, node.lineno
    return name


def score(module: Module, mutants: list[Mutant], equivalents: dict[tuple[str, ...], str]) -> str:
    """The report of one module: its score line, then each survivor."""
    stale = []
    tree = None
    if any(len(key) == 4 and key[0] == module.name for key in equivalents):
        # entries naming a function: read the source the mutants were made from (the run's copy)
        copy = WORK / module.name / "original.py"
        tree = ast.parse((copy if copy.exists() else REPO / module.path).read_text())
    for mutant in mutants:
        key = (module.name, mutant.original, mutant.mutated)
        reason = equivalents.get(key)
        if tree is not None:
            reason = equivalents.get((*key, enclosing_function(tree, mutant.line)), reason)
        if reason is not None and mutant.outcome in LOST:
            mutant.reason = reason
        elif reason is not None:
            stale.append(mutant)  # caught, so not equivalent: counted as caught
    counted = [m for m in mutants if not m.reason and m.outcome != "error"]
    lost = [m for m in counted if m.outcome in LOST]
    errors = [m for m in mutants if m.outcome == "error"]
    caught = len(counted) - len(lost)
    percent = 100.0 * caught / len(counted) if counted else 100.0
    equivalent = len(mutants) - len(counted) - len(errors)
    lines = [
        f"{module.name}: {percent:.1f} % caught ({caught} of {len(counted)} non-equivalent mutants; "
        f"{equivalent} equivalent, {len(lost)} survived, {len(errors)} errors)"
    ]
    lines += [f"  survived  {module.path.name}:{m.line}  {m.original}  ->  {m.mutated}  [{m.outcome}]" for m in lost]
    lines += [f"  error     {module.path.name}:{m.line}  {m.operator}" for m in errors]
    lines += [f"  listed as equivalent but caught: {module.path.name}:{m.line}  {m.mutated}" for m in stale]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("modules", nargs="*", help="dotted names or paths (default: modules changed vs --base)")
    parser.add_argument("--base", default="main", help="branch the default module list is computed against")
    parser.add_argument("--tests", nargs="+", help="test folders or files (default: the package's test folders)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per mutant before it counts as caught")
    parser.add_argument("--confirm", action="store_true", help="re-run survivors against the whole test folders")
    parser.add_argument("--keep", action="store_true", help="keep the mutated copy in .mutants/<module>/tree")
    parser.add_argument("--lines", nargs="+", metavar="N[-M]", help="only the mutants on these lines (one module)")
    parser.add_argument("--run-covering-tests", metavar="WORKDIR", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run_covering_tests:
        return run_covering_tests(Path(args.run_covering_tests))
    modules = [find_module(m) for m in args.modules] if args.modules else changed_modules(args.base)
    if not modules:
        print(f"no source module changed since {args.base}; name modules to mutate them")
        return 0
    if args.lines and len(modules) != 1:
        msg = f"--lines numbers the lines of one module; {len(modules)} were given"
        raise SystemExit(msg)
    equivalents = load_equivalents()
    reports = []
    for module in modules:  # one at a time: the machine is shared
        reports.append(score(module, mutate(module, args), equivalents))
        print(reports[-1], flush=True)
    if len(reports) > 1:
        print("\n".join(["", "summary:", *(r.splitlines()[0] for r in reports)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
