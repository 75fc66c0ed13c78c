"""redact: secrets are replaced even when split across any chunk boundary."""

from __future__ import annotations

import functools
import itertools
import random
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import redact_filter
from beamfilter_builtins._partial import prefix_source
from beamfilter_builtins._redact import SPEC
from beamfilter_core import ChatRequest, ChatResponse, Filter, Kernel, Message, RunFinished, ScriptedModel, TurnResult
from beamfilter_core.errors import ConfigError
from beamfilter_core.testing import collect_stream, stream_tokens

pytestmark = pytest.mark.anyio

SECRET = "sk-abcdefghijklmnopqrstuvwx"
AWS = "AKIAABCDEFGHIJKLMNOP"
BEARER = "Bearer abcdefghijkl0123"
TEXT = f"My key is {SECRET} and {BEARER} done {AWS}."
REDACTED = "My key is [REDACTED] and Bearer [REDACTED] done [REDACTED]."
SAMPLES = [
    TEXT,
    f"{SECRET}",
    f"start {AWS}",
    f"sk-short then {SECRET}!",
    f"ssk-{SECRET[3:]} and bearer   xyz {BEARER}",
    f"mail bob@example.com and {SECRET}",
]
SECRETS = [SECRET, AWS, BEARER, "abcdefghijklmnopqrstuvwx", "abcdefghijkl0123", "bob@example.com"]


@functools.cache
def reused(
    *, emails: bool = False, cache_size: int = 8192, replacement: str = "[REDACTED]", look_back: bool = False
) -> Filter:
    """One filter per option set for a property test's examples: each stream starts from a
    fresh state, and building the default rules is most of an example's time."""
    patterns = LOOK_BACK_PATTERNS if look_back else None
    return redact_filter(
        patterns, replacement=replacement, default_rules=not look_back, emails=emails, cache_size=cache_size
    )


def whole(flt: Filter, text: str) -> str:
    return "".join(stream_tokens(flt, [text]))


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 100])
def test_fixed_chunk_sizes(size: int) -> None:
    flt = redact_filter()
    chunks = [TEXT[i : i + size] for i in range(0, len(TEXT), size)]
    assert "".join(stream_tokens(flt, chunks)) == REDACTED


def test_plain_text_is_not_delayed() -> None:
    flt = redact_filter()
    transform = flt.token
    assert transform is not None
    state = transform.new_state()
    emitted, state = transform.step("Hello, world!", state)
    assert list(emitted) == ["Hello, world!"]
    emitted, state = transform.step(" this", state)  # a trailing 's' could start "sk-"
    assert list(emitted) == [" thi"]
    # the state keeps the character before the held tail (for the rules' leading \b),
    # as the first character seen of its class: "i" looks like any other letter to them
    assert (state.context, state.held) == ("i", "s")
    emitted, state = transform.step(" is", state)
    assert "".join(emitted) == "s i"
    assert (state.context, state.held) == ("i", "s")
    emitted, state = transform.step(" done!", state)
    assert "".join(emitted) == "s done!"
    assert (state.context, state.held) == ("!", "")


def test_only_the_shortest_possible_tail_is_held() -> None:
    flt = redact_filter()
    transform = flt.token
    assert transform is not None
    emitted, state = transform.step("the key sk-abc", transform.new_state())
    assert "".join(emitted) == "the key "
    assert (state.context, state.held) == (" ", "sk-abc")


def check_every_split(flt: Filter, text: str, secrets: list[str]) -> None:
    expected = whole(flt, text)
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1):
            chunks = [c for c in (text[:i], text[i:j], text[j:]) if c]
            out = stream_tokens(flt, chunks)
            joined = "".join(out)
            assert joined == expected, (chunks, joined)
            for piece in out:
                for secret in secrets:
                    assert secret not in piece
            for secret in secrets:
                assert secret not in joined


@pytest.mark.parametrize("text", SAMPLES)
def test_every_two_cut_split_of_samples(text: str) -> None:
    flt = redact_filter(emails=True)
    check_every_split(flt, text, [s for s in SECRETS if s in text])


