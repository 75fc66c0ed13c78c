"""Pauses are tamper-evident: the forged-state table, keys, and non-JSON context (findings 4, 6)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path
from typing import Any

import attrs
import pytest

from beamfilter_core import ChatResponse, Decision, Kernel, Message, PauseState, ScriptedModel, ToolCall, tool
from beamfilter_core._pause import PauseKeys, canonical
from beamfilter_core.errors import ConfigError, PauseSignatureError, ResumeError

KEY = "k" * 32
RAN: list[Any] = []


@tool(sensitive=True)
def transfer(amount: int, context: Any = None) -> str:
    """Move money."""
    RAN.append((amount, dict(context or {})))
    return f"moved {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _kernel(script: list[Any], **kw: Any) -> Kernel:
    return Kernel(ScriptedModel(script), tools=[transfer], gate=lambda c, t, x: Decision.pause("ask"), **kw)


def _pause(**kw: Any) -> tuple[Kernel, PauseState]:
    calls = [ToolCall("transfer", {"amount": 5}, "c1"), ToolCall("transfer", {"amount": 6}, "c2")]
    kernel = _kernel([ChatResponse.tool_calls(*calls), "done"], **kw)
    paused = kernel.run_sync("pay", context={"role": "user"})
    assert paused.pause is not None
    return kernel, paused.pause


def _edit_json(text: str, edit: Any) -> str:
    data = json.loads(text)
    edit(data)
    return json.dumps(data)


FORGED = {
    "an extra call": lambda d: d["calls"].append({"id": "c3", "name": "transfer", "arguments": {"amount": 9}}),
    "a call's arguments": lambda d: d["calls"][0]["arguments"].update(amount=500),
    "the transcript": lambda d: d["messages"][-1]["tool_calls"][0]["arguments"].update(amount=500),
    "awaiting emptied": lambda d: d.update(awaiting=[]),
    "awaiting shrunk": lambda d: d.update(awaiting=["c1"]),
    "decided added": lambda d: d["decided"].update(c2={"kind": "approve", "arguments": {"amount": 1}, "message": None}),
    "context role": lambda d: d["context"].update(role="admin"),
    "pause id": lambda d: d.update(pause_id="0" * 32),
    "remaining": lambda d: d.update(remaining=99),
    "signature": lambda d: d.update(signature="0" * 64),
    "signature case": lambda d: d.update(signature=d["signature"].upper()),
    "signature type": lambda d: d.update(signature=12),
}


@pytest.mark.parametrize("name", FORGED)
def test_forged_state_table(name: str) -> None:
    kernel, pause = _pause(pause_key=KEY)
    forged = _edit_json(pause.to_json(), FORGED[name])
    with pytest.raises(PauseSignatureError) as info:
        kernel.resume_sync(forged, {"c1": "approve", "c2": "approve"})
    assert str(info.value).startswith("Cannot resume: the signature of pause ")
    assert "does not match: the state was changed, or was signed with another pause_key." in str(info.value)
    assert RAN == []


def test_an_unsigned_state_is_refused_unless_the_kernel_opts_in() -> None:
    kernel, pause = _pause(pause_key=KEY)
    unsigned = _edit_json(pause.to_json(), lambda d: d.update(signature=None))
    with pytest.raises(PauseSignatureError) as info:
        kernel.resume_sync(unsigned, {"c1": "approve", "c2": "approve"})
    assert str(info.value) == (
        "Cannot resume: the pause state is unsigned, so it may have been forged or edited. Resume states that a "
        "kernel returned (they are signed), or, only for states you produce and trust yourself, build the kernel "
        "with unsafe_unsigned_pauses=True."
    )
    older = _edit_json(pause.to_json(), lambda d: [d.pop(k) for k in ("signature", "pause_id", "filter_state")])
    with pytest.raises(PauseSignatureError, match="unsigned"):
        kernel.resume_sync(older, {"c1": "approve", "c2": "approve"})  # a version-1 state from before signing
    assert RAN == []
    trusting = _kernel(["done"], pause_key=KEY, unsafe_unsigned_pauses=True)
    assert trusting.resume_sync(unsigned, {"c1": "approve", "c2": "reject"}).status == "completed"
    assert [a for a, _ in RAN] == [5]
    with pytest.raises(PauseSignatureError, match="does not match"):  # a bad signature is never trusted
        trusting.resume_sync(_edit_json(pause.to_json(), FORGED["signature"]), {"c1": "approve", "c2": "approve"})


def test_another_key_or_another_process_key_is_refused_and_the_message_says_which() -> None:
    _, pause = _pause(pause_key=KEY)
    with pytest.raises(PauseSignatureError, match="or was signed with another pause_key"):
        _kernel(["done"], pause_key="q" * 32).resume_sync(pause, {"c1": "approve", "c2": "approve"})
    with pytest.raises(PauseSignatureError, match="or comes from another process: configure the same pause_key"):
        _kernel(["done"]).resume_sync(pause, {"c1": "approve", "c2": "approve"})
    # without pause_key, kernels of one process share a random key
    _, local = _pause()
    assert _kernel(["done"]).resume_sync(local, {"c1": "approve", "c2": "reject"}).status == "completed"
    assert RAN == [(5, {"role": "user"})]


def test_the_signature_covers_the_canonical_json_and_survives_a_json_round_trip() -> None:
    _, pause = _pause(pause_key=KEY)
    text = pause.to_json()
    assert PauseState.from_json(text) == pause
    reordered = json.dumps(dict(reversed(list(json.loads(text).items()))), indent=2)
    assert _kernel(["done"], pause_key=KEY).resume_sync(reordered, {"c1": "approve", "c2": "approve"}).text == "done"
    body = canonical(pause)
    assert b'"signature"' not in body
    assert body.startswith(b'{"awaiting":["c1","c2"],"calls":[')
    assert len(pause.pause_id) == 32
    assert len(pause.signature or "") == 64


def test_every_pause_gets_its_own_id() -> None:
    ids = {_pause()[1].pause_id for _ in range(20)}
    assert len(ids) == 20


def test_pause_key_must_be_a_real_secret_and_is_never_shown() -> None:
    for bad, shown in [("short", "5 characters"), (12345678901234567, "a int")]:
        with pytest.raises(ConfigError) as info:
            _kernel(["x"], pause_key=bad)
        assert str(info.value).startswith(f"Kernel(pause_key=...) is {shown}; give a secret str or bytes")
    kernel = _kernel(["x"], pause_key=KEY)
    assert KEY not in repr(kernel._pause_keys)
    assert repr(kernel._pause_keys) == "PauseKeys(configured=True)"
    assert PauseKeys(b"b" * 16).sign != PauseKeys(b"b" * 16).seal


def test_pause_key_from_config_with_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BEAMFILTER_TEST_PAUSE_KEY", KEY)
    config = {
        "model": {"use": "scripted", "script": ["done"]},
        "kernel": {"pause_key": {"$env": "BEAMFILTER_TEST_PAUSE_KEY"}},
    }
    _, pause = _pause(pause_key=KEY)
    kernel = Kernel.from_config(config, tools=[transfer])
    assert kernel.resume_sync(pause, {"c1": "approve", "c2": "reject"}).text == "done"


def test_finding_6_a_non_json_context_value_is_refused_at_pause_time_naming_the_key() -> None:
    kernel = _kernel([ChatResponse.tool_calls(ToolCall("transfer", {"amount": 5}, "c1"))])
    with pytest.raises(ConfigError) as info:
        kernel.run_sync("pay", context={"day": date(2024, 1, 2)})
    assert str(info.value) == (
        "The run paused with context['day'] = datetime.date(2024, 1, 2) (a date), which a pause cannot carry: "
        "a pause is JSON that any worker may resume. Put a JSON value in the context (e.g. a date as its "
        "isoformat() text), or list the key in Kernel(transient_context=['day']) to leave it out of the pause "
        "and pass it again with resume(context=...)."
    )
    with pytest.raises(ConfigError, match=r"context\['ratio'\] = nan \(a float\)"):
        _kernel([ChatResponse.tool_calls(ToolCall("transfer", {"amount": 5}, "c1"))]).run_sync(
            "pay", context={"ratio": float("nan")}
        )
    assert RAN == []


def test_transient_context_keys_stay_out_of_the_pause_and_come_back_at_resume() -> None:
    db = object()
    kernel = _kernel(
        [ChatResponse.tool_calls(ToolCall("transfer", {"amount": 5}, "c1")), "done"], transient_context=["db"]
    )
    paused = kernel.run_sync("pay", context={"db": db, "user": "ann"})
    assert paused.pause is not None
    assert paused.pause.context == {"user": "ann"}
    kernel.resume_sync(paused.pause, {"c1": "approve"}, context={"db": "again"})
    assert RAN == [(5, {"user": "ann", "db": "again"})]
    with pytest.raises(ConfigError) as refused:
        _kernel([], transient_context="db")
    assert str(refused.value) == "Kernel(transient_context='db') is invalid; give a list of context keys, e.g. ['day']."


def test_resume_in_another_process_with_the_same_key(tmp_path: Path) -> None:
    _, pause = _pause(pause_key=KEY)
    state = tmp_path / "pause.json"
    state.write_text(pause.to_json())
    script = textwrap.dedent(
        f"""
        from beamfilter_core import Kernel, ScriptedModel, tool
        from beamfilter_core.errors import PauseSignatureError

        @tool(sensitive=True)
        def transfer(amount: int) -> str:
            \"\"\"Move money.\"\"\"
            print("ran", amount)
            return "ok"

        text = open({str(state)!r}).read()
        try:
            Kernel(ScriptedModel(["x"]), tools=[transfer]).resume_sync(text, {{"c1": "approve", "c2": "reject"}})
        except PauseSignatureError:
            print("refused without the key")
        done = Kernel(ScriptedModel(["done"]), tools=[transfer], pause_key={KEY!r}).resume_sync(
            text, {{"c1": "approve", "c2": "reject"}}
        )
        print(done.text)
        """
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.split("\n") == ["refused without the key", "ran 5", "done", ""]


def test_a_pause_state_passed_as_something_else_is_a_resume_error() -> None:
    kernel = _kernel(["x"])
    for text in ["{not json", '{"messages": 3}', "[]", "x" * 100_000, b"\xff"]:
        with pytest.raises(ResumeError) as info:
            kernel.resume_sync(text, {})  # type: ignore[arg-type]
        assert str(info.value).startswith(
            "Cannot resume: the text given as the pause state is not a PauseState's JSON ("
        )
    with pytest.raises(ResumeError, match=r"^Cannot resume: \{'a': 1\} is not a PauseState"):
        kernel.resume_sync({"a": 1}, {})  # type: ignore[arg-type]
    assert attrs.has(PauseState)
    assert Message  # imported for the table's readers
