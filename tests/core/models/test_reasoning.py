"""Message.reasoning: kept through replace() and through the JSON of messages and pause states."""

from __future__ import annotations

from beamfilter_core import Message, PauseState, Reasoning, ToolCall
from beamfilter_core._serde import converter

BLOCK = {"type": "thinking", "thinking": "Let me check.", "signature": "EqQB"}
THINKING = Reasoning("anthropic", "Let me check.", BLOCK)


def test_reasoning_survives_replace_and_defaults_to_empty() -> None:
    message = Message("assistant", "x", reasoning=(THINKING,))
    assert message.replace(content="y").reasoning == (THINKING,)
    assert Message.assistant("x").reasoning == ()
    assert Reasoning("gemini").data == {}


def test_reasoning_round_trips_through_json_and_is_absent_when_empty() -> None:
    call = ToolCall("get_weather", {"city": "Paris"}, "toolu_1")
    message = Message("assistant", None, (call,), reasoning=(THINKING,))
    data = converter.unstructure(message)
    assert data["reasoning"] == [
        {
            "provider": "anthropic",
            "text": "Let me check.",
            "data": {"type": "thinking", "thinking": "Let me check.", "signature": "EqQB"},
        }
    ]
    assert converter.structure(data, Message) == message
    assert "reasoning" not in converter.unstructure(Message.assistant("x"))
    state = PauseState((Message.user("hi"), message), (call,), ("toolu_1",))
    assert PauseState.from_json(state.to_json()).messages[1].reasoning == (THINKING,)


def test_a_signed_pause_state_whose_thinking_was_edited_is_refused() -> None:
    import attrs
    import pytest

    from beamfilter_core._pause import PauseKeys, sign, verify
    from beamfilter_core.errors import PauseSignatureError

    keys = PauseKeys("a-pause-key-of-32-characters-xxxx")
    call = ToolCall("get_weather", {"city": "Paris"}, "toolu_1")
    state = sign(
        PauseState(
            (Message.user("hi"), Message("assistant", None, (call,), reasoning=(THINKING,))), (call,), ("toolu_1",)
        ),
        keys,
    )
    verify(PauseState.from_json(state.to_json()), keys)  # the thinking is covered and survives JSON
    forged = Reasoning("anthropic", "Let me check.", {**BLOCK, "signature": "forged"})
    edited = attrs.evolve(state, messages=(state.messages[0], state.messages[1].replace(reasoning=(forged,))))
    with pytest.raises(PauseSignatureError):
        verify(edited, keys)
