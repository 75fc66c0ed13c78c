"""``beamfilter plugins check [DIST]``: what would bite the users of an installed plugin, all at once.

One installed distribution is checked on its own: each of its ``beamfilter`` entry points
is imported, its hook functions are matched against the hookspecs and called, and every
record they return is checked (summary, scopes, options schema, defaults, the factory with
default options, names other installed plugins already use). Nothing stops at the first
problem: the report lists them all, each with where it is and what to do.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib.util
import inspect
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

import attrs
import fastjsonschema

from . import _hookspecs
from ._filter import SCOPES
from ._registry import _HOOKS, _PLURAL, GROUP, Kind, Registry, quiet_plugin_log
from ._specs import CommandSpec, FilterSpec, PresetSpec
from .errors import BeamfilterError, ConfigError

__all__ = ["CheckReport", "check_distribution", "plugin_distributions"]

# one table of hooks and kinds: the registry's (a check must read plugins as loading does)
_RECORDS = _HOOKS
_ACCESSORS = _PLURAL
_TOKEN_SCOPES = (*SCOPES, "token")
_DEFAULT_SCHEMA = {"type": "object"}
_IMPL_MARK = f"{_hookspecs.PROJECT}_impl"


@attrs.frozen(slots=True)
class CheckReport:
    """The outcome of checking one distribution: what it provides and every problem found."""

    distribution: str
    version: str
    plugins: tuple[str, ...]
    provides: tuple[tuple[str, str], ...]
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        """True when nothing was found."""
        return not self.problems

    def lines(self) -> list[str]:
        """The report as ``beamfilter plugins check`` prints it."""
        head = f"{self.distribution} {self.version}"
        if self.ok:
            what = ", ".join(f"{kind} {name!r}" for kind, name in self.provides) or "nothing"
            plugins = ", ".join(repr(p) for p in self.plugins)
            return [f"{head}: ok (plugin {plugins}: {what})"]
        count = len(self.problems)
        return [f"{head}: {count} problem{'s' if count != 1 else ''}", *(f"  - {p}" for p in self.problems)]


def plugin_distributions() -> list[str]:
    """The installed distributions that declare ``beamfilter`` entry points, core excluded."""
    names = {
        dist.metadata["Name"]
        for dist in metadata.distributions()
        if any(ep.group == GROUP for ep in dist.entry_points) and dist.metadata["Name"] != "beamfilter-core"
    }
    return sorted(names, key=str.lower)


def check_distribution(name: str) -> CheckReport:
    """Check the installed distribution ``name`` (``beamfilter-shout``).

    Raises:
        ConfigError: no distribution of that name is installed in this environment.
    """
    try:
        dist = metadata.distribution(name)
    except metadata.PackageNotFoundError:
        known = plugin_distributions()
        msg = (
            f"No distribution named {name!r} is installed in this environment.{_closest(name, known)} "
            "Install it first (pip install -e . in its folder); installed plugin distributions: "
            f"{', '.join(known) or 'none'}."
        )
        raise ConfigError(msg) from None
    dist_name = dist.metadata["Name"]
    points = [ep for ep in dist.entry_points if ep.group == GROUP]
    problems: list[str] = []
    provides: list[tuple[str, str]] = []
    if not points:
        problems.append(
            f"{dist_name} declares no entry point in the 'beamfilter' group; add "
            '[project.entry-points.beamfilter] NAME = "your_module" to pyproject.toml and reinstall.'
        )
    with quiet_plugin_log():
        # every other installed plugin, to find the names users would see twice
        theirs = [ep for ep in metadata.entry_points(group=GROUP) if ep.dist is None or ep.dist.name != dist_name]
        others = Registry(strict=False, entry_points=theirs)
        others.load()
    for ep in points:
        _check_entry_point(ep, dist_name, others, problems, provides)
    return CheckReport(dist_name, dist.version, tuple(ep.name for ep in points), tuple(provides), tuple(problems))


def _check_entry_point(
    ep: metadata.EntryPoint, dist_name: str, others: Registry, problems: list[str], provides: list[tuple[str, str]]
) -> None:
    where = f"entry point '{ep.name} = {ep.value}'"
    for other in metadata.entry_points(group=GROUP, name=ep.name):
        owner = other.dist.name if other.dist is not None else None
        if owner != dist_name:
            problems.append(
                f"{where}: the plugin name {ep.name!r} is also used by {owner}; only one of the two loads "
                "when both are installed, so rename your entry point."
            )
    _check_typed(ep, where, problems)
    try:
        plugin = ep.load()
    except Exception as exc:  # noqa: BLE001  # a plugin may raise anything on import: report it
        problems.append(f"{where}: importing it fails: {type(exc).__name__}: {exc}")
        return
    records: list[tuple[Kind, Any, str]] = []
    for attribute, function, hook in _hook_functions(plugin, where, problems):
        kind, record_type = _RECORDS[hook]
        try:
            returned = function()
        except Exception as exc:  # noqa: BLE001  # reported, the other hooks are still checked
            problems.append(f"{where}: {attribute}() raised {type(exc).__name__}: {exc}")
            continue
        if not isinstance(returned, list | tuple):
            problems.append(f"{where}: {attribute}() returned {returned!r}; return a list of {record_type.__name__}.")
            continue
        for index, record in enumerate(returned):
            if not isinstance(record, record_type):
                problems.append(
                    f"{where}: {attribute}()[{index}] is {record!r}; return {record_type.__name__} records."
                )
                continue
            records.append((kind, record, f"{kind} {record.name!r}"))
    seen: set[tuple[str, str]] = set()
    for kind, record, label in records:
        if (kind, record.name) in seen:
            problems.append(f"{label}: registered twice by the plugin {ep.name!r}; give each its own name.")
            continue
        seen.add((kind, record.name))
        provides.append((kind, record.name))
        problems.extend(f"{label}: {text}" for text in _record_problems(kind, record))
        problems.extend(f"{label}: {text}" for text in _clashes(kind, record, ep.name, others))
    built = _factory_problems(ep.name, plugin, records)
    problems.extend(built)


def _check_typed(ep: metadata.EntryPoint, where: str, problems: list[str]) -> None:
    package = ep.value.partition(":")[0].strip().split(".")[0]
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        return  # the import failure is reported by the import itself
    locations = list(spec.submodule_search_locations or ())
    if not locations:
        problems.append(
            f"{where}: {package!r} is a single module, so it cannot carry a py.typed marker; make it a "
            f"package ({package}/__init__.py) with an empty py.typed file."
        )
        return
    if not any((Path(location) / "py.typed").is_file() for location in locations):
        problems.append(
            f"{where}: the package {package!r} has no py.typed file, so mypy ignores its type hints for "
            f"your users; add an empty src/{package}/py.typed."
        )


def _hook_functions(plugin: Any, where: str, problems: list[str]) -> Iterator[tuple[str, Callable[[], Any], str]]:
    """The plugin's hook implementations that match a hookspec; the others are reported."""
    for attribute in sorted(dir(plugin)):
        if attribute.startswith("__"):
            continue
        value: Any = getattr(plugin, attribute, None)
        options = getattr(value, _IMPL_MARK, None)
        if not isinstance(options, dict):
            if attribute.startswith("beamfilter_register_") and callable(value):
                problems.append(
                    f"{where}: {attribute} is named like a hook but is not marked @hookimpl "
                    "(from beamfilter_core import hookimpl), so beamfilter never calls it."
                )
            continue
        hook = str(options.get("specname") or attribute)
        if hook not in _RECORDS:
            problems.append(
                f"{where}: {attribute} is marked @hookimpl but beamfilter has no hook named {hook!r}.{_closest(hook)}"
            )
            continue
        if inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value):
            problems.append(f"{where}: {attribute} is async; hooks are plain functions: {hook}() -> list[...].")
            continue
        taken = _parameters(value)
        if taken:
            problems.append(
                f"{where}: {attribute}({', '.join(taken)}) does not match the hook {hook}(), which passes no "
                "arguments; remove its parameters."
            )
            continue
        yield attribute, value, hook


