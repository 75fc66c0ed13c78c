"""``beamfilter run``/``chat`` say why: a failed tool's line gives one short reason, a call
to a tool that does not exist leaves a line, ``--log``/``BEAMFILTER_LOG`` show log records
(the ``logging`` filter's among them), ``--trace`` shows what a token transform changed,
and ``run -`` drops the newline that ends a piped prompt."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

TOOLS = '''
def read(path: str) -> str:
    """Read a file."""
    with open(path) as f:
        return f.read()


def load(path: str) -> str:
    """Load a file (no policy rule covers it)."""
    with open(path) as f:
        return f.read()


def ping() -> str:
    """Ping."""
    return "pong"
'''


def _run(
    folder: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "beamfilter_core", *args],
        input=stdin, capture_output=True, text=True, timeout=120, cwd=folder, check=False,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


def _write(folder: Path, text: str, name: str = "beamfilter.toml") -> Path:
    (folder / "tools.py").write_text(TOOLS)
    config = folder / name
    config.write_text(textwrap.dedent(text))
    return config


CALLS = """
[model]
use = "scripted"
script = [{ tool_calls = [
  { name = "read", arguments = { path = "/etc/hostname" }, id = "a" },
  { name = "load", arguments = { path = "./missing.txt" }, id = "b" },
  { name = "ping", arguments = {}, id = "c" },
  { name = "ping", arguments = {}, id = "d" },
  { name = "nope", arguments = { x = 1 }, id = "e" },
] }, "done"]

[[tools]]
use = "tools:read"

[[tools]]
use = "tools:load"

[[tools]]
use = "tools:ping"

[[filters]]
use = "logging"

[[filters]]
use = "call_limits"
max_calls_per_tool = { ping = 1 }
on_limit = "finish"

