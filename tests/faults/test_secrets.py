"""Credentials never printed: every repr, error and CLI message shows them as ``***``.

One core helper, :func:`beamfilter_core.mask_credentials`, masks URL passwords and
secret-looking parameters; the table below pins it on every spelling, then each place
that prints a URL is attacked with a real server (Redis, PostgreSQL, a refused port).
Values read from ``$env`` are shown as ``<from $env NAME>`` in config errors.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from beamfilter_core import ChatRequest, Message, OpenAIChatModel, mask_credentials
from beamfilter_core._cli import main
from beamfilter_core.errors import ConfigError, ProviderConnectionError, StoreError
from beamfilter_memory import PostgresStore, RedisStore, open_store

pytestmark = pytest.mark.anyio

SECRET = "hunter2-Secret"

MASKED: list[tuple[str, str]] = [
    (f"redis://:{SECRET}@cache:6379/0", "redis://:***@cache:6379/0"),
    (f"redis://default:{SECRET}@cache", "redis://default:***@cache"),
    (f"rediss://user:{SECRET}@cache:6380/1", "rediss://user:***@cache:6380/1"),
    (f"redis://:p@ss{SECRET}@cache/0", "redis://:***@cache/0"),  # an unencoded '@' in the password
    (f"postgresql://app:{SECRET}@db/chats", "postgresql://app:***@db/chats"),
    (f"postgresql://:{SECRET}@db/chats", "postgresql://:***@db/chats"),
    (f"postgres://app:{SECRET}@db:5432/chats", "postgres://app:***@db:5432/chats"),
    (f"postgresql://app@db/chats?password={SECRET}", "postgresql://app@db/chats?password=***"),
    (
        f"postgresql://app@db/chats?sslmode=require&PASSWORD={SECRET}&x=1",
        "postgresql://app@db/chats?sslmode=require&PASSWORD=***&x=1",
    ),
    (f"host=db password={SECRET} dbname=chats", "host=db password=*** dbname=chats"),
    (f"https://user:{SECRET}@llm.internal/v1", "https://user:***@llm.internal/v1"),
    (f"http://127.0.0.1:8080/v1?api_key={SECRET}", "http://127.0.0.1:8080/v1?api_key=***"),
    (f"http://127.0.0.1:8080/v1?api-key={SECRET}", "http://127.0.0.1:8080/v1?api-key=***"),
    (f"http://h/v1?access_token={SECRET}#x", "http://h/v1?access_token=***#x"),
    (f"failed: 'redis://:{SECRET}@h:1/0' (refused)", "failed: 'redis://:***@h:1/0' (refused)"),
    # nothing secret: unchanged
    ("postgresql://app@db.internal/chats", "postgresql://app@db.internal/chats"),
    ("sqlite:///chats.db", "sqlite:///chats.db"),
    ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
    ("bob@example.org wrote", "bob@example.org wrote"),
]


@pytest.mark.parametrize(("text", "shown"), MASKED)
def test_mask_credentials(text: str, shown: str) -> None:
    assert mask_credentials(text) == shown


def _refused_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_store_reprs_mask_the_password() -> None:
    assert repr(RedisStore(f"redis://:{SECRET}@cache:6379/0")) == (
        "RedisStore('redis://:***@cache:6379/0', prefix='beamfilter:', ttl=None)"
    )
    assert repr(PostgresStore(f"postgresql://:{SECRET}@db/chats")) == "PostgresStore('postgresql://:***@db/chats')"
    assert repr(PostgresStore(f"postgresql://app@db/chats?password={SECRET}")) == (
        "PostgresStore('postgresql://app@db/chats?password=***')"
    )


@pytest.mark.parametrize(
    ("url", "options", "message"),
    [
        (
            f"redis://:{SECRET}@cache/0",
            {"bogus": 1},
            "open_store('redis://:***@cache/0') got options it does not accept (bogus): ",
        ),
        (f"mysql://root:{SECRET}@db/x", {}, "No memory store for the URL 'mysql://root:***@db/x' (scheme 'mysql'); "),
        (f"postgresql:/app:{SECRET}@db", {}, "No memory store for the URL 'postgresql:/app:"),
    ],
)
def test_open_store_errors_mask_the_password(url: str, options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        open_store(url, **options)
    assert str(caught.value).startswith(message)
    if "://" in url:
        assert SECRET not in str(caught.value)


async def test_a_refused_redis_store_error_masks_the_password() -> None:
    port = _refused_port()
    store = RedisStore(f"redis://:{SECRET}@127.0.0.1:{port}/0")
    with pytest.raises(StoreError) as caught:
        await store.load("c1")
    await store.aclose()
    text = str(caught.value)
    assert text.startswith(f"RedisStore('redis://:***@127.0.0.1:{port}/0', prefix='beamfilter:', ttl=None): ")
    assert SECRET not in text


async def test_a_refused_postgres_store_error_masks_the_password() -> None:
    port = _refused_port()
    store = PostgresStore(f"postgresql://app:{SECRET}@127.0.0.1:{port}/chats", timeout=1)
    with pytest.raises(StoreError) as caught:
        await store.load("c1")
    await store.aclose()
    assert str(caught.value).startswith(f"PostgresStore('postgresql://app:***@127.0.0.1:{port}/chats'): connecting")
    assert SECRET not in str(caught.value)


def test_memory_migrate_echoes_the_url_masked(capsys: pytest.CaptureFixture[str], redis_url: str) -> None:
    url = redis_url.replace("redis://", f"redis://:{SECRET}@")
    assert main(["memory", "migrate", url]) == 0
    out = capsys.readouterr()
    shown = redis_url.replace("redis://", "redis://:***@")
    assert (
        out.out
        == f"RedisStore('{shown}', prefix='beamfilter:', ttl=None): nothing to migrate (this store has no schema).\n"
    )
    assert SECRET not in out.out + out.err


def test_memory_migrate_failure_masks_the_password(capsys: pytest.CaptureFixture[str]) -> None:
    port = _refused_port()
    code = main(["memory", "migrate", f"postgresql://:{SECRET}@127.0.0.1:{port}/chats?connect_timeout=1"])
    err = capsys.readouterr().err
    assert code == 1
    # the driver's reason, at once: not the pool's "incomplete after 30.0 sec" half a minute later
    assert err == (
        f"beamfilter memory: the run failed: StoreError: PostgresStore('postgresql://:***@127.0.0.1:{port}"
        "/chats?connect_timeout=1'): connecting failed: OperationalError: connection failed: connection to "
        f'server at "127.0.0.1", port {port} failed: Connection refused\n'
        "\tIs the server running on that host and accepting TCP/IP connections?\n"
        "(--debug or BEAMFILTER_DEBUG=1 shows the traceback)\n"
    )
    assert SECRET not in err


async def test_the_openai_model_masks_credentials_in_base_url() -> None:
    port = _refused_port()
    assert repr(OpenAIChatModel("m", base_url=f"http://h/v1?api_key={SECRET}")) == (
        "OpenAIChatModel(model='m', base_url='http://h/v1?api_key=***')"
    )
    model = OpenAIChatModel("m", base_url=f"http://user:{SECRET}@127.0.0.1:{port}/v1", max_retries=0)
    assert repr(model) == f"OpenAIChatModel(model='m', base_url='http://user:***@127.0.0.1:{port}/v1')"
    with pytest.raises(ProviderConnectionError) as caught:
        await model.complete(ChatRequest((Message.user("hi"),)))
    await model.aclose()
    assert str(caught.value) == (
        f"Cannot reach http://user:***@127.0.0.1:{port}/v1/chat/completions: ConnectError: "
        "All connection attempts failed. Is the server running?"
    )


def test_a_key_given_as_api_key_env_is_never_echoed() -> None:
    with pytest.raises(ConfigError) as caught:
        OpenAIChatModel("m", api_key_env=f"sk-{SECRET}")
    assert SECRET not in str(caught.value)
    assert "must name an environment variable" in str(caught.value)


def test_beamfilter_run_prints_store_errors_masked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"redis://:{SECRET}@127.0.0.1:{_refused_port()}/0"
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        f'[model]\nuse = "scripted"\nscript = ["hi"]\n\n[[filters]]\nuse = "memory"\nstore = "{url}"\n',
        encoding="utf-8",
    )
    code = main(["run", str(config), "hello", "--conversation-id", "c1"])
    err = capsys.readouterr().err
    assert code == 1
    assert "redis://:***@127.0.0.1:" in err
    assert SECRET not in err


@pytest.mark.parametrize(
    ("table", "problem"),
    [
        ('[kernel]\nmax_iterations = { "$env" = "BF_SECRET" }', "kernel.max_iterations: must be of type integer, got "),
        (
            '[kernel]\ntool_timeout = { "$env" = "BF_SECRET" }',
            "kernel.tool_timeout: must be of type number, got ",
        ),
        (
            '[[filters]]\nuse = "redact"\nmax_length = { "$env" = "BF_SECRET" }',
            "filters[0].max_length: must be of type integer, got ",
        ),
    ],
)
def test_config_errors_show_env_values_by_name(
    table: str, problem: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BF_SECRET", f"sk-{SECRET}")
    config = tmp_path / "beamfilter.toml"
    config.write_text(f'[model]\nuse = "scripted"\nscript = ["hi"]\n\n{table}\n', encoding="utf-8")
    assert main(["chain", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"  - {problem}<from $env BF_SECRET>" in err
    assert SECRET not in err
