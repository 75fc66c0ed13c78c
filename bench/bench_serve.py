"""beamfilter serve under load, and against LiteLLM's proxy (issue 15).

One run, one llmock upstream (PyPI, the test peer), three ways to reach it, each a real
server process on 127.0.0.1:

- ``direct``: the client talks to llmock itself (the baseline);
- ``beamfilter``: ``beamfilter serve`` with ``redact`` and one keyword pattern;
- ``litellm``: LiteLLM's proxy (``litellm[proxy]`` from PyPI, in its own virtual
  environment ``bench/.venv-litellm``, created on first use) with a custom guardrail that
  redacts the same keyword in streamed and whole answers (``bench/serve/litellm_guardrail.py``).

Latency: streamed requests one at a time, the three targets interleaved round by round
(A/B/C), each request timed from send to ``[DONE]``; a gateway's *added latency* is its
p50 minus direct's p50 of the same run. Load: ``--clients`` concurrent streaming clients
for ``--seconds`` against each gateway: requests/s, errors, p50/p99, and for beamfilter
the process's RSS over time, its open sockets and asyncio tasks before and after.

    .venv/bin/python bench/bench_serve.py                       # full run (+ first LiteLLM install)
    .venv/bin/python bench/bench_serve.py --quick --no-litellm  # a smoke run
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import venv
from pathlib import Path
from typing import Any

import httpx

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
sys.path.insert(0, str(ROOT / "tools"))
import llmock_upstream  # noqa: E402  # after the path set-up

LITELLM_VENV = BENCH / ".venv-litellm"
KEY = "sk-bench-gateway-key-0123456789"
PROMPT = {"role": "user", "content": "Say something with forbidden-word in it."}


def wait_until_up(url: str, process: subprocess.Popen[bytes], what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            if httpx.get(url, timeout=2).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{what} did not start within {timeout} s")


def start_llmock(folder: Path) -> tuple[subprocess.Popen[str], str]:
    # static: every request gets the scenario's one answer, so each target streams the same text
    mock = llmock_upstream.start(folder / "llmock.log", env={"LLMOCK_RESPONSE_STYLE": "static"})
    return mock.process, mock.url


def start_beamfilter(folder: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    port = llmock_upstream.free_port()
    config = folder / "beamfilter.toml"
    config.write_text(
        llmock_upstream.model_table(upstream)
        + textwrap.dedent(
            """
            [server]
            api_keys = [{ "$env" = "BENCH_GATEWAY_KEY" }]
            model_name = "assistant"

            [[filters]]
            use = "redact"
            default_rules = false
            patterns = { keyword = "(?i)\\\\bforbidden-word\\\\b" }
            """
        )
    )
    argv = [
        sys.executable,
        "-m",
        "beamfilter_core",
        "serve",
        str(config),
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    env = {**os.environ, "BENCH_GATEWAY_KEY": KEY}
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=(folder / "beamfilter.log").open("wb"), env=env)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/healthz", process, "beamfilter serve")
    return process, url


def litellm_python() -> Path:
    python = LITELLM_VENV / "bin" / "python"
    if not python.exists():
        print(f"creating {LITELLM_VENV} and installing litellm[proxy] (once; a few minutes)", flush=True)
        venv.create(LITELLM_VENV, with_pip=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "litellm[proxy]"], check=True)
    return python


def start_litellm(folder: Path, upstream: str) -> tuple[subprocess.Popen[bytes], str]:
    python = litellm_python()
    port = llmock_upstream.free_port()
    (folder / "litellm_guardrail.py").write_text((BENCH / "serve" / "litellm_guardrail.py").read_text())
    config = folder / "litellm.yaml"
    config.write_text(
        textwrap.dedent(
            f"""
            model_list:
              - model_name: assistant
                litellm_params:
                  model: openai/gpt-4o-mini
                  api_base: {upstream}/v1
                  api_key: llmock-key
                  max_retries: 0
            guardrails:
              - guardrail_name: keyword-redact
                litellm_params:
                  guardrail: litellm_guardrail.KeywordRedact
                  mode: post_call
                  default_on: true
            general_settings:
              master_key: {KEY}
            litellm_settings:
              drop_params: true
              set_verbose: false
            """
        )
    )
    argv = [str(python), "-m", "litellm.proxy.proxy_cli", "--config", str(config), "--port", str(port)]
    argv += ["--host", "127.0.0.1", "--num_workers", "1"]
    env = {**os.environ, "LITELLM_LOG": "ERROR", "DISABLE_SCHEMA_UPDATE": "true", "LITELLM_TELEMETRY": "False"}
    log = (folder / "litellm.log").open("wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=folder)
    url = f"http://127.0.0.1:{port}"
    wait_until_up(url + "/health/liveliness", process, "litellm proxy")
    return process, url


async def one_stream(client: httpx.AsyncClient, url: str) -> tuple[float, str]:
    body = {"model": "assistant", "stream": True, "messages": [PROMPT]}
    started = time.perf_counter()
    text: list[str] = []
    async with client.stream("POST", url + "/v1/chat/completions", json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {response.status_code}: {(await response.aread())[:200]!r}")
        done = False
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                data = line[6:]
                if data == "[DONE]":
                    done = True
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    raise RuntimeError(f"{url}: stream error {chunk['error']}")
                for choice in chunk.get("choices") or []:
                    text.append((choice.get("delta") or {}).get("content") or "")
        if not done:
            raise RuntimeError(f"{url}: stream ended without [DONE]")
    return time.perf_counter() - started, "".join(text)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def latency(targets: dict[str, str], rounds: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in targets}
    headers = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(headers=headers, timeout=60) as client:
        for url in targets.values():  # warm-up: connections, imports, caches
            for _ in range(5):
                await one_stream(client, url)
        for _ in range(rounds):
            for name, url in targets.items():
                seconds, _ = await one_stream(client, url)
                times[name].append(seconds)
    return times


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sockets(pid: int) -> int:
    count = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            count += os.readlink(fd).startswith("socket:")
    return count


async def load(url: str, clients: int, seconds: float, pid: int | None) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {KEY}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    errors: list[str] = []
    times: list[float] = []
    rss: list[int] = []
    stop = time.monotonic() + seconds

    async def client_loop(client: httpx.AsyncClient) -> None:
        while time.monotonic() < stop:
            try:
                took, _ = await one_stream(client, url)
                times.append(took)
            except Exception as exc:  # noqa: BLE001  # every failure is counted and shown
                errors.append(f"{type(exc).__name__}: {exc}"[:200])

    async def sample() -> None:
        while time.monotonic() < stop and pid is not None:
            rss.append(rss_kib(pid))
            await asyncio.sleep(1)

    async with httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as client:
        started = time.monotonic()
        await asyncio.gather(sample(), *(client_loop(client) for _ in range(clients)))
        elapsed = time.monotonic() - started
    return {"requests": len(times), "errors": errors, "elapsed": elapsed, "times": times, "rss": rss}


def report_load(name: str, result: dict[str, Any]) -> None:
    times = result["times"]
    rate = len(times) / result["elapsed"]
    p50 = percentile(times, 0.5) * 1000 if times else float("nan")
    p99 = percentile(times, 0.99) * 1000 if times else float("nan")
    print(
        f"  {name:<17} {len(times):>7} requests  {rate:>7.1f} req/s  p50 {p50:>7.1f} ms  p99 {p99:>7.1f} ms  "
        f"errors {len(result['errors'])}"
    )
    for error in sorted(set(result["errors"]))[:5]:
        print(f"      {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--rounds", type=int, default=200, help="latency rounds (each target once a round)")
    parser.add_argument("--no-litellm", action="store_true", help="skip LiteLLM's proxy")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 20 clients, 5 s, 20 rounds, no LiteLLM")
    args = parser.parse_args()
    if args.quick:
        args.clients, args.seconds, args.rounds, args.no_litellm = 20, 5.0, 20, True
    processes: list[subprocess.Popen[Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        try:
            llmock, upstream = start_llmock(folder)
            processes.append(llmock)
            gateway, gateway_url = start_beamfilter(folder, upstream)
            processes.append(gateway)
            targets = {"direct": upstream, "beamfilter": gateway_url}
            if not args.no_litellm:
                proxy, proxy_url = start_litellm(folder, upstream)
                processes.append(proxy)
                targets["litellm"] = proxy_url
            # every answer of the run carries the keyword the guardrails redact
            answer = "Here is the forbidden-word you asked for, and some more words to stream."
            behavior = {"type": "reply", "text": answer, "times": None}
            httpx.post(upstream + "/_llmock/scenario", json={"behaviors": [behavior]}, timeout=10).raise_for_status()
            text = asyncio.run(_texts(targets))
            print("answers (the keyword redacted by both gateways):")
            for name, answer in text.items():
                print(f"  {name:<11} {answer!r}")
            print(f"\nlatency: streamed requests one at a time, {args.rounds} rounds interleaved")
            times = asyncio.run(latency(targets, args.rounds))
            direct = statistics.median(times["direct"])
            added: dict[str, float] = {}
            for name, values in times.items():
                p50, p99 = statistics.median(values), percentile(values, 0.99)
                extra = "" if name == "direct" else f"  added p50 {1000 * (p50 - direct):6.2f} ms"
                if name != "direct":
                    added[name] = p50 - direct
                print(f"  {name:<11} p50 {1000 * p50:7.2f} ms  p99 {1000 * p99:7.2f} ms{extra}")
            if "litellm" in added and added["litellm"] > 0:
                ratio = added["beamfilter"] / added["litellm"]
                verdict = "meets" if ratio <= 1 / 3 else "misses"
                print(f"  beamfilter's added latency / LiteLLM's: {ratio:.3f} ({verdict} the target <= 0.333)")
            print(f"\nload: {args.clients} concurrent streaming clients for {args.seconds:g} s each")
            before = (sockets(gateway.pid), _tasks(gateway_url))
            results = {"direct": asyncio.run(load(upstream, args.clients, args.seconds, None))}
            results["beamfilter"] = asyncio.run(load(gateway_url, args.clients, args.seconds, gateway.pid))
            time.sleep(2)
            middle = (sockets(gateway.pid), _tasks(gateway_url))
            # a second round: what a leak would add, it adds again
            results["beamfilter, again"] = asyncio.run(load(gateway_url, args.clients, args.seconds, gateway.pid))
            time.sleep(2)
            after = (sockets(gateway.pid), _tasks(gateway_url))
            # the upstream again: whether a slower second round is the gateway's or llmock's
            results["direct, again"] = asyncio.run(load(upstream, args.clients, args.seconds, None))
            if "litellm" in targets:
                results["litellm"] = asyncio.run(load(targets["litellm"], args.clients, args.seconds, None))
            for name, result in results.items():
                report_load(name, result)
            rss = results["beamfilter"]["rss"] + results["beamfilter, again"]["rss"]
            if rss:
                third = max(1, len(rss) // 3)
                print(
                    f"  beamfilter RSS: {rss[0] / 1024:.1f} MiB at start, {max(rss[:third]) / 1024:.1f} MiB max in "
                    f"the first third, {max(rss[-third:]) / 1024:.1f} MiB max in the last third"
                )
            print(f"  beamfilter sockets: {before[0]} before, {middle[0]} after round 1, {after[0]} after round 2")
            print(
                f"  beamfilter asyncio tasks: {before[1]} before, {middle[1]} after round 1, {after[1]} after round 2"
            )
        finally:
            for process in reversed(processes):
                process.terminate()
                try:
                    process.wait(30)
                except subprocess.TimeoutExpired:
                    process.kill()


async def _texts(targets: dict[str, str]) -> dict[str, str]:
    async with httpx.AsyncClient(headers={"Authorization": f"Bearer {KEY}"}, timeout=60) as client:
        return {name: (await one_stream(client, url))[1] for name, url in targets.items()}


def _tasks(url: str) -> int:
    return int(httpx.get(url + "/healthz", timeout=10).json().get("tasks", -1))


if __name__ == "__main__":
    main()
