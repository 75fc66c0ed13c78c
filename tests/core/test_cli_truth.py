"""The CLI tells the truth, each item run as a real ``beamfilter`` subprocess: --trace,
--debug, --json (final answer, JSON errors), the final answer after a filter changed it,
run + memory without an id, --tool, quiet broken pipes, plain --help, plurals, chat
/commands, and Kernel.run_sync inside a running loop."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from _support import run_beamfilter

pytest.importorskip("beamfilter_builtins")

pytestmark = pytest.mark.packages

TOOLS = '''
from beamfilter_core import ToolResult


def lookup(city: str) -> str:
    """The weather of a city."""
    return f"sunny in {city}"


def sign_off_filter():
    from beamfilter_core import Filter

    async def turn(request, state, call_next):
        result = await call_next(request)
        message = result.message.replace(content=result.text + " -- sent by beamfilter")
        return result.replace(message=message)

    return Filter("sign_off", around_turn=turn)


def rewrite_filter():
    from beamfilter_core import Filter

    async def turn(request, state, call_next):
        result = await call_next(request)
        return result.replace(message=result.message.replace(content="Rewritten answer."))

    return Filter("rewrite", around_turn=turn)
'''

PLUGIN = """
from beamfilter_core import FilterSpec, hookimpl
import truthtools


@hookimpl
def beamfilter_register_filters():
    return [
        FilterSpec("sign_off", truthtools.sign_off_filter, scopes=("turn",)),
        FilterSpec("rewrite", truthtools.rewrite_filter, scopes=("turn",)),
    ]
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("truthsite")
    (root / "truthtools.py").write_text(TOOLS)
    (root / "beamfilter_truth.py").write_text(PLUGIN)
    info = root / "beamfilter_truth-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beamfilter-truth\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[beamfilter]\ntruth = beamfilter_truth\n")
    return root


def _config(tmp_path: Path, body: str, script: str = '["Hello there."]') -> Path:
    path = tmp_path / "beamfilter.toml"
    path.write_text(f'[model]\nuse = "scripted"\nscript = {script}\nchunk = 3\n\n{body}')
    return path


TOOL_ROUND = '[{ tool_calls = [{ name = "lookup", arguments = { city = "Oslo" }, id = "c1" }] }, "It is sunny."]'


def test_trace_shows_every_filter_before_and_after(site: Path, tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        '[[tools]]\nuse = "truthtools:lookup"\n\n[[filters]]\nuse = "sign_off"\n\n'
        '[[filters]]\nuse = "tool_errors"\n\n[[filters]]\nuse = "redact"\n',
        TOOL_ROUND,
    )
    done = run_beamfilter(site, "run", str(config), "weather in Oslo?", "--trace")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "It is sunny. -- sent by beamfilter\n"
    lines = done.stderr.splitlines()
    assert lines[0] == "-> turn sign_off: 1 new message(s): 'weather in Oslo?'"
    assert any(
        line.startswith("<- turn sign_off: completed: 'It is sunny. -- sent by beamfilter' [changed the response (")
        for line in lines
    )
    # tool_errors (second filter) is indented one step and wraps the tool call
    assert "  -> tool tool_errors: lookup({'city': 'Oslo'})" in lines
    assert any(
        line.startswith(
            "  <- tool tool_errors: ok: 'sunny in Oslo' [changed the request (the tool's function is wrapped)] ("
        )
        for line in lines
    )
    # redact is a token transform only: it has no hook to trace
    assert not any(" redact:" in line for line in lines)
    assert "[tool lookup: ok]" in lines
    assert all(line.rstrip().endswith(" ms)") for line in lines if line.lstrip().startswith("<- "))


def test_final_answer_changed_after_streaming(site: Path, tmp_path: Path) -> None:
    appended = run_beamfilter(site, "run", str(_config(tmp_path, '[[filters]]\nuse = "sign_off"\n')), "hi")
    assert appended.returncode == 0, appended.stderr
    assert appended.stdout == "Hello there. -- sent by beamfilter\n"  # the difference streamed on
    rewritten = run_beamfilter(site, "run", str(_config(tmp_path, '[[filters]]\nuse = "rewrite"\n')), "hi")
    assert rewritten.stdout == "Hello there.\nRewritten answer.\n"
    assert rewritten.stderr == "[the final answer, changed by a filter after it was streamed:]\n"


