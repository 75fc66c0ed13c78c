"""The redaction engine's edges, each pinned with its exact result (what mutation testing found unpinned)."""

from __future__ import annotations

import itertools
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import redact_filter
from beamfilter_builtins._partial import first_chars, prefix_source
from beamfilter_builtins._redactor import Redactor, _look_back_probes
from beamfilter_core import Filter, Kernel, RunFinished, ScriptedModel, TokenTransform
from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import SecretRule
from beamfilter_core.testing import collect_stream, feed_tokens, stream_tokens

pytestmark = pytest.mark.anyio


def engine(**options: Any) -> tuple[Filter, TokenTransform, Redactor]:
    """A redact filter of ``options``, its token transform and the redactor behind it."""
    flt = redact_filter(**options)
    transform = flt.token
    assert transform is not None
    return flt, transform, flt.extras["redactor"]


def streamed(flt: Filter, chunks: list[str]) -> str:
    return "".join(stream_tokens(flt, chunks))


def every_split(text: str) -> list[list[str]]:
    return [
        [c for c in (text[:i], text[i:j], text[j:]) if c] for i in range(len(text) + 1) for j in range(i, len(text) + 1)
    ]


def assert_redacted_like_re_sub(pattern: str, text: str, expected: str) -> None:
    """``re.sub`` of the rule gives ``expected``; so do the whole-text redaction and every stream of ``text``."""
    assert re.sub(pattern, "#", text) == expected
    flt = redact_filter([pattern], replacement="#", default_rules=False)
    assert flt.extras["redactor"].redact(text) == expected
    for chunks in every_split(text):
        assert streamed(flt, chunks) == expected, chunks


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
    assert_redacted_like_re_sub(pattern, text, expected)


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
    flt, transform, _redactor = engine()
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
    flt, transform, _redactor = engine()
    assert transform.flush is not None
    out, state = feed_tokens(flt, ["the key sk-abcdefghijklmnopqrstu"])  # may still grow: held
    assert "".join(out) == "the key "
    assert list(transform.flush(state)) == ["[REDACTED]"]
    out, state = feed_tokens(flt, ["a trailing s"])  # could start "sk-": held, then released as is
    assert "".join(out) == "a trailing "
    assert list(transform.flush(state)) == ["s"]
    assert list(transform.flush(transform.new_state())) == []
    only = redact_filter([r"ab{2,4}"], default_rules=False, replacement="#")
    out, state = feed_tokens(only, ["xabb"])
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


# -- the stream states: remembered steps, their bound, and look-back classes ------------------


def test_a_step_taken_before_from_the_same_state_is_remembered_once() -> None:
    _flt, transform, redactor = engine()
    start = transform.new_state()
    assert start is transform.new_state()  # one object per point of a stream
    first = transform.step("hello world", start)
    assert first == (("hello world",), redactor.states["d", ""])
    assert redactor.remembered == 1
    again = transform.step("hello world", start)
    assert again is first  # the same remembered result, no scan
    assert redactor.remembered == 1
    assert sorted(redactor.states) == [("", ""), ("d", "")]


def test_the_bound_forgets_every_step_and_state_when_reached() -> None:
    flt, transform, redactor = engine(cache_size=2)
    start = transform.new_state()
    _out, after_a = transform.step("a ", start)
    assert (redactor.remembered, len(redactor.states)) == (1, 2)
    _out, after_b = transform.step("b ", after_a)
    assert after_b is after_a  # " " then " ": the same point
    assert (redactor.remembered, len(redactor.states)) == (2, 2)
    out, after_c = transform.step("c ", after_b)
    assert out == ("c ",)
    assert (redactor.remembered, redactor.states) == (0, {})
    assert len(start) == 0
    assert len(after_a) == 0
    assert after_c.context == " "
    # a forgotten state still streams correctly, and learns again once registered anew
    assert streamed(flt, ["key ", "sk-", "abcdefghijklmnopqrst", " ok"]) == "key [REDACTED] ok"


