"""Build a kernel from a ``beamfilter.toml`` file or a dict (see docs/configuration.md).

Filters, models, stores and toolsets are enabled by name through the :class:`Registry`. Every
option is validated against its spec's compiled JSON schema when the kernel is built
(:mod:`._options`), the ``[kernel]`` table against the kernel's own (:mod:`._kernel_options`),
and all problems are reported at once in one :class:`ConfigError`.
"""

from __future__ import annotations

import contextvars
import copy
import os
import tomllib
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import attrs

from ._filter import FILTER_NAME as _FILTER_NAME
from ._filter import normalise
from ._imports import ImportPolicy, NotImported, import_policy
from ._kernel import Kernel
from ._kernel_options import KERNEL_OPTIONS
from ._options import UNRESOLVED, accepted_options, check_options, unwrap_factory, wants_build
from ._paths import Place, resolve_paths
from ._registered import compile_schema
from ._registry import CORE_PLUGIN, Registered, Registry, suggest
from ._specs import BuildContext, SectionSpec
from ._tools import Tool
from ._toolsets import CORE_OPTIONS, Toolset, as_toolset, check_core_options, import_reference, select_tools
from .errors import BeamfilterError, ConfigError, PluginError

__all__ = ["BuiltConfig", "BuiltFilter", "BuiltToolset", "build_config", "kernel_from_config", "read_config"]

#: Stands for a ``$env`` value that could not be resolved (already reported).
_UNRESOLVED = UNRESOLVED

#: A config nested deeper than this is refused (real configs use fewer than ten levels).
MAX_DEPTH = 64

#: The path options met while a config file is built (for ``beamfilter chain``).
_PLACES: contextvars.ContextVar[list[Place] | None] = contextvars.ContextVar("beamfilter_places", default=None)

_TOP_KEYS = ("filters", "kernel", "model", "models", "plugins", "tools")
_PLUGIN_KEYS = ("disable", "only", "strict")
#: The core's own ``[kernel]`` section, checked like a plugin's section against its one schema.
_KERNEL_SPEC = SectionSpec("kernel", dict, KERNEL_OPTIONS, "the kernel's settings")
_KERNEL = Registered(_KERNEL_SPEC, CORE_PLUGIN, "beamfilter-core", None, compile_schema(_KERNEL_SPEC, "[kernel]"))


@attrs.frozen(slots=True)
class BuiltFilter:
    """One ``[[filters]]`` entry once built: where it came from and the filter object."""

    index: int
    use: str
    qualified: str
    filter: Any
    #: The ``use = "preset:..."`` entry this filter was expanded from, or None.
    preset: str | None = None


@attrs.frozen(slots=True)
class BuiltToolset:
    """One ``[[tools]]`` entry once built: its ``use`` (a toolset or a Python reference)
    and the toolset."""

    index: int
    use: str
    toolset: Toolset


@attrs.frozen(slots=True)
class BuiltConfig:
    """The kernel a config built, with the registry and the provenance of each filter."""

    kernel: Kernel
    registry: Registry
    filters: tuple[BuiltFilter, ...]
    model: str | None
    source: str
    #: The objects the plugin-registered top-level sections built (``[durable]``...), by name.
    sections: Mapping[str, Any] = attrs.field(factory=dict)
    #: The ``[[tools]]`` entries, built.
    toolsets: tuple[BuiltToolset, ...] = ()
    #: The folder relative paths of the config are taken from (None for a dict config).
    config_dir: str | None = None
    #: Every path option, as written and as resolved from ``config_dir``.
    places: tuple[Place, ...] = ()

    def runner(self) -> Any:
        """What runs this config's turns: the kernel, or the object a section's ``runner(built)``
        returns (e.g. ``[durable]`` runs each turn as a durable workflow).

        Raises:
            ConfigError: two sections each want to run the turns.
        """
        wanting = [
            (name, section) for name, section in self.sections.items() if callable(getattr(section, "runner", None))
        ]
        if not wanting:
            return self.kernel
        if len(wanting) > 1:
            names = ", ".join(f"[{name}]" for name, _ in wanting)
            msg = f"{self.source}: the sections {names} each run the turns; keep one of them."
            raise ConfigError(msg)
        return wanting[0][1].runner(self)