def test_json_holds_the_final_answer_and_errors_are_json(site: Path, tmp_path: Path) -> None:
    done = run_beamfilter(site, "run", str(_config(tmp_path, '[[filters]]\nuse = "rewrite"\n')), "hi", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["text"] == "Rewritten answer."
    broken = _config(tmp_path, '[[filters]]\nuse = "rewrtie"\n')
    failed = run_beamfilter(site, "run", str(broken), "hi", "--json")
    assert failed.returncode == 2
    error = json.loads(failed.stdout)["error"]
    assert error["type"] == "ConfigError"
    assert error["exit_code"] == 2
    assert (
        "filters[0].use: No installed plugin provides a filter named 'rewrtie'. Did you mean 'rewrite'?"
        in (error["message"])
    )


def test_debug_prints_the_traceback(site: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, "", '["one"]')
    # the script has one answer: the tool round asks for a second, which fails the run
    config.write_text(config.read_text().replace('["one"]', TOOL_ROUND.replace(', "It is sunny."', "")))
    config.write_text(config.read_text() + '\n[[tools]]\nuse = "truthtools:lookup"\n')
    plain = run_beamfilter(site, "run", str(config), "hi")
    assert plain.returncode == 1
    assert "Traceback" not in plain.stderr
    assert plain.stderr.splitlines()[-1].startswith("beamfilter run: the run failed: ScriptExhaustedError: ")
    assert plain.stderr.splitlines()[-1].endswith("(--debug or BEAMFILTER_DEBUG=1 shows the traceback)")
    for extra, env in ((["--debug"], {}), ([], {"BEAMFILTER_DEBUG": "1"})):
        debug = run_beamfilter(site, "run", str(config), "hi", *extra, env=env)
        assert debug.returncode == 1
        assert "Traceback (most recent call last):" in debug.stderr
        assert "ScriptExhaustedError" in debug.stderr


def test_run_with_memory_and_no_id_generates_and_prints_one(site: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, '[[filters]]\nuse = "memory"\nstore = "memory://"\n')
    done = run_beamfilter(site, "run", str(config), "hi")
    assert done.returncode == 0, done.stderr
    first = done.stderr.splitlines()[0]
    assert first.startswith("conversation: ")
    conversation = first.split()[1]
    assert first == f"conversation: {conversation} (new; continue it with --conversation-id {conversation})"
    given = run_beamfilter(site, "run", str(config), "hi", "--conversation-id", "mine")
    assert "conversation:" not in given.stderr


def test_tool_option_adds_a_function_from_the_current_folder(site: Path, tmp_path: Path) -> None:
    (tmp_path / "localtools.py").write_text(
        'def lookup(city: str) -> str:\n    """Weather."""\n    return f"rainy in {city}"\n'
    )
    config = _config(tmp_path, "", TOOL_ROUND)
    done = run_beamfilter(site, "run", str(config), "weather?", "--tool", "localtools:lookup", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    messages = json.loads(done.stdout)["messages"]
    assert [m["content"] for m in messages if m["role"] == "tool"] == ["rainy in Oslo"]
    missing = run_beamfilter(site, "run", str(config), "weather?", "--tool", "nowhere_xyz:f", cwd=tmp_path)
    assert missing.returncode == 2
    assert missing.stderr.startswith("beamfilter run: cannot import 'nowhere_xyz' for 'nowhere_xyz:f'")


def test_piping_into_head_ends_quietly(site: Path) -> None:
    command = f"{sys.executable} -m beamfilter_core plugins | head -1"
    done = subprocess.run(
        ["bash", "-c", f"set -o pipefail; {command}"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        timeout=120,
        check=False,
    )
    assert done.stdout.startswith("beamfilter-core ")
    assert done.stderr == ""
    assert done.returncode == 0


def test_help_has_no_rest_markup_and_plurals_are_right(site: Path, tmp_path: Path) -> None:
    for command in ("plugins", "chain", "run", "chat", "memory"):
        done = run_beamfilter(site, command, "--help")
        assert done.returncode == 0
        assert "``" not in done.stdout
        assert ":class:" not in done.stdout
    one = _config(tmp_path, '[[filters]]\nuse = "sign_off"\n\n[[tools]]\nuse = "truthtools:lookup"\n')
    chained = run_beamfilter(site, "chain", str(one))
    assert chained.stdout.splitlines()[0] == f"{one}: model core:scripted, 1 filter, 1 toolset"
    listing = run_beamfilter(site, "plugins")
    assert " 1 plugins" not in listing.stdout
    assert "  toolset builtins:mcp" in listing.stdout


def test_chat_never_sends_slash_commands_to_the_model(site: Path, tmp_path: Path) -> None:
    config = _config(tmp_path, "", '["first answer", "second answer"]')
    done = run_beamfilter(site, "chat", str(config), stdin="/help\n/model gpt\nhello\n/exit\nnever sent\n")
    assert done.returncode == 0, done.stderr
    assert "unknown command /model; it was not sent to the model." in done.stderr
    assert "  /exit" in done.stderr
    assert done.stdout == "first answer\n"
    assert "second answer" not in done.stdout


def test_run_sync_inside_a_running_loop_says_to_await(tmp_path: Path) -> None:
    script = tmp_path / "inside.py"
    script.write_text(
        "import asyncio\n"
        "from beamfilter_core import Kernel, ScriptedModel\n"
        "from beamfilter_core.errors import RunningLoopError\n"
        "kernel = Kernel(ScriptedModel(['hi']))\n"
        "async def main():\n"
        "    try:\n"
        "        kernel.run_sync('hello')\n"
        "    except RunningLoopError as exc:\n"
        "        print(exc)\n"
        "    print((await kernel.run('hello')).text)\n"
        "asyncio.run(main())\n"
    )
    done = subprocess.run(
        [sys.executable, "-W", "error", str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""  # no "coroutine ... was never awaited" warning
    assert done.stdout == (
        "Kernel.run_sync() was called inside a running event loop (Jupyter, or async code), where it cannot "
        "start its own; use `await kernel.run(...)` there instead.\nhi\n"
    )


def test_run_script_logs_without_escape_codes_off_a_terminal(tmp_path: Path) -> None:
    run = Path(__file__).resolve().parents[2] / "run"
    # the script's own log() definition, taken from the file and called with stderr on a pipe
    script = f'eval "$(sed -n \'/^if \\[ -t 2 \\]/,/^fi$/p\' {run})"; log "installing"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "[run] installing\n"
