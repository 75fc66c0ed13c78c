"""``beamfilter new plugin NAME``: a plugin package whose tests, mypy --strict and ruff pass as generated.

The files come from the templates in ``_templates/plugin`` (package data); ``%%KEY%%``
marks what is filled in, a marker that Python, TOML, YAML and Markdown never use. The
layout is the one of ``examples/beamfilter-shout``.
"""

from __future__ import annotations

import argparse
import keyword
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from importlib import resources
from pathlib import Path

import attrs

from .errors import ConfigError

__all__ = ["PluginPlan", "configure_new_plugin", "render_plugin", "run_new_plugin", "write_plugin"]

#: Plugin, filter, toolset and store names: what a spec name may be, short enough that
#: every generated line stays within ruff's 120 columns.
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,23}$")
_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]{0,23}$")
_MARKER = re.compile(r"%%([A-Z_]+)%%")
_LINE = 120


@attrs.frozen(slots=True)
class PluginPlan:
    """What to generate: the plugin name, its filters, an optional toolset and store scheme."""

    name: str
    filters: tuple[str, ...]
    toolset: str | None = None
    store: str | None = None

    @property
    def dist(self) -> str:
        """The distribution name (``beamfilter-my-plugin``)."""
        return "beamfilter-" + self.name.replace("_", "-")

    @property
    def module(self) -> str:
        """The import name (``beamfilter_my_plugin``)."""
        return "beamfilter_" + self.name

    @property
    def store_name(self) -> str | None:
        """The store's spec name, from its URL scheme."""
        return None if self.store is None else re.sub(r"[^a-z0-9]", "_", self.store)

    @property
    def store_class(self) -> str | None:
        """The store's class name (``MyStore`` for the scheme ``my``)."""
        name = self.store_name
        return None if name is None else "".join(part.capitalize() for part in name.split("_") if part) + "Store"


def _check_name(value: str, what: str) -> str:
    if not isinstance(value, str) or not _NAME.match(value) or keyword.iskeyword(value):
        msg = (
            f"{what} is {value!r}; use 1 to 24 lower-case letters, digits and underscores, starting with a "
            "letter, and not a Python keyword (e.g. 'shout' or 'sign_off')."
        )
        raise ConfigError(msg)
    return value


def plan_plugin(
    name: str, filters: Sequence[str] = (), toolset: str | None = None, store: str | None = None
) -> PluginPlan:
    """Check the names given to ``beamfilter new plugin`` and return what to generate.

    Without ``--filter``, ``--toolset`` and ``--store`` the plugin has one filter named
    like the plugin.

    Raises:
        ConfigError: a name is not usable (the message names it and the rule).
    """
    _check_name(name, "the plugin name")
    chosen = tuple(filters) or (() if toolset or store else (name,))
    for index, flt in enumerate(chosen):
        _check_name(flt, f"--filter #{index + 1}")
    repeated = sorted({flt for flt in chosen if chosen.count(flt) > 1})
    if repeated:
        msg = f"--filter {repeated[0]!r} is given twice; each filter needs its own name."
        raise ConfigError(msg)
    if toolset is not None:
        _check_name(toolset, "--toolset")
        if f"{toolset}_tools" in chosen:
            msg = f"--filter {toolset}_tools would clash with the toolset's factory {toolset}_tools; rename one."
            raise ConfigError(msg)
    if store is not None and not _SCHEME.match(store):
        msg = (
            f"--store is {store!r}; give a URL scheme of 1 to 24 characters: lower-case letters, digits, "
            "'+', '-' or '.', starting with a letter (e.g. 'mydb' for mydb://...)."
        )
        raise ConfigError(msg)
    return PluginPlan(name, chosen, toolset, store)


def _template(name: str) -> str:
    return (resources.files(__package__) / "_templates" / "plugin" / name).read_text(encoding="utf-8")


def _fill(text: str, values: Mapping[str, str]) -> str:
    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]  # a KeyError here is a template bug, found by the tests

    return _MARKER.sub(replace, text)


def _order(name: str) -> tuple[int, str]:
    """isort's order by type: CONSTANTS, then Classes, then the rest."""
    if name.isupper():
        return 0, name
    return (1, name) if name[:1].isupper() else (2, name)


def _from_import(module: str, names: Iterable[str]) -> str:
    ordered = sorted(set(names), key=_order)
    line = f"from {module} import {', '.join(ordered)}"
    if len(line) <= _LINE:
        return line
    return f"from {module} import (\n" + "".join(f"    {n},\n" for n in ordered) + ")"


def _list(names: Iterable[str], used: int, *, sort: bool = True, indent: str = "") -> str:
    """The items of a list literal on one line, or one per line when ``used`` columns plus
    the items would pass the limit (``indent``: the indentation of the line)."""
    ordered = sorted(set(names), key=_order) if sort else list(names)
    line = ", ".join(f'"{n}"' for n in ordered)
    if len(line) + used <= _LINE:
        return line
    return "\n" + "".join(f'{indent}    "{n}",\n' for n in ordered) + indent


def _q(text: str) -> str:
    """A string literal in the double quotes ruff format writes (the texts here hold no quotes)."""
    return f'"{text}"'


