"""logging: structured before/after records with durations; results unchanged."""

from __future__ import annotations

import logging

import pytest

from beamfilter_builtins import logging_filter
from beamfilter_builtins._logging import SPEC
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def test_records_per_scope(stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("add", {"a": 1, "b": 2}, "c1")), "x" * 300])
    kernel = Kernel(model, tools=[add], filters=[logging_filter(preview=10)])
    with caplog.at_level(logging.DEBUG, logger="beamfilter"):
        result, _ = await run_turn(kernel, "add", stream)
    assert result.text == "x" * 300
    facts = [r.beamfilter for r in caplog.records if r.name == "beamfilter"]  # type: ignore[attr-defined]
    assert [(f["scope"], f["phase"]) for f in facts] == [
        ("turn", "before"),
        ("iteration", "before"),
        ("chat", "before"),
        ("chat", "after"),
        ("tool", "before"),
        ("tool", "after"),
        ("iteration", "after"),
        ("iteration", "before"),
        ("chat", "before"),
        ("chat", "after"),
        ("iteration", "after"),
        ("turn", "after"),
    ]
    assert facts[3]["tool_calls"] == ["add"]
    assert facts[5]["content"] == "3"
    assert facts[9]["text"] == "x" * 10 + "..."
    assert facts[-1]["status"] == "completed"
    assert all(f["duration_ms"] >= 0 for f in facts if f["phase"] == "after")


async def test_error_record_and_scopes(caplog: pytest.LogCaptureFixture) -> None:
    kernel = Kernel(ScriptedModel([]), filters=[logging_filter(scopes=["chat"], level="INFO")])
    with caplog.at_level(logging.INFO, logger="beamfilter"), pytest.raises(Exception, match="scripted responses"):
        await kernel.run("x")
    facts = [r.beamfilter for r in caplog.records]  # type: ignore[attr-defined]
    assert [(f["scope"], f["phase"]) for f in facts] == [("chat", "before"), ("chat", "error")]
    assert facts[1]["error"].startswith("ScriptExhaustedError: ")


async def test_disabled_logger_costs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="beamfilter"):
        result = await Kernel(ScriptedModel(["hi"]), filters=[logging_filter()]).run("x")
    assert result.text == "hi"
    assert caplog.records == []


def test_options() -> None:
    with pytest.raises(ConfigError, match="level='LOUD'"):
        logging_filter(level="LOUD")
    with pytest.raises(ConfigError, match="choose among turn, iteration, chat, tool"):
        logging_filter(scopes=["token"])
    with pytest.raises(ConfigError, match="preview=-1"):
        logging_filter(preview=-1)
    assert logging_filter(scopes=["tool", "turn"]).scopes == ("turn", "tool")
    assert SPEC.name == "logging"


KEY = "sk-" + "a1B2c3D4e5F6g7H8i9J0"


def secret_kernel(*filters: object) -> Kernel:
    @tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"logged in; session token={KEY}"

    call = ToolCall("login", {"user": "jane@example.com", "password": "Xq9vL2mP8wZ4"}, "c1")
    model = ScriptedModel([ChatResponse.tool_calls(call), f"Your key is {KEY}."])
    return Kernel(model, tools=[login], filters=list(filters))  # type: ignore[arg-type]


async def test_logged_text_is_redacted_by_default(stream: bool, caplog: pytest.LogCaptureFixture) -> None:
    from beamfilter_builtins import pii_filter, redact_filter, tool_output_guard_filter

    kernel = secret_kernel(logging_filter(emails=True), pii_filter(), redact_filter(), tool_output_guard_filter())
    with caplog.at_level(logging.DEBUG, logger="beamfilter"):
        await run_turn(kernel, f"my key is {KEY}, mail jane@example.com", stream)
    logged = "\n".join(record.getMessage() for record in caplog.records)
    logged += repr([record.beamfilter for record in caplog.records])  # type: ignore[attr-defined]
    assert KEY not in logged
    assert "jane@example.com" not in logged
    assert "Xq9vL2mP8wZ4" not in logged
    facts = [record.beamfilter for record in caplog.records]  # type: ignore[attr-defined]
    assert facts[0]["text"] == "my key is [REDACTED], mail [REDACTED]"
    tool_before = next(f for f in facts if f["scope"] == "tool" and f["phase"] == "before")
    assert tool_before["arguments"] == "{'user': '[REDACTED]', 'password': '[REDACTED]'}"


async def test_redaction_can_be_turned_off_or_narrowed(caplog: pytest.LogCaptureFixture) -> None:
    kernel = secret_kernel(logging_filter(redact=False, scopes=["turn"]))
    with caplog.at_level(logging.DEBUG, logger="beamfilter"):
        await kernel.run(f"key {KEY}")
    facts = [record.beamfilter for record in caplog.records]  # type: ignore[attr-defined]
    assert facts[0]["text"] == f"key {KEY}"
    caplog.clear()
    kernel = secret_kernel(logging_filter(redact_exclude=["openai_key"], scopes=["turn"]))
    with caplog.at_level(logging.DEBUG, logger="beamfilter"):
        await kernel.run(f"key {KEY} and Bearer a1B2c3D4e5F6g7H8")
    facts = [record.beamfilter for record in caplog.records]  # type: ignore[attr-defined]
    assert facts[0]["text"] == f"key {KEY} and Bearer [REDACTED]"


async def test_a_secret_cut_by_the_preview_is_still_hidden(caplog: pytest.LogCaptureFixture) -> None:
    kernel = secret_kernel(logging_filter(preview=20, scopes=["turn"]))
    with caplog.at_level(logging.DEBUG, logger="beamfilter"):
        await kernel.run("x" * 15 + KEY + " and more text after it")
    facts = [record.beamfilter for record in caplog.records]  # type: ignore[attr-defined]
    assert facts[0]["text"] == "x" * 15 + "[REDA..."  # redacted first, then cut: no "sk-a1" prefix


def test_redact_options() -> None:
    with pytest.raises(ConfigError, match=r"logging_filter\(redact='yes'\): give true or false"):
        logging_filter(redact="yes")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"logging_filter\(exclude=\['nope'\]\): no rule named 'nope'"):
        logging_filter(redact_exclude=["nope"])
