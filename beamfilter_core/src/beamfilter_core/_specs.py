"""Records that plugins return from their hooks: filters, stores, models, presets, toolsets,
config sections and CLI commands."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs

from ._options import declared_schema
from .errors import ConfigError

_SPEC_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def _check_name(instance: Any, attribute: attrs.Attribute[str], value: str) -> None:
    if not isinstance(value, str) or not _SPEC_NAME.match(value):
        msg = (
            f"{type(instance).__name__}.{attribute.name} is {value!r}; "
            "names must match ^[a-z][a-z0-9_]*$ (lower case, digits, underscores)."
        )
        raise ConfigError(msg)


def _schema_of_factory(instance: Any) -> Mapping[str, Any]:
    """The schema the factory declared with ``@options_schema``, else one that takes any table."""
    declared = declared_schema(instance.factory)
    return declared if declared is not None else {"type": "object"}


def _check_schema(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    declared = declared_schema(instance.factory)
    if declared is not None and declared is not value and declared != value:
        msg = (
            f"{type(instance).__name__}({instance.name!r}).{attribute.name} differs from the schema its factory "
            "declares with @options_schema; leave options_schema out (the factory's is used) or pass the same one."
        )
        raise ConfigError(msg)


def _options_schema_field() -> Any:
    """A spec's options schema: given, or the one its factory declares with ``@options_schema``."""
    return attrs.field(default=attrs.Factory(_schema_of_factory, takes_self=True), validator=_check_schema)


def _check_callable(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if not callable(value):
        msg = f"{type(instance).__name__}.{attribute.name} is {value!r}, which is not callable."
        raise ConfigError(msg)


@attrs.frozen(slots=True)
class BuildContext:
    """What a factory may need besides its options while a kernel is being built.

    A factory receives it when its signature has a keyword parameter named ``build``.
    ``model`` is the kernel's chat model, ``models`` the other models named in the config,
    ``registry`` the registry in use, ``config_dir`` the folder of the config file (relative
    paths in options are taken from it) and ``where`` the place of the entry being built.
    """

    model: Any = None
    models: Mapping[str, Any] = attrs.field(factory=dict)
    registry: Any = None
    config_dir: str | None = None
    #: Where in the config the object being built is (``tools[0]``), for its messages.
    where: str | None = None


@attrs.frozen(slots=True)
class FilterSpec:
    """A filter a plugin provides, enabled by ``name`` in config.

    ``factory(**options)`` returns a :class:`Filter` (or filter-like object). Options are
    validated against ``options_schema`` (JSON schema), their one source of truth, before
    the factory is called; left out, it is the schema the factory declares with
    :func:`options_schema` (which checks Python calls against it too).
    ``scopes`` lists the scopes the filter uses, for listings and ``beamfilter chain``.
    With ``options_type`` (an attrs class) the validated options are structured into it
    with cattrs and the factory is called as ``factory(options)``.
    """

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] = attrs.field(validator=_check_callable)
    options_schema: Mapping[str, Any] = _options_schema_field()
    summary: str = ""
    scopes: Sequence[str] = ()
    options_type: type | None = None


_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*$")


def _scheme_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _check_schemes(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if (
        isinstance(value, str)
        or not isinstance(value, Sequence)
        or not all(isinstance(scheme, str) and _SCHEME.match(scheme) for scheme in value)
    ):
        msg = (
            f"StoreSpec.schemes is {value!r}; give a list of URL schemes such as ['sqlite'] "
            "(lower case, matching ^[a-z][a-z0-9+.-]*$, without '://')."
        )
        raise ConfigError(msg)


@attrs.frozen(slots=True)
class StoreSpec:
    """A memory store a plugin provides, selected by URL scheme (``sqlite``, ``redis``...).

    ``factory(url, **options)`` returns the store; a URL reaches it when its scheme is one
    of ``schemes`` (docs/stores.md shows a store written as one module and this spec).
    """

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] = attrs.field(validator=_check_callable)
    schemes: Sequence[str] = attrs.field(default=(), converter=_scheme_tuple, validator=_check_schemes)
    options_schema: Mapping[str, Any] = _options_schema_field()
    summary: str = ""
    options_type: type | None = None


@attrs.frozen(slots=True)
class ModelSpec:
    """A chat model provider (``openai``, ``local``, ``scripted``...) enabled by name.

    ``factory(**options)`` returns a :class:`ChatModel`; ``options_type`` as for
    :class:`FilterSpec`. ``requirements()``, when given, says what this machine lacks to
    run the provider (an optional dependency, model weights) and how to install it, or
    returns None when nothing is missing; it must not import what it checks, since
    ``beamfilter plugins`` calls it for every provider and marks each that cannot run.
    """

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] = attrs.field(validator=_check_callable)
    options_schema: Mapping[str, Any] = _options_schema_field()
    summary: str = ""
    options_type: type | None = None
    requirements: Callable[[], str | None] | None = None


