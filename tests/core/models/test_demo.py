"""The demo's own filters, and a full demo run on the scripted fallback model."""

from __future__ import annotations

import io

import pytest

from beamfilter_core._demo import SECRET, redact_transform, run_demo
from beamfilter_core._streaming import pipeline

TEXT = f"key {SECRET}, again {SECRET}! sky ss sk-short sk"
EXPECTED = "key [REDACTED], again [REDACTED]! sky ss sk-short sk"


def redact_pieces(pieces: list[str]) -> tuple[list[str], int]:
    counter = [0]
    out: list[str] = []
    push, flush = pipeline([redact_transform(counter)], out.append)
    for piece in pieces:
        push(piece)
    assert flush is not None
    flush()
    return out, counter[0]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, len(TEXT)])
def test_redaction_catches_keys_split_at_any_boundary(size: int) -> None:
    out, found = redact_pieces([TEXT[i : i + size] for i in range(0, len(TEXT), size)])
    assert "".join(out) == EXPECTED
    assert found == 2


def test_redaction_at_every_single_cut() -> None:
    for cut in range(len(TEXT) + 1):
        out, found = redact_pieces([TEXT[:cut], TEXT[cut:]])
        assert ("".join(out), found) == (EXPECTED, 2), cut


def test_redaction_holds_back_only_a_possible_key() -> None:
    out, _ = redact_pieces(["plain words ", "more words"])
    assert out == ["plain words ", "more word", "s"]  # a final "s" could start "sk-"
    held, _ = redact_pieces(["a ", "s", "k", "-", "x y"])
    assert held == ["a ", "sk-x y"]


def test_a_key_at_the_very_end_is_redacted_by_flush() -> None:
    out, found = redact_pieces([f"it is {SECRET}"])
    assert (out, found) == (["it is ", "[REDACTED]"], 1)


def test_scripted_demo_shows_the_onion_and_the_filters() -> None:
    out = io.StringIO()
    assert run_demo(["--scripted"], out=out) == 0
    text = out.getvalue()
    assert text.count(SECRET) == 1  # only in the user's prompt, never in an answer
    lines = [line.strip() for line in text.splitlines()]
    assert "1. log        turn, iteration, chat, tool" in lines
    assert "4. redact     token (rewrites the answer)" in lines
    assert "5. print      token (rewrites the stream)" in lines
    assert "[log] <- chat: finish_reason=stop" in lines
    assert "assistant> Your API key is [REDACTED]. Keep it safe!" in lines
    assert "assistant> You told me your API key is [REDACTED]." in lines
    assert "[memory] conversation 'demo': 2 stored + 1 new = 3 sent" in lines
    assert lines.count("[redact] hid 1 key(s) in this answer; returned text == streamed text: yes") == 2
    assert "[safeguard] input contains 'ignore previous instructions': blocked, the model is not called" in lines
    assert "assistant> I can't help with that request." in lines
    assert "memory kept 4 messages; a key in a stored answer: no" in lines
    # The blocked third turn never reached the model: three chats would mean it did.
    assert sum(line.startswith("[log] -> chat") for line in lines) == 2
