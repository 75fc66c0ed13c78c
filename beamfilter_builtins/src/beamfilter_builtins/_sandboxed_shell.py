"""The ``shell`` toolset: one tool, ``shell(command)``, that runs each command in the OS sandbox.

``[[tools]] use = "shell"`` with ``workdir = "work"`` (relative to the config file's
folder) gives the model a shell whose commands can write only ``workdir`` and the
``writable`` folders, read only those, ``readable`` and the system folders, reach no
network unless ``network = true``, and are stopped with every process they started
after ``timeout`` seconds. The sandbox is the enforcement; ``tool_policy``'s shell rule
stays the early layer that explains and asks.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from typing import Any

import fastjsonschema

from beamfilter_core import Tool, ToolResult, Toolset, ToolsetSpec, options_schema
from beamfilter_core.errors import SandboxError, ToolsetError

from ._sandbox import Sandbox, SandboxMode

__all__ = ["ShellToolset", "shell_toolset"]

#: The shell each command runs in (bash where there is one).
SHELL = shutil.which("bash", path="/usr/bin:/bin") or "/bin/sh"

_DESCRIPTION = (
    "Run a shell command in a sandbox and return its exit status, stdout and stderr. "
    "The current folder is {workdir} (writable); the network is {network}; "
    "a command is stopped after {timeout:g} s."
)
_PARAMETERS = {
    "type": "object",
    "properties": {
        "command": {
            "type": "string",
            "minLength": 1,
            "pattern": "^[^\\x00]*$",
            "description": "the command line, run by bash -c",
        }
    },
    "required": ["command"],
    "additionalProperties": False,
}


class ShellToolset(Toolset):
    """A ``shell`` tool whose every command runs in the OS sandbox (bubblewrap).

    Args:
        workdir: the folder commands start in and may write.
        writable: more folders commands may write.
        readable: more folders commands may read (nothing else outside the system
            folders is visible).
        network: give commands the host's network (off by default).
        timeout: seconds one command may take before it and its children are killed.
        max_output: bytes kept of stdout and of stderr each.
        env: variables added to the cleared environment.
        sandbox: ``"auto"`` (bubblewrap; missing is an error) or ``"none"``
            (unconfined, only when written).
        bwrap: the bubblewrap program (default: ``bwrap`` on PATH).

    Raises:
        SandboxError: ``sandbox="auto"`` and bubblewrap is missing.
        ConfigError: a folder or value is wrong.

    Example::

        kernel = Kernel(model, tools=[ShellToolset(workdir="/srv/project")])
    """

    def __init__(
        self,
        *,
        workdir: str | os.PathLike[str],
        writable: Sequence[str | os.PathLike[str]] = (),
        readable: Sequence[str | os.PathLike[str]] = (),
        network: bool = False,
        timeout: float = 60.0,
        max_output: int = 30_000,
        env: Mapping[str, str] | None = None,
        sandbox: SandboxMode = "auto",
        bwrap: str | None = None,
    ) -> None:
        self.sandbox = Sandbox.create(
            workdir=workdir,
            writable=writable,
            readable=readable,
            network=network,
            timeout=timeout,
            max_output=max_output,
            env=env,
            sandbox=sandbox,
            bwrap=bwrap,
        )
        box = self.sandbox
        where = f"workdir {box.workdir}, network {'on' if box.network else 'off'}"
        # the name is what `beamfilter chain` prints: an unconfined shell says so
        label = f"bubblewrap sandbox, {where}" if box.mode == "auto" else f'UNSANDBOXED: sandbox = "none", {where}'
        super().__init__(name=f"shell ({label})")
        self._tool = Tool(
            "shell",
            _DESCRIPTION.format(workdir=box.workdir, network="on" if box.network else "off", timeout=box.timeout),
            _PARAMETERS,
            self._shell,
            is_async=True,
            validate=fastjsonschema.compile(_PARAMETERS),  # a bad call is a failure the model reads
            workdir=str(box.workdir),  # tool_policy judges a relative path in a command from here
        )
        self._checked = box.mode == "none"

    def __repr__(self) -> str:
        return f"ShellToolset(workdir={self.sandbox.workdir!r}, sandbox={self.sandbox.mode!r})"

    async def open(self) -> Sequence[Tool]:
        """Check once that bubblewrap can set a sandbox up here, then list the tool.

        Raises:
            ToolsetError: it cannot (no user namespaces, a broken install); the message
                names what bubblewrap said.
        """
        if not self._checked:
            try:
                await self.sandbox.run(["true"])
            except SandboxError as exc:
                msg = f"the shell toolset cannot start: {exc}"
                raise ToolsetError(msg, toolset=self.name) from exc
            self._checked = True
        return (self._tool,)

    async def _shell(self, command: str) -> ToolResult:
        try:
            result = await self.sandbox.run([SHELL, "-c", command])
        except SandboxError as exc:  # bubblewrap went away: the call fails, nothing runs unconfined
            return ToolResult.failure("transient", f"The command did not run: {exc}")
        text = result.render()
        return ToolResult(text) if result.ok else ToolResult.failure("semantic", text)


# x-path: relative folders are taken from the config file's folder by the core
_FOLDERS = {"type": "array", "items": {"type": "string", "minLength": 1}, "x-path": True}

OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "workdir": {
            "type": "string",
            "minLength": 1,
            "x-path": True,
            "x-hint": 'a folder, e.g. "work" (beside the config file)',
        },
        "writable": _FOLDERS,
        "readable": _FOLDERS,
        "network": {"type": "boolean"},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "max_output": {"type": "integer", "minimum": 1},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "sandbox": {"enum": ["auto", "none"], "x-hint": '"auto" (bubblewrap) or "none" (no isolation)'},
        "bwrap": {"type": "string", "minLength": 1},
    },
    "required": ["workdir"],
    "additionalProperties": False,
}


@options_schema(OPTIONS)
def shell_toolset(
    *,
    workdir: str,
    writable: list[str] | None = None,
    readable: list[str] | None = None,
    network: bool = False,
    timeout: float = 60.0,
    max_output: int = 30_000,
    env: dict[str, str] | None = None,
    sandbox: SandboxMode = "auto",
    bwrap: str | None = None,
    build: Any = None,
) -> ShellToolset:
    """The ``shell`` toolset's factory. From a config, relative folders were taken from the
    config file's folder already; a Python call takes them from the current folder."""
    base = getattr(build, "config_dir", None) or os.getcwd()

    def here(path: str) -> str:
        return os.path.join(base, os.path.expanduser(path))

    return ShellToolset(
        workdir=here(workdir),
        writable=[here(p) for p in writable or ()],
        readable=[here(p) for p in readable or ()],
        network=network,
        timeout=timeout,
        max_output=max_output,
        env=env,
        sandbox=sandbox,
        bwrap=bwrap,
    )


SPEC = ToolsetSpec(
    "shell",
    shell_toolset,
    OPTIONS,
    "a shell tool whose commands run in an OS sandbox (bubblewrap): workdir writable, no network by default",
)