@settings(max_examples=300, deadline=None)
@given(
    text=st.sampled_from(SAMPLES),
    cuts=st.lists(st.integers(min_value=0, max_value=200), max_size=12),
)
@pytest.mark.parametrize("cache_size", [8192, 0])
def test_property_no_secret_reaches_the_consumer(cache_size: int, text: str, cuts: list[int]) -> None:
    flt = reused(emails=True, cache_size=cache_size)
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    seen = ""
    out = stream_tokens(flt, chunks)
    for piece in out:
        seen += piece
        for secret in SECRETS:
            assert secret not in seen
    assert seen == whole(flt, text)


@settings(max_examples=200, deadline=None)
@given(prefix=st.text(alphabet="ab skAK-", max_size=15), suffix=st.text(alphabet="ab skAK-.", max_size=15))
def test_property_random_context(prefix: str, suffix: str) -> None:
    flt = reused()
    text = f"{prefix}{SECRET}{suffix}"
    out = stream_tokens(flt, list(text))  # one character per token
    assert SECRET not in "".join(out)
    assert "".join(out) == whole(flt, text)


def test_custom_patterns_extend_the_default_rules() -> None:
    flt = redact_filter({"pin": r"PIN:\d{4,8}"}, replacement="<pin>")
    assert "".join(stream_tokens(flt, list(f"my PIN:1234 ok {SECRET}"))) == "my <pin> ok <pin>"
    only = redact_filter({"pin": r"PIN:\d{4,8}"}, replacement="<pin>", default_rules=False)
    assert "".join(stream_tokens(only, list(f"my PIN:1234 ok {SECRET}"))) == f"my <pin> ok {SECRET}"


def test_unbounded_patterns_are_refused_with_the_reason() -> None:
    with pytest.raises(ConfigError) as caught:
        redact_filter([r"PIN:\d+"])
    assert str(caught.value) == (
        "redact_filter: pattern patterns[0] 'PIN:\\\\d+' can match text of any length (a '*', '+' or '{n,}'), "
        "so a stream could never tell that a match is complete; bound it, e.g. '{1,256}' instead of '+'."
    )


def test_scan_cache_is_bounded_and_transparent() -> None:
    flt = redact_filter(cache_size=4)
    redactor = flt.extras["redactor"]
    for word in ["alpha ", "beta ", "gamma ", "delta ", "eps ", "zeta "]:
        stream_tokens(flt, [word, SECRET[:5], SECRET[5:], "."])
        assert redactor.remembered <= 4
        assert len(redactor.states) <= 4
    assert "".join(stream_tokens(flt, ["key ", SECRET[:5], SECRET[5:], "."])) == "key [REDACTED]."
    assert "".join(stream_tokens(flt, ["key ", SECRET[:5], SECRET[5:], "."])) == "key [REDACTED]."
    with pytest.raises(ConfigError, match="cache_size=-1"):
        redact_filter(cache_size=-1)


def test_bad_options() -> None:
    with pytest.raises(ConfigError, match=r"pattern patterns\[0\] '\(' is not a valid regular expression"):
        redact_filter(["("])
    with pytest.raises(ConfigError, match="can match the empty text"):
        redact_filter(["a{0,3}"])
    with pytest.raises(ConfigError, match="back references"):
        redact_filter([r"(a)\1"])
    with pytest.raises(ConfigError, match="max_length=0"):
        redact_filter(max_length=0)
    with pytest.raises(ConfigError, match="applies_to='both'"):
        redact_filter(applies_to="both")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="give a list of regular expressions"):
        redact_filter("sk-.*")  # type: ignore[arg-type]


def stored_by_memory(log: list[str]) -> Filter:
    async def around_chat(request: ChatRequest, state: dict[str, object], call_next: object) -> ChatResponse:
        response: ChatResponse = await call_next(request)  # type: ignore[operator]
        log.append(response.text)
        return response

    return Filter("memory_probe", around_chat=around_chat)


