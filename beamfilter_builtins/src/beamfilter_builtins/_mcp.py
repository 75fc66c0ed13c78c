"""The ``mcp`` toolset: the tools of an MCP server, through the official ``mcp`` SDK.

``[[tools]] use = "mcp"`` with ``command = [...]`` starts a server over stdio; with ``url``
(and ``headers``) it talks streamable HTTP. The server's tools become beamfilter tools
with the server's schemas, so every call goes through the kernel's tool chain
(tool_policy, approval, tool_retry... apply as to Python tools).

One background task owns the SDK client for the kernel's lifetime: the SDK's task groups
must be entered and left by the same task, while tool calls come from the run's tasks.
A server that dies, hangs or answers garbage makes the call fail with
:class:`ToolServerError` (a transient tool failure); the next call starts it again.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import contextlib
import contextvars
import importlib.util
import json
import logging
import os
import shutil
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from beamfilter_core import ContentPart, Tool, ToolResult, Toolset, ToolsetSpec, options_schema
from beamfilter_core.errors import ConfigError, ToolServerError, ToolsetError

if TYPE_CHECKING:
    from mcp import Client

__all__ = ["MCPToolset", "mcp_toolset"]

#: JSON-RPC codes the SDK uses for a lost connection or a request it gave up on (not the
#: server's answer): CONNECTION_CLOSED and REQUEST_TIMEOUT.
_CONNECTION_CODES = (-32000, -32001)

_INSTALL = "the mcp toolset needs the MCP SDK: pip install 'beamfilter-builtins[mcp]'"

#: The server's stderr lines go to this logger (``beamfilter --log info`` shows them), never
#: straight into the command's output.
log = logging.getLogger("beamfilter.mcp")

#: How many of the server's last stderr lines a start failure quotes.
_STDERR_LINES = 12

#: Programs that start the server named by their first non-option argument.
_LAUNCHERS = frozenset({"npx", "pnpx", "bunx", "uvx", "pipx", "node", "deno", "python", "python3", "uv", "docker"})

#: Set by a server's session task: receives the process the SDK spawned (for its exit status).
_SPAWNED: contextvars.ContextVar[Callable[[Any], None] | None] = contextvars.ContextVar(
    "beamfilter_mcp_spawned", default=None
)


def _require_sdk() -> None:
    """Refuse a config naming an MCP toolset when the SDK is missing, without importing it:
    `beamfilter chain` checks the toolset's options and starts no server."""
    if importlib.util.find_spec("mcp") is None:
        raise ConfigError(_INSTALL)


def _sdk() -> Any:
    try:
        import mcp
    except ModuleNotFoundError as exc:
        raise ConfigError(_INSTALL) from exc
    _watch_spawns()
    return mcp


def _watch_spawns() -> None:
    """Let a session task see the process the SDK spawns, to report its exit status.

    The SDK does not expose the process; its spawn function is wrapped once, and the
    wrapper hands the process to the session task that asked (a context variable, so
    concurrent servers never see each other's). Without that function, a start failure
    is reported without the status.
    """
    from mcp.client import stdio

    original = getattr(stdio, "_create_platform_compatible_process", None)
    if original is None or getattr(original, "__beamfilter__", False):
        return

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        seen = _SPAWNED.get()
        if seen is not None:
            seen(process)
        return process

    spawn.__beamfilter__ = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = spawn


def short_name(command: Sequence[str]) -> str:
    """How messages name a stdio server: its program (and, for a launcher such as npx, the
    package it runs), never the whole command line with its folders and options."""
    program = os.path.basename(command[0]) or command[0]
    if program.rstrip("0123456789.") in _LAUNCHERS:  # python3.12 too
        named = next((arg for arg in command[1:] if not arg.startswith("-")), None)
        if named is not None:  # a script by its file name; a package (@scope/name) as it is
            return f"{program} {os.path.basename(named) if named.startswith(('/', '.', '~')) else named}"
    return program


def find_program(program: str, cwd: str) -> str | None:
    """The file ``program`` names (on PATH, or relative to ``cwd`` when it holds a slash), or None."""
    if os.sep in program or (os.altsep and os.altsep in program):
        path = os.path.join(cwd, os.path.expanduser(program))
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    return shutil.which(program)


