"""Hostile config files and values: every one is a ConfigError naming where, exit code 2.

The table runs each file through ``beamfilter chain`` (the exact stderr is pinned); the
fuzzer feeds raw bytes (any encoding, any nesting) to the loader, which may raise only
ConfigError.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamfilter_core import Kernel, OpenAIChatModel, ScriptedModel, ToolCall, tool
from beamfilter_core._cli import main
from beamfilter_core._config import read_config
from beamfilter_core.errors import ConfigError, ToolDefinitionError

SCRIPTED = '[model]\nuse = "scripted"\nscript = ["hi"]\n'

# (id, file bytes, the error line after "beamfilter chain: " with {path} for the file)
FILES: list[tuple[str, bytes, str]] = [
    (
        "latin-1",
        (SCRIPTED + '[kernel]\nsystem_prompt = "Gr\xfc\xdfe"\n').encode("latin-1"),
        "{path} is not UTF-8 text (byte 0xfc at offset 69); TOML files are UTF-8: save it as UTF-8.",
    ),
    (
        "toml-nested-50000",
        b"x = " + b"[" * 50_000 + b"]" * 50_000 + b"\n",
        "{path} is nested too deeply to read (more than 64 levels is refused).",
    ),
    (
        "inline-tables-nested-100",
        SCRIPTED.encode() + b"[kernel.options]\nx = " + b"{a = " * 100 + b"1" + b"}" * 100 + b"\n",
        "{path}: kernel.options.x" + ".a" * 62 + " is nested more than 64 levels deep; flatten it.",
    ),
    (
        "tool_timeout-nan",
        (SCRIPTED + "[kernel]\ntool_timeout = nan\n").encode(),
        "{path} has 1 problem:\n  - kernel.tool_timeout: must be a finite number > 0, got nan",
    ),
    (
        "tool_timeout-inf",
        (SCRIPTED + "[kernel]\ntool_timeout = inf\n").encode(),
        "{path} has 1 problem:\n  - kernel.tool_timeout: must be a finite number > 0, got inf",
    ),
    (
        "openai-timeout-nan",
        b'[model]\nuse = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\ntimeout = nan\n',
        "{path} has 1 problem:\n  - model.timeout: must be a finite number > 0, got nan",
    ),
    (
        "openai-deadline-inf",
        b'[model]\nuse = "openai"\nmodel = "m"\nbase_url = "http://127.0.0.1:9/v1"\ndeadline = inf\n',
        "{path} has 1 problem:\n  - model.deadline: must be a finite number > 0, got inf",
    ),
    (
        "not-toml",
        b"[model\n",
        "{path} is not valid TOML: Expected ']' at the end of a table declaration (at line 1, column 7).",
    ),
]


@pytest.mark.parametrize(("data", "expected"), [f[1:] for f in FILES], ids=[f[0] for f in FILES])
def test_a_hostile_config_file_is_a_config_error_with_exit_2(
    data: bytes, expected: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "beamfilter.toml"
    path.write_bytes(data)
    assert main(["chain", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"beamfilter chain: {expected.format(path=path)}\n"
    assert captured.out == ""


def test_a_dict_config_nested_too_deeply_is_a_config_error() -> None:
    deep: dict[str, object] = {"a": 1}
    for _ in range(5000):
        deep = {"a": deep}
    with pytest.raises(ConfigError, match=r"^config: kernel\.options(\.a){63} is nested more than 64 levels deep"):
        Kernel.from_config({"model": {"use": "scripted", "script": ["hi"]}, "kernel": {"options": deep}})


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 0, -1.0])
def test_non_finite_or_non_positive_timeouts_are_refused_everywhere(value: float) -> None:
    with pytest.raises(ConfigError, match=r"tool_timeout="):
        Kernel(ScriptedModel(["hi"]), tool_timeout=value)
    with pytest.raises(ToolDefinitionError, match=r"has timeout="):
        tool(name="wait", timeout=value)(lambda: None)
    with pytest.raises(ConfigError, match=r"OpenAIChatModel\(timeout="):
        OpenAIChatModel("m", timeout=value)
    with pytest.raises(ConfigError, match=r"OpenAIChatModel\(deadline="):
        OpenAIChatModel("m", deadline=value)


def test_tool_call_takes_a_mapping_and_points_to_from_json() -> None:
    with pytest.raises(TypeError) as caught:
        ToolCall("add", '{"a": 1,')  # type: ignore[arg-type]
    assert str(caught.value) == (
        "ToolCall(arguments='{\"a\": 1,') needs the decoded arguments as a mapping, e.g. {'a': 1}; "
        "for the JSON text a model sent use ToolCall.from_json(name, text)."
    )
    call = ToolCall.from_json("add", '{"a": 1,', "c1")
    assert (call.arguments, call.raw_arguments) == ({}, '{"a": 1,')


# -- fuzzing the loader with raw bytes -------------------------------------------------------

_PIECES = st.sampled_from(
    [b"[model]\n", b'use = "scripted"\n', b'script = ["hi"]\n', b"[kernel]\n", b"tool_timeout = nan\n",
     b"x = [[[[[[", b"]]]]]]", b"{a = {b = ", b"}}", b"\xff\xfe", b"\xe9", b"\x00", b'"\\ud800"', b"= \n",
     b"[[filters]]\n", b'use = "redact"\n', b"\r\n"]
)  # fmt: skip


_SLOW_OK = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=150, deadline=None, suppress_health_check=_SLOW_OK)
@given(data=st.lists(_PIECES | st.binary(max_size=12), max_size=12).map(b"".join))
def test_the_loader_raises_config_errors_only_for_any_bytes(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "fuzz.toml"
    path.write_bytes(data)
    with contextlib.suppress(ConfigError):  # anything else escapes and fails the property
        read_config(path)
        Kernel.from_config(path)