@pytest.mark.parametrize("chunk", [None, 1, 3])
async def test_answer_scope_streamed_equals_result_equals_memory(chunk: int | None) -> None:
    stored: list[str] = []
    model = ScriptedModel([TEXT], chunk=chunk)
    kernel = Kernel(model, filters=[stored_by_memory(stored), redact_filter()])
    streamed, events = await collect_stream(kernel.run_stream("hi"))
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert streamed == REDACTED
    assert last.result.text == REDACTED
    assert stored == [REDACTED]
    assert SECRET not in repr(last.result.messages)


async def test_answer_scope_non_streaming() -> None:
    stored: list[str] = []
    kernel = Kernel(ScriptedModel([TEXT]), filters=[stored_by_memory(stored), redact_filter()])
    result = await kernel.run("hi")
    assert isinstance(result, TurnResult)
    assert result.text == REDACTED
    assert stored == [REDACTED]


async def test_stream_scope_changes_delivery_only() -> None:
    kernel = Kernel(ScriptedModel([TEXT], chunk=2), filters=[redact_filter(applies_to="stream")])
    streamed, events = await collect_stream(kernel.run_stream("hi"))
    last = events[-1]
    assert isinstance(last, RunFinished)
    assert streamed == REDACTED
    assert last.result.text == TEXT
    plain = await Kernel(ScriptedModel([TEXT]), filters=[redact_filter(applies_to="stream")]).run("hi")
    assert plain.text == TEXT


async def test_error_end_releases_nothing_held() -> None:
    class Failing(ScriptedModel):
        async def stream(self, request: ChatRequest, on_token: object) -> ChatResponse:
            on_token("key sk-abc")  # type: ignore[operator]
            raise RuntimeError("stream broke")

    kernel = Kernel(Failing(["x"]), filters=[redact_filter()])
    seen: list[str] = []
    with pytest.raises(RuntimeError, match="stream broke"):  # noqa: PT012  # drain until the error
        async for event in kernel.run_stream("hi"):
            seen.append(repr(event))
    assert all("sk-abc" not in item for item in seen)
    assert re.search("key ", "".join(seen))


def test_spec() -> None:
    assert SPEC.name == "redact"
    assert tuple(SPEC.scopes) == ("token",)
    assert SPEC.factory is redact_filter
    assert redact_filter().token is not None
    assert redact_filter().token.applies_to == "answer"  # type: ignore[union-attr]
    assert Message.user("x").text == "x"


LOOK_BACK_PATTERNS = [r"(?i)secret-\d{3}", r"\bpin\b:\d{2}", r"(?<=id=)\d{3}", r"^hi", r"ab(?:cd)?"]
LOOK_BACK_JOINED = r"(?i:secret-\d{3})|\bpin\b:\d{2}|(?<=id=)\d{3}|^hi|ab(?:cd)?"


