"""beamfilter_core.text: exact BM25 scores (the skills router compares raw scores), words, weights."""

from __future__ import annotations

import math
import re
import subprocess
import sys
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_core.text import STOP_WORDS, BM25Index, analyze, stem, words


def fruit() -> BM25Index:
    return BM25Index(
        [
            ("a", (("apple banana", 1),)),
            ("b", (("apple apple cherry", 1),)),
            ("c", (("date", 1),)),
        ]
    )


def test_tokenize_exact_pieces() -> None:
    assert words("getHTTPServer_status") == ["get", "http", "server", "status"]
    assert words("parseJSON2XML v10") == ["parse", "json", "2", "xml", "v", "10"]
    assert words("天气预报") == ["天气", "气预", "预报"]
    assert words("天") == ["天"]
    assert words("AB") == ["ab"]
    assert words("Ab") == ["ab"]
    assert words("  --  ") == []
    assert words("mkdir -p a/b") == ["mkdir", "p", "a", "b"]


def test_scores_are_okapi_bm25_with_the_positive_idf() -> None:
    idf_apple = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))
    # average length 2: doc a (length 2) norm 1.2, doc b (length 3) norm 1.2 * (0.25 + 0.75 * 1.5)
    expected_a = idf_apple * 1 * 2.2 / (1 + 1.2)
    expected_b = idf_apple * 2 * 2.2 / (2 + 1.2 * 1.375)
    found = fruit().scores("apple")
    assert [key for key, _ in found] == ["b", "a"]
    assert found[0][1] == pytest.approx(expected_b, rel=1e-12)
    assert found[1][1] == pytest.approx(expected_a, rel=1e-12)
    assert found[0][1] == pytest.approx(0.566580, abs=1e-6)
    assert found[1][1] == pytest.approx(0.470004, abs=1e-6)


def test_rare_terms_weigh_more_and_every_query_term_adds() -> None:
    idf_date = math.log(1 + (3 - 1 + 0.5) / (1 + 0.5))
    (key, score), *_ = fruit().scores("date")
    norm_c = 1.2 * (0.25 + 0.75 * 1 / 2)
    assert key == "c"
    assert score == pytest.approx(idf_date * 2.2 / (1 + norm_c), rel=1e-12)
    both = dict(fruit().scores("banana cherry"))
    idf_one = math.log(1 + 2.5 / 1.5)
    assert both == pytest.approx({"a": idf_one * 2.2 / (1 + 1.2), "b": idf_one * 2.2 / (1 + 1.65)}, rel=1e-12)


def test_a_repeated_query_term_counts_each_time() -> None:
    once = dict(fruit().scores("apple"))
    twice = dict(fruit().scores("apple apple"))
    assert twice == pytest.approx({key: 2 * value for key, value in once.items()}, rel=1e-12)


def test_k1_and_b_change_the_scores_as_the_formula_says() -> None:
    flat = BM25Index([("a", (("x y", 1),)), ("b", (("x y z w", 1),))], b=0.0, k1=2.0)
    idf_x = math.log(1 + 0.5 / 2.5)
    assert dict(flat.scores("x")) == pytest.approx({"a": idf_x * 3 / 3, "b": idf_x * 3 / 3}, rel=1e-12)
    full = BM25Index([("a", (("x y", 1),)), ("b", (("x y z w", 1),))], b=1.0, k1=2.0)
    assert dict(full.scores("x")) == pytest.approx(
        {"a": idf_x * 3 / (1 + 2.0 * 2 / 3), "b": idf_x * 3 / (1 + 2.0 * 4 / 3)}, rel=1e-12
    )
    assert flat.k1 == 2.0
    assert flat.b == 0.0


def test_field_weight_multiplies_the_term_frequency_and_the_length() -> None:
    index = BM25Index([("n", (("cal", 3), ("other", 1))), ("d", (("cal cal cal other", 1),))])
    found = dict(index.scores("cal"))
    assert found["n"] == pytest.approx(found["d"], rel=1e-12)  # weight 3 == three occurrences
    half = BM25Index([("n", (("cal", 0.5),)), ("m", (("zzz", 1),))])
    idf = math.log(1 + 1.5 / 1.5)
    norm = 1.2 * (0.25 + 0.75 * 0.5 / 0.75)
    assert dict(half.scores("cal")) == pytest.approx({"n": idf * 0.5 * 2.2 / (0.5 + norm)}, rel=1e-12)