def _spec(kind: str, args: Sequence[str], summary: str) -> str:
    lines = "".join(f"            {arg},\n" for arg in args)
    return f"        {kind}(\n{lines}            summary={_q(summary)},\n{_scopes(kind)}        ),\n"


def _scopes(kind: str) -> str:
    return '            scopes=("turn",),\n' if kind == "FilterSpec" else ""


def _hook(name: str, spec: str, what: str, specs: str) -> str:
    return (
        f"\n\n@hookimpl\ndef {name}() -> list[{spec}]:\n"
        f'    """The {what} of this plugin."""\n'
        f"    return [\n{specs}    ]\n"
    )


def render_plugin(plan: PluginPlan) -> dict[str, str]:
    """The files of the plugin package: relative path -> text."""
    requirements = _requirements(plan)
    core = requirements[0]
    values = {
        "DIST": plan.dist,
        "MODULE": plan.module,
        "PLUGIN": plan.name,
        "CORE_REQUIREMENT": core,
        "EXTRA_INSTALL": "".join(f' "{r}"' for r in requirements[1:]),
        "DEPENDENCIES": ", ".join(f'"{r}"' for r in requirements),
        "DESCRIPTION": _description(plan),
        "TOOLSET": plan.toolset or "",
        "SCHEME": plan.store or "",
        "STORE": plan.store_name or "",
        "STORE_CLASS": plan.store_class or "",
    }
    package = f"src/{plan.module}"
    files = {
        "pyproject.toml": _fill(_template("pyproject.toml.tmpl"), values),
        "README.md": _fill(_template("README.md.tmpl"), {**values, **_readme(plan)}),
        ".github/workflows/ci.yml": _fill(_template("ci.yml.tmpl"), values),
        ".gitignore": _template("gitignore.tmpl"),
        f"{package}/__init__.py": _fill(_template("init.py.tmpl"), {**values, **_init(plan)}),
        f"{package}/py.typed": "",
        "tests/conftest.py": _template("conftest.py.tmpl"),
        f"tests/test_{plan.name}.py": _tests(plan, values),
    }
    if plan.filters:
        each = "".join(_fill(_template("filter.py.tmpl"), {**values, "FILTER": f}) for f in plan.filters)
        files[f"{package}/_filters.py"] = _fill(_template("filters.py.tmpl"), {**values, "FILTERS": each})
    if plan.toolset:
        files[f"{package}/_tools.py"] = _fill(_template("tools.py.tmpl"), values)
    if plan.store:
        files[f"{package}/_store.py"] = _fill(_template("store.py.tmpl"), values)
    return {path: text.rstrip("\n") + "\n" if text else "" for path, text in sorted(files.items())}


def _description(plan: PluginPlan) -> str:
    kind = "filter" if len(plan.filters) == 1 else "filters"
    parts = [f"the {kind} {', '.join(plan.filters)}"] if plan.filters else []
    if plan.toolset:
        parts.append(f"the toolset {plan.toolset}")
    if plan.store:
        parts.append(f"a {plan.store}:// memory store")
    return "A beamfilter plugin: " + " and ".join(parts) + "."


def _readme(plan: PluginPlan) -> dict[str, str]:
    provides = [f"- the filter `{f}` (turn scope): appends its `note` option to every answer;" for f in plan.filters]
    config = ['[model]\nuse = "scripted"\nscript = ["hello"]']
    config += [f'[[filters]]\nuse = "{f}"\nnote = "-- from {plan.dist}"' for f in plan.filters]
    if plan.toolset:
        provides.append(f"- the toolset `{plan.toolset}`: a `greet` tool that greets people (`greeting` option);")
        config.append(f'[[tools]]\nuse = "{plan.toolset}"\ngreeting = "Hi"')
    if plan.store:
        provides.append(f"- the memory store `{plan.store_name}`, for `{plan.store}://NAME` URLs;")
        config.append(f'[[filters]]\nuse = "memory"\nstore = "{plan.store}://chats"')
    provides[-1] = provides[-1].rstrip(";") + "."
    return {"PROVIDES": "\n".join(provides), "CONFIG": "\n\n".join(config)}


def _init(plan: PluginPlan) -> dict[str, str]:
    core = ["hookimpl"]
    local: list[str] = []
    hooks = ""
    exported = []
    if plan.filters:
        core.append("FilterSpec")
        local.append(_from_import("._filters", ["NOTE_OPTIONS", *plan.filters]))
        specs = "".join(
            _spec("FilterSpec", [_q(f), f, "NOTE_OPTIONS"], "appends a note to every completed answer")
            for f in plan.filters
        )
        hooks += _hook("beamfilter_register_filters", "FilterSpec", "filters", specs)
        exported += ["beamfilter_register_filters", *plan.filters]
    if plan.toolset:
        core.append("ToolsetSpec")
        factory = f"{plan.toolset}_tools"
        local.append(_from_import("._tools", ["TOOLSET_OPTIONS", factory]))
        spec = _spec("ToolsetSpec", [_q(plan.toolset), factory, "TOOLSET_OPTIONS"], "a tool that greets people")
        hooks += _hook("beamfilter_register_tools", "ToolsetSpec", "toolsets", spec)
        exported += ["beamfilter_register_tools", factory]
    if plan.store:
        core.append("StoreSpec")
        opener = f"open_{plan.store_name}_store"
        local.append(_from_import("._store", ["STORE_OPTIONS", str(plan.store_class), opener]))
        args = [_q(str(plan.store_name)), opener, f"({_q(plan.store)},)", "STORE_OPTIONS"]
        spec = _spec("StoreSpec", args, f"conversations in {plan.store}:// stores")
        hooks += _hook("beamfilter_register_stores", "StoreSpec", "memory stores", spec)
        exported += ["beamfilter_register_stores", str(plan.store_class), opener]
    imports = _from_import("beamfilter_core", core) + "\n\n" + "\n".join(sorted(local))
    return {"IMPORTS": imports, "ALL": _list(exported, len("__all__ = []")), "HOOKS": hooks}