def test_a_third_state_reaching_the_bound_forgets_the_others() -> None:
    _flt, transform, redactor = engine(cache_size=2)
    start = transform.new_state()
    _out, letter = transform.step("ab", start)
    assert len(redactor.states) == 2
    _out, dot = transform.step(".", letter)  # "." is its own class: a third state
    assert redactor.states == {(".", ""): dot}
    assert redactor.remembered == 0


@pytest.mark.parametrize(("size", "registered"), [(32, True), (33, False)])
def test_held_tails_up_to_32_characters_are_shared_states(size: int, registered: bool) -> None:
    _flt, transform, redactor = engine()
    held = "sk-" + "a" * (size - 3)
    out, state = transform.step(" " + held, transform.new_state())
    assert (out, state.held) == ((" ",), held)
    assert (redactor.states.get((" ", held)) is state) is registered
    before = redactor.remembered
    out, after = transform.step("b", state)
    assert (out, after.held) == ((), held + "b")
    # only a registered state remembers its steps
    assert redactor.remembered == before + (1 if registered and size + 1 <= 32 else 0)


@pytest.mark.parametrize(("size", "remembered"), [(32, 1), (33, 0)])
def test_steps_over_texts_up_to_32_characters_are_remembered(size: int, remembered: int) -> None:
    flt, transform, _redactor = engine()
    token = "x" * (size - 1) + " "
    assert transform.step(token, transform.new_state())[0] == (token,)
    assert flt.extras["redactor"].remembered == remembered


def test_look_back_classes_keep_the_first_character_seen_of_each() -> None:
    redactor = redact_filter().extras["redactor"]
    assert [redactor._klass(c) for c in "ab.5_Z7-é,?"] == ["a", "a", ".", "5", "_", "a", "5", "-", "_", "-", "-"]
    assert redactor.classes == {c: redactor._klass(c) for c in "ab.5_Z7-é,?"}


def test_at_most_4096_characters_are_remembered_with_their_class() -> None:
    redactor = redact_filter().extras["redactor"]
    for code in range(0x4E00, 0x4E00 + 4100):
        assert redactor._klass(chr(code)) == "\u4e00"  # CJK ideographs are word characters, not letters
    assert len(redactor.classes) == 4096
    assert "\u4e00" in redactor.classes
    assert chr(0x4E00 + 4096) not in redactor.classes


def test_without_a_cache_the_context_is_kept_as_it_is() -> None:
    _flt, transform, redactor = engine(cache_size=0)
    _out, state = transform.step("xyz key ", transform.new_state())
    _out, state = transform.step("sk-", state)
    assert (state.context, state.held) == (" ", "sk-")
    _out, other = transform.step("Q", transform.new_state())
    assert (other.context, other.held) == ("Q", "")
    assert other is not transform.new_state()
    assert (redactor.classes, redactor.states, redactor.remembered) == ({}, {}, 0)


@pytest.mark.parametrize(
    ("pattern", "probes"),
    [
        (r"\bx", [r"\w"]),
        (r"\Bx", [r"\w"]),
        (r"(?m)^x", ["\n"]),
        (r"^x", []),
        (r"\Ax", []),
        (r"x$", []),
        (r"(?<=\d)x", ["5"]),
        (r"(?<!\.)x", ["."]),
        (r"(?=(?<=a)x)x", ["a"]),
        (r"(?:y|(?<=a)x)", ["a"]),
        (r"(?:(?<=a)x){1,2}", ["a"]),
        (r"(?>(?<=a)x)", ["a"]),
        (r"(?:(?<=a)x)", ["a"]),
        (r"(?<=a)x|(?<=a)y", ["a"]),
        (r"(?a)\bx", [r"\w"]),
    ],
)
def test_look_back_probes_name_what_the_character_before_decides(pattern: str, probes: list[str]) -> None:
    found = _look_back_probes([re.compile(pattern)])
    assert found is not None
    assert len(found) == len(probes)
    for probe, char in zip(found, probes, strict=True):
        if char == r"\w":
            assert [bool(probe.fullmatch(c)) for c in "a_-"] == [True, True, False]
            assert bool(probe.fullmatch("é")) is not pattern.startswith("(?a)")
        else:
            assert probe.fullmatch(char)
            assert not probe.fullmatch("b")


