"""What a :class:`~beamfilter_core.Registry` holds: each registered spec with its provenance
and its options validator, and each plugin as ``beamfilter plugins`` lists it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Generic, Literal, TypeVar

import attrs
import fastjsonschema

from ._specs import CommandSpec, FilterSpec, ModelSpec, PresetSpec, SectionSpec, StoreSpec, ToolsetSpec
from .errors import ConfigError

__all__ = ["PluginInfo", "Registered", "Status", "compile_schema"]

Status = Literal["loaded", "failed", "blocked"]
SpecT = TypeVar("SpecT", FilterSpec, StoreSpec, ModelSpec, PresetSpec, SectionSpec, CommandSpec, ToolsetSpec)


@attrs.frozen(slots=True)
class Registered(Generic[SpecT]):
    """A spec with its provenance and its compiled options validator."""

    spec: SpecT
    plugin: str
    distribution: str | None
    version: str | None
    validator: Callable[[Any], Any] = attrs.field(repr=False)

    @property
    def name(self) -> str:
        """The unqualified name (``retry``)."""
        return self.spec.name

    @property
    def qualified(self) -> str:
        """The always-unambiguous ``plugin:name``."""
        return f"{self.plugin}:{self.spec.name}"

    @property
    def summary(self) -> str:
        """The spec's one-line summary."""
        return self.spec.summary


@attrs.frozen(slots=True)
class PluginInfo:
    """One plugin as listed by ``beamfilter plugins``: provenance, status and what it provides."""

    name: str
    distribution: str | None
    version: str | None
    status: Status
    module: str | None = None
    hooks: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()
    stores: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    presets: tuple[str, ...] = ()
    sections: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    toolsets: tuple[str, ...] = ()
    error: str | None = None
    hint: str | None = None
    #: The beamfilter-core version a failure happened with.
    core_version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            field.name: list(value) if isinstance(value, tuple) else value
            for field in attrs.fields(PluginInfo)
            for value in (getattr(self, field.name),)
        }


def _no_options(options: Any) -> Any:
    return options


class _SchemaValidator:
    """A spec's options validator, compiled on its first call.

    Compiling is the dearest part of loading a plugin (about 4 ms a schema: fastjsonschema
    writes and compiles Python), and ``beamfilter --help`` or ``beamfilter plugins`` load
    some forty specs whose options they never check (bench/bench_cold_start.py). An invalid
    schema is reported when a config first uses the spec, and by ``beamfilter plugins check``.
    """

    __slots__ = ("_compiled", "_schema", "_where")

    def __init__(self, schema: Mapping[str, Any], where: str) -> None:
        self._schema = schema
        self._where = where
        self._compiled: Callable[[Any], Any] | None = None

    def __call__(self, options: Any) -> Any:
        compiled = self._compiled
        if compiled is None:
            try:
                compiled = fastjsonschema.compile(dict(self._schema))
            except fastjsonschema.JsonSchemaDefinitionException as exc:
                msg = f"{self._where}: options_schema is not a valid JSON schema: {exc}"
                raise ConfigError(msg) from exc
            self._compiled = compiled
        return compiled(options)


def compile_schema(spec: Any, where: str) -> Callable[[Any], Any]:
    """The options validator of ``spec``, compiled on its first call (presets and commands take no options)."""
    if isinstance(spec, PresetSpec | CommandSpec):
        return _no_options  # a preset's options are its filters' options, checked when expanded
    schema = spec.options_schema
    if not isinstance(schema, Mapping):
        msg = f"{where}: options_schema is {schema!r}; give a JSON schema mapping."
        raise ConfigError(msg)
    return _SchemaValidator(schema, where)
