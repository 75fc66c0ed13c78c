"""trajectory: JSON Lines records of each turn, compression, and record -> replay."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from beamfilter_builtins import load_trajectory, read_trajectory, trajectory_filter
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall, TurnResult, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def run(kernel: Kernel, text: str, stream: bool) -> TurnResult:
    context = {"conversation_id": "conv-1"}
    return (await run_turn(kernel, text, stream, context=context))[0]


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def script() -> list[Any]:
    return [
        ChatResponse.tool_calls(ToolCall("add", {"a": 2, "b": 3}, "call-1"), text="Adding."),
        "The sum is 5.",
    ]


async def test_records_each_event_in_order(tmp_path: Path, stream: bool) -> None:
    path = tmp_path / "t.jsonl"
    kernel = Kernel(ScriptedModel(script()), [add], [trajectory_filter(str(path))])
    await run(kernel, "What is 2 + 3?", stream)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records] == ["turn_start", "tool", "iteration", "iteration", "turn_end"]
    assert {r["turn"] for r in records} == {1}
    assert {r["conversation_id"] for r in records} == {"conv-1"}
    start, call, round1, round2, end = records
    assert start["messages"] == [{"role": "user", "content": "What is 2 + 3?"}]
    assert (start["history"], start["resume"]) == (0, False)
    assert (call["call_id"], call["name"], call["arguments"], call["content"], call["error"]) == (
        "call-1",
        "add",
        {"a": 2, "b": 3},
        "5",
        None,
    )
    assert (round1["index"], round1["status"], round2["index"], round2["status"]) == (0, "continue", 1, "completed")
    assert (end["status"], end["text"], end["blocked_by"]) == ("completed", "The sum is 5.", None)
    assert [m["role"] for m in end["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert all(r["ms"] >= 0 for r in (call, round1, round2, end))


async def test_record_then_replay_gives_the_same_result(tmp_path: Path, stream: bool) -> None:
    path = tmp_path / "t.jsonl"
    recorded = Kernel(ScriptedModel(script()), [add], [trajectory_filter(str(path))])
    original = await run(recorded, "What is 2 + 3?", stream)
    replay_model = load_trajectory(path)
    replayed = await run(Kernel(replay_model, [add]), "What is 2 + 3?", stream)
    assert replayed.text == original.text == "The sum is 5."
    assert replayed.messages == original.messages
    assert len(replay_model.requests) == 2


async def test_callback_and_truncation() -> None:
    seen: list[dict[str, Any]] = []
    flt = trajectory_filter(callback=seen.append, max_chars=5)
    await Kernel(ScriptedModel(["abcdefghij"]), filters=[flt]).run("hello world")
    end = seen[-1]
    assert end["text"] == "abcde…[truncated 5 chars]"
    assert seen[0]["messages"][0]["content"] == "hello…[truncated 6 chars]"
    assert seen[0]["turn"] == 1
    assert end["conversation_id"] is None


async def test_gzip_compression_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "g.jsonl"
    long_answer = "word " * 200
    await Kernel(
        ScriptedModel([long_answer]), filters=[trajectory_filter(str(path), max_chars=50, compress="gzip")]
    ).run("hi")
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    assert set(raw[-1]["text"]) == {"$gzip"}
    assert read_trajectory(path)[-1]["text"] == long_answer
    assert load_trajectory(path).script[0].text == long_answer  # type: ignore[union-attr]


async def test_turn_numbers_and_async_callback() -> None:
    seen: list[int] = []

    async def sink(record: dict[str, Any]) -> None:
        if record["event"] == "turn_end":
            seen.append(record["turn"])

    kernel = Kernel(ScriptedModel(["a", "b"]), filters=[trajectory_filter(callback=sink)])
    await kernel.run("1")
    await kernel.run("2")
    assert seen == [1, 2]


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"give path= \(a JSON Lines file\) or callback="):
        trajectory_filter()
    with pytest.raises(ConfigError, match=r"compress='zip'\) is invalid"):
        trajectory_filter("x", compress="zip")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"event": "turn_start"}\nnot json\n')
    with pytest.raises(ConfigError, match=r"bad.jsonl, line 2 is not JSON"):
        read_trajectory(bad)
    with pytest.raises(ConfigError, match=r"holds no completed turn"):
        load_trajectory(_empty(tmp_path))
    with pytest.raises(ConfigError, match=r"does not exist"):
        read_trajectory(tmp_path / "missing.jsonl")


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty.jsonl"
    path.write_text('{"event": "turn_start"}\n')
    return path


async def test_from_config_relative_path(tmp_path: Path) -> None:
    config = tmp_path / "beamfilter.toml"
    config.write_text(
        '[model]\nuse = "scripted"\nscript = ["hi"]\n\n[[filters]]\nuse = "trajectory"\npath = "runs.jsonl"\n'
    )
    await Kernel.from_config(config).run("hello")
    assert [r["event"] for r in read_trajectory(tmp_path / "runs.jsonl")] == ["turn_start", "iteration", "turn_end"]
