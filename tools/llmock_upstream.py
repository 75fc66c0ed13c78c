"""llmock (PyPI) as the local OpenAI-compatible upstream of the tests and the benches.

:func:`start` runs ``llmock serve`` on 127.0.0.1 and returns once it is up;
:func:`model_table` is the ``[model]`` table of a beamfilter config that talks to it.
The tests (``tests/peers/_peer.py``) and ``bench/bench_serve.py`` both start it here, so a
bench never imports the tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Mapping
from pathlib import Path

#: llmock's CLI, run by this interpreter (the venv's llmock, whatever is on PATH).
_CLI = "import sys; from llmock.cli import app; sys.exit(app())"


class LLMockDidNotStart(RuntimeError):
    """llmock exited, or did not say it was listening, before the time given to it."""


def free_port() -> int:
    """An ephemeral TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LLMock:
    """A running llmock: its process, root URL and log file (stdout and stderr)."""

    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log

    @property
    def output(self) -> list[str]:
        """What llmock printed so far, line by line."""
        return self.log.read_text(errors="replace").splitlines()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)


def start(
    log: Path,
    *,
    env: Mapping[str, str] | None = None,
    choose_port: Callable[[], int] = free_port,
    attempts: int = 3,
    seconds: float = 120,
) -> LLMock:
    """``llmock serve`` on a port from ``choose_port``, its output in the file ``log``, with
    ``env`` added to this process's environment.

    Its CLI cannot listen on an ephemeral port, so the port is chosen first: one that another
    process takes before llmock binds it (test sessions run side by side) is retried on a new
    one, up to ``attempts`` ports. It is up when it says so itself (uvicorn's "running on"
    line, hence ``--log-level info``), never because something else answered on the port.
    The output goes to a file, not a pipe, so a busy reader can never stall llmock.

    Raises:
        LLMockDidNotStart: it exited or stayed silent for ``seconds``, with its output; or
            every port it was given was taken.
    """
    for _ in range(attempts):
        url = f"http://127.0.0.1:{choose_port()}"
        argv = [sys.executable, "-c", _CLI, "serve", "-h", "127.0.0.1", "-p", url.rsplit(":", 1)[1]]
        with log.open("w") as sink:
            process = subprocess.Popen(
                [*argv, "--log-level", "info"],
                stdout=sink,
                stderr=subprocess.STDOUT,
                text=True,
                env={**os.environ, "NO_COLOR": "1", **(env or {})},
            )
        mock = LLMock(process, url, log)
        if _says(mock, f"Uvicorn running on {url}", seconds) and process.poll() is None:
            return mock
        mock.stop()
        if not any("address already in use" in line.lower() for line in mock.output):
            msg = "llmock did not start:\n" + "\n".join(mock.output)
            raise LLMockDidNotStart(msg)
    msg = f"llmock did not start: the port it was given was taken {attempts} times"
    raise LLMockDidNotStart(msg)


def _says(mock: LLMock, text: str, seconds: float) -> bool:
    """Whether llmock printed a line holding ``text`` before it exited or ``seconds`` passed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if any(text in line for line in mock.output):
            return True
        if mock.process.poll() is not None:
            return any(text in line for line in mock.output)  # its last lines are in the file now
        time.sleep(0.05)
    return False


def model_table(url: str, api_key: str = "llmock-key") -> str:
    """The ``[model]`` table of a config whose model is the OpenAI-compatible server at ``url``
    (its root, without ``/v1``): llmock here; the tests also point it at aimock."""
    return textwrap.dedent(
        f"""
        [model]
        use = "openai"
        model = "gpt-4o-mini"
        base_url = "{url}/v1"
        api_key = "{api_key}"
        max_retries = 0
        """
    )
