"""The redaction engine's edges, each pinned with its exact result (what mutation testing found unpinned)."""

from __future__ import annotations

import itertools
import re

import pytest

from beamfilter_builtins import redact_filter
from beamfilter_builtins._partial import first_chars, prefix_source
from beamfilter_core import Filter, Kernel, RunFinished, ScriptedModel
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream

pytestmark = pytest.mark.anyio


def run(flt: Filter, chunks: list[str]) -> tuple[list[str], object]:
    transform = flt.token
    assert transform is not None
    state = transform.new_state()
    out: list[str] = []
    for chunk in chunks:
        emitted, state = transform.step(chunk, state)
        out.extend(emitted)
    return out, state


def streamed(flt: Filter, chunks: list[str]) -> str:
    out, state = run(flt, chunks)
    transform = flt.token
    assert transform is not None
    assert transform.flush is not None
    return "".join(out) + "".join(transform.flush(state))


def every_split(text: str) -> list[list[str]]:
    return [
        [c for c in (text[:i], text[i:j], text[j:]) if c] for i in range(len(text) + 1) for j in range(i, len(text) + 1)
    ]


@pytest.mark.parametrize("address", ["jane@example.com", "7x@example.org", "Zed.Q+tag@mail.example.co.uk"])
def test_emails_starting_with_any_letter_or_digit_are_hidden(address: str) -> None:
    flt = redact_filter(emails=True, default_rules=False)
    text = f"mail {address} now"
    for chunks in every_split(text):
        assert streamed(flt, chunks) == "mail [REDACTED] now", chunks


def test_the_email_lead_set_holds_every_character_of_its_ranges() -> None:
    chars = first_chars(re.compile(r"[A-Za-z0-9._%+-]{1,64}@x"))
    assert chars is not None
    assert {"a", "j", "z", "A", "Z", "0", "7", "9", ".", "_", "%", "+", "-"} <= chars
    assert len(chars) == 26 + 26 + 10 + 5


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("a?b{3}", "xbbb abbb abb bbbb", "x# # abb #b"),
        (r"(?:ab|cd)x{2}", "abxx cdxx adxx", "# # adxx"),
        (r"\d{3}-\d{4}", "call 555-1234 or 55-12345", "call # or 55-12345"),
        (r"\w{2}@k", "ab@k x@k", "# x@k"),
    ],
)
def test_patterns_with_optional_branching_or_class_leads(pattern: str, text: str, expected: str) -> None:
    assert re.sub(pattern, "#", text) == expected
    flt = redact_filter([pattern], replacement="#", default_rules=False)
    for chunks in every_split(text):
        assert streamed(flt, chunks) == expected, chunks


def test_a_branch_lead_set_and_prefixes() -> None:
    assert first_chars(re.compile(r"(?:ab|cd)x{2}")) == frozenset("ac")
    prefix = re.compile(prefix_source(re.compile(r"(?:ab|cd)x{2}")))
    assert [w for w in ("a", "ab", "abx", "abxx", "c", "cdx") if prefix.fullmatch(w)] == [
        "a",
        "ab",
        "abx",
        "abxx",
        "c",
        "cdx",
    ]
    assert prefix.fullmatch("ad") is None
    assert prefix.fullmatch("abxxx") is None


@pytest.mark.parametrize("pattern", [r"\b", "^", "$", r"(?=a)", r"\b|^"])
def test_assertion_only_patterns_are_refused(pattern: str) -> None:
    with pytest.raises(ConfigError) as caught:
        redact_filter([pattern], default_rules=False)
    assert str(caught.value) == (
        f"redact_filter: pattern patterns[0] {pattern!r} can match the empty text; make it match 1+ characters."
    )


def test_empty_tokens_change_nothing() -> None:
    flt = redact_filter()
    transform = flt.token
    assert transform is not None
    state = transform.new_state()
    emitted, state = transform.step("", state)
    assert list(emitted) == []
    assert (state.context, state.held) == ("", "")
    emitted, state = transform.step("key sk-abc", state)
    assert "".join(emitted) == "key "
    assert (state.context, state.held) == (" ", "sk-abc")
    emitted, after = transform.step("", state)
    assert list(emitted) == []
    assert after is state
    assert streamed(flt, ["key ", "", "sk-", "", "abcdefghijklmnopqrst", "", " ok", ""]) == "key [REDACTED] ok"


async def test_empty_text_deltas_in_a_real_stream() -> None:
    class Gappy(ScriptedModel):
        async def stream(self, request: object, on_token: object) -> object:
            for token in ["key ", "", "sk-abcdefgh", "", "ijklmnopqrst", ""]:
                on_token(token)  # type: ignore[operator]
            return await self.complete(request)  # type: ignore[arg-type]

    kernel = Kernel(Gappy(["key sk-abcdefghijklmnopqrst"]), filters=[redact_filter()])
    text, events = await collect_stream(kernel.run_stream("hi"))
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert text == "key [REDACTED]"
    assert last.result.text == "key [REDACTED]"


def test_the_final_flush_redacts_or_releases_the_held_tail() -> None:
    flt = redact_filter()
    transform = flt.token
    assert transform is not None
    assert transform.flush is not None
    out, state = run(flt, ["the key sk-abcdefghijklmnopqrstu"])  # may still grow: held
    assert "".join(out) == "the key "
    assert list(transform.flush(state)) == ["[REDACTED]"]
    out, state = run(flt, ["a trailing s"])  # could start "sk-": held, then released as is
    assert "".join(out) == "a trailing "
    assert list(transform.flush(state)) == ["s"]
    assert list(transform.flush(transform.new_state())) == []
    only = redact_filter([r"ab{2,4}"], default_rules=False, replacement="#")
    out, state = run(only, ["xabb"])
    assert "".join(out) == "x"
    assert list(only.token.flush(state)) == ["#"]  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [True, False, "5", 5.0, 0, -3, None])
def test_max_length_refuses_what_is_not_a_positive_integer(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        redact_filter(max_length=bad)  # type: ignore[arg-type]
    assert str(caught.value) == f"redact_filter(max_length={bad!r}): give a positive number of characters."


def test_cache_size_and_default_rules_are_checked() -> None:
    for bad in (True, "5", -1):
        with pytest.raises(ConfigError, match=re.escape(f"redact_filter(cache_size={bad!r}): give an integer >= 0")):
            redact_filter(cache_size=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=re.escape("redact_filter(default_rules='no'): give true or false.")):
        redact_filter(default_rules="no")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"has no rules; give patterns or keep the defaults"):
        redact_filter(default_rules=False)


def test_scans_are_cached_and_bounded() -> None:
    flt = redact_filter(cache_size=3)
    redactor = flt.extras["redactor"]
    for word in itertools.islice(itertools.cycle(["alpha ", "beta ", "gamma ", "delta "]), 12):
        streamed(flt, [word, "x"])
        assert redactor.remembered <= 3
        assert len(redactor.states) <= 3
    uncached = redact_filter(cache_size=0)
    streamed(uncached, ["some text ", "sk-", "abc"])
    assert uncached.extras["redactor"].remembered == 0
    assert uncached.extras["redactor"].states == {}