class _Stderr:
    """The server's stderr: a pipe read by a thread that logs each line (prefixed with the
    server's place) and keeps the last ones for a start failure's message."""

    def __init__(self, label: str) -> None:
        self.label = label
        self.lines: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        read, write = os.pipe()
        self.writer: TextIO = os.fdopen(write, "w")
        self._reader = threading.Thread(target=self._read, args=(read,), name=f"stderr of {label}", daemon=True)
        self._reader.start()

    def _read(self, fd: int) -> None:
        with os.fdopen(fd, "r", encoding="utf-8", errors="replace") as stream:
            for line in stream:
                text = line.rstrip()
                if text:
                    self.lines.append(text)
                    log.info("[%s] %s", self.label, text)

    def close(self, wait: float = 0.0) -> list[str]:
        """Close this side of the pipe; wait up to ``wait`` s for the last lines; return them."""
        with contextlib.suppress(OSError):
            self.writer.close()
        if wait:
            self._reader.join(wait)
        return list(self.lines)


class MCPToolset(Toolset):
    """The tools of one MCP server (stdio ``command`` or streamable HTTP ``url``).

    Args:
        command: the server's command line, e.g. ``["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]``.
        url: a streamable HTTP endpoint, e.g. ``http://127.0.0.1:8931/mcp``.
        headers: HTTP headers for ``url`` (an ``Authorization`` token).
        env: extra environment variables for ``command``.
        cwd: the working directory of ``command``.
        timeout: seconds one tool call may take before it fails as transient.
        start_timeout: seconds the server has to start and list its tools.
        name: how errors and listings name this server (default: its program, or its url).
        place: where the server is configured (``tools[0].command``), for error messages.

    A stdio server runs in ``cwd`` (default: the current folder when the toolset is made),
    and its tools say so (:attr:`Tool.workdir`): ``tool_policy`` judges a relative path in
    their arguments from that folder, where the server resolves it.

    Example::

        kernel = Kernel(model, tools=[MCPToolset(command=["python", "server.py"])])
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        timeout: float = 30.0,
        start_timeout: float = 30.0,
        name: str | None = None,
        place: str | None = None,
    ) -> None:
        if (command is None) == (url is None):
            msg = 'give the MCP server as command = ["program", "arg", ...] (stdio) or url = "http://..." (HTTP).'
            raise ConfigError(msg)
        if command is not None and (isinstance(command, str) or not command):
            msg = f'command is {command!r}; give the program and its arguments as a list, e.g. ["npx", "-y", "pkg"].'
            raise ConfigError(msg)
        if headers and url is None:
            msg = "headers apply to url servers only; a command server gets env = { NAME = value }."
            raise ConfigError(msg)
        super().__init__(name=name or (url if url is not None else short_name(command or ("?",))))
        self.command = tuple(command) if command is not None else None
        self.url = url
        self.place = place
        self._headers = dict(headers or {})
        self._env = dict(env or {})
        # resolved now: the server starts there, and the policy judges relative paths from there
        self.cwd = os.path.abspath(os.path.expanduser(cwd)) if cwd is not None else os.getcwd()
        self._stderr: _Stderr | None = None
        self._process: Any = None
        self.timeout = float(timeout)
        self.start_timeout = float(start_timeout)
        self._tools_listed: tuple[Tool, ...] = ()
        self._client: Client | None = None
        self._task: asyncio.Task[None] | None = None
        self._stop: asyncio.Event | None = None
        self._restart: asyncio.Lock | None = None
        #: Sessions being stopped in the background after a failure (awaited by aclose).
        self._retiring: set[asyncio.Task[None]] = set()

    def __repr__(self) -> str:
        # headers and env may hold secrets: never shown
        where = f"url={self.url!r}" if self.url is not None else f"command={list(self.command or ())!r}"
        return f"MCPToolset({where})"

    # -- the session task ---------------------------------------------------------------

    @property
    def label(self) -> str:
        """How messages name the server: its place in the config and its name."""
        return f"{self.place} ({self.name})" if self.place else repr(self.name)

    def _server(self) -> Any:
        mcp = _sdk()
        if self.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            program, *args = self.command
            params = StdioServerParameters(command=program, args=args, env=self._env or None, cwd=self.cwd)
            self._stderr = _Stderr(self.place or self.name)
            return stdio_client(params, errlog=self._stderr.writer)
        from mcp.client.streamable_http import streamable_http_client

        del mcp
        if not self._headers:
            return self.url
        import httpx2

        http = httpx2.AsyncClient(headers=self._headers, timeout=httpx2.Timeout(30.0, read=300.0))
        return _OwningTransport(streamable_http_client(str(self.url), http_client=http), http)

    def _spawned(self, process: Any) -> None:
        self._process = process

    async def _serve(self, ready: asyncio.Future[Client], stop: asyncio.Event) -> None:
        mcp = _sdk()
        _SPAWNED.set(self._spawned)  # this task's own context: only this server's process
        server = self._server()
        stderr = self._stderr
        try:
            async with mcp.Client(server, read_timeout_seconds=self.timeout) as client:
                if not ready.done():
                    ready.set_result(client)
                await stop.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ToolServerError(f"{self.name}: stopped"))
            if isinstance(exc, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
                raise
        finally:
            self._client = None
            if stderr is not None:
                stderr.close()

    async def _connect(self) -> Client:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[Client] = loop.create_future()
        self._stop = stop = asyncio.Event()
        self._task = task = loop.create_task(self._serve(ready, stop), name=f"mcp server {self.name}")
        try:
            client = await asyncio.wait_for(asyncio.shield(ready), self.start_timeout)
        except BaseException:
            await self._cancel(task)
            raise
        self._client = client
        return client

    @staticmethod
    async def _cancel(task: asyncio.Task[None]) -> None:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task

    # -- Toolset --------------------------------------------------------------------------

    async def open(self) -> Sequence[Tool]:
        """Start the server (or connect to it) and list its tools."""
        if self._task is not None and not self._task.done() and self._task.get_loop() is asyncio.get_running_loop():
            return self._tools_listed
        self._process = None
        try:
            client = await self._connect()
            listed = await asyncio.wait_for(self._list(client), self.start_timeout)
        except TimeoutError:
            await self.aclose()
            msg = f"The MCP server {self.label} did not answer within {self.start_timeout:g} s (start_timeout)."
            raise ToolsetError(msg + self._last_words(), toolset=self.name) from None
        except ToolsetError:
            raise
        except Exception as exc:
            await self.aclose()
            raise ToolsetError(self._start_failure(exc), toolset=self.name) from exc
        self._tools_listed = tuple(self._tool(item) for item in listed)
        return self._tools_listed

    def _start_failure(self, exc: BaseException) -> str:
        """Why the server did not start: its exit status and last stderr lines when it
        exited, else the error; with its place in the config."""
        status = getattr(self._process, "returncode", None)
        if status is None:
            return f"The MCP server {self.label} could not be started: {_describe(exc)}." + self._last_words()
        how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
        return f"The MCP server {self.label} {how} before it listed its tools." + self._last_words()

    def _last_words(self) -> str:
        stderr = self._stderr
        lines = stderr.close(wait=2.0) if stderr is not None else []
        if not lines:
            return ""
        return " Its last lines on stderr:\n" + "\n".join(f"  {line}" for line in lines)

    async def _list(self, client: Client) -> list[Any]:
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(100):  # a server whose pages never end cannot hang the start
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def aclose(self) -> None:
        """Stop the server (a stdio process exits; an HTTP session is closed)."""
        task, self._task = self._task, None
        stop, self._stop = self._stop, None
        self._client = None
        if task is not None and task.get_loop() is asyncio.get_running_loop():
            await self._stop_session(task, stop)
        retiring = [t for t in self._retiring if t.get_loop() is asyncio.get_running_loop()]
        self._retiring.clear()
        for pending in retiring:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await pending

    async def _stop_session(self, task: asyncio.Task[None], stop: asyncio.Event | None) -> None:
        if stop is not None:
            stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), 10)
        except (TimeoutError, Exception):  # noqa: BLE001  # closing must not fail the caller
            await self._cancel(task)

    def _retire(self) -> None:
        """Forget a broken session now and stop it in the background: the failed call
        returns at once and the next call starts a new server."""
        task, self._task = self._task, None
        stop, self._stop = self._stop, None
        self._client = None
        if task is not None and not task.done():
            stopping = asyncio.get_running_loop().create_task(self._stop_session(task, stop))
            self._retiring.add(stopping)
            stopping.add_done_callback(self._retiring.discard)

    # -- one tool -------------------------------------------------------------------------

    def _tool(self, listed: Any) -> Tool:
        remote = str(listed.name)
        schema = dict(listed.input_schema or {"type": "object"})

        async def call(**arguments: Any) -> ToolResult:
            return await self._call(remote, arguments)

        return Tool(
            remote,
            str(listed.description or ""),
            schema,
            call,
            is_async=True,
            validate=_validator(schema),
            workdir=self.cwd if self.command is not None else "",  # a url server's folder is unknown
        )

    async def _client_now(self) -> Client:
        client = self._client
        if client is not None and self._task is not None and not self._task.done():
            return client
        # the server died (or was never started on this loop): start it again, once at a time
        if self._restart is None:
            self._restart = asyncio.Lock()
        async with self._restart:
            if self._client is not None and self._task is not None and not self._task.done():
                return self._client
            await self.aclose()
            try:
                return await self._connect()
            except Exception as exc:
                msg = f"the MCP server {self.name!r} is not running and could not be restarted: {_describe(exc)}"
                raise ToolServerError(msg) from exc

    async def _call(self, remote: str, arguments: dict[str, Any]) -> ToolResult:
        client = await self._client_now()
        try:
            result = await asyncio.wait_for(client.call_tool(remote, arguments), self.timeout)
        except TimeoutError:
            self._retire()  # a hung server is replaced on the next call
            msg = f"the MCP server {self.name!r} did not answer {remote!r} within {self.timeout:g} s"
            raise ToolServerError(msg) from None
        except Exception as exc:
            mcp = _sdk()
            code = getattr(exc, "code", None) if isinstance(exc, mcp.MCPError) else None
            if code is not None and code not in _CONNECTION_CODES and self._task is not None and not self._task.done():
                # the server is alive and refused the call (unknown tool, bad arguments)
                return ToolResult.failure(
                    "semantic", f"The MCP server refused {remote!r}: {code}: {getattr(exc, 'message', exc)}"
                )
            process = self._process
            self._retire()
            status = await _exit_status(process)
            if status is not None:  # it crashed: say so, in words the model and the user read alike
                how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
                msg = f"the MCP server {self.name!r} {how} during {remote!r}"
            else:
                msg = f"the MCP server {self.name!r} failed during {remote!r}: {_describe(exc)}"
            raise ToolServerError(msg) from exc
        return to_result(result)


async def _exit_status(process: Any, wait: float = 1.0) -> int | None:
    """The exit status of a server process that is exiting (within ``wait`` s), or None."""
    if process is None:
        return None
    deadline = asyncio.get_running_loop().time() + wait
    # polled: process.wait() also waits for the pipes, which a child of the server may hold
    while process.returncode is None and asyncio.get_running_loop().time() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    status = process.returncode
    return status if isinstance(status, int) else None


class _OwningTransport:
    """A transport that also closes the HTTP client it was given (its headers are ours)."""

    def __init__(self, inner: Any, http: Any) -> None:
        self.inner = inner
        self.http = http

    async def __aenter__(self) -> Any:
        await self.http.__aenter__()
        try:
            return await self.inner.__aenter__()
        except BaseException:
            await self.http.__aexit__(None, None, None)
            raise

    async def __aexit__(self, *exc: Any) -> Any:
        try:
            return await self.inner.__aexit__(*exc)
        finally:
            await self.http.__aexit__(None, None, None)


def _describe(exc: BaseException) -> str:
    """One line for an exception; task groups wrap the real cause in an ExceptionGroup."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc) or "no message"
    return f"{type(exc).__name__}: {text}"