def read_config(config: Any) -> tuple[dict[str, Any], str | None, str]:
    """Return ``(data, config_dir, label)`` for a TOML path or a mapping.

    Raises:
        ConfigError: the file is missing or is not valid TOML, or ``config`` has a wrong type.
    """
    if isinstance(config, Mapping):
        _check_depth(config, "config")
        return copy.deepcopy(dict(config)), None, "config"
    if isinstance(config, str | os.PathLike):
        path = Path(config)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            msg = f"The config file {str(path)!r} does not exist."
            raise ConfigError(msg) from None
        except UnicodeDecodeError as exc:
            msg = (
                f"{path} is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
                "TOML files are UTF-8: save it as UTF-8."
            )
            raise ConfigError(msg) from None
        except OSError as exc:
            msg = f"The config file {str(path)!r} cannot be read: {exc}."
            raise ConfigError(msg) from exc
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            msg = f"{path} is not valid TOML: {exc}."
            raise ConfigError(msg) from exc
        except ValueError:  # Python reads no integer of more than 4300 digits
            msg = f"{path} holds an integer of more than 4300 digits; write a smaller number."
            raise ConfigError(msg) from None
        except RecursionError:
            msg = f"{path} is nested too deeply to read (more than {MAX_DEPTH} levels is refused)."
            raise ConfigError(msg) from None
        _check_depth(data, str(path))
        return data, str(path.resolve().parent), str(path)
    msg = f"A config is a path to a TOML file or a dict; got {config!r} (a {type(config).__name__})."
    raise ConfigError(msg)


def _check_depth(data: Mapping[str, Any], label: str) -> None:
    """Refuse a config nested deeper than :data:`MAX_DEPTH`, naming where (iterative: no recursion)."""
    stack: list[tuple[Any, str, int]] = [(data, "", 0)]
    while stack:
        value, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            msg = f"{label}: {path} is nested more than {MAX_DEPTH} levels deep; flatten it."
            raise ConfigError(msg, (f"{path}: nested more than {MAX_DEPTH} levels deep",))
        if isinstance(value, Mapping):
            stack.extend((item, f"{path}.{key}" if path else str(key), depth + 1) for key, item in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(value))


def _resolve_env(value: Any, path: str, problems: list[str], secrets: dict[str, str] | None = None) -> Any:
    """Replace every ``{"$env": "NAME"}`` (optionally with ``default``) by the variable's value."""
    if isinstance(value, Mapping):
        if "$env" in value:
            name = value["$env"]
            extra = set(value) - {"$env", "default"}
            if not isinstance(name, str) or not name or extra:
                problems.append(f'{path}: write secrets as {{ "$env" = "NAME" }} (optionally with default = ...).')
                return _UNRESOLVED
            if name in os.environ:
                resolved = os.environ[name]
                if secrets is not None and resolved:
                    secrets[resolved] = name
                return resolved
            if "default" in value:
                return value["default"]
            problems.append(f"{path}: the environment variable {name} is not set.")
            return _UNRESOLVED
        return {
            key: _resolve_env(item, f"{path}.{key}" if path else key, problems, secrets) for key, item in value.items()
        }
    if isinstance(value, list):
        return [_resolve_env(item, f"{path}[{i}]", problems, secrets) for i, item in enumerate(value)]
    return value


def _hide_env_values(problems: list[str], secrets: Mapping[str, str]) -> list[str]:
    """Problems with every value read from the environment shown as ``<from $env NAME>``."""
    if not secrets:
        return problems
    # longest first, so a value containing another is replaced whole
    ordered = sorted(secrets.items(), key=lambda item: -len(item[0]))
    out = []
    for line in problems:
        for value, name in ordered:
            line = line.replace(repr(value), f"<from $env {name}>")
            if len(value) >= 6:  # a short value ("1") would also match unrelated text
                line = line.replace(value, f"<from $env {name}>")
        out.append(line)
    return out


