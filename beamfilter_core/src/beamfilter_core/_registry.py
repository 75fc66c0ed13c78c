"""The plugin registry: entry-point discovery through pluggy, isolated per plugin.

Every :class:`Registry` owns its own ``PluginManager("beamfilter")`` and loads lazily, on
first use. Each entry point of the ``beamfilter`` group is loaded and registered inside
its own error handling: a plugin that fails to import, or returns an invalid record, is
recorded as failed and the others keep working (``strict=True`` re-raises instead).
Host code uses the typed accessors (:meth:`Registry.get_filter`...), never ``pm.hook``.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from importlib import metadata
from typing import Any, Literal

import pluggy

from . import _hookspecs
from ._entry_points import EntryPointLike, StaticEntryPoint, dist_of
from ._registered import PluginInfo, Registered, compile_schema
from ._specs import CommandSpec, FilterSpec, ModelSpec, PresetSpec, SectionSpec, StoreSpec, ToolsetSpec
from .errors import AmbiguousFilterError, ConfigError, PluginLoadError, UnknownNameError

__all__ = [
    "CORE_PLUGIN",
    "EntryPointLike",
    "PluginInfo",
    "Registered",
    "Registry",
    "StaticEntryPoint",
    "list_plugins",
]

log = logging.getLogger("beamfilter_core.plugins")


@contextlib.contextmanager
def quiet_plugin_log() -> Iterator[None]:
    """Silence the registry's warning lines for a while (a command that reports the
    failures itself), and restore the logger as it was, whatever happens inside."""
    disabled = log.disabled
    log.disabled = True
    try:
        yield
    finally:
        log.disabled = disabled


GROUP = "beamfilter"
#: The core's own plugin (the model providers): always registered, cannot be blocked.
CORE_PLUGIN = "core"
_CORE_MODULE = "beamfilter_core._core_plugin"
_CORE_DIST = "beamfilter-core"

Kind = Literal["filter", "store", "model", "preset", "section", "command", "toolset"]

# hook name -> (kind, record type it must return)
_HOOKS: dict[str, tuple[Kind, type[Any]]] = {
    "beamfilter_register_filters": ("filter", FilterSpec),
    "beamfilter_register_stores": ("store", StoreSpec),
    "beamfilter_register_models": ("model", ModelSpec),
    "beamfilter_register_presets": ("preset", PresetSpec),
    "beamfilter_register_sections": ("section", SectionSpec),
    "beamfilter_register_commands": ("command", CommandSpec),
    "beamfilter_register_tools": ("toolset", ToolsetSpec),
}
_PLURAL: dict[Kind, str] = {
    "filter": "filters",
    "store": "stores",
    "model": "models",
    "preset": "presets",
    "section": "sections",
    "command": "commands",
    "toolset": "toolsets",
}


def core_version() -> str:
    """The installed beamfilter-core version (the package's own when not installed)."""
    try:
        return metadata.version(_CORE_DIST)
    except metadata.PackageNotFoundError:  # running from a source tree
        from . import __version__

        return __version__


def _truthy(value: str | None) -> bool:
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def _names(value: Iterable[str] | None, where: str) -> frozenset[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        msg = f"{where} is the string {value!r}; give a list of plugin names, e.g. [{value!r}]."
        raise ConfigError(msg)
    return frozenset(value)


def suggest(name: str, known: Iterable[str]) -> str:
    """``" Did you mean 'x'?"`` for the closest known names, or ``""``."""
    close = difflib.get_close_matches(name, sorted(set(known)), n=3, cutoff=0.6)
    if not close:
        return ""
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?"


class _Loaded:
    """What one plugin contributed (kept so that a later failure can roll it back)."""

    __slots__ = ("hooks", "items")

    def __init__(self) -> None:
        self.items: list[tuple[Kind, Registered[Any]]] = []
        self.hooks: list[str] = []


class Registry:
    """Filters, stores, model providers, presets and toolsets of the installed ``beamfilter`` plugins.

    Args:
        entry_points: where plugins come from; default the ``beamfilter`` entry-point
            group of the installed distributions. Tests pass :class:`StaticEntryPoint`
            values (or a callable returning them).
        autoload: ``False`` loads no entry points (only the core plugin and what you
            :meth:`register`).
        strict: re-raise plugin failures as :class:`PluginLoadError`; default from
            ``BEAMFILTER_STRICT_PLUGINS=1``.
        only: load only these entry-point names (an allowlist). The environment variable
            ``BEAMFILTER_PLUGINS="a,b"`` does the same (``""`` loads none).
        disable: never import these entry-point names.
        environ: the environment to read (default ``os.environ``).
        kinds: collect only these kinds of record (``("command",)``); default all. The
            command line lists plugin commands this way, so that no plugin's filters are
            imported for ``beamfilter --help``.

    Example::

        registry = Registry()
        spec = registry.get_filter("retry").spec
    """

    def __init__(
        self,
        *,
        entry_points: Iterable[EntryPointLike] | Callable[[], Iterable[EntryPointLike]] | None = None,
        autoload: bool = True,
        strict: bool | None = None,
        only: Iterable[str] | None = None,
        disable: Iterable[str] | None = None,
        environ: Mapping[str, str] | None = None,
        kinds: Iterable[Kind] | None = None,
    ) -> None:
        env = os.environ if environ is None else environ
        if kinds is not None:
            kinds = frozenset(kinds)
            unknown = sorted(kinds - set(_PLURAL))
            if unknown:
                msg = f"Registry(kinds=...): unknown kind {unknown[0]!r}; give some of {', '.join(_PLURAL)}."
                raise ConfigError(msg)
        self._kinds: frozenset[Kind] | None = kinds
        self._source = entry_points
        self._autoload = autoload
        self.strict = _truthy(env.get("BEAMFILTER_STRICT_PLUGINS")) if strict is None else strict
        self._trace = _truthy(env.get("BEAMFILTER_TRACE_PLUGINS"))
        self._only = _names(only, "Registry(only=...)")
        allow = env.get("BEAMFILTER_PLUGINS")
        self._env_only = None if allow is None else frozenset(n.strip() for n in allow.split(",") if n.strip())
        self._disable: dict[str, str] = {}
        for name in _names(disable, "Registry(disable=...)") or ():
            self._block(name, "disabled by Registry(disable=...)")
        self._pm = pluggy.PluginManager(_hookspecs.PROJECT)
        self._pm.add_hookspecs(_hookspecs)
        self._lock = threading.RLock()
        self._loaded = False
        self._infos: dict[str, PluginInfo] = {}
        self._contrib: dict[str, _Loaded] = {}
        self._by_kind: dict[Kind, dict[str, list[Registered[Any]]]] = {kind: {} for kind in _PLURAL}
        self._qualified: dict[Kind, dict[str, Registered[Any]]] = {kind: {} for kind in _PLURAL}
        self.failures: list[PluginLoadError] = []

    @classmethod
    def from_plugins(cls, plugins: Mapping[str, Any], *, strict: bool = True) -> Registry:
        """A registry of the core plus ``plugins`` (name -> module or object), no entry points.

        For tests: ``Registry.from_plugins({"mine": MyPlugin()}).get_filter("mine:x")``.
        """
        registry = cls(autoload=False, strict=strict)
        for name, plugin in plugins.items():
            registry.register(plugin, name)
        return registry

    def __repr__(self) -> str:
        state = "loaded" if self._loaded else "not loaded"
        return f"Registry({state}, {len(self._infos)} plugins)"

    # -- blocking -------------------------------------------------------------------------

    def _block(self, name: str, reason: str) -> None:
        if name == CORE_PLUGIN:
            msg = f"The plugin {CORE_PLUGIN!r} provides beamfilter's model providers and cannot be disabled."
            raise ConfigError(msg)
        self._disable.setdefault(name, reason)

    def block(self, names: Iterable[str], reason: str = "disabled by config plugins.disable") -> None:
        """Block plugins by entry-point name before they are imported.

        Raises:
            ConfigError: a plugin is already loaded (block it when creating the registry).
        """
        names = list(_names(names, "plugins.disable") or ())
        with self._lock:
            late = [
                n
                for n in names
                if self._loaded and self._infos.get(n, None) is not None and self._infos[n].status == "loaded"
            ]
            if late:
                msg = (
                    f"plugins.disable: {', '.join(map(repr, late))} is already loaded by the registry given; "
                    f"create it with Registry(disable={sorted(late)!r}) instead."
                )
                raise ConfigError(msg)
            for name in names:
                self._block(name, reason)

    def allow_only(self, names: Iterable[str]) -> None:
        """Load only these entry-point names (config ``plugins.only``); before loading only."""
        allowed = _names(names, "plugins.only") or frozenset()
        with self._lock:
            if self._loaded:
                extra = sorted(
                    n for n, i in self._infos.items() if i.status == "loaded" and n != CORE_PLUGIN and n not in allowed
                )
                if extra:
                    msg = (
                        f"plugins.only: the registry given already loaded {', '.join(map(repr, extra))}; "
                        f"create it with Registry(only={sorted(allowed)!r}) instead."
                    )
                    raise ConfigError(msg)
            self._only = allowed if self._only is None else self._only & allowed

    def _blocked_reason(self, name: str) -> str | None:
        if name in self._disable:
            return self._disable[name]
        if self._env_only is not None and name not in self._env_only:
            return "not listed in BEAMFILTER_PLUGINS"
        if self._only is not None and name not in self._only:
            return "not listed in plugins.only"
        return None

    def check_import(self, module_name: str) -> None:
        """Refuse a module a config names when it lies inside a blocked plugin's package.

        A plugin's package is the top-level package of its entry point (``pkg`` for
        ``pkg._plugin``), unless a loaded plugin lives in the same package; then only the
        entry point's own module is refused.

        Raises:
            ConfigError: naming the module, the plugin and why it is blocked.
        """
        self.load()
        loaded = {
            i.module.partition(":")[0].strip().split(".")[0]
            for i in self._infos.values()
            if i.status == "loaded" and i.module
        }
        target = module_name.strip()
        for info in self._infos.values():
            if info.status != "blocked" or not info.module:
                continue
            module = info.module.partition(":")[0].strip()
            package = module.split(".")[0]
            root = module if package in loaded else package
            if target == root or target.startswith(root + "."):
                msg = (
                    f"The module {target!r} belongs to the plugin {info.name!r}, which is blocked "
                    f"({info.error}); a config cannot import it by path either."
                )
                raise ConfigError(msg)

    # -- loading --------------------------------------------------------------------------

    def load(self) -> Registry:
        """Discover and register the plugins now (otherwise done on first use)."""
        with self._lock:
            if not self._loaded:
                self._loaded = True
                self._load_all()
        return self

    def _entry_points(self) -> list[Any]:
        if not self._autoload:
            return []
        source = self._source
        if source is None:
            return list(metadata.entry_points(group=GROUP))
        if callable(source):
            source = source()
        return list(source)

    def _load_all(self) -> None:
        from . import _core_plugin

        version = core_version()
        self._add(_core_plugin, CORE_PLUGIN, _CORE_DIST, version, module=_CORE_MODULE, raise_errors=True)
        for ep in self._entry_points():
            name = ep.name
            dist, ver = dist_of(ep)
            if name == CORE_PLUGIN and ep.value.strip() == _CORE_MODULE:
                continue  # registered above, as an essential plugin
            if name in self._infos:
                self._fail(
                    name,
                    dist,
                    ver,
                    ep.value,
                    None,
                    f"another distribution ({self._infos[name].distribution}) already provides a plugin named {name!r}",
                    "uninstall one of the two distributions",
                )
                continue
            reason = self._blocked_reason(name)
            if reason is not None:
                self._pm.set_blocked(name)  # never imported
                self._infos[name] = PluginInfo(name, dist, ver, "blocked", module=ep.value, error=reason)
                continue
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001  # a plugin may raise anything on import: isolate it
                self._fail(name, dist, ver, ep.value, exc, None, None)
                continue
            self._add(obj, name, dist, ver, module=ep.value, raise_errors=False)

    def register(
        self, plugin: Any, name: str | None = None, *, distribution: str | None = None, version: str | None = None
    ) -> PluginInfo:
        """Register a plugin object (a module or an object with ``@hookimpl`` methods) in code.

        Raises:
            PluginLoadError: the plugin is invalid (nothing of it stays registered).
        """
        self.load()
        plugin_name = name or getattr(plugin, "__name__", None) or type(plugin).__name__
        with self._lock:
            if plugin_name in self._infos and self._infos[plugin_name].status == "loaded":
                msg = f"A plugin named {plugin_name!r} is already registered; give another name=."
                raise PluginLoadError(msg, plugin=plugin_name, distribution=distribution, version=version)
            self._add(plugin, plugin_name, distribution, version, module=None, raise_errors=True)
        return self._infos[plugin_name]

    def _add(
        self, obj: Any, name: str, dist: str | None, ver: str | None, *, module: str | None, raise_errors: bool
    ) -> None:
        contrib = _Loaded()
        try:
            self._pm.register(obj, name=name)
            try:
                self._pm.check_pending()  # hookimpls without a hookspec: a misspelt hook name
                self._collect(obj, name, dist, ver, contrib)
            except BaseException:
                self._pm.unregister(name=name)
                raise
        except Exception as exc:  # noqa: BLE001  # any failure of one plugin is recorded, the rest go on
            self._fail(name, dist, ver, module, exc, None, None, always_raise=raise_errors)
            return
        self._commit(contrib)
        self._contrib[name] = contrib
        kinds: dict[Kind, list[str]] = {kind: [] for kind in _PLURAL}
        for kind, item in contrib.items:
            kinds[kind].append(item.name)
        self._infos[name] = PluginInfo(
            name,
            dist,
            ver,
            "loaded",
            module=module,
            hooks=tuple(contrib.hooks),
            filters=tuple(kinds["filter"]),
            stores=tuple(kinds["store"]),
            models=tuple(kinds["model"]),
            presets=tuple(kinds["preset"]),
            sections=tuple(kinds["section"]),
            commands=tuple(kinds["command"]),
            toolsets=tuple(kinds["toolset"]),
        )

    def _collect(self, obj: Any, name: str, dist: str | None, ver: str | None, contrib: _Loaded) -> None:
        # Call this plugin's own impls one by one, so every record knows where it came from.
        seen: set[tuple[Kind, str]] = set()
        for caller in self._pm.get_hookcallers(obj) or ():
            kind, record_type = _HOOKS[caller.name]
            if self._kinds is not None and kind not in self._kinds:
                continue
            contrib.hooks.append(caller.name)
            for impl in caller.get_hookimpls():
                if impl.plugin is not obj:
                    continue
                if self._trace:
                    print(f"beamfilter: calling {name}.{caller.name}()", file=sys.stderr)
                records = impl.function()  # the hookspecs take no arguments
                if inspect.isgenerator(records):
                    records = list(records)
                if not isinstance(records, list | tuple):
                    msg = f"{caller.name}() returned {records!r}; return a list of {record_type.__name__}."
                    raise ConfigError(msg)
                for index, record in enumerate(records):
                    where = f"{caller.name}()[{index}]"
                    if not isinstance(record, record_type):
                        msg = f"{where} is {record!r}; return {record_type.__name__} records."
                        raise ConfigError(msg)
                    if (kind, record.name) in seen:
                        msg = f"{where}: the {kind} {record.name!r} is registered twice by this plugin."
                        raise ConfigError(msg)
                    seen.add((kind, record.name))
                    validator = compile_schema(record, f"{where} ({kind} {record.name!r})")
                    contrib.items.append((kind, Registered(record, name, dist, ver, validator)))

    def _commit(self, contrib: _Loaded) -> None:
        for kind, item in contrib.items:
            self._by_kind[kind].setdefault(item.name, []).append(item)
            self._qualified[kind][item.qualified] = item

    def _fail(
        self,
        name: str,
        dist: str | None,
        ver: str | None,
        module: str | None,
        exc: BaseException | None,
        reason: str | None,
        hint: str | None,
        *,
        always_raise: bool = False,
    ) -> None:
        error = reason or f"{type(exc).__name__}: {exc}"
        if hint is None:
            hint = _hint(name, dist, exc)
        where = f"{dist} {ver}" if dist else "(no distribution)"
        msg = (
            f"beamfilter plugin {name!r} from {where} failed to load with beamfilter-core "
            f"{core_version()}: {error}. Hint: {hint}"
        )
        failure = PluginLoadError(msg, plugin=name, distribution=dist, version=ver, hint=hint)
        if exc is not None:
            failure.__cause__ = exc
        if always_raise or self.strict:
            raise failure
        self.failures.append(failure)
        self._infos[name] = PluginInfo(
            name, dist, ver, "failed", module=module, error=error, hint=hint, core_version=core_version()
        )
        log.warning("%s", msg)

    # -- typed accessors ------------------------------------------------------------------

    def plugins(self) -> tuple[PluginInfo, ...]:
        """Every plugin seen: loaded, failed or blocked, sorted by name (core first)."""
        self.load()
        return tuple(sorted(self._infos.values(), key=lambda i: (i.name != CORE_PLUGIN, i.name)))

    def _all(self, kind: Kind) -> tuple[Registered[Any], ...]:
        self.load()
        return tuple(sorted(self._qualified[kind].values(), key=lambda r: (r.name, r.plugin)))

    def filters(self) -> tuple[Registered[FilterSpec], ...]:
        """Every registered filter, sorted by name then plugin."""
        return self._all("filter")

    def stores(self) -> tuple[Registered[StoreSpec], ...]:
        """Every registered memory store, sorted by name then plugin."""
        return self._all("store")

    def models(self) -> tuple[Registered[ModelSpec], ...]:
        """Every registered chat model provider, sorted by name then plugin."""
        return self._all("model")

    def presets(self) -> tuple[Registered[PresetSpec], ...]:
        """Every registered preset, sorted by name then plugin."""
        return self._all("preset")

    def sections(self) -> tuple[Registered[SectionSpec], ...]:
        """Every registered config section, sorted by name then plugin."""
        return self._all("section")

    def commands(self) -> tuple[Registered[CommandSpec], ...]:
        """Every registered ``beamfilter`` sub-command, sorted by name then plugin."""
        return self._all("command")

    def toolsets(self) -> tuple[Registered[ToolsetSpec], ...]:
        """Every registered toolset, sorted by name then plugin."""
        return self._all("toolset")

    def _get(self, kind: Kind, name: str, *, by_scheme: bool = False) -> Registered[Any]:
        self.load()
        if not isinstance(name, str) or not name:
            msg = f"A {kind} name must be a non-empty string, got {name!r}."
            raise UnknownNameError(msg)
        if ":" in name and not by_scheme:
            found = self._qualified[kind].get(name)
            if found is not None:
                return found
            candidates: list[Registered[Any]] = []
        else:
            candidates = list(self._by_kind[kind].get(name, ()))
            if by_scheme and not candidates:
                candidates = [r for r in self._qualified[kind].values() if name in r.spec.schemes]
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            names = sorted(c.qualified for c in candidates)
            msg = (
                f"The {kind} name {name!r} is provided by several plugins: {', '.join(names)}. "
                f"Use a qualified name, e.g. use = {('preset:' if kind == 'preset' else '') + names[0]!r}."
            )
            raise AmbiguousFilterError(msg, names)
        known = list(self._qualified[kind] if ":" in name else self._by_kind[kind])
        if by_scheme:
            known += [s for r in self._qualified[kind].values() for s in r.spec.schemes]
        msg = f"No installed plugin provides a {kind} named {name!r}.{suggest(name, known)}"
        failed = [i for i in self._infos.values() if i.status == "failed"]
        if failed:
            msg += " Plugins that failed to load: " + "; ".join(f"{i.name} ({i.error})" for i in failed) + "."
        msg += f" Run `beamfilter plugins` to list the installed {_PLURAL[kind]}."
        raise UnknownNameError(msg)

    def get_filter(self, name: str) -> Registered[FilterSpec]:
        """The filter named ``name`` (``retry``) or ``plugin:name``.

        Raises:
            UnknownNameError: no plugin provides it (the message suggests close names).
            AmbiguousFilterError: several plugins provide the unqualified name.
        """
        return self._get("filter", name)

    def get_preset(self, name: str) -> Registered[PresetSpec]:
        """The preset named ``name`` (``production``), ``plugin:name``, or either prefixed
        with ``preset:`` as written in config (``preset:builtins:production``).

        Raises:
            UnknownNameError: no plugin provides it.
            AmbiguousFilterError: several plugins provide the unqualified name.
        """
        return self._get("preset", name.removeprefix("preset:") if isinstance(name, str) else name)

    def get_section(self, name: str) -> Registered[SectionSpec]:
        """The config section named ``name`` (``durable``) or ``plugin:name``.

        Raises:
            UnknownNameError: no plugin reads such a section.
        """
        return self._get("section", name)

    def get_toolset(self, name: str) -> Registered[ToolsetSpec]:
        """The toolset named ``name`` (``mcp``) or ``plugin:name``.

        Raises:
            UnknownNameError: no plugin provides it (the message suggests close names).
            AmbiguousFilterError: several plugins provide the unqualified name.
        """
        return self._get("toolset", name)

    def get_model(self, name: str) -> Registered[ModelSpec]:
        """The chat model provider named ``name`` (``openai``) or ``plugin:name``."""
        return self._get("model", name)

    def get_store(self, url: str) -> Registered[StoreSpec]:
        """The store for a URL (``sqlite:///x.db`` -> scheme ``sqlite``), a scheme, a name
        or ``plugin:name``."""
        if "://" in url:
            return self._get("store", url.split("://", 1)[0], by_scheme=True)
        if ":" in url:
            return self._get("store", url)
        return self._get("store", url, by_scheme=True)


def _hint(name: str, dist: str | None, exc: BaseException | None) -> str:
    disable = f'disable it with [plugins] disable = ["{name}"] or BEAMFILTER_PLUGINS'
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        owner = f"reinstall {dist}" if dist else "install it"
        return f"the module {exc.name!r} is not installed; {owner} or `pip install {exc.name}`, or {disable}."
    if isinstance(exc, ImportError | AttributeError | TypeError | ConfigError | pluggy.PluginValidationError):
        who = dist or name
        return (
            f"check that {who} supports beamfilter-core {core_version()} (upgrade it), or {disable}; "
            "BEAMFILTER_STRICT_PLUGINS=1 shows the traceback."
        )
    return f"{disable}; BEAMFILTER_STRICT_PLUGINS=1 shows the traceback."


def list_plugins(registry: Registry | None = None) -> tuple[PluginInfo, ...]:
    """Every installed plugin with its status (``loaded``, ``failed`` or ``blocked``)."""
    return (registry or Registry()).plugins()
