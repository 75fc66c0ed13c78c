"""The shared secret rules: coverage of the documented formats, exactness when streamed, no collateral damage."""

from __future__ import annotations

import itertools
import random
import re
import uuid

import pytest
from _secret_samples import CONTEXTS, SAMPLES, build
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import redact_filter
from beamfilter_core import Filter, Kernel, RunFinished, ScriptedModel
from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import CATEGORIES, DEFAULT_RULES, SecretRule, select_rules
from beamfilter_core.testing import collect_stream, stream_tokens

pytestmark = pytest.mark.anyio

FILTER = redact_filter()
REDACTOR = FILTER.extras["redactor"]


def streamed(flt: Filter, chunks: list[str]) -> str:
    return "".join(stream_tokens(flt, chunks))


def split(text: str, rng: random.Random, pieces: int) -> list[str]:
    cuts = sorted(rng.sample(range(1, len(text)), min(pieces, len(text) - 1))) if len(text) > 1 else []
    return [text[a:b] for a, b in itertools.pairwise([0, *cuts, len(text)])]


def test_rules_are_named_categorised_and_unique() -> None:
    names = [rule.name for rule in DEFAULT_RULES]
    assert len(names) == len(set(names))
    assert len(DEFAULT_RULES) >= 60
    assert {rule.category for rule in DEFAULT_RULES} == set(CATEGORIES)
    assert all(rule.shape for rule in DEFAULT_RULES)


@pytest.mark.parametrize("sample", SAMPLES, ids=[sample[0] for sample in SAMPLES])
def test_every_documented_format_is_hidden_whole_and_streamed(sample: tuple[str, ...]) -> None:
    name = sample[0]
    rng = random.Random(name)
    for seed in range(3):
        built = {item[0]: item for item in build(seed)}
        _name, _category, text, secret = built[name]
        for context in CONTEXTS:
            answer = context.format(text)
            whole = REDACTOR.redact(answer)
            assert secret not in whole
            assert "[REDACTED]" in whole
            assert streamed(FILTER, list(answer)) == whole
            for pieces in (2, 5, 17):
                assert streamed(FILTER, split(answer, rng, pieces)) == whole


async def test_a_long_bearer_token_is_hidden_whole_when_streamed() -> None:
    token = "eyJ" + "a1B2c3" * 80  # 483 characters, longer than the old 256-character cap
    answer = f"Use Authorization: Bearer {token} to call it."
    kernel = Kernel(ScriptedModel([answer], chunk=7), filters=[redact_filter()])
    text, events = await collect_stream(kernel.run_stream("hi"))
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert text == "Use Authorization: Bearer [REDACTED] to call it."
    assert last.result.text == text
    plain = await Kernel(ScriptedModel([answer]), filters=[redact_filter()]).run("hi")
    assert plain.text == text


def test_a_private_key_is_held_from_begin_to_end_and_released_after() -> None:
    _name, _category, pem, secret = {item[0]: item for item in build(1)}["RSA private key (PKCS#1)"]
    transform = FILTER.token
    assert transform is not None
    state = transform.new_state()
    seen: list[str] = []
    lines = f"before\n{pem}\nafter the key.\n".splitlines(keepends=True)
    for line in lines:
        emitted, state = transform.step(line, state)
        seen.extend(emitted)
        assert secret not in "".join(seen)
    assert "".join(seen) == "before\n[REDACTED]\nafter the key.\n"
    assert state.held == ""


def test_a_cut_private_key_is_hidden_up_to_where_it_stops() -> None:
    _name, _category, pem, _secret = {item[0]: item for item in build(2)}["Private key (PKCS#8)"]
    cut = pem[: pem.index("-----END")] + "(output truncated)"
    assert REDACTOR.redact(cut) == "[REDACTED](output truncated)"
    assert streamed(FILTER, split(cut, random.Random(0), 40)) == "[REDACTED](output truncated)"


# Ordinary technical text: kept byte for byte.
def _ordinary(rng: random.Random) -> list[str]:
    sha = "".join(rng.choice("0123456789abcdef") for _ in range(40))
    digest = "".join(rng.choice("0123456789abcdef") for _ in range(64))
    return [
        f"commit {sha}\nMerge: {sha[:7]} {sha[7:14]}",
        f"request id {uuid.UUID(int=rng.getrandbits(128))} failed",
        f"sha256:{digest}  beamfilter-0.1.0.tar.gz",
        "pip install 'httpx>=0.27.2,<1.0' numpy==2.1.3 python3.11",
        "See https://docs.python.org/3/library/re.html#re.sub and http://localhost:8080/api/v1/items?page=2",
        "postgresql://localhost:5432/app and redis://cache:6379/0 need no password",
        "def get_token(self, api_key_name: str) -> str:\n    return self.secret_store[api_key_name]",
        "password = os.environ['DB_PASSWORD']\ntoken = tokenize.generate_tokens(readline)",
        'secret_key = settings.SECRET_KEY\napi_key: ${OPENAI_API_KEY}\npassword: "<your password here>"',
        "Choose a strong password: at least 12 characters. Never share your secret token with anyone.",
        "API_KEY=your-api-key-here\nPASSWORD=changeme\nTOKEN=xxxxxxxxxxxxxxxxxxxx",
        "The bearer authentication scheme and basic authentication are described in RFC 6750.",
        "task-based scheduling, risk-assessment-framework and the sk-learn-compatible estimators",
        "max_tokens: 4096\ntoken_count = 123456789\nsecrets.token_hex(32)",
        "mysql://user:password@localhost/db is the documented form; user:pass@host too",
        "AKIA is the prefix of AWS keys; ghp_ the prefix of GitHub tokens; -----BEGIN CERTIFICATE-----",
        "Version 1.2.3-rc.1+build.5, 2026-12-01T15:30:00Z, 0x7fffffff, 192.168.0.1:443",
    ]