@pytest.mark.parametrize("size", [1, 2, 3, 100])
def test_patterns_that_look_back_keep_their_context(size: int) -> None:
    flt = redact_filter(LOOK_BACK_PATTERNS, replacement="#", default_rules=False)
    text = "hi pin:12 spin:12 xid=123 Secret-999 abc abcd hi"
    chunks = [text[i : i + size] for i in range(0, len(text), size)]
    assert "".join(stream_tokens(flt, chunks)) == "# # spin:12 xid=# # #c # hi"


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="abcdhipnSsecrt-:0129 =AKIkBearx", max_size=40),
    cuts=st.lists(st.integers(min_value=0, max_value=40), max_size=8),
    patterns=st.sampled_from([None, LOOK_BACK_PATTERNS]),
)
def test_property_stream_equals_whole_text_regex(text: str, cuts: list[int], patterns: list[str] | None) -> None:
    flt = reused(replacement="#", look_back=patterns is not None)
    reference = flt.extras["redactor"].redact(text)
    if patterns is not None:
        assert reference == re.sub(LOOK_BACK_JOINED, "#", text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    assert "".join(stream_tokens(flt, chunks)) == reference


@pytest.mark.packages  # uses beamfilter-memory
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_real_memory_filter_stores_the_redacted_answer(tmp_path: Path, stream: bool) -> None:
    from beamfilter_memory import SQLiteStore, memory_filter

    store = SQLiteStore(f"sqlite:///{tmp_path / 'chat.db'}")
    try:
        kernel = Kernel(ScriptedModel([TEXT], chunk=4), filters=[memory_filter(store), redact_filter()])
        context = {"conversation_id": "c1"}
        if stream:
            streamed, events = await collect_stream(kernel.run_stream("hi", context=context))
            last = events[-1]
            assert isinstance(last, RunFinished)
            assert streamed == REDACTED
            result = last.result
        else:
            result = await kernel.run("hi", context=context)
        assert result.text == REDACTED
        stored = await store.load("c1")
        assert [(m.role, m.text) for m in stored] == [("user", "hi"), ("assistant", REDACTED)]
    finally:
        await store.aclose()


OVERLAP_PATTERNS = [r"a{1,3}ab", r"x[a-c]{1,3}c", r"q[^z]{1,3}z", r"(?:ab|a){2,3}c", r"(?i:k[a-c]{1,2})C"]


@settings(max_examples=500, deadline=None)
@given(
    text=st.text(alphabet="abcxqzkKC ", max_size=30),
    cuts=st.lists(st.integers(min_value=0, max_value=30), max_size=10),
)
def test_property_runs_that_overlap_what_follows(text: str, cuts: list[int]) -> None:
    flt = redact_filter(OVERLAP_PATTERNS, replacement="#", default_rules=False)
    reference = re.sub("|".join(OVERLAP_PATTERNS), "#", text)
    points = sorted({c % (len(text) + 1) for c in cuts})
    bounds = [0, *points, len(text)]
    chunks = [text[a:b] for a, b in itertools.pairwise(bounds) if b > a]
    assert "".join(stream_tokens(flt, chunks)) == reference
    assert "".join(stream_tokens(flt, list(text))) == reference


@pytest.mark.parametrize(
    "pattern",
    [
        r"a{1,3}ab",
        r"x[a-c]{1,3}c",
        r"q[^z]{1,3}z",
        r"(?:ab|a){2,3}c",
        r"(?i:k[a-c]{1,2})C",
        r"[ab]{1,4}b",
        r"c[a-c]{0,3}?c",
    ],
)
def test_every_prefix_of_every_match_is_held(pattern: str) -> None:
    # The safety property behind redact: a text that could still grow into a match is
    # always recognised as such (holding back too much is slow; too little leaks).
    compiled = re.compile(pattern)
    prefix = re.compile(prefix_source(compiled))
    rng = random.Random(3)
    alphabet = "".join(sorted(set(re.sub(r"[^a-zA-Z]", "", pattern) + "abz")))
    matches = 0
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 10)))
        for start in range(len(text)):
            for end in range(start + 1, len(text) + 1):
                if compiled.fullmatch(text, start, end):
                    matches += 1
                    word = text[start:end]
                    for cut in range(1, len(word) + 1):
                        assert prefix.fullmatch(word[:cut]), (word, word[:cut])
    assert matches > 100


def test_case_insensitive_patterns_catch_unicode_case_pairs() -> None:
    # Under IGNORECASE Python pairs 's' with U+017F (long s) and 'k' with U+212A (Kelvin sign).
    flt = redact_filter([r"(?i)secret-\d{2}", r"(?i:key)=\d"], replacement="#", default_rules=False)
    for text in ("my \u017fecret-12 x", "a \u212aey=1 b"):
        expected = flt.extras["redactor"].redact(text)
        assert "#" in expected
        assert "".join(stream_tokens(flt, [text])) == expected
        assert "".join(stream_tokens(flt, list(text))) == expected
