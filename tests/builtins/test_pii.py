"""pii: personal data is masked before the LLM and restored in tool arguments."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import pii_filter
from beamfilter_builtins._pii import SPEC, iban_valid, luhn_valid
from beamfilter_core import ChatResponse, ContentPart, Kernel, Message, ScriptedModel, ToolCall, tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import run_turn

pytestmark = pytest.mark.anyio


async def masked(text: str, **options: Any) -> str:
    model = ScriptedModel(["ok"])
    await Kernel(model, filters=[pii_filter(**options)]).run(text)
    return model.requests[0].messages[-1].text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("mail jane.doe+x@example.co.uk now", "mail <EMAIL_1> now"),
        ("call +44 20 7946 0958 or (555) 123-4567", "call <PHONE_1> or <PHONE_2>"),
        ("call 555-123-4567.", "call <PHONE_1>."),
        ("card 4111 1111 1111 1111 ok", "card <CREDIT_CARD_1> ok"),
        ("card 4111 1111 1111 1112 fails Luhn", "card 4111 1111 1111 1112 fails Luhn"),
        ("iban GB82 WEST 1234 5698 7654 32 paid", "iban <IBAN_1> paid"),
        ("iban GB82WEST12345698765433 bad checksum", "iban GB82WEST12345698765433 bad checksum"),
        ("from 192.168.1.20 and 2001:db8::8a2e:370:7334", "from <IP_1> and <IP_2>"),
        ("version 1.2.3.4.5 and 999.1.1.1", "version 1.2.3.4.5 and 999.1.1.1"),
        (
            "on 2026-11-30 at 10:30:00, order 12345678, pi 3.14159",
            "on 2026-11-30 at 10:30:00, order 12345678, pi 3.14159",
        ),
        ("a@b.io, a@b.io and c@d.io", "<EMAIL_1>, <EMAIL_1> and <EMAIL_2>"),
    ],
)
async def test_detectors(text: str, expected: str) -> None:
    assert await masked(text) == expected


async def test_modes_and_custom_patterns() -> None:
    assert await masked("x a@b.io EMP-123456", mode="redact", patterns={"employee": r"EMP-\d{6}"}) == (
        "x [REDACTED] [REDACTED]"
    )
    assert await masked("a@b.io", mode="hash") == "<EMAIL_0f3306f4>"  # sha256("a@b.io")[:8]
    assert await masked("EMP-123456 a@b.io", detect=[], patterns={"employee_id": r"EMP-\d{6}"}) == (
        "<EMPLOYEE_ID_1> a@b.io"
    )


async def test_tool_arguments_get_real_values_and_results_are_masked(stream: bool) -> None:
    sent: list[dict[str, Any]] = []

    @tool
    def send_mail(to: str, cc: list[str], body: str) -> str:
        """Send an e-mail."""
        sent.append({"to": to, "cc": cc, "body": body})
        return f"sent to {to}; replies go to help@corp.example"

    call = ToolCall("send_mail", {"to": "<EMAIL_1>", "cc": ["<EMAIL_2>", "<PHONE_9>"], "body": "hi <EMAIL_1>"})
    model = ScriptedModel([ChatResponse.tool_calls(call), "Mail sent to <EMAIL_1>."])
    kernel = Kernel(model, tools=[send_mail], filters=[pii_filter()])
    result, streamed = await run_turn(kernel, "mail bob@site.org, copy ann@site.org", stream)
    assert model.requests[0].messages[0].text == "mail <EMAIL_1>, copy <EMAIL_2>"
    assert sent == [{"to": "bob@site.org", "cc": ["ann@site.org", "<PHONE_9>"], "body": "hi bob@site.org"}]
    tool_message = model.requests[1].messages[-1]
    assert tool_message.text == "sent to <EMAIL_1>; replies go to <EMAIL_3>"
    # The transcript keeps what really happened; only the model's view is masked.
    assert [m.text for m in result.messages if m.role == "tool"] == [
        "sent to bob@site.org; replies go to help@corp.example"
    ]
    assert result.text == "Mail sent to <EMAIL_1>."
    if stream:
        assert streamed == "Mail sent to <EMAIL_1>."


async def test_restore_can_be_turned_off() -> None:
    seen: list[str] = []

    @tool
    def echo(text: str) -> str:
        """Echo."""
        seen.append(text)
        return "ok"

    model = ScriptedModel([ChatResponse.tool_calls(ToolCall("echo", {"text": "<EMAIL_1>"})), "done"])
    flt = pii_filter(restore_in_tools=False)
    assert flt.scopes == ("chat",)
    await Kernel(model, tools=[echo], filters=[flt]).run("a@b.io")
    assert seen == ["<EMAIL_1>"]


async def test_multimodal_text_parts_are_masked() -> None:
    model = ScriptedModel(["ok"])
    content = (ContentPart("text", "mail a@b.io"), ContentPart("image_url", url="http://img/a@b.io.png"))
    await Kernel(model, filters=[pii_filter()]).run(Message("user", content))
    parts = model.requests[0].messages[0].content
    assert parts == (ContentPart("text", "mail <EMAIL_1>"), ContentPart("image_url", url="http://img/a@b.io.png"))


def test_checksums() -> None:
    assert luhn_valid("4111111111111111")
    assert luhn_valid("79927398713")
    assert not luhn_valid("79927398710")
    assert iban_valid("DE89 3704 0044 0532 0130 00")
    assert not iban_valid("DE89 3704 0044 0532 0130 01")


def test_bad_options_and_spec() -> None:
    with pytest.raises(ConfigError) as caught:
        pii_filter(mode="scramble")
    assert str(caught.value) == "pii_filter(mode='scramble') is invalid; give one of 'mask', 'hash', 'redact'."
    with pytest.raises(ConfigError) as caught:
        pii_filter(patterns={"id": "(unclosed"})
    assert str(caught.value).startswith("pii_filter: patterns['id'] = '(unclosed' is not a valid regular expression (")
    with pytest.raises(ConfigError) as caught:
        pii_filter(detect=["ssn"])
    assert str(caught.value) == (
        "pii_filter(detect=['ssn']) is invalid; give a list among email, iban, credit_card, ip, ipv6, phone."
    )
    assert (SPEC.name, tuple(SPEC.scopes)) == ("pii", ("chat", "tool"))


async def test_arguments_of_earlier_tool_calls_in_the_prompt_are_masked() -> None:
    history = [
        Message.user("mail someone"),
        Message.assistant(None, (ToolCall("send_mail", {"to": "bob@site.org", "tags": ["x", "ann@site.org"]}, "c1"),)),
        Message.tool("c1", "sent", "send_mail"),
        Message.user("again?"),
    ]
    model = ScriptedModel(["ok"])
    result = await Kernel(model, filters=[pii_filter()]).run(history)
    sent_call = model.requests[0].messages[1].tool_calls[0]
    assert sent_call.arguments == {"to": "<EMAIL_1>", "tags": ["x", "<EMAIL_2>"]}
    assert sent_call.id == "c1"
    assert result.messages[1].tool_calls[0].arguments["to"] == "bob@site.org"


def luhn_complete(prefix: str) -> str:
    for digit in "0123456789":
        if luhn_valid(prefix + digit):
            return prefix + digit
    raise AssertionError("unreachable")


_WORD = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=1, max_size=8)


@settings(max_examples=60, deadline=None)
@given(
    local=st.lists(_WORD, min_size=1, max_size=3).map(".".join),
    domain=st.lists(_WORD, min_size=1, max_size=3).map(".".join),
    tld=st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=4),
    card=st.text(alphabet="0123456789", min_size=15, max_size=15).map(lambda p: luhn_complete("4" + p[1:])),
    before=st.sampled_from(["", "mail ", "to: ", "(", "x "]),
    after=st.sampled_from(["", ".", " now", ")", ", thanks"]),
)
def test_property_values_never_reach_the_model_and_tools_get_them_back(
    local: str, domain: str, tld: str, card: str, before: str, after: str
) -> None:
    email = f"{local}@{domain}.{tld}"
    received: list[str] = []

    @tool
    def store(value: str) -> str:
        """Store."""
        received.append(value)
        return "stored"

    call = ToolCall("store", {"value": "<EMAIL_1> <CREDIT_CARD_1>"})
    model = ScriptedModel([ChatResponse.tool_calls(call), "ok"])
    Kernel(model, tools=[store], filters=[pii_filter()]).run_sync(f"{before}{email}{after} card {card}")
    prompt = model.requests[0].messages[0].text
    assert email not in prompt
    assert card not in prompt
    assert prompt == f"{before}<EMAIL_1>{after} card <CREDIT_CARD_1>"
    assert received == [f"{email} {card}"]
