"""Side-by-side benchmark (issue 7): beamfilter against LangChain, Agent Framework and Semantic Kernel.

Installs the pinned peers of ``bench/peers/requirements.txt`` (and ``./beamfilter_core``)
into its own virtual environment, ``bench/.venv-bench-peers`` (created once, reinstalled
when the pins change), then runs one scenario script per framework
(``bench/peers/bench_<framework>.py``), each in its own process with that environment's
Python, and prints the table: every framework's figures, the per-layer slope,
beamfilter's ratio to each peer and the pure-Python floor (N nested async closures,
measured in the beamfilter process of the same run), with the targets of issue 7.

Scenarios (the same in every framework, each with its own fake in-process model and N
pass-through layers, N = 0, 1, 5, 10, 20, around the model call and around tool calls):
a one-call turn without tools; one tool round (tool call, tool result, answer); 10,000
streamed tokens, bare and with one upper-casing layer; import time and resident memory
after building one agent.

Run it with::

    .venv/bin/python bench/bench_peers.py            # full run, a few minutes (+ first install)
    .venv/bin/python bench/bench_peers.py --quick    # short rounds, for a smoke check
    .venv/bin/python bench/bench_peers.py --only beamfilter semantic_kernel --json out.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import subprocess
import sys
import time
import venv
from collections.abc import Sequence
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
PEERS_DIR = BENCH_DIR / "peers"
REQUIREMENTS = PEERS_DIR / "requirements.txt"
DEFAULT_VENV = BENCH_DIR / ".venv-bench-peers"
FRAMEWORKS = ("beamfilter", "langchain", "agent_framework", "semantic_kernel")
TITLES = {
    "beamfilter": "beamfilter",
    "langchain": "LangChain",
    "agent_framework": "Agent Framework",
    "semantic_kernel": "Semantic Kernel",
}
PEERS = FRAMEWORKS[1:]
SCRIPT_TIMEOUT = 900.0  # seconds; a full run of the slowest script takes about two minutes

# Targets of issue 7, for beamfilter in the same run.
TARGET_FASTER = 3.0  # at least this many times faster than the fastest peer, every row
TARGET_FLOOR = 2.5  # per added layer, at most this many times the pure-Python floor


class PeersError(RuntimeError):
    """The peers' environment could not be set up, or a scenario script failed."""


# -- the environment --------------------------------------------------------------------


def _python(env_dir: Path) -> Path:
    return env_dir / "bin" / "python"