@pytest.mark.parametrize("pattern", [r"(?<=ab)x", r"(?<=\b)x", r"(?<=(a))x", r"(?i:(?<=a)x)", r"(?-i:(?<=a)x)"])
def test_look_backs_the_classes_cannot_follow_keep_the_context_as_it_is(pattern: str) -> None:
    assert _look_back_probes([re.compile(pattern)]) is None


@settings(max_examples=150, deadline=None)
@given(text=st.text(alphabet="0a_.é -\nxyz", max_size=24), cuts=st.lists(st.integers(0, 30), max_size=6))
def test_streams_sharing_remembered_steps_equal_whole_texts_with_look_backs(text: str, cuts: list[int]) -> None:
    flt = SHARED_LOOK_BACKS
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    assert streamed(flt, chunks) == flt.extras["redactor"].redact(text)
    assert streamed(flt, list(text)) == flt.extras["redactor"].redact(text)


SHARED_LOOK_BACKS = redact_filter(
    [r"(?<=\d)xy{0,2}", r"\bzx{1,2}", r"(?m)^yz", r"(?<![a_])x{3}", r"(?<=\.)y"], default_rules=False, cache_size=64
)


# -- what a rule may reach, against max_length ------------------------------------------------

_BOUND = "raise max_length or bound the pattern."


@pytest.mark.parametrize(
    ("pattern", "fits", "message"),
    [
        (
            r"x{1,7}\b",
            8,
            "can match 7 characters (looking 1 further), more than max_length=7; " + _BOUND,
        ),
        (
            r"x{1,7}(?=ab)",
            9,
            "can match 7 characters (looking 2 further), more than max_length=8; " + _BOUND,
        ),
        (r"(?<=abc)x", 3, "looks back more than max_length=2 characters; raise max_length."),
    ],
)
def test_a_rule_reaching_exactly_max_length_fits_one_more_is_refused(pattern: str, fits: int, message: str) -> None:
    assert redact_filter([pattern], default_rules=False, max_length=fits).token is not None
    with pytest.raises(ConfigError) as caught:
        redact_filter([pattern], default_rules=False, max_length=fits - 1)
    assert str(caught.value) == f"redact_filter: pattern patterns[0] {pattern!r} {message}"


# -- the engine itself: what it refuses, its bounds, and the exact pieces a scan returns --------


def test_the_engine_refuses_no_rules_non_strings_and_back_references() -> None:
    with pytest.raises(ConfigError) as caught:
        Redactor([])
    assert str(caught.value) == "redact_filter has no rules to redact with; keep the default rules or give patterns."
    with pytest.raises(ConfigError) as caught:
        Redactor([SecretRule("n", "custom", 42)], where="w")  # type: ignore[arg-type]
    assert str(caught.value) == "w: pattern n is 42; give a regular expression string."
    with pytest.raises(ConfigError) as caught:
        Redactor([SecretRule("n", "custom", r"(a)\1")])
    assert str(caught.value) == (
        "redact_filter: the pattern '(a)\\\\1' uses a construct that cannot be joined with others (GROUPREF); "
        "rewrite it without back references."
    )


def test_a_tail_as_long_as_a_match_and_its_reach_is_held() -> None:
    redactor = Redactor([SecretRule("n", "custom", r"x{1,7}\b")], replacement="#")
    assert (redactor.limit, redactor.context) == (8, 1)
    state = redactor.start()
    out, state = redactor.step("xxxxxxx", state)  # 7 characters and the \b after them: all could change
    assert (out, state.held) == ((), "xxxxxxx")
    out, state = redactor.step("x", state)
    assert (out, state.held) == ((), "xxxxxxxx")
    assert redactor.flush(state) == ["x#"]
    assert redactor.redact("xxxxxxxx") == "x#"


