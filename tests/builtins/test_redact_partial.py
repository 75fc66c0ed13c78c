"""The pattern analysis under the redaction engine (``_partial``), each answer pinned exactly."""

from __future__ import annotations

import re
import tracemalloc

import pytest

from beamfilter_builtins._partial import (
    context_width,
    fast_source,
    first_chars,
    first_source,
    full_source,
    hold_source,
    prefix_source,
    trailing_reach,
)


@pytest.mark.parametrize(
    ("pattern", "reach"),
    [
        ("ab", 0),
        (r"a$", 2),  # "$" also matches before a final newline: it sees two characters
        (r"a\Z", 1),
        (r"a\b", 1),
        (r"a\B", 1),
        (r"a(?=bc)", 2),
        (r"a(?!bcd)", 3),
        (r"a(?=b\b)", 2),  # the lookahead's character, then what its \b sees
        (r"x(?=y{1,3}$)", 5),
        (r"(?<=a)b", 0),
        (r"(?<=a\b)b", 0),  # the \b inside looks at the match's own "b"
        (r"a\bb", 0),  # a character follows the \b inside the match
        (r"a$b", 1),
        (r"a\b\w{0,2}", 1),  # what follows may be empty
        (r"(?:a\b|b)", 1),
        (r"(?:a\b){1,2}", 1),
        (r"(?>a\b)", 1),
        (r"(a\b)", 1),
        (r"(?m)a\n^", 0),  # "^" and "\A" look back, never ahead
        (r"a\A", 0),
    ],
)
def test_how_far_past_a_match_a_pattern_looks(pattern: str, reach: int) -> None:
    assert trailing_reach(re.compile(pattern)) == reach


def test_an_unbounded_lookahead_has_no_reach() -> None:
    with pytest.raises(ValueError, match=r"^a lookahead of unbounded length \(it may look at any amount of text"):
        trailing_reach(re.compile(r"a(?=b{1,})"))
    with pytest.raises(ValueError, match=r"^a lookahead of unbounded length"):
        trailing_reach(re.compile(r"a(?=b{1,4294967294})"))  # the largest bound re takes reads as unbounded
    assert trailing_reach(re.compile(r"a(?=b{1,4294967293})")) == 4294967293


@pytest.mark.parametrize(
    ("pattern", "width"),
    [
        ("x", 0),
        (r"x$", 0),
        (r"x\Z", 0),
        (r"\bx", 1),
        (r"\Bx", 1),
        (r"^x", 1),
        (r"\Ax", 1),
        (r"(x\b)", 1),
        (r"(?<!a)x", 1),
        (r"(?<=ab)x", 2),
        (r"(?:(?<=ab)x|y)", 2),
        (r"(?>(?<=abc)x)", 3),
        (r"(?:(?<=ab)x){1,2}", 2),
        (r"x(?=(?<=abcd))", 4),
        (r"(?<=a(?<=bcd))x", 3),
    ],
)
def test_how_far_before_a_match_a_pattern_looks(pattern: str, width: int) -> None:
    assert context_width(re.compile(pattern)) == width


def test_the_look_back_width_is_capped() -> None:
    assert context_width(re.compile(r"(?<=a{300})x")) == 256
    assert context_width(re.compile(r"(?<=a{300})x"), cap=5) == 5
    assert context_width(re.compile(r"(?<=a{3})x"), cap=3) == 3


def test_lead_sets_up_to_256_characters_are_listed() -> None:
    assert first_chars(re.compile(r"[\x00-\xff]x")) == frozenset(map(chr, range(256)))
    assert first_chars(re.compile(r"[\x00-\xfe]x")) == frozenset(map(chr, range(255)))
    assert first_chars(re.compile(r"[\x00-\u0100]x")) is None  # 257 characters
    assert first_chars(re.compile(r"(?:[\x00-\x7f]|[\x80-\xff])x")) == frozenset(map(chr, range(256)))
    assert first_chars(re.compile(r"(?:[\x00-\x7f]|[\x80-\xff]|\u0100)x")) is None
    assert first_chars(re.compile(r"[\x00-\x09]x"), limit=10) == frozenset(map(chr, range(10)))
    assert first_chars(re.compile(r"[\x00-\x0a]x"), limit=10) is None