@pytest.mark.parametrize("index", range(17))
def test_ordinary_technical_text_is_kept_byte_for_byte(index: int) -> None:
    text = _ordinary(random.Random(index))[index]
    assert REDACTOR.redact(text) == text
    assert streamed(FILTER, list(text)) == text


# -- exactness: streamed == whole text, for the default rules and for patterns -------------

ALPHABET = "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_=:/@. \n\"'Bearer password"


@settings(max_examples=150, deadline=None)
@given(
    before=st.text(alphabet=ALPHABET, max_size=30),
    after=st.text(alphabet=ALPHABET, max_size=30),
    index=st.integers(min_value=0, max_value=len(SAMPLES) - 1),
    seed=st.integers(min_value=0, max_value=10**6),
)
def test_property_default_rules_stream_equals_whole_text(before: str, after: str, index: int, seed: int) -> None:
    _name, _category, text, _secret = build(seed % 7)[index]
    answer = before + text + after
    whole = REDACTOR.redact(answer)
    rng = random.Random(seed)
    assert streamed(FILTER, split(answer, rng, rng.randint(1, 12))) == whole


# Patterns drawn from a small grammar: lookaheads, negative lookaheads, \b, ^, $,
# alternations, optional leads, \d and \w leads, lazy and possessive repeats.
ATOMS = ["a", "b", "c", r"\d", r"\w", "[ab]", "[^a ]", ".", " ", r"\s"]
TAILS = ["", r"(?=c)", r"(?!b)", r"\b", r"\B", "$", r"(?=[ab]{1,2}c)", r"(?!\d)"]
HEADS = ["", r"\b", "^", r"(?<=a)", r"(?<!b)"]
REPEATS = ["", "?", "{1,3}", "{0,2}", "{2}", "{1,3}?", "{1,3}+"]


@st.composite
def patterns(draw: st.DrawFn) -> str:
    body = ""
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        atom = draw(st.sampled_from(ATOMS))
        if draw(st.booleans()):
            atom = f"(?:{atom}|{draw(st.sampled_from(ATOMS))})"
        body += atom + draw(st.sampled_from(REPEATS))
    return draw(st.sampled_from(HEADS)) + body + draw(st.sampled_from(TAILS))


@settings(max_examples=400, deadline=None)
@given(
    pattern=patterns(),
    text=st.text(alphabet="abc1 \n", max_size=24),
    cuts=st.lists(st.integers(min_value=0, max_value=24), max_size=8),
)
def test_property_every_accepted_pattern_streams_exactly(pattern: str, text: str, cuts: list[int]) -> None:
    try:
        flt = redact_filter([pattern], replacement="#", default_rules=False, cache_size=0)
    except ConfigError as exc:
        if "can match the empty text" not in str(exc):
            raise  # the only refusal this grammar can reach (every repeat is bounded)
        return
    reference = re.sub(pattern, "#", text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    chunks = [text[a:b] for a, b in itertools.pairwise([0, *points, len(text)]) if b > a]
    assert streamed(flt, chunks) == reference, (pattern, chunks)
    assert streamed(flt, list(text)) == reference, pattern


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        (r"PIN:\d{4}(?!\d)", "PIN:99999 PIN:1234", "PIN:99999 #"),
        (r"PIN:\d{4}\b", "PIN:99999 PIN:1234.", "PIN:99999 #."),
        (r"\d{4}(?=x)", "1234y 5678x", "1234y #x"),
        (r"\d{2}(?=.{0,3}x)", "12ab x 34abcdx", "#ab x 34abcdx"),
        (r"ab$", "ab\nab", "ab\n#"),
    ],
)
def test_patterns_that_look_past_the_match_at_every_split(pattern: str, text: str, expected: str) -> None:
    flt = redact_filter([pattern], replacement="#", default_rules=False)
    assert re.sub(pattern, "#", text) == expected
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            chunks = [c for c in (text[:i], text[i:j], text[j:]) if c]
            assert streamed(flt, chunks) == expected, chunks


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        (r"\S+", "can match text of any length"),
        (r"key=\w{1,10}(?=.*end)", "uses a lookahead of unbounded length"),
        (r"\b", "can match the empty text"),
        (r"^", "can match the empty text"),
        (r"a{0,3}", "can match the empty text"),
        (r"(a)\1", "back references"),
        (r"x{1,20000}", "can match 20000 characters (looking 0 further), more than max_length=16384"),
    ],
)
def test_patterns_that_cannot_stream_exactly_are_refused(pattern: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        redact_filter([pattern])


def test_max_length_must_be_a_positive_integer() -> None:
    for bad in (True, "5", 0, -1, 2.5):
        with pytest.raises(ConfigError, match=re.escape(f"redact_filter(max_length={bad!r}): give a positive")):
            redact_filter(max_length=bad)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"can match 2053 characters .* more than max_length=256; raise max_length"):
        redact_filter(max_length=256)
    assert redact_filter([r"PIN:\d{4}"], default_rules=False, max_length=8).token is not None
    with pytest.raises(ConfigError, match=r"can match 9 characters \(looking 1 further\), more than max_length=9"):
        redact_filter([r"PIN:\d{5}\b"], default_rules=False, max_length=9)


