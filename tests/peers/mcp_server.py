"""An MCP server built with the official Python SDK, started by the MCP peer tests.

    python mcp_server.py http PORT TOKEN   streamable HTTP on 127.0.0.1:PORT/mcp; requests
                                           without "Authorization: Bearer TOKEN" get 401
    python mcp_server.py stdio             the same tools over stdio

Tools: ``add``, ``read_note``, ``write_note`` (the notes live in this process), and three
that misbehave on purpose: ``hang`` never answers, ``die`` kills the process mid-call,
``garble`` writes bytes that are not JSON-RPC to stdout and then never answers.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

from mcp.server.mcpserver import MCPServer

server: MCPServer[Any] = MCPServer("beamfilter-test-notes")
NOTES: dict[str, str] = {"hello": "Hello from the notes server."}


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def read_note(name: str) -> str:
    """Read a note by name."""
    if name not in NOTES:
        raise ValueError(f"no note named {name!r}; notes: {', '.join(sorted(NOTES))}")
    return NOTES[name]


@server.tool()
def write_note(name: str, text: str) -> str:
    """Write a note."""
    NOTES[name] = text
    return f"saved {name!r} ({len(text)} characters)"


@server.tool()
def hang() -> str:
    """Never answers."""
    time.sleep(3600)
    return "unreachable"


@server.tool()
def die() -> str:
    """Kills the server process mid-call."""
    os._exit(3)


@server.tool()
def garble() -> str:
    """Writes garbage where JSON-RPC belongs, then never answers."""
    os.write(1, b"\x00\xff this is {{ not json-rpc\n")
    time.sleep(3600)
    return "unreachable"


def _http(port: int, token: str) -> None:
    import uvicorn
    from starlette.types import ASGIApp, Receive, Scope, Send

    app = server.streamable_http_app()

    def guarded(inner: ASGIApp) -> ASGIApp:
        async def guard(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                headers = dict(scope["headers"])
                if headers.get(b"authorization") != f"Bearer {token}".encode():
                    await send({"type": "http.response.start", "status": 401, "headers": []})
                    await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
                    return
            await inner(scope, receive, send)

        return guard

    # the Starlette app's lifespan runs the SDK's session manager: keep it
    uvicorn.run(guarded(app), host="127.0.0.1", port=port, log_level="warning", lifespan="on")


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "http":
        _http(int(sys.argv[2]), sys.argv[3])
    else:
        server.run("stdio")
