"""The ``beamfilter`` command, run as a real subprocess.

Extra plugins come from a real distribution on ``PYTHONPATH`` (a ``.dist-info`` folder
with ``entry_points.txt``, which ``importlib.metadata`` discovers like an installed one):
``clifix`` provides filters and a model, ``clibroken`` fails to import.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from _support import free_port, http_server, run_beamfilter

PLUGIN = '''
from beamfilter_core import ChatResponse, Filter, FilterSpec, ModelSpec, TokenTransform, hookimpl


class Counter:
    """Answers with the number of user messages it was sent and the conversation id."""

    async def complete(self, request):
        users = sum(1 for m in request.messages if m.role == "user")
        return ChatResponse.from_text(f"{users} user messages in {request.context.get('conversation_id')}")

    async def stream(self, request, on_token):
        response = await self.complete(request)
        on_token(response.message.text)
        return response


async def passthrough(request, state, call_next):
    return await call_next(request)


def shout(token, state):
    return (token.upper(),), state


async def explode(request, state, call_next):
    raise ValueError("boom")


@hookimpl
def beamfilter_register_filters():
    return [
        FilterSpec("memory", lambda: Filter("memory", around_turn=passthrough), scopes=("turn",)),
        FilterSpec("explode", lambda: Filter("explode", around_turn=explode), scopes=("turn",)),
        FilterSpec(
            "upper",
            lambda: Filter("upper", around_chat=passthrough, token=TokenTransform(shout, applies_to="answer")),
            scopes=("chat", "token"),
        ),
    ]


@hookimpl
def beamfilter_register_models():
    return [ModelSpec("counter", lambda: Counter())]
'''


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("site")
    (root / "beamfilter_clifix.py").write_text(PLUGIN, encoding="utf-8")
    info = root / "beamfilter_clifix-0.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: beamfilter-clifix\nVersion: 0.2\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[beamfilter]\nclifix = beamfilter_clifix\nclibroken = beamfilter_clibroken_missing\n", encoding="utf-8"
    )
    return root


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "beamfilter.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


SCRIPTED = '[model]\nuse = "scripted"\nscript = ["hello world"]\n'


@pytest.mark.parametrize("command", [[], ["plugins"], ["chain"], ["run"], ["chat"], ["demo"]])
def test_help_everywhere(site: Path, command: list[str]) -> None:
    done = run_beamfilter(site, *command, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"usage: beamfilter {' '.join(command)}".rstrip())


def test_the_console_script_and_usage_errors(site: Path) -> None:
    script = Path(sys.executable).with_name("beamfilter")
    done = subprocess.run([str(script), "--version"], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, "beamfilter-core 0.1.0")
    done = run_beamfilter(site)
    assert done.returncode == 2
    assert done.stderr.startswith("usage: beamfilter [-h] [--version] COMMAND ...")
    done = run_beamfilter(site, "plugins", "--jsn")
    assert done.returncode == 2
    assert done.stderr.rstrip().endswith("beamfilter: error: unrecognized arguments: --jsn")
    done = run_beamfilter(site, "frobnicate")
    assert done.returncode == 2
    assert "invalid choice: 'frobnicate'" in done.stderr


def test_plugins_lists_loaded_and_failed_plugins(site: Path) -> None:
    done = run_beamfilter(site, "plugins")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    assert "\nclifix  [loaded]  beamfilter-clifix 0.2\n" in done.stdout
    assert "  filter  clifix:upper" in done.stdout
    assert "  model   clifix:counter" in done.stdout
    assert (
        "\nclibroken  [failed]  beamfilter-clifix 0.2\n"
        "  error: ModuleNotFoundError: No module named 'beamfilter_clibroken_missing'\n" in done.stdout
    )
    assert "\ncore  [loaded]  beamfilter-core 0.1.0\n" in done.stdout

    listed = json.loads(run_beamfilter(site, "plugins", "--json").stdout)
    by_name = {p["name"]: p for p in listed["plugins"]}
    assert by_name["clifix"]["status"] == "loaded"
    assert by_name["clifix"]["filters"] == ["memory", "explode", "upper"]
    assert by_name["clibroken"]["status"] == "failed"
    assert by_name["clibroken"]["distribution"] == "beamfilter-clifix"
    assert by_name["clibroken"]["hint"].startswith("the module 'beamfilter_clibroken_missing' is not installed")
    assert {
        "kind": "filter",
        "name": "upper",
        "qualified": "clifix:upper",
        "summary": "",
        "scopes": ["chat", "token"],
    } in by_name["clifix"]["provides"]


def test_plugins_honours_the_allowlist(site: Path) -> None:
    listed = json.loads(run_beamfilter(site, "plugins", "--json", env={"BEAMFILTER_PLUGINS": "clifix"}).stdout)
    statuses = {p["name"]: p["status"] for p in listed["plugins"]}
    assert statuses["clibroken"] == "blocked"
    assert statuses["clifix"] == "loaded"


def test_run_streams_the_answer_even_with_a_broken_plugin(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, SCRIPTED + '\n[[filters]]\nuse = "upper"\n')
    done = run_beamfilter(site, "run", config, "hi")
    assert (done.returncode, done.stdout) == (0, "HELLO WORLD\n")
    assert done.stderr.startswith("beamfilter plugin 'clibroken' from beamfilter-clifix 0.2 failed to load")


def test_run_json_prints_the_turn_result(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, '[model]\nuse = "clifix:counter"\n[plugins]\ndisable = ["clibroken"]\n')
    done = run_beamfilter(site, "run", config, "hi", "--json", "--conversation-id", "c-7")
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    result = json.loads(done.stdout)
    assert (result["status"], result["iterations"]) == ("completed", 1)
    assert result["message"] == {"role": "assistant", "content": "1 user messages in c-7"}


def test_run_reads_the_prompt_from_stdin(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, '[model]\nuse = "counter"\n')
    done = run_beamfilter(site, "run", config, "-", stdin="a prompt\n")
    assert (done.returncode, done.stdout) == (0, "1 user messages in None\n")


def test_config_errors_exit_2_with_every_problem(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, '[model]\nuse = "scriptd"\n\n[[filters]]\nuse = "uper"\n\n[kernel]\nmax_iterations = 0\n')
    done = run_beamfilter(site, "run", config, "hi")
    assert done.returncode == 2
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[-4:] == [
        f"beamfilter run: {config} has 3 problems:",
        "  - kernel.max_iterations: must be >= 1, got 0",
        "  - model.use: No installed plugin provides a model named 'scriptd'. Did you mean 'scripted'? "
        "Plugins that failed to load: clibroken (ModuleNotFoundError: No module named 'beamfilter_clibroken_missing'). "
        "Run `beamfilter plugins` to list the installed models.",
        "  - filters[0].use: No installed plugin provides a filter named 'uper'. Did you mean 'upper'? "
        "Plugins that failed to load: clibroken (ModuleNotFoundError: No module named 'beamfilter_clibroken_missing'). "
        "Run `beamfilter plugins` to list the installed filters.",
    ]
    missing = run_beamfilter(site, "chain", str(tmp_path / "nope.toml"))
    assert missing.returncode == 2
    assert missing.stderr.strip().endswith(
        f"beamfilter chain: The config file '{tmp_path / 'nope.toml'}' does not exist."
    )


def test_a_failing_run_exits_1(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, SCRIPTED + '[plugins]\ndisable = ["clibroken"]\n[[filters]]\nuse = "explode"\n')
    done = run_beamfilter(site, "run", config, "hi")
    assert done.returncode == 1
    assert done.stderr.startswith("beamfilter run: the run failed: FilterError: ")
    assert "boom" in done.stderr


def test_chain_draws_the_onion_and_warns_about_memory(site: Path, tmp_path: Path) -> None:
    config = write(
        tmp_path,
        SCRIPTED
        + '[plugins]\ndisable = ["clibroken"]\n[[filters]]\nuse = "upper"\n[[filters]]\nuse = "clifix:memory"\n',
    )
    done = run_beamfilter(site, "chain", config)
    assert done.returncode == 0
    assert done.stdout == (
        f"{config}: model core:scripted, 2 filters\n"
        "\nturn\n  └─ memory (clifix:memory)\n     └─ [the tool loop]\n"
        "\niteration\n  └─ [one model call and its tool calls]\n"
        "\nchat\n  └─ upper (clifix:upper)\n     └─ [the model: core:scripted]\n"
        "\ntool\n  └─ [the tool]\n"
        "\ngate\n  └─ [the kernel's gate, then approve]\n"
        "\ntoken (the streamed text, in this order)\n  [model tokens] → upper (clifix:upper, answer) → [output]\n"
    )
    assert done.stderr == (
        "warning: the memory filter is filters[1], after clifix:upper; put it first so that every other "
        "filter sees the loaded history and its retries are saved.\n"
    )


def test_chat_keeps_the_conversation_without_a_memory_filter(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, '[model]\nuse = "counter"\n[plugins]\ndisable = ["clibroken"]\n')
    done = run_beamfilter(site, "chat", config, "--conversation-id", "conv-1", stdin="hi\n\nagain\n/exit\nnot read\n")
    assert done.returncode == 0, done.stderr
    # through a pipe, stdout holds the answers only: no prompts mixed in
    assert done.stdout == "1 user messages in conv-1\n2 user messages in conv-1\n"
    assert done.stderr == "conversation: conv-1\n(no memory filter: the history lives in this process only)\n"


def test_chat_shows_a_new_conversation_id_and_ends_at_eof(site: Path, tmp_path: Path) -> None:
    config = write(tmp_path, '[model]\nuse = "counter"\n[plugins]\ndisable = ["clibroken"]\n')
    done = run_beamfilter(site, "chat", config, stdin="hi\n")
    assert done.returncode == 0
    first = done.stderr.splitlines()[0]
    assert first.startswith("conversation: ")
    conversation = first.removeprefix("conversation: ")
    assert len(conversation) == 32
    assert done.stdout == f"1 user messages in {conversation}\n"


class _OpenAIServer(ThreadingHTTPServer):
    requests: list[dict[str, object]]


class _Handler(BaseHTTPRequestHandler):
    """A small OpenAI-compatible chat-completions server streaming two text chunks."""

    server: _OpenAIServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        self.server.requests.append({"path": self.path, "auth": self.headers.get("authorization"), "body": body})
        base = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": body["model"]}
        chunks = [
            {
                **base,
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello "}, "finish_reason": None}],
            },
            {**base, "choices": [{"index": 0, "delta": {"content": "from the server"}, "finish_reason": None}]},
            {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        ]
        payload = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)


@pytest.fixture
def openai_server() -> Iterator[_OpenAIServer]:
    with http_server(_Handler, _OpenAIServer) as server:
        server.requests = []
        yield server


def test_run_with_the_openai_provider_against_a_real_server(
    site: Path, tmp_path: Path, openai_server: _OpenAIServer
) -> None:
    port = openai_server.server_address[1]
    config = write(
        tmp_path,
        f'[model]\nuse = "openai"\nmodel = "test-model"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        'api_key = { "$env" = "BF_CLI_KEY" }\nmax_retries = 0\n[plugins]\ndisable = ["clibroken"]\n'
        '[[filters]]\nuse = "upper"\n',
    )
    done = run_beamfilter(site, "run", config, "hi", env={"BF_CLI_KEY": "sk-test"})
    assert (done.returncode, done.stdout, done.stderr) == (0, "HELLO FROM THE SERVER\n", "")
    (request,) = openai_server.requests
    assert (request["path"], request["auth"]) == ("/v1/chat/completions", "Bearer sk-test")
    body = request["body"]
    assert isinstance(body, dict)
    assert (body["model"], body["stream"], body["messages"]) == (
        "test-model",
        True,
        [{"role": "user", "content": "hi"}],
    )


def test_a_provider_error_exits_1(site: Path, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there: connection refused
    config = write(
        tmp_path,
        f'[model]\nuse = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:{port}/v1"\napi_key = "k"\n'
        'max_retries = 0\ntimeout = 5\n[plugins]\ndisable = ["clibroken"]\n',
    )
    done = run_beamfilter(site, "run", config, "hi")
    assert done.returncode == 1
    assert done.stderr.startswith("beamfilter run: the run failed: ProviderConnectionError: ")


def test_chat_leaves_the_history_to_a_memory_filter(site: Path, tmp_path: Path) -> None:
    # clifix:memory passes through without storing anything: each turn sends only the new line.
    config = write(
        tmp_path, '[model]\nuse = "counter"\n[plugins]\ndisable = ["clibroken"]\n[[filters]]\nuse = "clifix:memory"\n'
    )
    done = run_beamfilter(site, "chat", config, "--conversation-id", "m", stdin="hi\nagain\n")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "1 user messages in m\n1 user messages in m\n"
    assert done.stderr == "conversation: m\n"


def test_listing_works_in_strict_mode_with_a_broken_plugin(site: Path) -> None:
    done = run_beamfilter(site, "plugins", env={"BEAMFILTER_STRICT_PLUGINS": "1"})
    assert done.returncode == 0
    assert "\nclibroken  [failed]  beamfilter-clifix 0.2\n" in done.stdout


@pytest.mark.packages  # the demo builds examples/beamfilter.toml of the checkout, with builtins and memory
def test_demo_forwards_its_options(site: Path) -> None:
    from beamfilter_core._cli import main

    assert main(["demo", "--bogus-option"]) == 2  # the demo's own parser rejects it, in-process
    done = run_beamfilter(site, "demo", "--scripted", env={"BEAMFILTER_PLUGINS": "builtins,memory"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].startswith("done in ")