def _build(item: Registered[Any], options: Any, context: BuildContext, where: str, problems: list[str]) -> Any:
    """Call the spec's factory with validated options (past the Python-call check of
    :func:`options_schema`: the config's options were checked already)."""
    factory = unwrap_factory(item.spec.factory)
    extra = {"build": attrs.evolve(context, where=where)} if wants_build(factory) else {}
    try:
        if item.spec.options_type is not None:
            return factory(options, **extra)
        return factory(**options, **extra)
    except ConfigError as exc:
        # a factory told the build's place (BuildContext.where) names it itself
        problems.extend(p if p.startswith((f"{where}.", f"{where}:")) else f"{where}: {p}" for p in exc.problems)
    except Exception as exc:  # noqa: BLE001  # a plugin's factory may raise anything: report it with its place
        problems.append(f"{where}: {item.qualified!r} could not be built: {type(exc).__name__}: {exc}")
    return None


def _checked(
    item: Registered[Any], kind: str, options: dict[str, Any], where: str, context: BuildContext, problems: list[str]
) -> Any:
    """:func:`check_options`, after the table's relative paths were taken from the config's folder."""
    places = _PLACES.get()
    if context.config_dir is not None and places is not None:
        options = resolve_paths(item.spec.options_schema, options, where, context.config_dir, places)
    return check_options(item, kind, options, where, problems)


def _table(data: Mapping[str, Any], key: str, problems: list[str]) -> dict[str, Any] | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, Mapping):
        problems.append(f"{key}: must be a table ([{key}]), got {value!r}.")
        return None
    return dict(value)


def _registry_for(plugins: dict[str, Any] | None, registry: Registry | None, problems: list[str]) -> Registry:
    plugins = plugins or {}
    for key in plugins:
        if key not in _PLUGIN_KEYS:
            problems.append(
                f"plugins.{key}: unknown key.{suggest(key, _PLUGIN_KEYS)} Known keys: {', '.join(_PLUGIN_KEYS)}."
            )
    lists: dict[str, list[str] | None] = {}
    for key in ("disable", "only"):
        value = plugins.get(key)
        if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            problems.append(f"plugins.{key}: must be a list of plugin names, got {value!r}.")
            value = None
        lists[key] = value
    strict = plugins.get("strict")
    if strict is not None and not isinstance(strict, bool):
        problems.append(f"plugins.strict: must be true or false, got {strict!r}.")
        strict = None
    try:
        if registry is None:
            return Registry(strict=strict, only=lists["only"], disable=lists["disable"])
        if lists["disable"]:
            registry.block(lists["disable"])
        if lists["only"] is not None:
            registry.allow_only(lists["only"])
    except ConfigError as exc:
        problems.extend(exc.problems)
    return registry if registry is not None else Registry()


def _entries(section: str, entries: Any, problems: list[str]) -> Iterator[tuple[int, str, str, dict[str, Any]]]:
    """``(index, where, use, options)`` of each well-formed table of an array section
    (``[[filters]]``, ``[[tools]]``); what is malformed is reported and skipped."""
    if not isinstance(entries, list):
        problems.append(f"{section}: must be an array of tables ([[{section}]] use = ...), got {entries!r}.")
        return
    for index, entry in enumerate(entries):
        where = f"{section}[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(f"{where}: must be a table with use = ..., got {entry!r}.")
            continue
        parsed = _split_use(entry, where, problems)
        if parsed is not None:
            yield index, where, *parsed


def _split_use(table: Mapping[str, Any], where: str, problems: list[str]) -> tuple[str, dict[str, Any]] | None:
    use = table.get("use")
    if not isinstance(use, str) or not use:
        problems.append(f'{where}.use: missing; name what to enable, e.g. use = "name" (got {use!r}).')
        return None
    return use, {k: v for k, v in table.items() if k != "use"}


def _model_from(
    registry: Registry, table: Mapping[str, Any], where: str, context: BuildContext, problems: list[str]
) -> tuple[Any, str | None]:
    parsed = _split_use(table, where, problems)
    if parsed is None:
        return None, None
    use, options = parsed
    try:
        item = registry.get_model(use)
    except PluginError as exc:
        problems.append(f"{where}.use: {exc}")
        return None, None
    checked = _checked(item, "model", options, where, context, problems)
    if checked is None:
        return None, item.qualified
    return _build(item, checked, context, where, problems), item.qualified


