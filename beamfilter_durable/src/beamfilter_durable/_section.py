"""The ``[durable]`` section: read by the config, it makes ``beamfilter run``/``chat`` durable."""

from __future__ import annotations

from typing import Any

from ._options import DurableOptions
from ._runner import DurableRunner

__all__ = ["DurableSection"]


class DurableSection:
    """What ``[durable]`` builds: the validated options and the runner of the config's turns."""

    def __init__(self, options: DurableOptions) -> None:
        self.options = options

    def __repr__(self) -> str:
        return f"DurableSection({self.options!r})"

    def runner(self, built: Any) -> DurableRunner:
        """The runner of ``built`` (a ``BuiltConfig`` read from a file): workers rebuild its
        kernel from the file's path."""
        return DurableRunner(built.source, self.options)
