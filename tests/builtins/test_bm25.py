"""_bm25: exact scores (the skills router compares raw scores), the default tokenizer, weights."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import BM25SkillRouter, Skill
from beamfilter_builtins._bm25 import BM25Index, tokenize


def fruit() -> BM25Index:
    return BM25Index(
        [
            ("a", (("apple banana", 1),)),
            ("b", (("apple apple cherry", 1),)),
            ("c", (("date", 1),)),
        ]
    )


def test_tokenize_exact_pieces() -> None:
    assert tokenize("getHTTPServer_status") == ["get", "http", "server", "status"]
    assert tokenize("parseJSON2XML v10") == ["parse", "json", "2", "xml", "v", "10"]
    assert tokenize("天气预报") == ["天气", "气预", "预报"]
    assert tokenize("天") == ["天"]
    assert tokenize("AB") == ["ab"]
    assert tokenize("Ab") == ["ab"]
    assert tokenize("  --  ") == []
    assert tokenize("mkdir -p a/b") == ["mkdir", "p", "a", "b"]


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
    terms = set(tokenize(query))
    assert {key for key, _ in found} == {str(i) for i, text in enumerate(texts) if terms & set(tokenize(text))}
    assert all(score > 0 for _, score in found)
    assert found == sorted(found, key=lambda item: (-item[1], item[0]))


def test_skills_router_compares_raw_scores_with_min_score() -> None:
    skills = [
        Skill("weather-report", "Forecast and current weather for a city"),
        Skill("trip-planner", "Plan a trip: flights, hotels and a city guide"),
    ]
    router = BM25SkillRouter()
    router.build(skills)
    assert router.route("what's the weather in Oslo?") == "weather-report"
    assert router.route("plan a trip to Rome") == "trip-planner"
    assert router.route("tell me a joke") is None  # stop words only: no score at all
    # "weather" is in the name (x2) and the description of one skill of two.
    idf = math.log(1 + 1.5 / 1.5)
    lengths = [2 * 2 + 7, 2 * 2 + 9]  # name words x2 plus description words (stop words kept)
    norm = 1.2 * (0.25 + 0.75 * lengths[0] / (sum(lengths) / 2))
    score = idf * 3 * 2.2 / (3 + norm)
    assert router._index.scores("weather")[0][1] == pytest.approx(score, rel=1e-12)
    below = BM25SkillRouter(min_score=score - 1e-9)
    below.build(skills)
    assert below.route("weather") == "weather-report"
    at = BM25SkillRouter(min_score=score)
    at.build(skills)
    assert at.route("weather") is None  # the best score must exceed min_score