@pytest.mark.parametrize(
    ("pattern", "chars"),
    [
        ("ab|cd", "ac"),
        ("a?bc", "ab"),
        (r"(?:a|[b-d])x", "abcd"),
        (r"a{0}b", "b"),
        (r"(?:a{0,2}|b)c", "abc"),
        (r"(?=a)ab", "a"),
        (r"(?<=a)bc", "b"),
        (r"\bab", "a"),
        (r"(?:\b|^)x", "x"),  # assertions consume nothing
        (r"(?>ab|cd)", "ac"),
        ("(?i)k", "Kk\u212a"),  # the Kelvin sign is a "k" without case
        ("(?i)K", "Kk\u212a"),  # the lower case comes from the case pairs, not the pattern
        ("(?i:s)x", "Ss\u017f"),  # and the long s an "s"
    ],
)
def test_the_characters_a_match_can_start_with(pattern: str, chars: str) -> None:
    assert first_chars(re.compile(pattern)) == frozenset(chars)


@pytest.mark.parametrize("pattern", [r"\dx", r".x", r"[^a]x", r"[\w]x", r"(?:\b|\d)x"])
def test_lead_sets_too_wide_to_list(pattern: str) -> None:
    assert first_chars(re.compile(pattern)) is None


@pytest.mark.parametrize(
    ("pattern", "source"),
    [
        (r"\bab", "(?:a)"),
        (r"a?b{3}", "(?:a|b)"),
        (r"(?i:ab)", "(?:(?i:a))"),
        (r"(?:ab|cd)x{2}", "(?:a|c)"),
        (r"\dx", r"(?:[\d])"),
        (r"(?=a)ab", "(?:a)"),
        (r"a{0}b", "(?:b)"),
        (r"(?:a|a)b", "(?:a)"),
        (r"(?:\b|^)", r"(?:[\s\S])"),  # nothing is consumed: any character may start it
        (r"(?s)x", "(?s:x)"),
    ],
)
def test_the_source_of_the_lead_characters(pattern: str, source: str) -> None:
    assert first_source(re.compile(pattern)) == source


@pytest.mark.parametrize(
    ("pattern", "fast", "full"),
    [
        (r"\bsk-x", r"(?:s(?<!\ws)k\-x)", r"(?:\bsk\-x)"),
        (r"(?<=a)bc", "(?:b(?<=ab)c)", "(?:(?<=a)bc)"),
        (r"(?<!a)bc", "(?:b(?<!ab)c)", "(?:(?<!a)bc)"),
        (r"(?:\bab|cd)x", r"(?:(?:a(?<!\wa)b|cd)x)", r"(?:(?:\bab|cd)x)"),
        (r"(?i:\bab)c", r"(?:(?i:a(?<!\wa)b)c)", r"(?:(?i:\bab)c)"),
        (r"\b\dx", r"(?:\b[\d]x)", r"(?:\b[\d]x)"),  # the boundary is before a class: kept
        (r"\b-x", r"(?:\b\-x)", r"(?:\b\-x)"),  # before a non-word character \b means the opposite
        (r"\Bax", r"(?:\Bax)", r"(?:\Bax)"),
        (r"(?i)ab", "(?i:ab)", "(?i:ab)"),
        (r"a{2}?b", "(?:(?:a){2,2}?b)", "(?:(?:a){2,2}?b)"),
        (r"(?>ab)c", "(?:(?>ab)c)", "(?:(?>ab)c)"),
        (r"a*+b", "(?:(?:a){0,}+b)", "(?:(?:a){0,}+b)"),
        ("x", "(?:x)", "(?:x)"),
        (r"()x", "(?:(?:)x)", "(?:(?:)x)"),
        (r"[^a-c\d_]x", r"(?:[^a-c\d_]x)", r"(?:[^a-c\d_]x)"),
        (r"a(?=b)c", "(?:a(?=b)c)", "(?:a(?=b)c)"),
        (r"a(?!b)c", "(?:a(?!b)c)", "(?:a(?!b)c)"),
        (r"(?=a)ab", "(?:(?=a)ab)", "(?:(?=a)ab)"),  # a lookahead first is not moved
        (r"\bk", r"(?:k(?<!\wk))", r"(?:\bk)"),  # a look-back and one character: moved too
        (r"(?<=a)b", "(?:b(?<=ab))", "(?:(?<=a)b)"),
    ],
)
def test_joined_sources_keep_every_match(pattern: str, fast: str, full: str) -> None:
    assert fast_source(re.compile(pattern)) == fast
    assert full_source(re.compile(pattern)) == full


def test_back_references_cannot_be_joined() -> None:
    with pytest.raises(ValueError, match=r"^the pattern '\(ab\)\\\\1' uses a construct that cannot be joined"):
        fast_source(re.compile(r"(ab)\1"))


