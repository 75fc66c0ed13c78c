"""tool_search's embedding speed: one query's MiniLM forward pass and one hybrid search.

The baseline, measured in the same process and interleaved round by round with what
ships, is the numpy forward pass the embedding backends used before (written out below,
OpenBLAS with one thread, as it ran then). Printed: CPU time per query (median over
rounds) and its ratio to the baseline for onnxruntime with one and with two threads, then
the wall and CPU time of a whole hybrid search (default: one thread) over the 196-tool
catalog with each query's vector forgotten first (so every search pays its forward pass).

Run::

    .venv/bin/python bench/bench_tool_search_speed.py
    .venv/bin/python bench/bench_tool_search_speed.py --rounds 5    # a quicker look
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the baseline ran its BLAS on one thread

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from bench_tool_search_eval import _load as load_average
from bench_tool_search_eval import forget_queries, load_catalog, load_requests
from safetensors.numpy import load_file

from beamfilter_builtins import HybridToolIndex
from beamfilter_builtins._minilm import MiniLMEncoder, default_model_dir

QUERY = "what are the GPS coordinates of the Eiffel Tower?"


class NumpyMiniLM:
    """The baseline: the six-layer encoder in numpy (activations as columns, Q/K/V fused)."""

    def __init__(self, folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        self.heads, self.layers, self.eps = (
            config["num_attention_heads"],
            config["num_hidden_layers"],
            config["layer_norm_eps"],
        )
        raw = load_file(str(folder / "model.safetensors"))
        w = {k: v.astype(np.float32) for k, v in raw.items() if v.dtype != np.int64}
        for n in range(self.layers):
            p = f"encoder.layer.{n}.attention.self."
            parts = ("query", "key", "value")
            w[f"{p}qkv.weight"] = np.ascontiguousarray(np.concatenate([w[f"{p}{x}.weight"] for x in parts]))
            w[f"{p}qkv.bias"] = np.concatenate([w[f"{p}{x}.bias"] for x in parts])
        for key, value in list(w.items()):
            if (value.ndim == 1 and not key.startswith("embeddings.")) or "LayerNorm" in key:
                w[key] = value[:, None]
        self.w = w

    def norm(self, h: Any, prefix: str) -> Any:
        centered = h - h.mean(axis=0, keepdims=True)
        variance = (centered * centered).mean(axis=0, keepdims=True)
        return (
            centered / np.sqrt(variance + np.float32(self.eps)) * self.w[f"{prefix}.weight"] + self.w[f"{prefix}.bias"]
        )

    def encode(self, ids: list[int]) -> Any:
        w, length = self.w, len(ids)
        x = w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:length]
        x = x + w["embeddings.token_type_embeddings.weight"][0]
        h = self.norm(np.ascontiguousarray(x.T), "embeddings.LayerNorm")
        hidden = h.shape[0]
        size = hidden // self.heads
        scale = np.float32(1.0 / np.sqrt(size))
        for n in range(self.layers):
            p = f"encoder.layer.{n}."
            qkv = w[f"{p}attention.self.qkv.weight"] @ h + w[f"{p}attention.self.qkv.bias"]
            qkv = qkv.reshape(3, self.heads, size, length).transpose(0, 1, 3, 2)
            scores = (qkv[0] @ qkv[1].transpose(0, 2, 1)) * scale
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ qkv[2]).transpose(0, 2, 1).reshape(hidden, length)
            attended = w[f"{p}attention.output.dense.weight"] @ context + w[f"{p}attention.output.dense.bias"]
            h = self.norm(attended + h, f"{p}attention.output.LayerNorm")
            inner = w[f"{p}intermediate.dense.weight"] @ h + w[f"{p}intermediate.dense.bias"]
            inner = 0.5 * inner * (1.0 + _erf(inner * np.float32(0.7071067811865476)))
            out = w[f"{p}output.dense.weight"] @ inner.astype(np.float32) + w[f"{p}output.dense.bias"]
            h = self.norm(out + h, f"{p}output.LayerNorm")
        pooled = h.mean(axis=1)
        return pooled / np.linalg.norm(pooled)


def _erf(x: Any) -> Any:
    """Abramowitz & Stegun 7.1.26, as the baseline computed it."""
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return np.sign(x) * (1.0 - poly * np.exp(-a * a))


def cpu_and_wall(run: Callable[[], object], repeats: int, *, warm: bool = True) -> tuple[float, float]:
    if warm:
        run()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(repeats):
        run()
    return (time.process_time() - cpu) / repeats, (time.perf_counter() - wall) / repeats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--repeats", type=int, default=10, help="forward passes per round and contender")
    options = parser.parse_args()
    folder = default_model_dir()
    baseline = NumpyMiniLM(folder)
    one, two = MiniLMEncoder(folder, threads=1), MiniLMEncoder(folder, threads=2)
    ids = one._tokenizer.encode(QUERY).ids
    deviation = float(np.abs(baseline.encode(ids) - one.encode([QUERY])[0]).max())
    contenders: dict[str, Callable[[], object]] = {
        "numpy, 1 BLAS thread (before)": lambda: baseline.encode(one._tokenizer.encode(QUERY).ids),
        "onnxruntime, 1 thread": lambda: one.encode([QUERY]),
        "onnxruntime, 2 threads": lambda: two.encode([QUERY]),
    }
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in contenders}
    for _ in range(options.rounds):
        for name, run in contenders.items():
            samples[name].append(cpu_and_wall(run, options.repeats))
    print(
        f"forward pass of a {len(ids)}-piece query, {options.rounds} rounds x {options.repeats} (load {load_average()})"
    )
    print(f"largest difference numpy vs onnxruntime: {deviation:.1e}")
    base = statistics.median(cpu for cpu, _ in samples["numpy, 1 BLAS thread (before)"])
    for name, values in samples.items():
        cpu = statistics.median(c for c, _ in values)
        wall = statistics.median(w for _, w in values)
        print(f"  {name:<32} CPU {cpu * 1000:6.2f} ms  wall {wall * 1000:6.2f} ms  CPU ratio to numpy {cpu / base:.2f}")
    tools, requests = load_catalog(), load_requests("all")
    with tempfile.TemporaryDirectory() as cache:
        index = HybridToolIndex(cache_dir=cache, progress=None)
        started, cpu_started = time.perf_counter(), time.process_time()
        index.build(tools)
        build_wall, build_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        timings = []
        for request in requests:
            forget_queries(index)
            timings.append(cpu_and_wall(lambda text=request["text"]: index.search(text, 5), 1, warm=False))
    print(f"hybrid over {len(tools)} tools: first build {build_wall:.2f} s wall, {build_cpu:.2f} s CPU")
    walls, cpus = sorted(w for _, w in timings), sorted(c for c, _ in timings)
    p95 = int(0.95 * (len(walls) - 1))
    print(
        f"  one search ({len(requests)} requests, query vector forgotten first): "
        f"median wall {statistics.median(walls) * 1000:.2f} ms, CPU {statistics.median(cpus) * 1000:.2f} ms; "
        f"p95 wall {walls[p95] * 1000:.2f} ms, CPU {cpus[p95] * 1000:.2f} ms"
    )


if __name__ == "__main__":
    main()