def _tests(plan: PluginPlan, values: Mapping[str, str]) -> str:
    core = ["Kernel", "Registry", "ScriptedModel"]
    mine: list[str] = []
    provided = []
    if plan.filters:
        core += ["ChatResponse", "RunFinished", "ToolCall", "tool"]
        mine += plan.filters
        listed = _list(plan.filters, 36, sort=False, indent="    ")
        provided.append(f"    assert list(info.filters) == [{listed}]\n")
    if plan.toolset:
        core += ["ChatResponse", "ToolCall"]
        mine.append(f"{plan.toolset}_tools")
        provided.append(f"    assert info.toolsets == ({_q(plan.toolset)},)\n")
    if plan.store:
        core.append("Message")
        mine += [str(plan.store_class), f"open_{plan.store_name}_store"]
        provided.append(f"    assert info.stores == ({_q(str(plan.store_name))},)\n")
    third = ["import pytest"] if plan.filters or plan.store else []
    third.append(_from_import("beamfilter_core", core))
    if plan.filters:
        third.append(_from_import("beamfilter_core.testing", ["collect_stream"]))
    imports = "\n".join(third) + "\n\n" + _from_import(plan.module, mine)
    head = {**values, "IMPORTS": imports, "PROVIDED": "".join(provided).rstrip("\n")}
    text = _fill(_template("test_head.py.tmpl"), head)
    for flt in plan.filters:
        text += _fill(_template("test_filter.py.tmpl"), {**values, "FILTER": flt})
    if plan.toolset:
        text += _fill(_template("test_toolset.py.tmpl"), values)
    if plan.store:
        text += _fill(_template("test_store.py.tmpl"), values)
    return text


def write_plugin(plan: PluginPlan, directory: Path) -> list[Path]:
    """Write the plugin's files under ``directory`` (created; it must not hold files yet).

    Raises:
        ConfigError: ``directory`` exists and is not empty (nothing is overwritten).
    """
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        msg = f"{directory} already exists and is not empty; choose another folder with --directory."
        raise ConfigError(msg)
    written = []
    for relative, text in render_plugin(plan).items():
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


def configure_new_plugin(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``beamfilter new plugin``."""
    parser.add_argument("name", metavar="NAME", help="the plugin name users see (lower case, e.g. shout)")
    parser.add_argument(
        "--filter",
        action="append",
        default=[],
        metavar="NAME",
        dest="filters",
        help="a filter to generate; repeatable (default: one filter named like the plugin)",
    )
    parser.add_argument("--toolset", metavar="NAME", help="also generate a toolset of that name")
    parser.add_argument("--store", metavar="SCHEME", help="also generate a memory store for SCHEME:// URLs")
    parser.add_argument(
        "--directory", metavar="DIR", help="where to write the package (default: ./beamfilter-NAME); must be empty"
    )


def run_new_plugin(args: argparse.Namespace) -> int:
    """Write the package and say what to do next."""
    plan = plan_plugin(args.name, args.filters, args.toolset, args.store)
    directory = Path(args.directory) if args.directory else Path.cwd() / plan.dist
    written = write_plugin(plan, directory)
    out = sys.stdout
    print(f"wrote {plan.dist} ({len(written)} files) in {directory}", file=out)
    for path in written:
        print(f"  {path.relative_to(directory)}", file=out)
    print(
        "\nnext, in that folder (docs/publishing.md walks through each step):\n"
        "  python -m venv .venv && . .venv/bin/activate\n"
        f"  python -m pip install {' '.join(repr(r) for r in _requirements(plan))}\n"
        "  python -m pip install -e '.[test]'\n"
        "  python -m pytest && python -m mypy && python -m ruff check .\n"
        f"  beamfilter plugins check {plan.dist}",
        file=out,
    )
    return 0


def _requirements(plan: PluginPlan) -> list[str]:
    """What the plugin depends on: a compatible range of this core (and memory for a store)."""
    from . import __version__

    major, minor = (int(part) for part in __version__.split(".")[:2])
    wanted = [f"beamfilter-core>={major}.{minor},<{major}.{minor + 1}"]
    if plan.store:
        wanted.append("beamfilter-memory>=0.1,<0.2")
    return wanted