@pytest.mark.parametrize(
    ("pattern", "reach", "source"),
    [
        ("ab", 0, "(?:(?:(?:a)?+|a(?:b)?+))"),
        (r"a\b", 1, r"(?:(?:(?:a)?+)|(?:a)[\s\S]{1,1})"),
        (r"a(?=bc)", 2, r"(?:(?:(?:a)?+)|(?:a)[\s\S]{1,2})"),
        (r"(ab)\1", 0, r"(?:[\s\S]*)"),
        (r"(ab)\1", 3, r"(?:[\s\S]*)"),
        (r"(?>ab){1,2}?\b", 1, r"(?:(?:(?:(?>ab)){0,1}(?:(?:(?:(?:a)?+|a(?:b)?+))))|(?:(?:(?:ab)){1,2})[\s\S]{1,1})"),
    ],
)
def test_what_a_stream_holds_back(pattern: str, reach: int, source: str) -> None:
    assert hold_source(re.compile(pattern), reach) == source


@pytest.mark.parametrize(
    ("pattern", "source"),
    [
        (r"\bthe", r"(?:\b(?:(?:(?:t)?+|t(?:(?:h)?+|h(?:e)?+))))"),
        (r"(?<=x)ab", "(?:(?<=x)(?:(?:(?:a)?+|a(?:b)?+)))"),
        (r"a(?=b)c", "(?:(?:(?:a)?+|a(?:c)?+))"),
        (r"a{1,3}b", "(?:(?:(?:a){0,3}+|(?:a){1,3}+(?:b)?+))"),  # "a" never starts "b": possessive run
        (r"a{1,3}a", "(?:(?:(?:a){0,3}+|(?:a){1,3}(?:a)?+))"),  # it may give an "a" back
        (r"[a-c]{2,4}@x", "(?:(?:(?:[a-c]){0,4}+|(?:[a-c]){2,4}+(?:(?:@)?+|@(?:x)?+)))"),
        (r"(?i)a{1,3}b", "(?i:(?:(?:a){0,3}+|(?:a){1,3}(?:b)?+))"),  # case folding: no possessive run
        (r"(?:ab){1,2}c", "(?:(?:(?:ab){0,1}(?:(?:(?:a)?+|a(?:b)?+))|(?:ab){1,2}(?:c)?+))"),
        (r"a{0}b", "(?:(?:|(?:a){0,0}+(?:b)?+))"),
        (r"(ab)\1", r"(?:[\s\S]*)"),
        (r"(?=a)ab", "(?:(?:(?:a)?+|a(?:b)?+))"),  # a lookahead decides on text not seen yet: dropped
        (r"^ab", "(?:(?:(?:a)?+|a(?:b)?+))"),
        (r"\Bab", r"(?:\B(?:(?:(?:a)?+|a(?:b)?+)))"),
        (
            r"(?:\bab|cd)x",
            r"(?:(?:(?:\b(?:(?:(?:a)?+|a(?:b)?+))|(?:(?:c)?+|c(?:d)?+))|(?:\bab|cd)(?:x)?+))",
        ),
        (r"x(?:\bab|cd)", "(?:(?:(?:x)?+|x(?:(?:(?:a)?+|a(?:b)?+)|(?:(?:c)?+|c(?:d)?+))))"),  # not at the start
        (r"\d{1,3}@", r"(?:(?:(?:[\d]){0,3}+|(?:[\d]){1,3}(?:@)?+))"),  # a category is not listed
        (r"(?i:a{1,3}b)", "(?:(?i:(?:(?:a){0,3}+|(?:a){1,3}(?:b)?+)))"),
        (r"(?>ab)c", "(?:(?:(?:(?:(?:a)?+|a(?:b)?+))|(?>ab)(?:c)?+))"),
        (r"a{1,3}?b", "(?:(?:(?:a){0,3}+|(?:a){1,3}?(?:b)?+))"),  # only greedy runs are made possessive
        (r"a{1,3}x{0}", "(?:(?:a){0,3}+)"),
        (r"a{1,3}(\b)", "(?:(?:(?:a){0,3}+|(?:a){1,3}(?:)))"),  # nothing follows that a character could start
        # only what follows the run decides, not what comes before it
        (r"aa{1,3}b", "(?:(?:(?:a)?+|a(?:(?:a){0,3}+|(?:a){1,3}+(?:b)?+)))"),
        (r"a{1,3}ba", "(?:(?:(?:a){0,3}+|(?:a){1,3}+(?:(?:b)?+|b(?:a)?+)))"),
    ],
)
def test_every_prefix_of_a_match(pattern: str, source: str) -> None:
    assert prefix_source(re.compile(pattern)) == source


@pytest.mark.parametrize(
    ("low", "high", "possessive"),
    [
        ("\u0100", "\u0102", "+"),  # three characters, none of them "@"
        ("\u0100", "\u02ff", "+"),  # 512 characters: still listed
        ("\u0100", "\u0300", ""),  # 513: too many to list, so the run may give one back
    ],
)
def test_a_run_is_possessive_when_its_listed_characters_cannot_start_what_follows(
    low: str, high: str, possessive: str
) -> None:
    run = f"(?:[{low}-{high}])"
    expected = f"(?:(?:{run}{{0,3}}+|{run}{{1,3}}{possessive}(?:@)?+))"
    assert prefix_source(re.compile(f"[{low}-{high}]{{1,3}}@")) == expected