def _validator(schema: Mapping[str, Any]) -> Any:
    """A compiled validator of the server's input schema, or None when fastjsonschema
    cannot compile it (the server validates anyway)."""
    import fastjsonschema

    try:
        return fastjsonschema.compile(dict(schema))
    except Exception:  # noqa: BLE001  # a schema dialect fastjsonschema lacks: leave it to the server
        return None


def to_result(result: Any) -> ToolResult:
    """A :class:`ToolResult` from an MCP ``CallToolResult``: text for the model, images and
    resources as content parts, ``is_error`` as a semantic failure."""
    texts: list[str] = []
    parts: list[ContentPart] = []
    for block in result.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
            parts.append(ContentPart("text", text=block.text))
        elif kind in ("image", "audio"):
            size = len(base64.b64decode(block.data, validate=False)) if block.data else 0
            texts.append(f"[{kind}: {block.mime_type}, {size} bytes]")
            parts.append(
                ContentPart("image_url" if kind == "image" else kind, url=f"data:{block.mime_type};base64,{block.data}")
            )
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                texts.append(f"[resource {resource.uri}]\n{text}")
                parts.append(ContentPart("text", text=text))
            else:
                mime = resource.mime_type or "application/octet-stream"
                texts.append(f"[resource {resource.uri}: {mime}]")
                parts.append(ContentPart("resource", url=f"data:{mime};base64,{resource.blob}"))
        elif kind == "resource_link":
            texts.append(f"[resource link {block.uri}: {block.name}]")
            parts.append(ContentPart("resource", url=str(block.uri), text=block.name))
    if not result.content and result.structured_content is not None:
        texts.append(json.dumps(result.structured_content, ensure_ascii=False))
    content = "\n".join(texts)
    if result.is_error:
        return ToolResult.failure("semantic", content or "the MCP tool reported an error")
    only_text = all(p.type == "text" for p in parts)
    return ToolResult(content, parts=() if only_text else tuple(parts))


