"""Helpers of the gateway tests: llmock as the upstream model, and ``beamfilter serve``
started as a real process on 127.0.0.1."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx
from _support import free_port, require
from llmock_upstream import model_table
from peers._peer import FILESYSTEM, Peer

#: The API key of the test gateways (given through $env, as a deployment would).
API_KEY = "sk-test-gateway-key-0123456789"
REVIEWER_KEY = "reviewer-key-abcdefghijklmnop"
#: A key some tests send: it must never reach the log either.
WRONG_KEY = "sk-wrong-key-that-must-never-be-logged"
#: A second client's key: its conversations and pauses are apart from the first one's.
OTHER_KEY = "sk-other-client-key-9876543210"
PAUSE_KEY = "pause-key-for-the-gateway-tests-0123456789"
#: The server tools of the test gateways; ``refund`` writes what it did to refunds.jsonl.
SHOP = '''
import json, pathlib

LEDGER = pathlib.Path(__file__).with_name("refunds.jsonl")


def lookup_order(order: int) -> str:
    """The status of an order."""
    return f"order {order}: shipped"


def refund(order: int, amount: int) -> str:
    """Refund an amount on an order."""
    with LEDGER.open("a") as f:
        f.write(json.dumps({"order": order, "amount": amount}) + "\\n")
    return f"refunded {amount} on order {order}"
'''

#: A client tool of the tests: the gateway hands its calls back to the client.
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
            "required": ["city"],
        },
    },
}

KEY_ENV = {"BF_TEST_API_KEY": API_KEY, "BF_TEST_OTHER_KEY": OTHER_KEY, "BF_TEST_REVIEWER_KEY": REVIEWER_KEY}


#: The [kernel] and [server] tables of the keyed test gateways: every key from $env.
KEYED = """
[kernel]
pause_key = { "$env" = "BF_TEST_PAUSE_KEY" }

[server]
api_keys = [{ "$env" = "BF_TEST_API_KEY" }, { "$env" = "BF_TEST_OTHER_KEY" }]
inbox_keys = [{ "$env" = "BF_TEST_REVIEWER_KEY" }]
model_name = "assistant"
"""


#: The [server] table of the open test gateways (no keys): the model name clients ask for.
OPEN = """
[server]
model_name = "assistant"
"""


def open_config(folder: Path, model: str, rest: str = "") -> Path:
    """``folder/beamfilter.toml`` of a gateway without keys: the ``[model]`` table ``model``
    (``llmock_upstream.model_table(url)`` for llmock), :data:`OPEN`, then ``rest`` (more
    [server] options, then tools and filters)."""
    config = folder / "beamfilter.toml"
    config.write_text(textwrap.dedent(model) + OPEN + textwrap.dedent(rest))
    return config


def shop_config(
    folder: Path, llmock_url: str, filters: str, *, server: str = "", tools: tuple[str, ...] = ("refund",)
) -> Path:
    """``folder/beamfilter.toml`` next to ``shop.py``: llmock as the model, :data:`KEYED` and
    ``server`` (more [server] options), the shop's ``tools`` (``refund`` sensitive), then
    ``filters`` (the [[filters]] tables)."""
    (folder / "shop.py").write_text(SHOP)
    shop = "".join(
        f'\n[[tools]]\nuse = "shop:{name}"\n' + ('sensitive = ["refund"]\n' if name == "refund" else "")
        for name in tools
    )
    config = folder / "beamfilter.toml"
    config.write_text(model_table(llmock_url) + KEYED + textwrap.dedent(server) + shop + textwrap.dedent(filters))
    return config


class Gateway:
    """A running ``beamfilter serve``: its process, URL and captured log."""

    def __init__(self, process: subprocess.Popen[str], url: str, log: Path) -> None:
        self.process = process
        self.url = url
        self.log = log
        self.folder = log.parent

    @property
    def output(self) -> str:
        return self.log.read_text()

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {API_KEY}", **extra}

    def post(self, path: str, body: Any, **headers: str) -> httpx.Response:
        return httpx.post(self.url + path, json=body, headers=self.headers(**headers), timeout=30)

    def get(self, path: str, **headers: str) -> httpx.Response:
        return httpx.get(self.url + path, headers=self.headers(**headers), timeout=30)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 30) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode


def start(config: Path, *, env: dict[str, str] | None = None, cwd: Path | None = None) -> Gateway:
    """``beamfilter serve CONFIG`` on a free port; returns once /healthz answers."""
    port = free_port()
    log = config.with_suffix(".log")
    handle = log.open("w")
    argv = [sys.executable, "-m", "beamfilter_core", "serve", str(config), "--port", str(port), "--log-level", "info"]
    process = subprocess.Popen(
        argv,
        stdout=handle,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, **KEY_ENV, **(env or {})},
        cwd=cwd or config.parent,
    )
    handle.close()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(url + "/healthz", timeout=1).status_code == 200:
                return Gateway(process, url, log)
        except httpx.HTTPError:
            pass
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise AssertionError("beamfilter serve did not start:\n" + log.read_text())
        time.sleep(0.1)


def scenario(peer: Peer, *behaviors: dict[str, Any]) -> None:
    """Queue llmock's next answers (the queue is cleared first)."""
    peer.delete("/_llmock/scenario")
    peer.post("/_llmock/scenario", {"behaviors": list(behaviors)})


def refunds(folder: Path) -> list[dict[str, Any]]:
    """What the ``refund`` tool of the tools gateway did, one entry per run."""
    ledger = folder / "refunds.jsonl"
    return [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []


def reviewer(**extra: str) -> dict[str, str]:
    """Headers of a reviewer calling the JSON decision API."""
    return {"Authorization": f"Bearer {REVIEWER_KEY}", **extra}


def listed_pauses(gateway: Gateway, waiting: threading.Thread, seconds: float = 30) -> list[dict[str, Any]]:
    """The pauses the gateway's JSON listing shows once it shows any, asked every 0.1 s while
    the client thread ``waiting`` waits for its answer (``[]`` after ``seconds``)."""
    listed: list[dict[str, Any]] = []
    for _ in range(int(seconds * 10)):
        listed = httpx.get(gateway.url + "/v1/pauses", headers=reviewer(), timeout=10).json()["data"]
        if listed:
            break
        waiting.join(0.1)
    return listed


def mcp_root(folder: Path, files: Mapping[str, str]) -> Path:
    """A folder holding ``files`` for one test's npm filesystem MCP server; its unique name
    finds that server among the machine's processes."""
    require(FILESYSTEM.exists(), "mcp-server-filesystem is not installed; run ./run setup (npm ci in tests/peers)")
    root = folder / f"mcp-root-{uuid.uuid4().hex}"
    root.mkdir()
    for name, text in files.items():
        (root / name).write_text(text)
    return root
