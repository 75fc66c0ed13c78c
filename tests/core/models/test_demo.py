"""The demo: the onion of examples/beamfilter.toml built by the real plugins, traced, on
the scripted fallback model, with one tool round."""

from __future__ import annotations

import io

import pytest

pytest.importorskip("beamfilter_builtins")
pytest.importorskip("beamfilter_memory")

from beamfilter_core._demo import EXAMPLE, SECRET, run_demo

pytestmark = pytest.mark.packages


def test_scripted_demo_shows_the_real_onion_of_the_example_config() -> None:
    out = io.StringIO()
    assert run_demo(["--scripted"], out=out) == 0
    text = out.getvalue()
    lines = [line.strip() for line in text.splitlines()]
    assert lines[0] == f"beamfilter demo: the onion of {EXAMPLE}, built by the real plugins"
    assert "model: ScriptedModel (canned answers)" in lines
    # the filters of examples/beamfilter.toml, by name, through the plugins
    assert "1. memory:memory        turn, chat" in lines
    assert "2. builtins:logging     turn, iteration, chat, tool" in lines
    assert "3. builtins:safeguard   turn" in lines
    assert "4. builtins:redact      token" in lines
    # secrets: only in the user's prompt, never in an answer
    assert text.count(SECRET) == 4  # the prompt line and its three traced turn lines
    assert "assistant> Your API key is [REDACTED]. Keep it safe!" in lines
    assert "assistant> You told me your API key is [REDACTED]." in lines
    # memory gave turn 2 the history of turn 1
    assert any(
        line.startswith(
            "<- chat memory: 'You told me your API key is [REDACTED].' [changed the request (messages 1 -> 3)]"
        )
        for line in lines
    )
    assert lines.count("returned text == streamed text: yes") == 2
    # the safeguard short-circuits turn 3: the model is never called
    assert any(
        line.startswith(
            '<- turn safeguard: completed, blocked by safeguard: "I can\'t help with that request." '
            "[short-circuited: the inner layers were not called]"
        )
        for line in lines
    )
    assert "returned text == streamed text: yes; blocked by safeguard" in lines
    assert "assistant> I can't help with that request." in lines
    assert sum(line.startswith("-> chat memory") for line in lines) == 4  # 2 turns + 2 rounds of the tool turn
    assert "memory kept 6 messages; a key in a stored answer: no" in lines
    # one real tool round, saying on which model
    assert any(line.startswith("model: ScriptedModel asking for the tool") for line in lines)
    assert "-> tool logging: count_words({'text': 'the quick brown fox jumps'})" in lines
    assert "the tool ran 1 time(s); answer: There are 5 words." in lines
    assert lines[-1].startswith("done in ")


def test_a_missing_config_is_said(tmp_path: object) -> None:
    out = io.StringIO()
    assert run_demo(["--scripted", "--config", "/nonexistent/beamfilter.toml"], out=out) == 1
    assert out.getvalue() == (
        "beamfilter demo: /nonexistent/beamfilter.toml does not exist; give a config with --config PATH.\n"
    )