def _add_filter(
    reg: Registry,
    use: str,
    options: dict[str, Any],
    origin: tuple[int, str, str | None],
    context: BuildContext,
    built: list[BuiltFilter],
    problems: list[str],
) -> None:
    index, where, preset = origin
    try:
        item = reg.get_filter(use)
    except PluginError as exc:
        problems.append(f"{where}.use: {exc}")
        return
    name = _core_name(item, options, where, problems)
    checked = _checked(item, "filter", options, where, context, problems)
    if checked is None or name is _UNRESOLVED:
        return
    flt = _build(item, checked, context, where, problems)
    if flt is not None:
        built.append(BuiltFilter(index, use, item.qualified, _renamed(flt, name, where, problems), preset))


def _core_name(item: Registered[Any], options: dict[str, Any], where: str, problems: list[str]) -> Any:
    """The ``name`` every filter accepts; taken out of ``options`` unless the filter declares it.

    A name lets the same filter be enabled twice (filter names key their private state).
    Returns None when no name is given, ``_UNRESOLVED`` after a problem.
    """
    if "name" not in options:
        return None
    name = options["name"]
    if not isinstance(name, str) or not _FILTER_NAME.match(name):
        problems.append(
            f"{where}.name: must be a filter name (letters, digits, '_', '-', '.' or ':', starting with a letter), "
            f"got {name!r}."
        )
        options.pop("name")
        return _UNRESOLVED
    declared = "name" in item.spec.options_schema.get("properties", {})
    if not declared and item.spec.options_type is None:
        accepted = accepted_options(item.spec.factory)
        declared = accepted is None or "name" in accepted
    if not declared:
        options.pop("name")
    return name


def _renamed(flt: Any, name: str | None, where: str, problems: list[str]) -> Any:
    """The built filter under the configured ``name`` (any filter-like object becomes a Filter)."""
    if name is None or getattr(flt, "name", None) == name:
        return flt
    try:
        compiled = normalise(flt, 0).filter
    except ConfigError as exc:
        problems.append(f"{where}: {exc}")
        return flt
    return attrs.evolve(compiled, name=name)


def _preset_key(table: Mapping[str, Any]) -> str:
    """How overrides name a filter of a preset: its ``name`` option, else its unqualified use."""
    name = table.get("name")
    return name if isinstance(name, str) else str(table["use"]).rpartition(":")[2]


def _expand_preset(
    reg: Registry, use: str, overrides: dict[str, Any], where: str, problems: list[str]
) -> list[tuple[str, str, dict[str, Any]]]:
    """The ``(where, use, options)`` of each filter of a preset, with the entry's overrides.

    Overrides: ``exclude = ["name", ...]`` leaves filters out; ``NAME = { option = value }``
    replaces options of the filter NAME. Problems inside the preset are reported as
    ``filters[i](preset:NAME)[j].option``.
    """
    try:
        preset = reg.get_preset(use).spec
    except PluginError as exc:
        problems.append(f"{where}.use: {exc}")
        return []
    tables = [copy.deepcopy(dict(table)) for table in preset.filters]
    keys = [_preset_key(table) for table in tables]
    exclude = overrides.pop("exclude", [])
    if not (isinstance(exclude, list) and all(isinstance(name, str) for name in exclude)):
        problems.append(f"{where}.exclude: must be a list of filter names of {use!r}, got {exclude!r}.")
        exclude = []
    for key in [*exclude, *overrides]:
        if key not in keys:
            problems.append(
                f"{where}.{key}: the preset {use!r} has no filter named {key!r}.{suggest(key, keys)} "
                f"Its filters: {', '.join(keys)}; override one with {keys[0]} = {{ option = value }} "
                "or leave it out with exclude = [...]."
            )
    for key, value in overrides.items():
        if key not in keys:
            continue
        if not isinstance(value, Mapping):
            problems.append(f"{where}.{key}: give a table of options for {key!r}, got {value!r}.")
            continue
        if "use" in value:
            problems.append(f"{where}.{key}.use: a preset's filter cannot be replaced; exclude it and add another.")
            continue
        tables[keys.index(key)].update(value)
    label = f"{where}({use})"
    return [
        (f"{label}[{position}]", table.pop("use"), table)
        for position, (key, table) in enumerate(zip(keys, tables, strict=True))
        if key not in exclude
    ]


