"""The gateway's request parser (sans-IO): whatever JSON a client sends, the answer is a
parsed call or a 400 naming the field, never another exception."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core.errors import GatewayError

pytest.importorskip("beamfilter_server")

from server._bodies import JSON, parsed_or_refused

from beamfilter_server._auth import KeyRing, basic_password, bearer
from beamfilter_server._wire import ChatCall, parse_chat_request

ROLES = st.sampled_from(["system", "developer", "user", "assistant", "tool", "wizard", None, 3])
MESSAGE = st.fixed_dictionaries(
    {"role": ROLES},
    optional={
        "content": st.none() | st.text(max_size=20) | st.lists(JSON, max_size=2),
        "tool_calls": JSON,
        "tool_call_id": st.none() | st.text(max_size=8),
        "name": JSON,
    },
)
BODY = st.fixed_dictionaries(
    {"model": st.sampled_from(["assistant", "", None, 1]), "messages": st.lists(MESSAGE, max_size=4) | JSON},
    optional={"stream": JSON, "tools": JSON, "n": JSON, "user": JSON, "temperature": JSON, "stream_options": JSON},
)


def parse(body: Any) -> ChatCall | GatewayError:
    try:
        return parse_chat_request(body, max_messages=3)
    except GatewayError as exc:
        return exc


@settings(max_examples=100, deadline=None)
@given(st.one_of(BODY, JSON))
def test_any_body_parses_or_is_a_400_naming_the_field(body: Any) -> None:
    call = parsed_or_refused(lambda body: parse_chat_request(body, max_messages=3), body)
    if call is not None:
        assert call.model == body["model"]
        assert 1 <= len(call.messages) <= 3
        assert set(call.options) <= {"temperature"}


def test_refusals_name_the_field() -> None:
    cases = {
        json.dumps([]): (None, "The request body is a JSON list; send a JSON object."),
        "null": (None, "The request body is a JSON null; send a JSON object."),
        '{"messages": [{"role": "user", "content": "x"}]}': (
            "model",
            "The request has no model; send the model id that GET /v1/models lists.",
        ),
        '{"model": "m", "messages": [{"role": "tool", "content": "x"}]}': (
            "messages[0].tool_call_id",
            "messages[0] is a tool message without tool_call_id; send the id of the call it answers.",
        ),
        '{"model": "m", "n": 2, "messages": [{"role": "user", "content": "x"}]}': (
            "n",
            "n is 2; the gateway answers with one choice (n = 1).",
        ),
        '{"model": "m", "messages": [{"role": "user", "content": [{"type": "audio"}]}]}': (
            "messages[0].content[0]",
            "messages[0].content[0] has type 'audio'; the gateway takes 'text' and 'image_url' parts.",
        ),
    }
    for body, (param, message) in cases.items():
        outcome = parse(json.loads(body))
        assert isinstance(outcome, GatewayError)
        assert (outcome.param, str(outcome)) == (param, message)


def test_a_whole_request_is_read_as_the_openai_wire_means_it() -> None:
    call = parse_chat_request(
        {
            "model": "assistant",
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": 0.2,
            "user": "ada",
            "messages": [
                {"role": "developer", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "w", "arguments": '{"city": "Oslo"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ],
            "tools": [{"type": "function", "function": {"name": "w", "parameters": {"type": "object"}}}],
        },
        max_messages=10,
    )
    assert (call.stream, call.include_usage, call.user, dict(call.options)) == (True, True, "ada", {"temperature": 0.2})
    assert [m.role for m in call.messages] == ["system", "user", "assistant", "tool"]
    assert dict(call.messages[2].tool_calls[0].arguments) == {"city": "Oslo"}
    assert call.messages[3].tool_call_id == "c1"
    assert [t.name for t in call.tools] == ["w"]


@given(st.text(max_size=40))
def test_a_key_ring_accepts_exactly_its_keys(key: str) -> None:
    ring = KeyRing(["k" * 20, "other-key-0123456789"])
    assert ring.accepts(key) == (key in ("k" * 20, "other-key-0123456789"))
    assert ring.accepts("k" * 20)
    assert not ring.accepts(None)
    assert KeyRing([]).accepts(key)
    assert "k" * 20 not in repr(ring)


def test_authorization_headers_are_read_strictly() -> None:
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None
    assert bearer("Bearer ") is None
    assert basic_password("Basic YWRhOnMzY3JldA==") == ("ada", "s3cret")
    assert basic_password("Basic not-base64!") is None
    assert basic_password("Basic bm9jb2xvbg==") is None  # "nocolon"