def _closest(name: str, known: Iterable[str] = _RECORDS) -> str:
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" Did you mean {close[0]!r}?" if close else ""


def _parameters(function: Any) -> list[str]:
    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return []
    return [
        str(p)
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _record_problems(kind: str, record: Any) -> Iterator[str]:
    if not isinstance(record.summary, str) or not record.summary.strip():
        yield (
            "has no summary; give a one-line summary (summary=...), shown by `beamfilter plugins` and in config errors."
        )
    if isinstance(record, FilterSpec):
        if not record.scopes:
            yield 'declares no scopes; list the scopes its filter uses, e.g. scopes=("turn",).'
        for scope in record.scopes:
            if scope not in _TOKEN_SCOPES:
                yield f"has the scope {scope!r}; scopes are {', '.join(_TOKEN_SCOPES)}."
    if isinstance(record, PresetSpec | CommandSpec):
        return
    schema = record.options_schema
    if not isinstance(schema, Mapping):
        yield f"options_schema is {schema!r}; give a JSON schema mapping."
        return
    if dict(schema) == _DEFAULT_SCHEMA and record.options_type is None:
        yield (
            "has no options schema, so any option is accepted and a misspelt one is silently ignored; "
            'give options_schema={"type": "object", "properties": {...}, "additionalProperties": False}.'
        )
        return
    try:
        fastjsonschema.compile(dict(schema))
    except fastjsonschema.JsonSchemaDefinitionException as exc:
        yield f"options_schema is not a valid JSON schema (fastjsonschema: {exc})."
        return
    yield from _default_problems(record, schema)


def _default_problems(record: Any, schema: Mapping[str, Any]) -> Iterator[str]:
    """Each default a user gets by leaving an option out, checked against that option's own
    schema: the schema's ``default`` values, and the factory's keyword defaults that are
    plain JSON values (``None`` means "not given" and is left out)."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return
    defaults = {
        key: (value["default"], "the schema's default")
        for key, value in properties.items()
        if isinstance(value, Mapping) and "default" in value
    }
    if record.options_type is None:
        with contextlib.suppress(TypeError, ValueError):
            for parameter in inspect.signature(record.factory).parameters.values():
                default = parameter.default
                if parameter.name in properties and type(default) in (str, int, float, bool):
                    defaults.setdefault(parameter.name, (default, f"the default of {_callable_name(record.factory)}()"))
    shared = {key: schema[key] for key in ("definitions", "$defs") if key in schema}
    for key, (default, origin) in defaults.items():
        if key == "name" or not isinstance(properties[key], Mapping):
            continue  # ``name`` is the core's option
        try:
            fastjsonschema.compile({**shared, **properties[key]})(default)
        except fastjsonschema.JsonSchemaDefinitionException:
            continue  # e.g. a $ref the option's schema cannot resolve alone: the whole schema compiled
        except fastjsonschema.JsonSchemaValueException as exc:
            problem = exc.message.replace("data", key, 1)
            yield f"the option {key!r} defaults to {default!r} ({origin}), which fails its own schema: {problem}."


def _callable_name(function: Any) -> str:
    return str(getattr(function, "__qualname__", None) or getattr(function, "__name__", None) or repr(function))


def _clashes(kind: Kind, record: Any, plugin: str, others: Registry) -> Iterator[str]:
    accessor: Callable[[], tuple[Any, ...]] = getattr(others, _ACCESSORS[kind])
    for item in accessor():
        if item.plugin == plugin:
            continue
        owner = f"the plugin {item.plugin!r} ({item.distribution or 'registered in code'})"
        if kind == "store":  # users pick a store by its URL scheme, never by name
            for scheme in sorted(set(record.schemes) & set(item.spec.schemes)):
                yield f"the URL scheme {scheme!r} is also served by {owner}; rename the scheme."
        elif item.name == record.name and kind == "command":
            yield f"{owner} adds a command of the same name; `beamfilter {record.name}` runs only one of them."
        elif item.name == record.name:
            use = f"preset:{plugin}:{record.name}" if kind == "preset" else f"{plugin}:{record.name}"
            yield (
                f"{owner} provides a {kind} of the same name; users who install both must write "
                f"use = {use!r}. Rename it unless that is intended."
            )


def _factory_problems(plugin_name: str, plugin: Any, records: list[tuple[Kind, Any, str]]) -> list[str]:
    """Build each filter and toolset with default options through the config, as a user
    enabling it by name would (skipped when its schema requires options)."""
    problems: list[str] = []
    candidates = [
        (kind, record, label)
        for kind, record, label in records
        if kind in ("filter", "toolset") and not _requires_options(record)
    ]
    if not candidates:
        return problems
    try:
        registry = Registry.from_plugins({plugin_name: plugin}, strict=True)
        registry.load()
    except BeamfilterError:
        return problems  # the records' own problems were reported above
    from ._config import build_config

    for kind, record, label in candidates:
        use = f"{plugin_name}:{record.name}"
        section = "filters" if kind == "filter" else "tools"
        config = {"model": {"use": "scripted", "script": ["ok"]}, section: [{"use": use}]}
        try:
            build_config(config, registry=registry)
        except ConfigError as exc:
            problems.append(f"{label}: building it with default options fails: {_problem_text(exc)}")
        except Exception as exc:  # noqa: BLE001  # a factory may raise anything: report it
            problems.append(f"{label}: building it with default options fails: {type(exc).__name__}: {exc}")
    return problems


def _requires_options(record: Any) -> bool:
    """True when ``{}`` fails the schema: the user must give options, so there are no defaults."""
    schema = record.options_schema
    if record.options_type is not None:
        return False
    try:
        fastjsonschema.compile(dict(schema))({})
    except fastjsonschema.JsonSchemaException:
        return True
    return False


def _problem_text(exc: ConfigError) -> str:
    listed = getattr(exc, "problems", None)
    if listed:
        return "; ".join(str(p) for p in listed)
    return str(exc)


def run_check(args: Any) -> int:
    """``beamfilter plugins check [DIST]``: 0 when nothing was found, 1 otherwise."""
    import sys

    names = [args.dist] if args.dist else plugin_distributions()
    if not names:
        print("No plugin distributions are installed in this environment; nothing to check.", file=sys.stderr)
        return 1
    found = False
    for name in names:
        report = check_distribution(name)
        found = found or not report.ok
        for line in report.lines():
            print(line)
    return 1 if found else 0
