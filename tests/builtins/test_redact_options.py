"""redact's options and the rules it builds from them, each pinned with its exact value or message."""

from __future__ import annotations

import re

import pytest

from beamfilter_builtins import redact_filter
from beamfilter_builtins._redact import user_rules
from beamfilter_core import Kernel
from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import SecretRule


def test_no_patterns_give_no_rules() -> None:
    assert user_rules("f", "patterns", None) == []


def test_a_list_of_patterns_is_named_by_option_and_index() -> None:
    assert user_rules("f", "patterns", [r"a{2}", r"b{2}"]) == [
        SecretRule("patterns[0]", "custom", r"a{2}"),
        SecretRule("patterns[1]", "custom", r"b{2}"),
    ]


def test_a_mapping_of_patterns_keeps_its_names() -> None:
    assert user_rules("f", "secret_patterns", {"pin": r"PIN\d{4}", 7: "x{2}"}) == [  # type: ignore[dict-item]
        SecretRule("pin", "custom", r"PIN\d{4}"),
        SecretRule("7", "custom", "x{2}"),
    ]


@pytest.mark.parametrize("bad", ["sk-.{1,8}", re.compile("sk-"), 5, None.__class__])
def test_one_pattern_or_a_non_list_is_refused_with_the_value(bad: object) -> None:
    with pytest.raises(ConfigError) as caught:
        user_rules("f", "patterns", bad)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"f(patterns={bad!r}): give a list of regular expressions or a mapping name -> pattern."
    )


def test_compiled_patterns_carry_their_flags_inline() -> None:
    rules = user_rules(
        "f",
        "patterns",
        [
            re.compile("ab"),
            re.compile("ab", re.IGNORECASE),
            re.compile("ab", re.MULTILINE | re.DOTALL),
            re.compile("ab", re.ASCII | re.IGNORECASE),
        ],
    )
    assert [rule.pattern for rule in rules] == ["ab", "(?i)ab", "(?ms)ab", "(?ia)ab"]
    assert [rule.name for rule in rules] == ["patterns[0]", "patterns[1]", "patterns[2]", "patterns[3]"]


@pytest.mark.parametrize("flags", [re.VERBOSE, re.VERBOSE | re.IGNORECASE, re.LOCALE])
def test_compiled_patterns_with_flags_that_cannot_be_inlined_are_refused(flags: int) -> None:
    source = b"ab" if flags & re.LOCALE else "ab"
    pattern = re.compile(source, flags)
    with pytest.raises(ConfigError) as caught:
        user_rules("f", "patterns", {"pin": pattern})  # type: ignore[dict-item]
    assert str(caught.value) == "f: pattern pin uses flags redact cannot carry over; use inline flags like (?i)."


def test_a_pattern_that_is_not_a_string_is_refused_with_its_name() -> None:
    with pytest.raises(ConfigError) as caught:
        user_rules("f", "patterns", ["ab", 42])  # type: ignore[list-item]
    assert str(caught.value) == "f: pattern patterns[1] is 42; give a regular expression string."


def test_the_defaults_of_redact() -> None:
    flt = redact_filter()
    redactor = flt.extras["redactor"]
    assert flt.name == "redact"
    assert redactor.cache_size == 8192
    assert redactor.replacement == "[REDACTED]"
    assert flt.token is not None
    assert flt.token.applies_to == "answer"
    assert "email" not in {rule.name for rule in redactor.rules}
    assert {rule.name for rule in redact_filter(emails=True).extras["redactor"].rules} >= {"email", "jwt"}


def test_the_default_max_length_is_16384_characters() -> None:
    assert redact_filter([r"x{1,16384}"], default_rules=False).token is not None
    with pytest.raises(ConfigError) as caught:
        redact_filter([r"x{1,16385}"], default_rules=False)
    assert str(caught.value) == (
        "redact_filter: pattern patterns[0] 'x{1,16385}' can match 16385 characters (looking 0 further), "
        "more than max_length=16384; raise max_length or bound the pattern."
    )


def test_the_smallest_options_are_accepted() -> None:
    flt = redact_filter(["x"], default_rules=False, max_length=1, cache_size=0, replacement="")
    assert flt.extras["redactor"].redact("axb") == "ab"
    assert redact_filter({"one": "x"}, default_rules=False).extras["redactor"].redact("x") == "[REDACTED]"
    assert redact_filter(exclude=["jwt"]).extras["redactor"].redact("x") == "x"


_LIST = "give a list of regular expressions or a mapping name -> pattern."


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"patterns": []}, f"redact_filter(patterns=[]): {_LIST}"),
        ({"patterns": {}}, f"redact_filter(patterns={{}}): {_LIST}"),
        ({"patterns": [""]}, f"redact_filter(patterns=['']): {_LIST}"),
        ({"patterns": {"a": ""}}, f"redact_filter(patterns={{'a': ''}}): {_LIST}"),
        ({"exclude": [""]}, "redact_filter(exclude=['']) is invalid; give a list of rule names."),
        ({"name": ""}, "redact_filter(name=''): give a non-empty string."),
        ({"max_length": 0}, "redact_filter(max_length=0): give a positive number of characters."),
        ({"cache_size": -1}, "redact_filter(cache_size=-1): give an integer >= 0 (0 disables the cache)."),
        ({"emails": 1}, "redact_filter(emails=1): give true or false."),
        ({"replacement": 3}, "redact_filter(replacement=3): give a string."),
        ({"applies_to": "both"}, "redact_filter(applies_to='both'): give 'answer' or 'stream'."),
    ],
)
def test_each_option_is_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        redact_filter(**options)  # type: ignore[arg-type]
    assert str(caught.value) == message


def test_a_one_character_name_is_accepted() -> None:
    assert redact_filter(name="r").name == "r"


def test_an_unknown_option_in_a_config_is_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        Kernel.from_config({"model": {"use": "scripted", "script": ["x"]}, "filters": [{"use": "redact", "colour": 1}]})
    assert str(caught.value) == (
        "config has 1 problem:\n  - filters[0].colour: unknown option for the filter 'builtins:redact'. "
        "Known options: applies_to, cache_size, default_rules, emails, exclude, max_length, name, patterns, "
        "replacement."
    )


def test_the_largest_repeat_re_accepts_reads_as_unbounded() -> None:
    # 4294967294 is the largest bound re accepts; its parser reports it like "+"
    with pytest.raises(ConfigError) as caught:
        redact_filter([r"x{1,4294967294}"], default_rules=False)
    assert "can match text of any length" in str(caught.value)
    with pytest.raises(ConfigError) as caught:
        redact_filter([r"x{1,4294967293}"], default_rules=False)
    assert str(caught.value) == (
        "redact_filter: pattern patterns[0] 'x{1,4294967293}' can match 4294967293 characters (looking 0 further), "
        "more than max_length=16384; raise max_length or bound the pattern."
    )


def test_patterns_may_be_named_and_the_other_options_only_are() -> None:
    by_name = redact_filter(patterns={"pin": r"PIN\d{4}"}, default_rules=False)
    assert by_name.extras["redactor"].redact("PIN1234") == "[REDACTED]"
    with pytest.raises(TypeError, match=r"^too many positional arguments$"):
        redact_filter([r"PIN\d{4}"], ["jwt"])  # type: ignore[misc]


def test_a_one_character_rule_name_to_exclude_is_looked_up() -> None:
    with pytest.raises(ConfigError) as caught:
        redact_filter(exclude=["j"])
    assert str(caught.value).startswith(
        "redact_filter(exclude=['j']): no rule named 'j'; known rules: age_secret_key, "
    )
