"""The shell rule's on_opaque: deny, pause for a human (through a real Kernel), or allow."""

from __future__ import annotations

from typing import Any

import pytest

from beamfilter_builtins import tool_policy_filter
from beamfilter_builtins._shell_rule import ShellRule, ShellVerdict
from beamfilter_builtins._tool_policy import Denial, ToolPolicy
from beamfilter_core import ChatResponse, Decision, Kernel, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError

pytestmark = pytest.mark.anyio

EXPANSION = (
    "the command has a parameter expansion, and allow_commands allows only plain commands (a listed program, "
    "literal words and redirections)"
)
MESSAGE = (
    "The call to 'shell' was denied by the tool policy (rules[0] shell 'command'): {}. Do not retry it with the "
    "same arguments; choose another way or ask the user."
)


def test_on_opaque_values_and_their_errors() -> None:
    assert ShellRule([], None, True).on_opaque == "deny"
    assert ShellRule([], None, True, allow_opaque=True).on_opaque == "allow"
    assert ShellRule([], None, True, allow_opaque=True).allow_opaque
    assert not ShellRule([], None, True, on_opaque="pause").allow_opaque
    with pytest.raises(ConfigError) as caught:
        ShellRule([], None, True, on_opaque="ask")
    assert str(caught.value) == "ShellRule(on_opaque='ask') is invalid; give one of 'deny', 'pause', 'allow'."
    with pytest.raises(ConfigError) as caught:
        ShellRule([], None, True, allow_opaque=True, on_opaque="deny")
    assert str(caught.value) == (
        "ShellRule(allow_opaque=True, on_opaque='deny') contradict each other; give on_opaque only."
    )
    with pytest.raises(ConfigError) as caught:
        ShellRule([], frozenset({"ls"}), True, on_opaque="allow")
    assert str(caught.value) == (
        "ShellRule(on_opaque='allow') cannot be used with allow_commands: under an allow-list only plain commands "
        "pass; give on_opaque='deny' or 'pause'."
    )
    with pytest.raises(ConfigError) as caught:
        ToolPolicy([{"tool": "shell", "kind": "shell", "on_opaque": "maybe"}])
    assert str(caught.value) == (
        "tool_policy_filter: rules[0].on_opaque='maybe' is invalid; give one of 'deny', 'pause', 'allow'."
    )


def test_allow_lets_opaque_commands_through_but_not_unreadable_ones() -> None:
    rule = ShellRule([], None, True, on_opaque="allow")
    assert rule.analyse("$X") == ShellVerdict(None)
    assert rule.analyse("echo 'x") == ShellVerdict(
        "the command cannot be parsed (syntax error at line 1, column 5)", opaque=True
    )
    assert rule.analyse("rm -rf /") == ShellVerdict("the command runs rm recursively from / or the home directory")


def test_a_policy_marks_only_opaque_denials_for_a_pause() -> None:
    policy = ToolPolicy([{"tool": "shell", "kind": "shell", "allow_commands": ["ls"], "on_opaque": "pause"}])
    label = "rules[0] shell 'command'"
    assert policy.check("shell", {"command": "ls $HOME"}) == Denial(
        label, f"{EXPANSION} (on_opaque is 'pause': a human decides)", pause=True
    )
    assert policy.check("shell", {"command": "rm x"}) == Denial(
        label, "the program 'rm' is not in the allowed commands (ls)"
    )
    assert policy.check("shell", {"command": "ls -la"}) is None


def _kernel(on_opaque: str, action: str, commands: list[str], ran: list[str]) -> tuple[Kernel, ScriptedModel]:
    @tool
    def shell(command: str) -> str:
        """Run a command."""
        ran.append(command)
        return "ok"

    rules: list[dict[str, Any]] = [{"tool": "shell", "kind": "shell", "allow_commands": ["ls"], "on_opaque": on_opaque}]
    calls = [ToolCall("shell", {"command": c}, f"c{i}") for i, c in enumerate(commands)]
    model = ScriptedModel([ChatResponse.tool_calls(*calls), "done"])
    return Kernel(model, tools=[shell], filters=[tool_policy_filter(rules, action=action)]), model


async def test_pause_asks_a_human_for_opaque_calls_only() -> None:
    ran: list[str] = []
    kernel, model = _kernel("pause", "deny", ["ls $HOME", "rm x", "ls"], ran)
    paused = await kernel.run("go")
    assert paused.status == "paused"
    assert paused.pause is not None
    assert paused.pause.awaiting == ("c0",)
    assert paused.pause.reason == MESSAGE.format(f"{EXPANSION} (on_opaque is 'pause': a human decides)")
    assert ran == []
    resumed = await kernel.resume(paused.pause, {"c0": "approve"})
    assert resumed.text == "done"
    assert sorted(ran) == ["ls", "ls $HOME"]  # the approved opaque call ran; the denied one did not
    tool_texts = [m.text for m in model.requests[1].messages if m.role == "tool"]
    assert tool_texts == ["ok", MESSAGE.format("the program 'rm' is not in the allowed commands (ls)"), "ok"]


async def test_a_rejected_opaque_call_does_not_run() -> None:
    ran: list[str] = []
    kernel, _model = _kernel("pause", "deny", ["ls $HOME"], ran)
    paused = await kernel.run("go")
    assert paused.pause is not None
    resumed = await kernel.resume(paused.pause, {"c0": Decision.reject("no")})
    assert resumed.text == "done"
    assert ran == []


async def test_deny_never_pauses() -> None:
    ran: list[str] = []
    kernel, model = _kernel("deny", "deny", ["ls $HOME"], ran)
    result = await kernel.run("go")
    assert result.status == "completed"
    assert ran == []
    assert [m.text for m in model.requests[1].messages if m.role == "tool"] == [
        MESSAGE.format(f"{EXPANSION} (allow_opaque is off)")
    ]


def test_an_unreadable_command_pauses_too() -> None:
    policy = ToolPolicy([{"tool": "shell", "kind": "shell", "on_opaque": "pause"}])
    assert policy.check("shell", {"command": "echo 'x"}) == Denial(
        "rules[0] shell 'command'", "the command cannot be parsed (syntax error at line 1, column 5)", pause=True
    )
    allowing = ToolPolicy([{"tool": "shell", "kind": "shell", "on_opaque": "allow"}])
    assert allowing.check("shell", {"command": "echo 'x"}) == Denial(
        "rules[0] shell 'command'", "the command cannot be parsed (syntax error at line 1, column 5)"
    )
    assert allowing.check("shell", {"command": "$X"}) is None