def build_config(
    config: Any,
    *,
    registry: Registry | None = None,
    tools: Iterable[Tool | Toolset | Callable[..., Any]] = (),
    **overrides: Any,
) -> BuiltConfig:
    """Build a kernel from a config, keeping where each filter came from (used by the CLI).

    Modules the config names are imported under :func:`import_policy`: never from a
    blocked plugin, and not at all inside an inspect-only policy (``beamfilter chain``).

    Raises:
        ConfigError: with ``problems`` listing every problem found, each with its path.
    """
    places: list[Place] = []
    token = _PLACES.set(places)
    try:
        with import_policy() as policy:
            built = _build_config(config, policy, registry, tools, overrides)
    finally:
        _PLACES.reset(token)
    return attrs.evolve(built, places=tuple(places))


def _build_config(
    config: Any,
    policy: ImportPolicy,
    registry: Registry | None,
    tools: Iterable[Tool | Toolset | Callable[..., Any]],
    overrides: dict[str, Any],
) -> BuiltConfig:
    data, config_dir, label = read_config(config)
    problems: list[str] = []
    # resolve per section: a top-level "$env" key is an unknown section, not an indirection
    secrets: dict[str, str] = {}
    data = {key: _resolve_env(value, key, problems, secrets) for key, value in data.items()}
    reg = _registry_for(_table(data, "plugins", problems), registry, problems)
    policy.registry = reg
    plugin_sections = _plugin_sections(reg, data, problems)
    kernel_opts = check_options(_KERNEL, "section", _table(data, "kernel", problems) or {}, "kernel", problems) or {}
    context = BuildContext(registry=reg, config_dir=config_dir)

    model = overrides.pop("model", None)
    model_use: str | None = None
    if model is None:
        table = _table(data, "model", problems)
        if table is None:
            # a section that names the kernel its turns run on stands in the file's model
            stand_ins = [item.spec.model(t) for item, t in plugin_sections.values() if item.spec.model]
            model = next((m for m in stand_ins if m is not None), None)
            if "model" not in data and model is None:
                problems.append(
                    'model: missing; add a [model] table, e.g. [model] use = "openai" model = "gpt-4o-mini".'
                )
        else:
            model, model_use = _model_from(reg, table, "model", context, problems)
    context = attrs.evolve(context, model=model)

    models: dict[str, Any] = {}
    for name, table in (_table(data, "models", problems) or {}).items():
        where = f"models.{name}"
        if not isinstance(table, Mapping):
            problems.append(f"{where}: must be a table ([models.{name}]) with use = ..., got {table!r}.")
            continue
        models[name], _ = _model_from(reg, table, where, context, problems)
    context = attrs.evolve(context, models=models)

    built: list[BuiltFilter] = []
    for index, where, use, options in _entries("filters", data.get("filters", []), problems):
        if not use.startswith("preset:"):
            _add_filter(reg, use, options, (index, where, None), context, built, problems)
            continue
        for inner_where, inner_use, inner_options in _expand_preset(reg, use, options, where, problems):
            _add_filter(reg, inner_use, inner_options, (index, inner_where, use), context, built, problems)

    sections: dict[str, Any] = {}
    for name, (item, table) in plugin_sections.items():
        options = _checked(item, "section", table, name, context, problems)
        if options is not None:
            sections[name] = _build(item, options, context, name, problems)

    toolsets = _toolsets_from(reg, data.get("tools", []), context, problems)

    if problems:
        problems = _hide_env_values(problems, secrets)
        count = f"{len(problems)} problem" + ("s" if len(problems) > 1 else "")
        msg = f"{label} has {count}:\n" + "\n".join(f"  - {p}" for p in problems)
        raise ConfigError(msg, problems)
    all_tools = [*tools, *(b.toolset for b in toolsets)]
    try:
        kernel = Kernel(model, all_tools, [b.filter for b in built], **{**kernel_opts, **overrides})
    except ConfigError as exc:
        if not secrets:
            raise
        hidden = _hide_env_values([str(exc)], secrets)[0]
        raise ConfigError(hidden, _hide_env_values(list(exc.problems), secrets)) from None
    return BuiltConfig(kernel, reg, tuple(built), model_use, label, sections, tuple(toolsets), config_dir)


