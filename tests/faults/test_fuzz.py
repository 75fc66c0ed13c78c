"""Property tests (hypothesis): the SSE decoder, the config loader, tool argument
validation, the redact transform and the JSON round-trip of messages.

Example counts are kept small enough for the whole fault suite to run in about a
minute on two cores; each property still sees dozens of random cases per run.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from core.models._mock import load_capture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamfilter_builtins import redact_filter
from beamfilter_core import (
    ChatRequest,
    ChatResponse,
    ContentPart,
    Kernel,
    Message,
    OpenAIChatModel,
    RunFinished,
    ScriptedModel,
    ToolCall,
    converter,
    tool,
)
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- the SSE decoder ---------------------------------------------------------------------

STREAMS = (
    "aimock_two_tool_calls_stream.http",
    "llama_cpp_python_forced_tool_stream.sse",
    "llamacpp_xllamacpp_smollm2_text_stream.http",
)


async def _body(parts: list[bytes]) -> Any:
    for part in parts:
        yield part


def _decode(name: str, cuts: list[int] | None, crlf: bool) -> tuple[ChatResponse, list[str]]:
    """Replay a capture through OpenAIChatModel.stream, its body cut at ``cuts``."""
    status, headers, body = load_capture(name)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    if cuts is None:
        parts = [body]
    else:
        points = sorted({c % (len(body) + 1) for c in cuts} | {0, len(body)})
        parts = [body[a:b] for a, b in itertools.pairwise(points)]

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, headers=headers, content=_body(parts))

    async def main() -> tuple[ChatResponse, list[str]]:
        tokens: list[str] = []
        model = OpenAIChatModel(
            "m", base_url="http://mock.test/v1", api_key="k", max_retries=0, transport=httpx.MockTransport(handle)
        )
        async with model:
            response = await model.stream(ChatRequest((Message.user("hi"),)), tokens.append)
        return response, tokens

    return asyncio.run(main())


_WHOLE = {name: _decode(name, None, False) for name in STREAMS}


@pytest.mark.parametrize("name", STREAMS)
@FAST
@given(cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=60), crlf=st.booleans())
def test_any_chunking_of_a_recorded_stream_decodes_the_same(name: str, cuts: list[int], crlf: bool) -> None:
    response, tokens = _decode(name, cuts, crlf)
    whole_response, whole_tokens = _WHOLE[name]
    assert response == whole_response
    # Tokens may be grouped differently by nobody: one SSE event is one token.
    assert tokens == whole_tokens


def test_the_recorded_streams_decode_to_what_they_hold() -> None:
    response, tokens = _WHOLE["llamacpp_xllamacpp_smollm2_text_stream.http"]
    assert response.finish_reason == "length"  # recorded with a small max_tokens
    assert response.text == "".join(tokens)
    assert len(tokens) > 3
    assert [c.name for c in _WHOLE["aimock_two_tool_calls_stream.http"][0].message.tool_calls] == [
        "get_weather",
        "get_time",
    ]


# -- the config loader ---------------------------------------------------------------------

# Names the loader knows, so random configs reach deep validation, not only "unknown key".
# "memory" (writes ./beamfilter.db) and "local" (loads model weights) are left out.
_WORDS = st.sampled_from(
    [
        "filters", "kernel", "model", "models", "plugins", "use", "options", "max_iterations",
        "tool_timeout", "system_prompt", "disable", "only", "strict", "scripted", "openai", "script",
        "redact", "pii", "tool_retry", "model_retry", "call_limits", "loop_guard", "logging",
        "fallback", "approval", "validation", "max_retries", "patterns", "$env", "default",
        "base_url", "timeout", "builtins:redact", "preset:builtins:production", "x",
    ]
)  # fmt: skip
_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-5, 5), st.floats(allow_nan=True), st.text(max_size=8), _WORDS
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(_WORDS, inner, max_size=4)),
    max_leaves=20,
)
# A top-level "$env" key is the known bug of test_a_top_level_env_key_is_a_config_error.
_CONFIGS = st.dictionaries(_WORDS, _VALUES, max_size=5)


def _only_config_errors(build: Callable[[], Any]) -> None:
    message = "built"
    try:
        build()
    except ConfigError as exc:  # anything else escapes and fails the property
        message = str(exc)
    assert message


@FAST
@given(config=_CONFIGS)
def test_a_random_config_dict_raises_only_config_error(config: dict[str, Any]) -> None:
    _only_config_errors(lambda: Kernel.from_config(config))


@FAST
@given(
    model=st.dictionaries(st.sampled_from(["use", "script", "model", "base_url", "timeout", "x"]), _VALUES),
    filters=st.lists(st.dictionaries(_WORDS, _VALUES, max_size=4), max_size=3),
    kernel=st.dictionaries(_WORDS, _VALUES, max_size=3),
)
def test_random_sections_raise_only_config_error(
    model: dict[str, Any], filters: list[Any], kernel: dict[str, Any]
) -> None:
    _only_config_errors(lambda: Kernel.from_config({"model": model, "filters": filters, "kernel": kernel}))


@pytest.mark.parametrize("value", [None, "HOME"])
def test_a_top_level_env_key_is_a_config_error(value: str | None) -> None:
    with pytest.raises(ConfigError, match=r"\$env: unknown section"):
        Kernel.from_config({"$env": value})


_TOML_VALUES = st.sampled_from(['"scripted"', "1", "-1", "true", "[1, 2]", '["ok"]', "{}", "1.5", "inf", '"a"', "'"])
_TOML_LINES = st.lists(
    st.one_of(
        st.sampled_from(["[kernel]", "[model]", "[[filters]]", "[plugins]", "[[filters", "=", '"', "[", "]"]),
        st.builds(lambda key, value: f"{key} = {value}", _WORDS, _TOML_VALUES),
        st.text(max_size=12),
    ),
    max_size=10,
)


@FAST
@given(lines=_TOML_LINES)
def test_random_toml_text_raises_only_config_error(lines: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "beamfilter.toml"
        path.write_text("\n".join(lines), encoding="utf-8")
        _only_config_errors(lambda: Kernel.from_config(path))


def test_a_toml_file_that_is_not_toml_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "beamfilter.toml"
    path.write_text("[model\nuse = 1", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"beamfilter\.toml is not valid TOML: "):
        Kernel.from_config(path)


# -- tool argument validation ---------------------------------------------------------


@tool
def book(city: str, nights: int, late: bool = False) -> str:
    """Book a room."""
    return json.dumps({"city": city, "nights": nights, "late": late})


_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=6)),
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
_ARGUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(["city", "nights", "late", "x"]), _JSON, max_size=4),
    st.builds(lambda c, n: {"city": c, "nights": n}, st.text(max_size=6), st.integers(-3, 3)),
)


@FAST
@given(arguments=_ARGUMENTS, raw=st.one_of(st.none(), st.text(max_size=20)))
def test_random_tool_arguments_never_break_the_run(arguments: dict[str, Any], raw: str | None) -> None:
    call = ToolCall.from_json("book", raw, "call_1") if raw is not None else ToolCall("book", arguments, "call_1")
    model = ScriptedModel([ChatResponse.tool_calls(call), "done"])
    result = Kernel(model, tools=[book]).run_sync("go")
    assert result.text == "done"
    answer = result.messages[2]
    assert answer.role == "tool"
    content = str(answer.content)
    valid = (
        call.raw_arguments is None
        and set(call.arguments) <= {"city", "nights", "late"}
        and isinstance(call.arguments.get("city"), str)
        and type(call.arguments.get("nights")) is int
        and type(call.arguments.get("late", False)) is bool
    )
    if valid:
        assert json.loads(content) == {"late": False, **call.arguments}
    elif call.raw_arguments is not None:
        assert content.startswith("Arguments for tool 'book' are not a JSON object: ")
    else:
        assert content.startswith("Invalid arguments for tool 'book': ")
        assert content.endswith(". Fix them and call again.")


# -- the redact transform ---------------------------------------------------------------

_SECRETS = st.one_of(
    st.from_regex(r"sk-[A-Za-z0-9_-]{15,39}[0-9]", fullmatch=True),
    st.from_regex(r"AKIA[0-9A-Z]{16}", fullmatch=True),
    st.from_regex(r"ghp_[A-Za-z0-9]{36,40}", fullmatch=True),
    st.from_regex(r"Bearer [A-Za-z0-9._~+/=-]{7,29}[0-9]", fullmatch=True),  # the token is hidden, "Bearer" kept
)
_PLAIN = st.text(alphabet=" .,!?\nabcxyz", max_size=30)


class ChunkedModel:
    """A chat model that streams fixed chunks (the split under test)."""

    def __init__(self, chunks: list[str]) -> None:
        self.chunks = chunks

    async def complete(self, request: ChatRequest) -> ChatResponse:
        return ChatResponse(Message.assistant("".join(self.chunks)), "stop")

    async def stream(self, request: ChatRequest, on_token: Callable[[str], None]) -> ChatResponse:
        for chunk in self.chunks:
            on_token(chunk)
        return ChatResponse(Message.assistant("".join(self.chunks)), "stop")


@FAST
@given(
    before=_PLAIN,
    secrets=st.lists(_SECRETS, min_size=1, max_size=3),
    after=_PLAIN,
    cuts=st.lists(st.integers(0, 400), max_size=40),
)
def test_no_secret_survives_any_split_of_the_stream(
    before: str, secrets: list[str], after: str, cuts: list[int]
) -> None:
    text = before + " " + " ~ ".join(secrets) + " " + after
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    chunks = [text[a:b] for a, b in itertools.pairwise(points)]
    kernel = Kernel(ChunkedModel(chunks), filters=[redact_filter()])
    streamed, events = asyncio.run(collect_stream(kernel.run_stream("go")))
    last = events[-1]
    assert isinstance(last, RunFinished)
    final = last.result.text
    hidden = ["Bearer [REDACTED]" if secret.startswith("Bearer") else "[REDACTED]" for secret in secrets]
    expected = before + " " + " ~ ".join(hidden) + " " + after
    assert streamed == expected
    assert final == expected
    for secret in secrets:
        assert secret not in streamed


# -- messages' JSON round-trip ---------------------------------------------------------

_IDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_-", min_size=1, max_size=12)
_TEXT = st.text(max_size=30)
_CALLS = st.one_of(
    st.builds(ToolCall, _IDS, st.dictionaries(st.text(max_size=6), _JSON, max_size=3), _IDS),
    st.builds(lambda n, t, i: ToolCall.from_json(n, t, i), _IDS, st.text(max_size=20), _IDS),
)
_PARTS = st.one_of(
    st.builds(ContentPart, st.just("text"), _TEXT),
    st.builds(lambda u: ContentPart("image_url", url=u), st.text(max_size=20)),
)
_ASSISTANT = st.builds(
    lambda content, calls: Message.assistant(content, tuple(calls)),
    st.one_of(st.none(), _TEXT),
    st.lists(_CALLS, max_size=3),
)
_MESSAGES = st.one_of(
    st.builds(Message.user, _TEXT),
    st.builds(Message.system, _TEXT),
    _ASSISTANT,
    st.builds(Message.tool, _IDS, _TEXT, st.one_of(st.none(), _IDS)),
    st.builds(lambda parts: Message("user", tuple(parts)), st.lists(_PARTS, min_size=1, max_size=3)),
)


@settings(max_examples=150, deadline=None)
@given(messages=st.lists(_MESSAGES, max_size=6))
def test_messages_survive_a_json_round_trip(messages: list[Message]) -> None:
    text = json.dumps(converter.unstructure(messages), ensure_ascii=False)
    assert converter.structure(json.loads(text), list[Message]) == messages