# -- configuration --------------------------------------------------------------------------


def test_exclude_switches_rules_off_by_name() -> None:
    jwt = build(0)[[s[0] for s in SAMPLES].index("JWT")][3]
    flt = redact_filter(exclude=["jwt"])
    assert flt.extras["redactor"].redact(f"t {jwt}") == f"t {jwt}"
    assert REDACTOR.redact(f"t {jwt}") == "t [REDACTED]"
    with pytest.raises(ConfigError) as caught:
        redact_filter(exclude=["jwtt"])
    assert str(caught.value).startswith("redact_filter(exclude=['jwtt']): no rule named 'jwtt'; known rules: ")
    with pytest.raises(ConfigError, match=r"exclude='jwt'\) is invalid; give a list of rule names"):
        redact_filter(exclude="jwt")  # type: ignore[arg-type]


def test_select_rules_keeps_the_order_and_adds_emails_last() -> None:
    chosen = select_rules("x", ["openai_key"], emails=True)
    assert [rule.name for rule in chosen] == [r.name for r in DEFAULT_RULES if r.name != "openai_key"] + ["email"]
    assert select_rules("x", None, emails=False, defaults=False) == []


def test_from_config_with_exclude_and_patterns() -> None:
    built = Kernel.from_config(
        {
            "model": {"use": "scripted", "script": ["x"]},
            "filters": [{"use": "redact", "exclude": ["jwt"], "patterns": {"pin": r"PIN:\d{4}"}}],
        }
    )
    redactor = built.filters[0].extras["redactor"]
    assert redactor.redact("PIN:1234 sk-abcdefghijklmnopqrstuv") == "[REDACTED] [REDACTED]"


def test_a_secret_group_hides_only_that_part_and_checks_see_it() -> None:
    rule = SecretRule("pin", "custom", r"PIN: ?(?P<secret>\d{4,6})", check=lambda value: value != "0000")
    flt = redact_filter([rule.pattern], default_rules=False)
    assert flt.extras["redactor"].redact("PIN: 1234, PIN:0000") == "PIN: [REDACTED], PIN:[REDACTED]"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('password = "Xq9vL2mP8wZ4"', 'password = "[REDACTED]"'),
        ("DB_PASSWORD=Xq9vL2mP8wZ4", "DB_PASSWORD=[REDACTED]"),
        ('{"accessToken": "a8Kq2Lm9Pz4Rt7Vw"}', '{"accessToken": "[REDACTED]"}'),
        ("  client_secret: a8Kq2Lm9Pz4Rt7Vw", "  client_secret: [REDACTED]"),
        ('{\\"apiKey\\": \\"a8Kq2Lm9Pz4Rt7Vw\\"}', '{\\"apiKey\\": \\"[REDACTED]\\"}'),
        (
            "https://deploy:a8Kq2Lm9Pz4Rt7Vw@git.example.org/repo.git",
            "https://deploy:[REDACTED]@git.example.org/repo.git",
        ),
        ("redis://:a8Kq2Lm9Pz4Rt7Vw@cache:6379/0", "redis://:[REDACTED]@cache:6379/0"),
        ("token: Bearer a8Kq2Lm9Pz4Rt7Vw", "token: Bearer [REDACTED]"),
        (
            '"private_key": "-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n"',
            '"private_key": "[REDACTED]\\n"',
        ),
    ],
)
def test_keyword_and_url_rules_hide_the_value_only(text: str, expected: str) -> None:
    assert REDACTOR.redact(text) == expected
    assert streamed(FILTER, list(text)) == expected


def test_a_rejected_match_does_not_hide_a_secret_inside_it() -> None:
    # "token: Bearer" is rejected as an assignment (no random value), the bearer rule still runs inside it.
    assert REDACTOR.redact("auth_token=Bearer-ish sk-abcdefghijklmnopqrstuv") == "auth_token=Bearer-ish [REDACTED]"


def test_the_redact_page_lists_every_rule() -> None:
    from pathlib import Path

    page = (Path(__file__).resolve().parents[2] / "docs" / "builtins" / "redact.md").read_text(encoding="utf-8")
    missing = [rule.name for rule in DEFAULT_RULES if f"`{rule.name}`" not in page]
    assert missing == []