def ensure_venv(env_dir: Path) -> Path:
    """Create or refresh the peers' venv; return its Python.

    A stamp (the hash of the pins and of beamfilter_core's pyproject) skips the install
    when nothing changed; beamfilter_core is installed editable, so its code is current.
    """
    pins = REQUIREMENTS.read_text(encoding="utf-8")
    core = (ROOT / "beamfilter_core" / "pyproject.toml").read_text(encoding="utf-8")
    want = hashlib.sha256((pins + core).encode()).hexdigest()
    stamp = env_dir / ".bench-peers-stamp"
    python = _python(env_dir)
    if python.exists() and stamp.exists() and stamp.read_text(encoding="utf-8") == want:
        return python
    if not python.exists():
        print(f"[bench_peers] creating {env_dir.relative_to(ROOT)}", file=sys.stderr, flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(env_dir)
    print(f"[bench_peers] installing the pinned peers of {REQUIREMENTS.relative_to(ROOT)}", file=sys.stderr, flush=True)
    command = [str(python), "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS), "-e", str(ROOT / "beamfilter_core")]
    done = subprocess.run(command, check=False, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    if done.returncode != 0:
        msg = (
            f"pip could not install the pins of {REQUIREMENTS} into {env_dir} (exit status {done.returncode}); "
            "check the network and the pinned versions, or delete the venv and retry."
        )
        raise PeersError(msg)
    stamp.write_text(want, encoding="utf-8")
    return python


# -- running the scripts ----------------------------------------------------------------


def run_script(python: Path, framework: str, args: Sequence[str]) -> dict[str, Any]:
    """Run ``bench/peers/bench_<framework>.py`` in its own process; return its JSON."""
    script = PEERS_DIR / f"bench_{framework}.py"
    print(f"[bench_peers] {TITLES[framework]} ...", file=sys.stderr, flush=True)
    started = time.perf_counter()
    try:
        done = subprocess.run(
            [str(python), str(script), *args],
            cwd=PEERS_DIR,
            capture_output=True,
            text=True,
            timeout=SCRIPT_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        msg = f"{script.name} did not finish within {SCRIPT_TIMEOUT:g} s"
        raise PeersError(msg) from exc
    if done.returncode != 0:
        msg = f"{script.name} failed (exit status {done.returncode}):\n{done.stderr[-4000:]}"
        raise PeersError(msg)
    lines = done.stdout.strip().splitlines()
    if not lines:
        msg = f"{script.name} printed no figures; stderr:\n{done.stderr[-4000:]}"
        raise PeersError(msg)
    result: dict[str, Any] = json.loads(lines[-1])
    print(f"[bench_peers] {TITLES[framework]} done in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return result


# -- the table --------------------------------------------------------------------------


def _num(value: float | None, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.{digits}f}"


def layer_keys(series: dict[str, Any]) -> list[str]:
    """The layer counts of a series, in increasing order."""
    return sorted(series["us"], key=int)


def resolved(series: dict[str, Any]) -> bool:
    """Whether a series' slope stands out of its noise: the rise it implies from the
    smallest to the largest N is larger than the round-to-round spread of those figures."""
    keys = layer_keys(series)
    lo, hi = keys[0], keys[-1]
    rise = float(series["slope_us"]) * (int(hi) - int(lo))
    noise = max(float(series["spread"][n]) * float(series["us"][n]) for n in (lo, hi))
    return rise > noise


def _ratio(peer: float | None, ours: float | None) -> str:
    if peer is None or ours is None or ours <= 0:
        return "n/a"
    return f"{peer / ours:.1f}x"


class Table:
    """Markdown tables: one row per figure, a column per framework, ratios, the verdict."""

    def __init__(self, results: dict[str, dict[str, Any]]) -> None:
        self.results = results
        self.present = [f for f in FRAMEWORKS if f in results]
        self.peers = [f for f in PEERS if f in results]
        self.misses: list[str] = []
        self.lines: list[str] = []
        self.section = ""

    def header(self, title: str, unit: str, extra: Sequence[str] = ()) -> None:
        names = [f"{TITLES[f]} ({unit})" if unit else TITLES[f] for f in self.present]
        ratios = [f"vs {TITLES[p]}" for p in self.peers]
        self.section = title.split(" ", 1)[0].rstrip(".")
        cols = ["row", *names, *extra, *ratios, f"target: >= {TARGET_FASTER:g}x the fastest peer"]
        self.lines += ["", f"### {title}", "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def row(
        self,
        name: str,
        values: dict[str, float | None],
        extra: Sequence[str] = (),
        digits: int = 1,
        unresolved: Sequence[str] = (),
    ) -> None:
        """One figure per framework; ``unresolved`` peers' figures are below their noise."""
        ours = values.get("beamfilter")
        cells = [name, *(_num(values.get(f), digits) for f in self.present), *extra]
        cells = [
            f"{cell} (noise)" if f in unresolved else cell
            for f, cell in zip(["", *self.present, *([""] * len(extra))], cells, strict=True)
        ]
        cells += [_ratio(values.get(p), ours) + (" ?" if p in unresolved else "") for p in self.peers]
        measured = [values[p] for p in self.peers if values.get(p) is not None]
        if ours is None or not measured:
            verdict = "n/a (no peer can)" if ours is not None else "n/a"
        elif unresolved:
            names = ", ".join(TITLES[p] for p in unresolved)
            verdict = f"undecided: {names} within noise"
            self.misses.append(f"{self.section}. {name}: undecided ({names} within noise)")
        else:
            fastest = min(measured)  # type: ignore[type-var]
            factor = fastest / ours if ours > 0 else float("inf")  # type: ignore[operator]
            ok = factor >= TARGET_FASTER
            verdict = f"{factor:.1f}x {'ok' if ok else 'MISS'}"
            if not ok:
                self.misses.append(f"{self.section}. {name}: {factor:.1f}x the fastest peer")
        self.lines.append("| " + " | ".join([*cells, verdict]) + " |")

    def series(self, key: str, title: str) -> None:
        floor = self.results.get("beamfilter", {}).get("floor")
        self.header(title, "us", ["floor (us)"] if floor else ())
        for n in layer_keys(self.results[self.present[0]][key]):
            values = {f: self.results[f][key]["us"][n] for f in self.present}
            extra = [_num(floor["us"][n], 2)] if floor else []
            self.row(f"N={n}", values, extra)
        slopes = {f: self.results[f][key]["slope_us"] for f in self.present}
        extra = [_num(floor["slope_us"], 3)] if floor else []
        unresolved = [f for f in self.present if not resolved(self.results[f][key])]
        self.row("per added layer (slope)", slopes, extra, digits=2, unresolved=unresolved)

    def build(self) -> list[str]:
        self.series("turn", "1. One-call turn, no tools: us per invoke, N pass-through layers")
        self.series("tool_round", "2. One tool round (tool call, tool result, answer): us per invoke")
        self.header("3. 10,000 streamed tokens, consumer included", "ms")
        stream = {f: self.results[f]["stream"] for f in self.present}
        self.row("bare stream", {f: s["bare_ms"] for f, s in stream.items()})
        self.row("one upper-casing layer", {f: s["transform_ms"] for f, s in stream.items()})
        self.header("4. Import and memory after building one agent (net of the harness)", "")
        prints = {f: self.results[f]["footprint"] for f in self.present}
        self.row("import time (ms)", {f: p["import_ms"] for f, p in prints.items()})
        self.row("resident memory (MB)", {f: p["rss_mb"] for f, p in prints.items()})
        self.floor_section()
        self.notes_section()
        return self.lines

    def floor_section(self) -> None:
        ours = self.results.get("beamfilter")
        if ours is None:
            return
        floor = ours["floor"]["slope_us"]
        turn = ours["turn"]["slope_us"]
        tool = ours["tool_round"]["slope_us"]
        self.lines += [
            "",
            f"### Per layer against the pure-Python floor (target: <= {TARGET_FLOOR:g}x)",
            "",
            "| beamfilter figure | per layer (us) | floor (us) | ratio | verdict |",
            "|---|---|---|---|---|",
        ]
        for name, value, passes in (
            ("turn: 1 chat pass per layer", turn, 1),
            ("tool round: 3 passes per layer", tool, 3),
        ):
            base = floor * passes
            ratio = value / base if base > 0 else float("inf")
            ok = ratio <= TARGET_FLOOR
            if not ok:
                self.misses.append(f"per layer ({name}): {ratio:.1f}x the floor")
            self.lines.append(f"| {name} | {value:.3f} | {base:.3f} | {ratio:.1f}x | {'ok' if ok else 'MISS'} |")

    def notes_section(self) -> None:
        self.lines += ["", "### How each framework was driven", ""]
        for f in self.present:
            r = self.results[f]
            self.lines.append(f"- **{TITLES[f]}** ({r['version']}): {r['mechanism']}; stream: {r['stream']['note']}.")
            self.lines += [f"  - {note}" for note in r["notes"]]
        self.lines += [
            "",
            "### Noise",
            "",
            "Figures are CPU time of each scenario process (other work on the machine does not count); "
            "the wall-clock medians, in the JSON, show how much the machine's load inflated them.",
            "",
        ]
        for f in self.present:
            r = self.results[f]
            spreads = [*r["turn"]["spread"].values(), *r["tool_round"]["spread"].values()]
            turn0 = r["turn"]
            inflation = turn0["wall_us"]["0"] / turn0["us"]["0"] if turn0["us"]["0"] else float("nan")
            self.lines.append(
                f"- {TITLES[f]}: largest round-to-round spread (max-min)/median {max(spreads):.0%} over the "
                f"turn and tool rows, {r['stream']['bare_spread']:.0%} on the bare stream; wall/CPU "
                f"{inflation:.1f}x on the N=0 turn; floor N=0 in this process {r['floor']['us']['0']:.3f} us; "
                f"script ran {r['seconds']:.0f} s"
            )


def machine() -> str:
    """A one-line description of this machine."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.system()} {platform.release()}, {cpu}, {os.cpu_count()} cores, load average {load:.1f} at start"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="short rounds, for a smoke check")
    parser.add_argument("--rounds", type=int, default=5, help="rounds per figure, median taken (at least 5)")
    parser.add_argument("--round-seconds", type=float, default=0.05, help="CPU seconds of one round")
    parser.add_argument("--only", nargs="+", choices=FRAMEWORKS, help="run only these frameworks")
    parser.add_argument("--layers", type=int, nargs="+", help="layer counts N (default 0 1 5 10 20)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV, help="the peers' virtual environment")
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    args = parser.parse_args(argv)
    if args.rounds < 5:
        parser.error(f"--rounds={args.rounds}: the medians need at least 5 rounds")
    started = time.perf_counter()
    where = machine()
    try:
        python = ensure_venv(args.venv.resolve())
        script_args = ["--rounds", str(args.rounds), "--round-seconds", str(args.round_seconds)]
        if args.quick:
            script_args.append("--quick")
        if args.layers:
            script_args += ["--layers", *(str(n) for n in args.layers)]
        results = {f: run_script(python, f, script_args) for f in (args.only or FRAMEWORKS)}
    except PeersError as exc:
        print(f"bench_peers: {exc}", file=sys.stderr)
        return 1
    table = Table(results)
    lines = table.build()
    any_result = next(iter(results.values()))
    layers = ", ".join(str(n) for n in sorted(set(args.layers or (0, 1, 5, 10, 20))))
    print(f"## Side-by-side: median of {args.rounds} rounds, N = {layers}{' (quick)' if args.quick else ''}")
    print()
    print(f"Machine: {where}; Python {any_result['python']}.")
    print("Versions: " + "; ".join(results[f]["version"] for f in table.present) + ".")
    print("\n".join(lines))
    print()
    if table.misses:
        print("beamfilter misses or undecided: " + "; ".join(table.misses) + ".")
    else:
        print("beamfilter meets every target of this run.")
    print(f"(whole run: {time.perf_counter() - started:.0f} s)")
    if args.json is not None:
        payload = {"machine": where, "rounds": args.rounds, "quick": args.quick, "results": results}
        args.json.write_text(json.dumps(payload, indent=1, sort_keys=True), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
