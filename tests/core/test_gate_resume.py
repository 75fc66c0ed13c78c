"""Integration tests of the approval gate, pause, JSON round-trip and resume (issue 2, contract 9)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from beamfilter_core import ChatResponse, Decision, Kernel, PauseState, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ResumeError

RUNS: list[str] = []


@tool(sensitive=True)
def delete(path: str) -> str:
    """Delete a file."""
    RUNS.append(path)
    return f"deleted {path}"


@tool
def look(path: str) -> str:
    """Look at a file."""
    return f"saw {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RUNS.clear()


def test_non_sensitive_tools_never_reach_the_gate() -> None:
    asked: list[str] = []

    def gate(call: ToolCall, tool: Any, context: Any) -> str:
        asked.append(call.name)
        return "approve"

    model = ScriptedModel(
        [ChatResponse.tool_calls(ToolCall("look", {"path": "a"}), ToolCall("delete", {"path": "b"})), "ok"]
    )
    Kernel(model, tools=[look, delete], gate=gate).run_sync("go")
    assert asked == ["delete"]
    assert RUNS == ["b"]


def test_rejection_is_a_normal_tool_result_and_the_tool_never_runs() -> None:
    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("delete", {"path": "x"}, "c1")), "understood"])
    kernel = Kernel(model, tools=[delete], gate=lambda c, t, x: Decision.reject("not on Fridays"))
    result = kernel.run_sync("go")
    assert RUNS == []
    assert result.text == "understood"
    tool_message = model.requests[1].messages[-1]
    assert (tool_message.role, tool_message.tool_call_id) == ("tool", "c1")
    assert tool_message.content == "The call to 'delete' was rejected: not on Fridays"


async def _async_gate(call: ToolCall, tool: Any, context: Any) -> Decision:
    return Decision.pause("needs a human")


def test_pause_roundtrips_through_json_and_resumes_with_decisions() -> None:
    calls = [ToolCall("delete", {"path": "a"}, "c1"), ToolCall("look", {"path": "b"}, "c2")]
    model = ScriptedModel([ChatResponse.tool_calls(*calls)])
    kernel = Kernel(model, tools=[delete, look], gate=_async_gate)
    paused = kernel.run_sync("clean up", context={"user": "ana"})
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause.awaiting == ("c1",)
    assert paused.pause.reason == "needs a human"
    assert RUNS == []
    text = paused.pause.to_json()
    restored = PauseState.from_json(text)
    assert restored == paused.pause
    assert json.loads(text)["context"] == {"user": "ana"}

    fresh = Kernel(ScriptedModel(["all done"]), tools=[delete, look], gate=_async_gate)
    # an edit goes through the gate again: this gate pauses, so the edited call is a new pause
    again = fresh.resume_sync(text, {"c1": Decision.approve({"path": "a-approved"})})
    assert again.status == "paused"
    assert again.pause is not None
    assert [(c.id, dict(c.arguments)) for c in again.pause.calls] == [
        ("c1", {"path": "a-approved"}),
        ("c2", {"path": "b"}),
    ]
    assert RUNS == []
    result = fresh.resume_sync(again.pause.to_json(), {"c1": "approve"})
    assert result.status == "completed"
    assert result.text == "all done"
    assert RUNS == ["a-approved"]
    assert [m.content for m in result.messages if m.role == "tool"] == ["deleted a-approved", "saw b"]
    assert result.tool_calls_made == 2
    assert result.iterations == 2


def test_resume_with_reply_and_reject_decisions() -> None:
    calls = [ToolCall("delete", {"path": "a"}, "c1"), ToolCall("delete", {"path": "b"}, "c2")]
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(*calls), "fine"]), tools=[delete], gate=_async_gate)
    paused = kernel.run_sync("go")
    assert paused.pause is not None
    result = kernel.resume_sync(paused.pause, {"c1": Decision.reply("kept a"), "c2": "reject"})
    assert RUNS == []
    assert [m.content for m in result.messages if m.role == "tool"] == ["kept a", "The call to 'delete' was rejected."]


def test_resume_rejects_missing_unknown_and_pause_decisions() -> None:
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("delete", {"path": "a"}, "c1"))]),
        tools=[delete],
        gate=_async_gate,
    )
    pause = kernel.run_sync("go").pause
    assert pause is not None
    with pytest.raises(ResumeError, match=r"no decision for awaited calls: c1\. Awaited calls: c1\."):
        kernel.resume_sync(pause, {})
    with pytest.raises(ResumeError, match=r"call 'zz' is not in this pause"):
        kernel.resume_sync(pause, {"c1": "approve", "zz": "approve"})
    with pytest.raises(ResumeError, match=r"decisions\['c1'\] is 'pause'"):
        kernel.resume_sync(pause, {"c1": "pause"})
    with pytest.raises(ResumeError, match=r"needs a pause state, or conversation_id="):
        kernel.resume_sync(None, {})


def test_resume_in_another_process(tmp_path: Path) -> None:
    kernel = Kernel(
        ScriptedModel([ChatResponse.tool_calls(ToolCall("delete", {"path": "far"}, "c9"))]),
        tools=[delete],
        gate=_async_gate,
        pause_key="shared-secret-of-both-processes",
    )
    pause = kernel.run_sync("go").pause
    assert pause is not None
    state_file = tmp_path / "pause.json"
    state_file.write_text(pause.to_json())
    script = textwrap.dedent(
        f"""
        from beamfilter_core import Kernel, ScriptedModel, tool

        ran = []

        @tool(sensitive=True)
        def delete(path: str) -> str:
            \"\"\"Delete a file.\"\"\"
            ran.append(path)
            return f"deleted {{path}}"

        key = "shared-secret-of-both-processes"
        kernel = Kernel(ScriptedModel(["resumed elsewhere"]), tools=[delete], pause_key=key)
        result = kernel.resume_sync(open({str(state_file)!r}).read(), {{"c9": "approve"}})
        print(result.status, result.text, ran)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == "completed resumed elsewhere ['far']"