[[filters]]
use = "tool_policy"
rules = [{ tool = "read", kind = "path", roots = ["/srv/allowed"] }]
"""


def test_each_failed_tool_line_gives_one_short_reason(tmp_path: Path) -> None:
    _write(tmp_path, CALLS)
    done = _run(tmp_path, "run", "beamfilter.toml", "go")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    # a call to a tool that does not exist leaves its two lines too, first (the run answers it itself)
    assert lines[:2] == [
        '[tool nope({"x": 1})]',
        "[tool nope: failed: the model asked for a tool that does not exist]",
    ]
    assert sorted(lines) == sorted(
        [
            '[tool nope({"x": 1})]',
            "[tool nope: failed: the model asked for a tool that does not exist]",
            '[tool read({"path": "/etc/hostname"})]',
            "[tool read: failed: denied by the tool policy (rules[0] path 'path'): the path resolves to "
            "'/etc/hostname', outside the allowed roots (/srv/allowed)]",
            '[tool load({"path": "./missing.txt"})]',
            "[tool load: failed: FileNotFoundError: [Errno 2] No such file or directory: './missing.txt']",
            "[tool ping({})]",
            "[tool ping({})]",
            "[tool ping: ok]",
            "[tool ping: failed: Not run: the limit of 1 calls of tool 'ping' per turn was reached "
            "(max_calls_per_tool['ping'])]",
            "blocked by the filter 'call_limits'",
        ]
    )


def test_a_long_reason_is_cut() -> None:
    from beamfilter_core import ToolResult
    from beamfilter_core._cli import outcome

    assert outcome(ToolResult("fine")) == "ok"
    long = ToolResult.failure("semantic", "x" * 300 + ". More.")
    assert outcome(long) == "failed: " + "x" * 159 + "…"
    assert outcome(ToolResult.failure("semantic", "\n\n")) == "failed"
    assert outcome(ToolResult.failure("transient", "Tool 't' failed: OSError: boom\nmore lines")) == (
        "failed: OSError: boom"
    )


def test_log_shows_the_logging_filter_s_records_on_stderr(tmp_path: Path) -> None:
    _write(tmp_path, '[model]\nuse = "scripted"\nscript = ["hi there"]\n\n[[filters]]\nuse = "logging"\n')
    quiet = _run(tmp_path, "run", "beamfilter.toml", "hello", "--debug")
    assert quiet.stderr == ""  # --debug is about tracebacks: no records without --log
    shown = _run(tmp_path, "run", "beamfilter.toml", "hello", "--log", "debug")
    assert shown.stdout == "hi there\n"
    records = [line for line in shown.stderr.splitlines() if line.startswith("DEBUG beamfilter:")]
    assert records[0] == "DEBUG beamfilter: turn before messages=1 resume=False text='hello'"
    assert records[-1].startswith("DEBUG beamfilter: turn after status='completed' ")
    assert len(records) == 6  # before and after the turn, its one round and its one model call
    by_env = _run(tmp_path, "chat", "beamfilter.toml", stdin="hello\n", env={"BEAMFILTER_LOG": "INFO"})
    assert by_env.returncode == 0
    assert "DEBUG" not in by_env.stderr  # the records are DEBUG: below INFO
    bad = _run(tmp_path, "run", "beamfilter.toml", "hello", "--log", "loud")
    assert bad.returncode == 2
    assert bad.stderr == (
        "beamfilter run: --log 'loud' is not a log level; give one of debug, info, warning, error, critical "
        "(or set BEAMFILTER_LOG).\n"
    )


def test_log_lines_mask_secrets(tmp_path: Path) -> None:
    _write(
        tmp_path,
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n[[filters]]\nuse = "logging"\nredact = false\n',
    )
    done = _run(tmp_path, "run", "beamfilter.toml", "my key sk-live-abcdef0123456789abcdef", "--log", "debug")
    assert "sk-live-abcdef0123456789abcdef" not in done.stderr
    assert "DEBUG beamfilter: turn before messages=1" in done.stderr


def test_trace_shows_what_a_token_transform_changed(tmp_path: Path) -> None:
    _write(
        tmp_path,
        """
        [model]
        use = "scripted"
        script = ["My key is sk-live-abcdef0123456789abcdef and AKIAIOSFODNN7EXAMPLE, ok", "Nothing secret."]
        chunk = 5

        [[filters]]
        use = "logging"

        [[filters]]
        use = "redact"
        """,
    )
    done = _run(tmp_path, "run", "beamfilter.toml", "hi", "--trace")
    assert done.stdout == "My key is [REDACTED] and [REDACTED], ok\n"
    assert (
        "  -- token redact (answer): 69 -> 39 characters, 2 change(s): now 'My key is [REDACTED] and [REDACTED], ok'"
        in (done.stderr.splitlines())
    )
    assert "sk-live" not in done.stderr
    clean = _run(tmp_path, "chat", "beamfilter.toml", "--trace", stdin="a\nb\n")
    assert "  -- token redact (answer): 15 characters [no change]" in clean.stderr.splitlines()


def test_run_dash_reads_the_prompt_without_its_trailing_newline(tmp_path: Path) -> None:
    _write(tmp_path, '[model]\nuse = "scripted"\nscript = ["ok"]\n')
    done = _run(tmp_path, "run", "beamfilter.toml", "-", "--json", stdin="two\nlines\n")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["messages"][0]["content"] == "two\nlines"
    crlf = _run(tmp_path, "run", "beamfilter.toml", "-", "--json", stdin="windows\r\n")
    assert json.loads(crlf.stdout)["messages"][0]["content"] == "windows"


def test_chat_on_a_terminal_shows_its_prompts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import asyncio
    import io

    from beamfilter_core import Kernel, ScriptedModel
    from beamfilter_core._cli import _chat_loop

    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\n"))
    asyncio.run(_chat_loop(Kernel(ScriptedModel(["hello"])), "c1", keep_history=True, interactive=True))
    assert capsys.readouterr().out == "assistant> hello\n\n"


# -- the same, in this process (what the coverage gate measures) ---------------------------


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """``tmp_path`` as the current folder; the root logger restored afterwards (``--log``)."""
    monkeypatch.chdir(tmp_path)
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield tmp_path
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)


def test_in_process_tool_lines_log_and_trace(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beamfilter_core._cli import main

    (cli / "whytools.py").write_text(TOOLS)
    (cli / "calls.toml").write_text(CALLS.replace('"tools:', '"whytools:'))
    assert main(["run", "calls.toml", "go"]) == 0
    captured = capsys.readouterr()
    assert captured.out == (
        "I stopped before finishing because the limit of 1 calls of tool 'ping' per turn was reached "
        "(max_calls_per_tool['ping']).\n"
    )
    lines = captured.err.splitlines()
    assert lines[:2] == ['[tool nope({"x": 1})]', "[tool nope: failed: the model asked for a tool that does not exist]"]
    assert "[tool ping: ok]" in lines
    assert (
        "[tool read: failed: denied by the tool policy (rules[0] path 'path'): the path resolves to "
        "'/etc/hostname', outside the allowed roots (/srv/allowed)]"
    ) in lines

    (cli / "redact.toml").write_text(
        '[model]\nuse = "scripted"\nscript = ["key sk-live-abcdef0123456789abcdef ok"]\nchunk = 4\n\n'
        '[[filters]]\nuse = "logging"\n\n[[filters]]\nuse = "redact"\n'
    )
    assert main(["run", "redact.toml", "hi", "--trace", "--log", "DEBUG"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "key [REDACTED] ok\n"
    err = captured.err.splitlines()
    assert "  -- token redact (answer): 37 -> 17 characters, 1 change(s): now 'key [REDACTED] ok'" in err
    assert "-> turn logging: 1 new message(s): 'hi'" in err
    assert any(line.startswith("DEBUG beamfilter: turn before messages=1") for line in err)
    assert main(["run", "redact.toml", "hi", "--log", "loud"]) == 2
    assert capsys.readouterr().err == (
        "beamfilter run: --log 'loud' is not a log level; give one of debug, info, warning, error, critical "
        "(or set BEAMFILTER_LOG).\n"
    )


def test_in_process_chat_through_a_pipe_and_run_dash(
    cli: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io

    from beamfilter_core._cli import main

    (cli / "beamfilter.toml").write_text('[model]\nuse = "scripted"\nscript = ["one", "two"]\n')
    monkeypatch.setattr(sys, "stdin", io.StringIO("hi\nagain\n"))
    assert main(["chat", "beamfilter.toml", "--conversation-id", "c9"]) == 0
    captured = capsys.readouterr()
    assert captured.out == "one\ntwo\n"
    assert captured.err == "conversation: c9\n(no memory filter: the history lives in this process only)\n"
    monkeypatch.setattr(sys, "stdin", io.StringIO("piped prompt\n"))
    assert main(["run", "beamfilter.toml", "-", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["messages"][0]["content"] == "piped prompt"


def test_in_process_chain_prints_the_places(cli: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from beamfilter_core._cli import main

    project = cli / "project"
    project.mkdir()
    (project / "beamfilter.toml").write_text(
        '[model]\nuse = "scripted"\nscript = ["ok"]\n\n[[filters]]\nuse = "trajectory"\npath = "t.jsonl"\n'
    )
    assert main(["chain", "project/beamfilter.toml"]) == 0
    lines = capsys.readouterr().out.splitlines()
    at = lines.index(f"paths (relative ones are taken from {project})")
    assert lines[at + 1] == f"  filters[0].path: t.jsonl -> {project}/t.jsonl"
