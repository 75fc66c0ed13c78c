"""A beamfilter.toml with a ``[durable]`` section, read for a durable runner.

When ``[durable] kernel`` names the kernel, the file's own ``[model]`` is not needed: its
turns run on the named kernel, and the file's kernel is built around a stand-in model
that refuses to answer (the section's ``SectionSpec.model``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from beamfilter_core import ChatRequest, ChatResponse
from beamfilter_core.errors import ConfigError

if TYPE_CHECKING:
    from beamfilter_core import BuiltConfig

    from ._options import DurableOptions

__all__ = ["NamedKernelModel", "build_durable_config", "durable_options"]


class NamedKernelModel:
    """The model of a config whose ``[durable] kernel`` names the kernel its turns run on
    and which has no ``[model]`` of its own: the file's kernel never answers."""

    def __init__(self, kernel: str) -> None:
        self.kernel = kernel

    def __repr__(self) -> str:
        return f"NamedKernelModel({self.kernel!r})"

    def _refuse(self) -> ConfigError:
        msg = (
            f"This config has no [model]: its durable turns run on the kernel [durable] kernel names "
            f"({self.kernel!r}); run them through the durable runner, or add a [model] table."
        )
        return ConfigError(msg)

    async def complete(self, request: ChatRequest) -> ChatResponse:
        raise self._refuse()

    async def stream(self, request: ChatRequest, on_token: Any) -> ChatResponse:
        raise self._refuse()


def build_durable_config(config: str | os.PathLike[str]) -> BuiltConfig:
    """Build ``config`` as ``beamfilter run`` does (the ``[durable]`` section stands in the
    file's model when its ``kernel`` names the kernel and the file has no ``[model]``).

    Raises:
        ConfigError: the file is missing or invalid (every problem with its place).
    """
    from beamfilter_core import build_config

    return build_config(config)


def durable_options(built: BuiltConfig) -> DurableOptions:
    """The validated ``[durable]`` section of a built config.

    Raises:
        ConfigError: the config has no ``[durable]`` section.
    """
    section = built.sections.get("durable")
    if section is None:
        msg = f'{built.source} has no [durable] section; add one, e.g. [durable] use = "dbos".'
        raise ConfigError(msg)
    options: DurableOptions = section.options
    return options
