"""Harvest real tool definitions from MCP servers into bench/data/mcp_tools.json.

The tool-search evaluation (``bench/bench_tool_search_eval.py``) runs on the catalog this
script writes: the ``tools/list`` answers of real MCP servers published on npm and PyPI,
each tool named ``<server>__<tool>`` as an MCP toolset exposes it. The catalog is frozen
in the repository; rerun this script only to rebuild it (the servers' descriptions change
between releases, so a rebuilt catalog moves the figures).

Install the servers into a throwaway folder, never into the project::

    mkdir -p /tmp/mcp-harvest/npm && cd /tmp/mcp-harvest/npm && npm init -y
    PUPPETEER_SKIP_DOWNLOAD=1 npm install @modelcontextprotocol/server-everything \\
        @modelcontextprotocol/server-filesystem @modelcontextprotocol/server-memory \\
        @modelcontextprotocol/server-sequential-thinking @modelcontextprotocol/server-github \\
        @modelcontextprotocol/server-gitlab @modelcontextprotocol/server-slack \\
        @modelcontextprotocol/server-google-maps @modelcontextprotocol/server-brave-search \\
        @modelcontextprotocol/server-puppeteer @modelcontextprotocol/server-redis \\
        @modelcontextprotocol/server-postgres @modelcontextprotocol/server-everart \\
        @playwright/mcp @notionhq/notion-mcp-server mcp-server-kubernetes
    python3 -m venv /tmp/mcp-harvest/py
    /tmp/mcp-harvest/py/bin/pip install 'mcp>=2.3,<3' mcp-server-git mcp-server-fetch mcp-server-time
    python3 -m venv /tmp/mcp-harvest/py1
    /tmp/mcp-harvest/py1/bin/pip install 'mcp<2' mcp-server-sqlite mcp-server-calculator
    /tmp/mcp-harvest/py/bin/python bench/harvest_mcp_tools.py --root /tmp/mcp-harvest

The script uses the ``mcp`` SDK's (2.x) stdio client directly. Servers that want an API key
get a placeholder value: ``tools/list`` does not call the remote service, and no real
credential is ever needed or read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from mcp import ClientSession, StdioServerParameters, types  # type: ignore[import-not-found]
from mcp.client.stdio import stdio_client  # type: ignore[import-not-found]

HERE = Path(__file__).resolve().parent
OUTPUT = HERE / "data" / "mcp_tools.json"
PLACEHOLDER = "placeholder-not-a-real-key"
# The Redis server connects at start-up: the script runs a throwaway redis-server here.
REDIS_PORT = 16390

# (server prefix, package, command relative to --root, env): the npm servers run from
# <root>/npm/node_modules/.bin, the PyPI ones from <root>/py/bin (servers on mcp 2.x, the
# client's SDK) or <root>/py1/bin (servers that still import the mcp 1.x API).
SERVERS: list[tuple[str, str, list[str], dict[str, str]]] = [
    ("everything", "@modelcontextprotocol/server-everything", ["npm", "mcp-server-everything"], {}),
    ("filesystem", "@modelcontextprotocol/server-filesystem", ["npm", "mcp-server-filesystem", "/tmp"], {}),
    ("memory", "@modelcontextprotocol/server-memory", ["npm", "mcp-server-memory"], {}),
    ("thinking", "@modelcontextprotocol/server-sequential-thinking", ["npm", "mcp-server-sequential-thinking"], {}),
    ("github", "@modelcontextprotocol/server-github", ["npm", "mcp-server-github"], {}),
    (
        "gitlab",
        "@modelcontextprotocol/server-gitlab",
        ["npm", "mcp-server-gitlab"],
        {"GITLAB_PERSONAL_ACCESS_TOKEN": PLACEHOLDER},
    ),
    (
        "slack",
        "@modelcontextprotocol/server-slack",
        ["npm", "mcp-server-slack"],
        {"SLACK_BOT_TOKEN": PLACEHOLDER, "SLACK_TEAM_ID": "T0000000"},
    ),
    (
        "maps",
        "@modelcontextprotocol/server-google-maps",
        ["npm", "mcp-server-google-maps"],
        {"GOOGLE_MAPS_API_KEY": PLACEHOLDER},
    ),
    (
        "brave",
        "@modelcontextprotocol/server-brave-search",
        ["npm", "mcp-server-brave-search"],
        {"BRAVE_API_KEY": PLACEHOLDER},
    ),
    ("puppeteer", "@modelcontextprotocol/server-puppeteer", ["npm", "mcp-server-puppeteer"], {}),
    ("redis", "@modelcontextprotocol/server-redis", ["npm", "mcp-server-redis", f"redis://127.0.0.1:{REDIS_PORT}"], {}),
    (
        "postgres",
        "@modelcontextprotocol/server-postgres",
        ["npm", "mcp-server-postgres", "postgresql://127.0.0.1:1/x"],
        {},
    ),
    (
        "everart",
        "@modelcontextprotocol/server-everart",
        ["npm", "mcp-server-everart"],
        {"EVERART_API_KEY": PLACEHOLDER},
    ),
    ("playwright", "@playwright/mcp", ["npm", "playwright-mcp"], {}),
    ("notion", "@notionhq/notion-mcp-server", ["npm", "notion-mcp-server"], {"NOTION_TOKEN": PLACEHOLDER}),
    ("kubernetes", "mcp-server-kubernetes", ["npm", "mcp-server-kubernetes"], {}),
    ("git", "mcp-server-git", ["py", "mcp-server-git"], {}),
    ("fetch", "mcp-server-fetch", ["py", "mcp-server-fetch"], {}),
    ("time", "mcp-server-time", ["py", "mcp-server-time", "--local-timezone", "UTC"], {}),
    ("sqlite", "mcp-server-sqlite", ["py1", "mcp-server-sqlite", "--db-path", "/tmp/mcp-harvest.sqlite"], {}),
    ("calculator", "mcp-server-calculator", ["py1", "mcp-server-calculator"], {}),
]


def _command(root: Path, where: str, executable: str, args: list[str]) -> tuple[str, list[str]]:
    if where == "npm":
        return str(root / "npm" / "node_modules" / ".bin" / executable), args
    return str(root / where / "bin" / executable), args


async def _list_tools(root: Path, spec: tuple[str, str, list[str], dict[str, str]]) -> list[dict[str, Any]]:
    prefix, package, (where, executable, *args), env = spec
    command, arguments = _command(root, where, executable, args)
    base_env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp"}
    params = StdioServerParameters(command=command, args=arguments, env={**base_env, **env})
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await session.list_tools(params=params)
            for item in page.tools:
                tools.append(
                    {
                        "server": prefix,
                        "package": package,
                        "name": f"{prefix}__{item.name}",
                        "description": item.description or "",
                        "parameters": item.input_schema,
                    }
                )
            cursor = page.next_cursor
            if not cursor:
                return tools


def _describe(exc: BaseException) -> str:
    """The innermost error of an exception group (the SDK wraps transport errors in one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


async def _harvest(root: Path, only: set[str]) -> list[dict[str, Any]]:
    catalog: list[dict[str, Any]] = []
    for spec in SERVERS:
        if only and spec[0] not in only:
            continue
        try:
            tools = await asyncio.wait_for(_list_tools(root, spec), timeout=timedelta(seconds=60).total_seconds())
        except Exception as exc:  # noqa: BLE001  (a server that fails is reported, the others still run)
            print(f"{spec[0]:<12} FAILED: {_describe(exc)}", file=sys.stderr)
            continue
        print(f"{spec[0]:<12} {len(tools):>3} tools  ({spec[1]})")
        catalog.extend(tools)
    return catalog


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, required=True, help="the folder holding npm/ and py/")
    parser.add_argument("--out", type=Path, default=OUTPUT)
    parser.add_argument("--only", action="append", default=[], help="harvest only this server prefix")
    options = parser.parse_args()
    redis = subprocess.Popen(
        ["redis-server", "--port", str(REDIS_PORT), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
        stdout=subprocess.DEVNULL,
    )
    try:
        time.sleep(0.5)
        catalog = asyncio.run(_harvest(options.root, set(options.only)))
    finally:
        redis.terminate()
        redis.wait(timeout=10)
    options.out.parent.mkdir(parents=True, exist_ok=True)
    options.out.write_text(json.dumps(catalog, indent=1, ensure_ascii=False, sort_keys=True) + "\n", encoding="utf-8")
    print(f"{len(catalog)} tools from {len({t['server'] for t in catalog})} servers -> {options.out}")


if __name__ == "__main__":
    main()