def _plugin_sections(
    reg: Registry, data: Mapping[str, Any], problems: list[str]
) -> dict[str, tuple[Registered[Any], dict[str, Any]]]:
    """The top-level tables that are not core sections: each must be one a plugin registers."""
    found: dict[str, tuple[Registered[Any], dict[str, Any]]] = {}
    unknown = [key for key in data if key not in _TOP_KEYS]
    if not unknown:
        return found
    known = sorted({*_TOP_KEYS, *(item.name for item in reg.sections())})
    for key in unknown:
        if key not in known:  # a top-level "$env" key lands here too: never an indirection
            problems.append(f"{key}: unknown section.{suggest(key, known)} Known sections: {', '.join(known)}.")
            continue
        try:
            item = reg.get_section(key)
        except BeamfilterError as exc:  # several plugins read a section of that name
            problems.append(f"{key}: {exc}")
            continue
        table = _table(data, key, problems)
        if table is not None:
            found[key] = (item, table)
    return found


def _toolsets_from(reg: Registry, entries: Any, context: BuildContext, problems: list[str]) -> list[BuiltToolset]:
    """The ``[[tools]]`` entries: ``use = "toolset"`` / ``"plugin:toolset"`` or a Python
    reference ``"package.module:function"`` (a function, a Tool, a list or a Toolset)."""
    out: list[BuiltToolset] = []
    plugins = {info.name for info in reg.plugins() if info.status == "loaded"}
    for index, where, use, options in _entries("tools", entries, problems):
        selection = check_core_options(options, where, problems)
        head, colon, _ = use.partition(":")
        if colon and head not in plugins:
            if options:
                problems.append(
                    f"{where}: {use!r} is a Python reference and takes no options but "
                    f"{', '.join(CORE_OPTIONS)}; got {', '.join(sorted(options))}."
                )
                continue
            try:
                value = import_reference(use, context.config_dir)
                if isinstance(value, NotImported):
                    # an inspection build imports nothing: an empty toolset stands for the reference
                    out.append(BuiltToolset(index, use, Toolset(name=use)))
                    continue
                toolset = as_toolset(value, use)
            except ConfigError as exc:
                problems.append(f"{where}.use: {exc}")
                continue
        else:
            toolset_or_none = _toolset_from_plugin(reg, use, options, where, context, problems)
            if toolset_or_none is None:
                continue
            toolset = toolset_or_none
        try:
            out.append(BuiltToolset(index, use, select_tools(toolset, **selection, where=where)))
        except ConfigError as exc:
            problems.append(str(exc))
    return out


def _toolset_from_plugin(
    reg: Registry, use: str, options: dict[str, Any], where: str, context: BuildContext, problems: list[str]
) -> Toolset | None:
    try:
        item = reg.get_toolset(use)
    except PluginError as exc:
        hint = "" if ":" in use else ' (a Python function is named "package.module:function")'
        problems.append(f"{where}.use: {exc}{hint}")
        return None
    checked = _checked(item, "toolset", options, where, context, problems)
    if checked is None:
        return None
    value = _build(item, checked, context, where, problems)
    if value is None:
        return None
    try:
        return as_toolset(value, f"the toolset {item.qualified!r}")
    except ConfigError as exc:
        problems.append(f"{where}: {exc}")
        return None


def kernel_from_config(
    config: Any,
    *,
    registry: Registry | None = None,
    tools: Iterable[Tool | Toolset | Callable[..., Any]] = (),
    **overrides: Any,
) -> Kernel:
    """Build a :class:`Kernel` from a TOML path or a dict; ``overrides`` are Kernel arguments.

    Example::

        kernel = Kernel.from_config({"model": {"use": "scripted", "script": ["Hi!"]}})
    """
    return build_config(config, registry=registry, tools=tools, **overrides).kernel
