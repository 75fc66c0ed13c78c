"""Entry-point module of beamfilter-server: the [server] section and the ``beamfilter serve`` command."""

from __future__ import annotations

from typing import Any

from beamfilter_core import CommandSpec, SectionSpec, hookimpl

from ._options import SERVER_OPTIONS, ServerOptions


def _section(options: ServerOptions) -> ServerOptions:
    return options


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
            "server",
            _section,
            SERVER_OPTIONS,
            "beamfilter serve: API keys, limits, CORS and the inbox of the OpenAI-compatible gateway",
            options_type=ServerOptions,
        )
    ]


@hookimpl
def beamfilter_register_commands() -> list[CommandSpec]:
    return [CommandSpec("serve", _configure, _run, "serve the config as an OpenAI-compatible gateway, with /inbox")]