def test_term_scores_weights_and_analyzer() -> None:
    index = BM25Index([("a", (("Apple pie", 1),)), ("b", (("pear", 1),))], analyzer=lambda text: text.split())
    assert index.vocabulary == frozenset({"Apple", "pie", "pear"})
    assert index.document_frequency("pie") == 1
    assert index.document_frequency("nope") == 0
    plain = dict(index.scores("Apple"))
    assert index.scores("apple") == []  # the analyzer given is used for queries too
    assert dict(index.term_scores([("Apple", 0.25)])) == pytest.approx({"a": plain["a"] * 0.25}, rel=1e-12)
    assert index.term_scores([]) == []


def test_ties_by_key_zero_scores_dropped_limit_and_empty_cases() -> None:
    index = BM25Index([("z", (("same", 1),)), ("y", (("same", 1),)), ("x", (("other", 1),))])
    assert [key for key, _ in index.scores("same")] == ["y", "z"]
    assert index.search("same", 1) == ["y"]
    assert index.search("same", 0) == []
    assert index.scores("") == []
    assert index.scores("missing") == []
    empty = BM25Index([])
    assert len(empty) == 0
    assert empty.scores("anything") == []
    assert empty.search("x", 3) == []
    assert len(index) == 3


def test_an_empty_document_and_a_term_in_every_document() -> None:
    index = BM25Index([("a", (("common", 1),)), ("b", (("common", 1),)), ("e", (("", 1),))])
    found = index.scores("common")
    idf = math.log(1 + (3 - 2 + 0.5) / 2.5)  # stays positive although in most documents
    norm = 1.2 * (0.25 + 0.75 * 1 / (2 / 3))
    assert found == [("a", pytest.approx(idf * 2.2 / (1 + norm))), ("b", pytest.approx(idf * 2.2 / (1 + norm)))]


@settings(deadline=None)  # CPU-bound; a busy machine must not fail it
@given(st.lists(st.text(alphabet="abc ", max_size=12), min_size=1, max_size=6), st.text(alphabet="abc ", max_size=8))
def test_scores_are_positive_sorted_and_only_for_documents_sharing_a_term(texts: list[str], query: str) -> None:
    index = BM25Index([(str(i), ((text, 1),)) for i, text in enumerate(texts)])
    found = index.scores(query)
    terms = set(words(query))
    assert {key for key, _ in found} == {str(i) for i, text in enumerate(texts) if terms & set(words(text))}
    assert all(score > 0 for _, score in found)
    assert found == sorted(found, key=lambda item: (-item[1], item[0]))


def test_words_keep_every_script_and_split_identifiers() -> None:
    assert words("github__createIssue") == ["github", "create", "issue"]
    assert words("getHTTPServer2_status") == ["get", "http", "server", "2", "status"]
    assert words("Wie spät ist es in Tōkyō? café") == ["wie", "spät", "ist", "es", "in", "tōkyō", "café"]
    assert words("ÉCOLE Straße") == ["école", "strasse"]  # casefold
    assert words("天气预报 x") == ["天气", "气预", "预报", "x"]
    assert words("天") == ["天"]
    assert words("notion__API-get-user") == ["notion", "api", "get", "user"]
    assert words("") == []
    assert words("__ -- !!") == []
    assert words("e\u0301t\u00e9") == ["été"]  # NFC: a combining accent joins its letter


def test_stem_maps_word_forms_to_one_term() -> None:
    for group in (
        ("file", "files"),
        ("create", "creating", "created", "creation"),
        ("query", "queries", "queried"),
        ("unstage", "unstages", "unstaged"),
        ("run", "running"),
        ("install", "installed", "installing"),
    ):
        assert len({stem(word) for word in group}) == 1, group
    assert stem("status") == "status"  # -us kept
    assert stem("process") == "process"  # -ss kept
    assert stem("this") == "this"  # -is kept
    assert stem("days") == "days"  # -ys kept
    assert stem("map") == "map"
    assert stem("use") == "use"
    assert stem("größe") == "größe"
    assert stem("v2") == "v2"
    assert stem("relational") == "relat"
    assert stem("rings") == "ring"