def test_a_group_that_turns_a_flag_off_keeps_it_off_in_every_source() -> None:
    pattern = re.compile(r"(?i)(?-i:ab)c")
    assert first_source(pattern) == "(?i:(?-i:a))"
    assert first_chars(pattern) == frozenset("a")  # "A" does not start a match
    assert fast_source(pattern) == "(?i:(?-i:ab)c)"
    assert full_source(pattern) == "(?i:(?-i:ab)c)"
    assert prefix_source(pattern) == "(?i:(?:(?-i:(?:(?:a)?+|a(?:b)?+))|(?-i:ab)(?:c)?+))"


def test_a_lead_that_cannot_be_analysed_may_be_any_character() -> None:
    # The back reference is reached because the group before it may be empty.
    pattern = re.compile(r"(a)?\1x")
    assert first_source(pattern) == r"(?:[\s\S])"
    assert first_chars(pattern) is None


def test_a_huge_range_is_refused_without_listing_its_characters() -> None:
    # Listing the 1,114,112 characters of the range before noticing that they are too many
    # would take 120 MB and a noticeable pause for each rule built.
    tracemalloc.start()
    try:
        assert first_chars(re.compile("[\x00-\U0010ffff]y")) is None
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8_000_000


@pytest.mark.parametrize(
    ("pattern", "source"),
    [
        # the run's last character "c" is not "d": nothing to give back
        ("[a-c]{1,3}d", "(?:(?:(?:[a-c]){0,3}+|(?:[a-c]){1,3}+(?:d)?+))"),
        ("[b-c]{1,3}a", "(?:(?:(?:[b-c]){0,3}+|(?:[b-c]){1,3}+(?:a)?+))"),
        ("[a-c]{1,3}c", "(?:(?:(?:[a-c]){0,3}+|(?:[a-c]){1,3}(?:c)?+))"),  # "c" may be given back
        ("[a-c]{1,3}b", "(?:(?:(?:[a-c]){0,3}+|(?:[a-c]){1,3}(?:b)?+))"),  # and "b", inside the range
        ("[a-c]{1,3}a", "(?:(?:(?:[a-c]){0,3}+|(?:[a-c]){1,3}(?:a)?+))"),  # and "a", its first character
    ],
)
def test_a_run_of_a_range_gives_back_exactly_the_characters_of_the_range(pattern: str, source: str) -> None:
    assert prefix_source(re.compile(pattern)) == source


@pytest.mark.parametrize(
    ("pattern", "chars"),
    [
        ("(?i)K", "Kk\u212a"),
        ("(?i)k", "Kk\u212a"),
        ("(?i)\u212a", "Kk\u212a"),
        ("(?i)[j-l]", "JjKkLl\u212a"),
        ("(?i)1", "1"),  # a digit has no other case
        ("(?i)\u4e00", "\u4e00"),  # nor has a CJK ideograph
        ("(?i)\u00df", "\u00df\u1e9e"),  # sharp s: its capital is U+1E9E, its upper() "SS"
        ("k", "k"),  # without the flag: the pattern's own characters only
    ],
)
def test_case_insensitive_lead_sets_hold_every_case_partner(pattern: str, chars: str) -> None:
    assert first_chars(re.compile(pattern)) == frozenset(chars)


def test_an_ascii_pattern_starts_with_an_empty_lookahead_in_every_source() -> None:
    # re's search reads the first-character set of (?a:\W) as Unicode \W and skips "é":
    # the empty lookahead first turns that skip off; the lead set is still listed.
    pattern = re.compile(r"(?a)\Wb")
    assert full_source(pattern) == r"(?a:(?=)[\W]b)"
    assert fast_source(pattern) == r"(?a:(?=)[\W]b)"
    assert first_source(pattern) == r"(?a:(?=)[\W])"
    assert prefix_source(pattern) == r"(?a:(?=)(?:(?:[\W])?+|[\W](?:b)?+))"
    assert hold_source(pattern, 1) == r"(?:(?a:(?=)(?:(?:[\W])?+|[\W](?:b)?+))|(?a:(?=)[\W]b)[\s\S]{1,1})"
    assert re.search(full_source(pattern), "xéb")
    assert re.search(first_source(pattern), "é")
    assert first_chars(re.compile(r"(?ai)ab|c")) == frozenset("aAcC")
    assert first_chars(re.compile(r"(?ai)k")) == frozenset("kK")  # under ASCII "k" has no Kelvin sign