def test_a_whole_match_at_the_end_of_the_text_is_held() -> None:
    redactor = Redactor([SecretRule("n", "custom", r"a\d{3}")], replacement="#")
    assert redactor.limit == 4
    assert redactor.scan("a123") == ([], "a123")
    assert redactor.scan("xa123") == (["x"], "a123")
    assert redactor.scan("a12") == ([], "a12")


@pytest.mark.parametrize(
    ("pattern", "text", "pieces", "held"),
    [
        (r"a\d{3}", "a123 b", ["#", " b"], ""),
        (r"a\d{3}", "a123a123", ["#"], "a123"),
        (r"a\d{3}", "x a123 y a", ["x ", "#", " y "], "a"),
        (r"a\d{3}", "plain", ["plain"], ""),
        (r"\d{3}x", "123x", [], "123x"),  # no known first characters: one search for all rules
        (r"\d{3}x", "a123x b", ["a", "#", " b"], ""),
        (r"\d{3}x", "123x123x", ["#"], "123x"),
        (r"\d{3}x", "a 12", ["a "], "12"),
        (r"\d{3}x", "123xy", ["#", "y"], ""),
    ],
)
def test_a_scan_returns_exactly_the_pieces_it_emits_and_the_held_tail(
    pattern: str, text: str, pieces: list[str], held: str
) -> None:
    redactor = Redactor([SecretRule("n", "custom", pattern)], replacement="#")
    emitted, rest = redactor.scan(text)
    assert (list(emitted), rest) == (pieces, held)


def test_a_secret_group_at_the_start_or_left_out_of_the_match() -> None:
    at_start = Redactor([SecretRule("n", "custom", r"(?P<secret>\d{4})-x")])
    assert at_start.redact("1234-x") == "[REDACTED]-x"
    optional = Redactor([SecretRule("n", "custom", r"a(?P<secret>\d{2})?b{2}")])
    assert optional.redact("abb a12bb") == "[REDACTED] a[REDACTED]bb"  # no secret part: the whole match


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"(?a)\W\d{3}", "id é123 ok", "id # ok"),  # "é" is not an ASCII word character
        (r"(?a)\S{2}!", "a\u00a0x! y", "a# y"),  # nor is U+00A0 an ASCII space
        (r"(?a)\D{2}\d", "x\u0663\u06631 y", "x# y"),  # nor U+0663 (ARABIC-INDIC THREE) an ASCII digit
    ],
)
def test_a_rule_with_the_ascii_flag_reads_its_classes_as_ascii(pattern: str, text: str, expected: str) -> None:
    # The joined pattern carries the flag in a group, (?a:...); re's search skips ahead with
    # a set of first characters read under the pattern's own flags, not the group's.
    assert_redacted_like_re_sub(pattern, text, expected)


@pytest.mark.parametrize("pattern", [r"(?i)K\d", r"(?i)k\d", "(?i)\u212a\\d", r"(?i:K)\d"])
def test_a_case_insensitive_rule_starts_with_any_case_partner(pattern: str) -> None:
    assert_redacted_like_re_sub(pattern, "K1 k2 \u212a3 x4", "# # # x4")


@pytest.mark.parametrize("pattern", [r"(?i)a{1,3}Abc", r"(?i:a{1,3}Abc)", r"(?i:a){1,3}Abc"])
def test_a_case_insensitive_run_may_give_back_a_character_to_what_follows(pattern: str) -> None:
    # "aaA" is a run of three "a" read without case, but "aaAb" is a prefix of a match
    # only if the run gives its "A" back: a stream cut after "aaAb" must hold all of it.
    assert_redacted_like_re_sub(pattern, "xaaAbc aAbd aaaAbc", "x# aAbd #")


@pytest.mark.parametrize(("pattern", "text"), [("[a-c]{1,3}ade", "xcade y"), ("[a-c]{1,3}bde", "xabde y")])
def test_a_run_of_a_range_that_gives_a_character_back_holds_the_whole_tail(pattern: str, text: str) -> None:
    # "xcad" ends with "cad", a prefix of a match only if the run [a-c]{1,3} gives its "a"
    # back to what follows: the stream must hold it until the "e" arrives.
    assert_redacted_like_re_sub(pattern, text, "x# y")