@attrs.frozen(slots=True)
class ToolsetSpec:
    """Tools a plugin provides, enabled in config as ``[[tools]] use = "NAME"`` with options.

    ``factory(**options)`` returns a :class:`Toolset`, a :class:`Tool`, a function, or a
    list of them; ``options_type`` as for :class:`FilterSpec`. Every ``[[tools]]`` entry
    also takes ``include``, ``exclude`` and ``prefix``, handled by the core.

    Example::

        ToolsetSpec("clock", lambda *, zone="UTC": [make_clock(zone)], summary="the time of day")
    """

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] = attrs.field(validator=_check_callable)
    options_schema: Mapping[str, Any] = _options_schema_field()
    summary: str = ""
    options_type: type | None = None


def _as_tuple(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _check_preset_filters(instance: Any, attribute: attrs.Attribute[Any], value: Any) -> None:
    if isinstance(value, str | Mapping) or not isinstance(value, Sequence) or not value:
        shown = "empty" if isinstance(value, Sequence) and not value else repr(value)
        msg = f"PresetSpec.filters is {shown}; give a non-empty list of tables like {{'use': 'pii'}}."
        raise ConfigError(msg)
    for position, entry in enumerate(value):
        use = entry.get("use") if isinstance(entry, Mapping) else None
        if not isinstance(use, str) or not use:
            msg = f"PresetSpec.filters[{position}] is {entry!r}; each entry is a mapping with use = 'filter name'."
            raise ConfigError(msg)
        if use.startswith("preset:"):
            msg = f"PresetSpec.filters[{position}] uses {use!r}; presets cannot contain presets, list the filters."
            raise ConfigError(msg)


@attrs.frozen(slots=True)
class PresetSpec:
    """A named, versioned bundle of filters with options, enabled as ``use = "preset:NAME"``.

    ``filters`` is a list of config tables (``{"use": "pii", "mode": "hash"}``), in
    onion order; the config expands them in place of the preset entry.

    Example::

        PresetSpec("careful", "1", [{"use": "tool_errors"}, {"use": "loop_guard", "max_repeats": 2}])
    """

    name: str = attrs.field(validator=_check_name)
    version: str
    filters: Sequence[Mapping[str, Any]] = attrs.field(
        converter=_as_tuple,
        validator=_check_preset_filters,
    )
    summary: str = ""


@attrs.frozen(slots=True)
class SectionSpec:
    """A top-level config section a plugin reads, e.g. ``[durable]``.

    The table is validated against ``options_schema`` (like a filter's options), then
    ``factory(**options)`` builds the section's object (``factory(options)`` with
    ``options_type``; a ``build`` keyword parameter receives the :class:`BuildContext`).
    ``BuiltConfig.sections[name]`` holds it. When the object has a ``runner(built)``
    method, ``beamfilter run`` and ``beamfilter chat`` run their turns through the object it
    returns (anything with the :class:`Kernel`'s ``run``, ``run_stream`` and ``aclose``)
    instead of the kernel itself. A name no plugin registers stays an unknown section.
    ``model(table)`` may return a model standing in for a missing ``[model]`` when the
    section's table makes the file's own model unneeded (``[durable] kernel``), else None.
    """

    name: str = attrs.field(validator=_check_name)
    factory: Callable[..., Any] = attrs.field(validator=_check_callable)
    options_schema: Mapping[str, Any] = _options_schema_field()
    summary: str = ""
    options_type: type | None = None
    model: Callable[[Mapping[str, Any]], Any] | None = None


@attrs.frozen(slots=True)
class CommandSpec:
    """A ``beamfilter NAME ...`` command a plugin adds to the command line.

    ``configure(parser)`` adds the command's arguments (and sub-commands) to its
    ``argparse.ArgumentParser``; ``run(args)`` runs it with the parsed
    ``argparse.Namespace`` and returns the exit code (0 success, 1 failure, 2 usage or
    config error). A :class:`~beamfilter_core.errors.ConfigError` raised by ``run`` is
    reported like the built-in commands' (exit code 2). Names of the built-in commands
    (``run``, ``chat``, ``chain``, ``plugins``, ``memory``, ``demo``) cannot be taken.

    Example::

        CommandSpec("hello", configure=lambda p: p.add_argument("who"), run=lambda a: print(a.who) or 0)
    """

    name: str = attrs.field(validator=_check_name)
    configure: Callable[[Any], None] = attrs.field(validator=_check_callable)
    run: Callable[[Any], int] = attrs.field(validator=_check_callable)
    summary: str = ""