def test_analyze_drops_stop_words_and_stems() -> None:
    assert analyze("Show me what's inside the config files, please") == ["show", "insid", "config", "fil"]
    assert {"the", "please", "could", "want"} <= STOP_WORDS
    assert "show" not in STOP_WORDS
    assert "list" not in STOP_WORDS
    assert "get" not in STOP_WORDS


# The tokenizer ``BM25Index`` had before it moved to core: ASCII letters and digits only.
_FORMER = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


@settings(deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40))
def test_on_ascii_text_words_are_the_former_tokens(text: str) -> None:
    # so the skills router's and rag's scores did not change for ASCII text
    assert words(text) == [piece.lower() for piece in _FORMER.findall(text)]


@settings(deadline=None)
@given(st.text(max_size=30))
def test_the_lower_case_shortcut_gives_what_splitting_gives(text: str) -> None:
    from beamfilter_core.text import _RUN, _split_identifier

    for run in _RUN.findall(unicodedata.normalize("NFC", text)):
        if run.islower() and run.isalpha():
            assert [part.casefold() for part in _split_identifier(run)] == [run.casefold()]


def test_words_edges() -> None:
    assert words("abc") == ["abc"]
    assert words("straße") == ["strasse"]  # the shortcut casefolds too
    assert words("ab12cd") == ["ab", "12", "cd"]
    assert words("ABCdef") == ["ab", "cdef"]
    assert words("aB") == ["a", "b"]
    assert words("x_y") == ["x", "y"]
    assert words("天气") == ["天气"]
    assert words("a天气b") == ["a", "天气", "b"]


def test_stem_edges() -> None:
    assert stem("ties") == "tie"  # -ies/-es would leave fewer than three letters
    assert stem("lies") == "lie"
    assert stem("series") == "seri"
    assert stem("flies") == "fli"  # flies -> fly -> fli
    assert stem("tried") == "tri"
    assert stem("stopped") == "stop"
    assert stem("stopping") == "stop"
    assert stem("installed") == "install"  # a doubled l stays
    assert stem("fizzing") == "fizz"
    assert stem("passes") == "pass"
    assert stem("pass") == "pass"
    assert stem("cats") == "cat"
    assert stem("creation") == "creat"
    assert stem("creations") == "creat"
    assert stem("created") == "creat"
    assert stem("surprisingly") == "surpris"
    assert stem("allegedly") == "alleg"
    assert stem("savings") == "sav"
    assert stem("boys") == "boys"
    assert stem("play") == "play"
    assert stem("copy") == "copi"
    assert stem("made") == "mad"
    assert stem("are") == "are"
    assert stem("abcd") == "abcd"
    assert stem("aged") == "aged"  # "ag" would be too short
    assert stem("Files") == "Fil"  # case is the caller's business (words() lower-cases)
    assert stem("file2") == "file2"
    assert stem("cafés") == "cafés"  # not ASCII
    assert stem("speeds") == "speed"  # one suffix only: not speed -> spe
    assert stem("embeds") == "embed"
    assert stem("adding") == "add"  # three letters left: not undoubled
    assert stem("freeing") == "fre"
    assert stem("cat") == "cat"
    assert stem("ate") == "ate"
    assert stem("spy") == "spy"  # the y of three letters stays
    assert stem("query") == "queri"  # a y after a consonant
    assert stem("display") == "display"  # a y after a vowel stays
    assert stem("spying") == "spy"
    assert stem("bus") == "bus"


def test_analyze_drops_single_latin_letters_only() -> None:
    assert analyze("x y 7 天 é ab") == ["7", "天", "é", "ab"]
    assert analyze("") == []
    assert analyze("the and") == []


def test_import_beamfilter_core_does_not_load_the_text_module() -> None:
    code = "import sys, beamfilter_core; print('beamfilter_core.text' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_one_document_and_empty_documents() -> None:
    single = BM25Index([("only", (("alpha beta beta", 1),))])
    idf = math.log(1 + 0.5 / 1.5)
    # one document: its length is the average, so norm = k1
    assert single.scores("beta") == [("only", pytest.approx(idf * 2 * 2.2 / (2 + 1.2), rel=1e-12))]
    empty = BM25Index([("a", (("", 1),)), ("b", (("the", 0),))])
    assert empty.scores("the") == []  # a zero-weight field adds no term frequency
    assert len(empty) == 2
