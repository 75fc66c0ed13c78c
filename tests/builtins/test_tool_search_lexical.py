"""tool_search's default backend: analyzer, stemmer, typo correction, fields, steps, fusion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from beamfilter_builtins import BM25ToolIndex
from beamfilter_builtins._fusion import carry_names, interleave, reciprocal_rank_fusion, split_steps
from beamfilter_builtins._tool_lexical import split_server, tool_text_fields
from beamfilter_builtins._tool_synonyms import SOFTWARE_SYNONYMS, QueryExpander
from beamfilter_builtins._typos import TypoCorrector, trigrams
from beamfilter_core import Tool
from beamfilter_core.text import analyze, words

CATALOG = Path(__file__).resolve().parents[2] / "bench" / "data" / "mcp_tools.json"


def real_tools() -> list[Tool]:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    return [Tool.declaration(t["name"], t["description"], t["parameters"]) for t in data]


@pytest.fixture(scope="module")
def mcp_index() -> BM25ToolIndex:
    index = BM25ToolIndex()
    index.build(real_tools())
    return index


def test_typo_corrector_finds_one_edit_neighbours_keeping_the_first_letter() -> None:
    corrector = TypoCorrector({"send": 3, "slack": 1, "messag": 2, "fall": 5, "chang": 4, "chain": 1})
    assert corrector.corrections("sned") == [("send", 0.8)]  # transposition
    assert corrector.corrections("slak") == [("slack", 0.8)]  # a dropped letter
    assert corrector.corrections("mesag") == [("messag", 0.8)]
    assert corrector.corrections("call") == []  # fall: the first letter differs
    assert corrector.corrections("chagn") == [("chang", 0.8), ("chain", 0.8)]  # ties: commoner first
    assert corrector.corrections("send") == []  # known
    assert corrector.corrections("sen") == []  # too short to correct
    assert corrector.corrections("zzzz") == []


def test_typo_corrector_trigram_pass_for_longer_words() -> None:
    corrector = TypoCorrector(["repositori", "directori"])
    # two edits away: only the trigram overlap (9 shared of 13) finds it
    assert corrector.corrections("repositoriez") == [("repositori", pytest.approx(9 / 13))]
    assert corrector.corrections("reposytory") == []  # 1/3 overlap is below the default 0.5
    assert TypoCorrector(["repositori"], min_trigram_similarity=0.3).corrections("reposytory") == [
        ("repositori", pytest.approx(1 / 3))
    ]
    assert corrector.corrections("repositoriez", limit=0) == []
    assert TypoCorrector(["repositori"], min_trigram_similarity=0.7).corrections("repositoriez") == []
    assert corrector.overlapping("mkdir") == [("directori", pytest.approx(1 / 13))]
    assert corrector.overlapping("qqqq") == []
    # only a word's opening counts: "dir" opens "directori"; "ect" and "ori" only stand inside it
    assert corrector.overlapping("lecture") == []
    assert corrector.overlapping("memori") == []
    assert TypoCorrector(["queri"]).overlapping("quantum") == []  # " qu" is shared, "que" is not in it
    assert trigrams("ab") == frozenset({" ab", "ab "})


def test_split_steps_and_fusion() -> None:
    assert split_steps("clone the repo, then open an issue") == ["clone the repo", "open an issue"]
    assert split_steps("stage it and then commit; afterwards push") == ["stage it", "commit", "push"]
    assert split_steps("Lies die Datei und dann lösche sie") == ["Lies die Datei", "lösche sie"]
    assert split_steps("what time is it") == ["what time is it"]
    # commas and "and" cut only between clauses of two content words or more
    assert split_steps("open the login page, fill in the username and click sign in") == [
        "open the login page",
        "fill in the username",
        "click sign in",
    ]
    assert split_steps("push the fixed file, and open a pull request") == ["push the fixed file", "open a pull request"]
    assert split_steps("search for cats and dogs") == ["search for cats and dogs"]
    assert split_steps("list branches, tags") == ["list branches, tags"]
    assert split_steps("read it, then list open issues and pull requests") == [
        "read it",
        "list open issues",
        "pull requests",
    ]
    assert split_steps("a b, c d and e f, g h and i j") == ["a b, c d and e f, g h and i j"]  # single letters: no words
    assert split_steps("red apples, green pears, yellow plums, blue berries, pink roses") == [
        "red apples",
        "green pears",
        "yellow plums",
        "blue berries pink roses",
    ]
    assert split_steps("then") == ["then"]
    assert split_steps("a; b; c; d; e; f") == ["a", "b", "c", "d e f"]
    assert interleave([["a", "b", "c"], ["x", "a"]], 10) == ["a", "x", "b", "c"]
    assert interleave([["a", "b"], ["x", "y"]], 3) == ["a", "x", "b"]
    assert interleave([], 3) == []
    assert reciprocal_rank_fusion([["a", "b", "c"], ["b", "c", "a"]], 3, k=1) == ["b", "a", "c"]
    # equal fused scores: the better single rank first, then the name
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], 2, k=60) == ["a", "b"]
    assert reciprocal_rank_fusion([["b"], ["a"]], 5) == ["a", "b"]
    # weighted: a = 1/2 + 1.5/3 = 1.0, b = 1/3 + 1.5/2 = 1.083
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], 2, k=1, weights=(1.0, 1.5)) == ["b", "a"]
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], 2, k=1, weights=(1.0, 1.0)) == ["a", "b"]
    assert reciprocal_rank_fusion([["a", "b"], ["b", "a"]], 2, k=1, weights=(1.0, 0.99)) == ["a", "b"]


def test_fields_of_a_tool_include_server_and_parameters() -> None:
    tool = Tool.declaration(
        "github__create_issue",
        "Create a new issue",
        {
            "type": "object",
            "properties": {
                "repo": {"type": "string", "description": "Repository name"},
                "labels": {"type": "array", "items": {"type": "object", "properties": {"colour": {"type": "string"}}}},
                "odd": "not a schema",
            },
        },
    )
    assert tool_text_fields(tool) == {
        "server": "github",
        "name": "create_issue",
        "description": "Create a new issue",
        "parameter_names": "repo labels colour odd",
        "parameter_descriptions": "Repository name",
    }
    assert split_server("plain_name") == ("", "plain_name")
    assert split_server("__lead") == ("", "__lead")
    assert split_server("trail__") == ("", "trail__")


def test_server_prefix_weighs_less_than_the_tool_name() -> None:
    tools = [
        Tool.declaration("maps__maps_geocode", "Convert an address into geographic coordinates", {}),
        Tool.declaration("maps__maps_elevation", "Get elevation data for locations", {}),
        Tool.declaration("other__coordinates_tool", "Coordinates of things", {}),
    ]
    index = BM25ToolIndex()
    index.build(tools)
    assert index.search("maps", 3)[0] in ("maps__maps_geocode", "maps__maps_elevation")
    assert index.search("geographic coordinates of the Eiffel Tower", 3)[0] == "maps__maps_geocode"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("show me what's inside config.yaml", None),
        ("unstage everything", "git__git_reset"),
        ("sned a mesage on slak", "slack__slack_post_message"),
        ("lsit the pull requsts", "github__list_pull_requests"),
        ("what are the GPS coordinates of the Eiffel Tower?", "maps__maps_geocode"),
        ("Lösche den Schlüssel cache:1 aus Redis", None),
    ],
)
def test_issue_examples_on_real_mcp_tools(mcp_index: BM25ToolIndex, query: str, expected: str | None) -> None:
    found = mcp_index.search(query, 5)
    assert len(found) == 5
    if expected is not None:
        assert expected in found, found


def test_real_catalog_exact_rankings(mcp_index: BM25ToolIndex) -> None:
    assert mcp_index.search("unstage everything", 2) == ["git__git_diff_unstaged", "git__git_reset"]
    assert mcp_index.corrected("sned a mesage on slak") == "sends a message on slack"
    assert mcp_index.corrected("comit my chagnes") == "commit my changes"
    assert mcp_index.corrected("Wie spät ist es?") == "Wie spät ist es?"
    assert mcp_index.search("mkdir", 5) != []  # the trigram fallback: directory tools
    assert all("director" in name for name in mcp_index.search("mkdir", 2))


def test_multi_step_request_returns_a_tool_per_step(mcp_index: BM25ToolIndex) -> None:
    request = "make a folder named out and then write results.csv into it"
    first, second = mcp_index.search("make a folder named out", 5), mcp_index.search("write results.csv into it", 5)
    found = mcp_index.search(request, 5)
    assert found == interleave([first, second], 5)  # each step's best first, in turn
    assert found[:2] == [first[0], second[0]]
    whole = BM25ToolIndex(steps=False)
    whole.build(real_tools())
    assert whole.search(request, 5) == [name for name, _ in whole.scores(request)[:5]]
    assert whole.search(request, 5) != found


def _five_tools() -> list[Tool]:
    def declared(name: str, description: str) -> Tool:
        return Tool.declaration(name, description, {"type": "object", "properties": {"query": {"type": "string"}}})

    return [
        declared("run_sql", "Run a SQL query against the database"),
        declared("send_email", "Send an email to a recipient"),
        declared("read_file", "Read a file from disk"),
        declared("create_directory", "Create a new directory"),
        declared("get_weather", "Get the weather forecast for a city"),
    ]


@pytest.mark.parametrize(
    "request_text", ["quantum tunnelling", "astrophysics lecture", "qwerty zxcv", "a sonnet about autumn"]
)
def test_a_request_sharing_nothing_with_the_catalog_finds_nothing(request_text: str) -> None:
    index = BM25ToolIndex()
    index.build(_five_tools())
    assert index.search(request_text, 5) == []
    assert index.search("mkdir", 5) == ["create_directory"]  # the fallback still finds an abbreviation


def test_blank_and_unknown_queries_and_options(mcp_index: BM25ToolIndex) -> None:
    assert mcp_index.search("   ", 5) == []
    assert mcp_index.search("the of and", 5) == []  # stop words only
    assert mcp_index.search("qqqqqq", 5) == []
    strict = BM25ToolIndex(typos=False)
    strict.build(real_tools())
    assert strict.search("sned a mesage on slak", 5) == []
    assert strict.corrected("sned") == "sned"
    assert strict.search("mkdir", 5) == []
    empty = BM25ToolIndex()
    assert empty.search("anything", 5) == []
    empty.build([])
    assert empty.search("anything", 5) == []


# Content words: what the analyzer keeps (no stop word, no single Latin letter).
_VOCAB = sorted({w for t in real_tools()[:60] for w in words(f"{t.name} {t.description}") if analyze(w)})


@settings(deadline=None)  # CPU-bound; a busy machine must not fail it
@given(st.sampled_from(_VOCAB), st.lists(st.sampled_from(["please", "the", "a", "me", "xqzv"]), max_size=3))
def test_a_query_sharing_a_content_word_never_finds_nothing(word: str, filler: list[str]) -> None:
    index = _SMALL
    query = " ".join([*filler, word])
    found = index.search(query, 5)
    assert found, query


_SMALL = BM25ToolIndex()
_SMALL.build(real_tools()[:60])


@settings(deadline=None)  # CPU-bound; a busy machine must not fail it
@given(st.text(max_size=60))
def test_any_text_is_a_valid_query(query: str) -> None:
    found = _SMALL.search(query, 5)
    assert len(found) <= 5
    assert len(set(found)) == len(found)
    assert isinstance(_SMALL.corrected(query), str)
    assert 0.0 <= _SMALL.known_share(query) <= 1.0
    assert all(isinstance(expansion, str) for expansion in _SMALL.expander.expansions(query))


def declared(name: str, description: str) -> Tool:
    return Tool.declaration(name, description, {"type": "object"})


def test_numbered_first_then_and_other_languages_split_into_steps() -> None:
    assert split_steps("1. clone the repo 2. open an issue") == ["clone the repo", "open an issue"]
    assert split_steps("1) read config.yaml\n2) post it to slack") == ["read config.yaml", "post it to slack"]
    assert split_steps("First, clone the repo, then open an issue") == ["clone the repo", "open an issue"]
    assert split_steps("scale the deployment to 3. Done") == ["scale the deployment to 3. Done"]  # not numbered
    assert split_steps("1. only one step") == ["1. only one step"]
    assert split_steps("Leggi il file e poi invialo su Slack") == ["Leggi il file", "invialo su Slack"]
    assert split_steps("Leia o arquivo e depois envie para o Slack") == ["Leia o arquivo", "envie para o Slack"]
    assert split_steps("Lees het bestand en dan stuur het naar Slack") == ["Lees het bestand", "stuur het naar Slack"]
    assert split_steps("Lis le fichier et puis envoie-le") == ["Lis le fichier", "envoie-le"]
    assert split_steps("ファイルを読んで、それからSlackに送って") == ["ファイルを読んで", "Slackに送って"]


def test_a_step_naming_no_server_carries_the_servers_the_request_names() -> None:
    servers = frozenset({"redis", "github"})
    assert carry_names(["get the key from redis", "update it to v2"], servers) == [
        "get the key from redis",
        "update it to v2 (redis)",
    ]
    both_named = ["open the redis key", "file a github issue"]
    assert carry_names(both_named, servers) == both_named
    assert carry_names(["read it", "then post it"], servers) == ["read it", "then post it"]
    catalog = [
        declared("redis__get", "Get the value of a key"),
        declared("redis__set", "Set or update the value of a key"),
        declared("github__update_issue", "Update an existing issue in a GitHub repository"),
        declared("notion__update_page", "Update the properties of a page"),
    ]
    query = "read the key theme from redis, then update it to dark"
    carried, alone = BM25ToolIndex(), BM25ToolIndex(carry=False)
    carried.build(catalog)
    alone.build(catalog)
    assert carried.servers == frozenset({"redis", "github", "notion"})
    assert carried.search(query, 2) == ["redis__get", "redis__set"]
    assert alone.search(query, 2) == ["redis__get", "notion__update_page"]


def test_listed_abbreviations_are_expanded_whole_and_any_case() -> None:
    expander = QueryExpander()
    assert expander.expansions("what changed in PR 12 of the repo?") == ["pull request", "repository"]
    assert expander.expansions("list the k8s pods; the K8S pods") == ["kubernetes"]
    assert expander.expansions("PR-12 and pr 13") == ["pull request"]  # each expansion once
    assert expander.expansions("print the prs of repos") == ["pull requests", "repositories"]
    assert expander.expansions("prepare a directory") == []  # inside words: nothing
    assert QueryExpander({}).expansions("PR") == []
    # keys are literal text, not patterns; blank keys are dropped
    odd = QueryExpander({"C++": "cpp", "node.js": "javascript runtime", " ": "nothing"})
    assert odd.expansions("build the c++ and Node.js code") == ["cpp", "javascript runtime"]
    assert odd.expansions("nodexjs c+") == []
    assert QueryExpander({**SOFTWARE_SYNONYMS, "ticket": "issue"}).expansions("close ticket 4 of the PR") == [
        "issue",
        "pull request",
    ]
    assert SOFTWARE_SYNONYMS["pr"] == "pull request"
    assert SOFTWARE_SYNONYMS["repo"] == "repository"
    assert SOFTWARE_SYNONYMS["dir"] == "directory"


def test_pr_finds_the_pull_request_tool_lexically() -> None:
    catalog = [
        declared("github__get_pull_request", "Get details of a specific pull request"),
        declared("github__get_issue", "Get details of a specific issue"),
        declared("git__git_show", "Shows the contents of a commit"),
    ]
    index, plain = BM25ToolIndex(), BM25ToolIndex(synonyms={})
    index.build(catalog)
    plain.build(catalog)
    assert index.search("show PR 12", 2) == ["github__get_pull_request", "git__git_show"]
    assert plain.search("show PR 12", 2) == ["git__git_show"]
    # the abbreviation is a word, not a typo: kept as it is, its expansion added
    assert index.query_terms("show PR 12") == [("show", 1.0), ("pr", 1.0), ("12", 1.0), ("pull", 1.0), ("request", 1.0)]
    assert index.corrected("show PR 12") == "show PR 12"
    weighted = BM25ToolIndex(synonym_weight=0.5)
    weighted.build(catalog)
    assert weighted.query_terms("PR")[1:] == [("pull", 0.5), ("request", 0.5)]


def test_known_share_tells_other_languages_from_english(mcp_index: BM25ToolIndex) -> None:
    assert mcp_index.known_share("create an issue in the repository") == 1.0
    assert mcp_index.known_share("Wegbeschreibung von Berlin nach München") == 0.0
    assert mcp_index.known_share("東京の今の時間を教えて") == 0.0
    assert mcp_index.known_share("45 * 12") == 1.0  # no words: nothing says another language
    assert mcp_index.known_share("") == 1.0
