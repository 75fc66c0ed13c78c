"""Entry-point module of beamfilter-durable: the [durable] section, the ``beamfilter durable``
command and the ``durable_steps`` filter."""

from __future__ import annotations

import os
from typing import Any

import attrs

from beamfilter_core import BuildContext, CommandSpec, FilterSpec, SectionSpec, hookimpl

from ._options import DEFAULT_DATABASE, DURABLE_OPTIONS, DurableOptions
from ._steps import STEPS_FILTER, durable_steps

_NO_OPTIONS: dict[str, Any] = {"type": "object", "additionalProperties": False}


def _section(options: DurableOptions, *, build: BuildContext | None = None) -> Any:
    from ._section import DurableSection

    if options.database == DEFAULT_DATABASE and build is not None and build.config_dir is not None:
        # the default database lies beside the config, like every relative path of a config
        # (a database the file names was taken from its folder already)
        path = os.path.join(build.config_dir, DEFAULT_DATABASE.removeprefix("sqlite:///"))
        options = attrs.evolve(options, database=f"sqlite:///{path}")
    return DurableSection(options)


def _stand_in_model(table: Any) -> Any:
    # `[durable] kernel` names the kernel the turns run on: the file needs no [model]
    kernel = table.get("kernel") if isinstance(table, dict) else None
    if not isinstance(kernel, str):
        return None
    from ._config import NamedKernelModel

    return NamedKernelModel(kernel)


def _configure(parser: Any) -> None:
    from ._commands import configure

    configure(parser)


def _run(args: Any) -> int:
    from ._commands import run

    return run(args)


@hookimpl
def beamfilter_register_sections() -> list[SectionSpec]:
    return [
        SectionSpec(
            "durable",
            _section,
            DURABLE_OPTIONS,
            "run each turn as a durable workflow (DBOS): survives its process, resumes on any worker",
            options_type=DurableOptions,
            model=_stand_in_model,
        )
    ]


@hookimpl
def beamfilter_register_commands() -> list[CommandSpec]:
    return [
        CommandSpec(
            "durable", _configure, _run, "inspect and drive durable turns (list, show, attach, resume, cancel, worker)"
        )
    ]


@hookimpl
def beamfilter_register_filters() -> list[FilterSpec]:
    return [
        FilterSpec(
            STEPS_FILTER,
            lambda: durable_steps(None),
            _NO_OPTIONS,
            "where a durable turn's steps begin: filters listed after it are recorded with each step",
            scopes=("chat", "tool"),
        )
    ]