_STRINGS = {"type": "object", "additionalProperties": {"type": "string"}}

OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "command": {
            "type": "array",
            "items": {"type": "string"},
            "minItems": 1,
            "x-hint": 'the program and its arguments as a list, e.g. ["npx", "-y", "pkg"]',
        },
        "url": {"type": "string", "pattern": "^https?://"},
        "headers": _STRINGS,
        "env": _STRINGS,
        "cwd": {"type": "string", "x-path": True},
        "timeout": {"type": "number", "exclusiveMinimum": 0},
        "start_timeout": {"type": "number", "exclusiveMinimum": 0},
    },
    "additionalProperties": False,
    # the server is required: a stdio command or an HTTP url, not both
    "oneOf": [{"required": ["command"]}, {"required": ["url"]}],
    "x-hint": 'the MCP server as command = ["program", "arg", ...] (stdio) or url = "http://..." (HTTP)',
}


@options_schema(OPTIONS)
def mcp_toolset(
    *,
    command: list[str] | None = None,
    url: str | None = None,
    headers: dict[str, str] | None = None,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    timeout: float = 30.0,
    start_timeout: float = 30.0,
    build: Any = None,
) -> MCPToolset:
    """The ``mcp`` toolset's factory: ``cwd`` is relative to the config file's folder, and
    defaults to it; the program of ``command`` is found on PATH, or in ``cwd`` when it holds a
    slash (``./server.py``).

    Raises:
        ConfigError: the SDK is not installed, or the program is not found.
    """
    _require_sdk()
    base = getattr(build, "config_dir", None)
    where = getattr(build, "where", None)
    if base is not None:
        cwd = os.path.join(base, os.path.expanduser(cwd)) if cwd is not None else base
    if command is not None:
        folder = os.path.abspath(cwd) if cwd is not None else os.getcwd()
        if find_program(command[0], folder) is None:
            program = os.path.expanduser(command[0])
            found = (
                "does not exist or is not executable"
                if os.path.isabs(program)
                else f"is not found in {folder} (cwd)"
                if os.sep in program
                else "is not found on PATH"
            )
            msg = (
                f"{where or 'mcp_toolset'}.command[0]: the program {command[0]!r} {found}; install it or fix the path."
            )
            raise ConfigError(msg)
    kind = "command" if command is not None else "url"
    return MCPToolset(
        command=command,
        url=url,
        headers=headers,
        env=env,
        cwd=cwd,
        timeout=timeout,
        start_timeout=start_timeout,
        place=f"{where}.{kind}" if where else None,
    )


SPEC = ToolsetSpec(
    "mcp",
    mcp_toolset,
    OPTIONS,
    "the tools of an MCP server (stdio command or streamable HTTP url)",
)
