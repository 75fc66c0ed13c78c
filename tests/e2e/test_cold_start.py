"""The command line lists its commands and plugins without importing what only a command,
a filter or a config section needs (bench/bench_cold_start.py measures the time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.packages

HEAVY = (
    "dbos",
    "sqlalchemy",
    "starlette",
    "uvicorn",
    "mcp",
    "beamfilter_durable._runner",
    "beamfilter_server._app",
    "beamfilter_builtins._tool_policy",
    "beamfilter_builtins._tool_embedding",
    "beamfilter_builtins._redact",
)


def loaded_after(*argv: str) -> list[str]:
    """The modules of HEAVY imported once ``beamfilter ARGV`` has run, in a fresh interpreter."""
    code = (
        "import contextlib, io, json, sys\n"
        "from beamfilter_core._cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        f"        main({list(argv)!r})\n"
        "    except SystemExit:\n"
        "        pass\n"
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return list(json.loads(out.stdout))


def test_help_imports_no_plugin_engine_nor_filter() -> None:
    assert loaded_after("--help") == []


def test_plugins_imports_the_filters_but_no_engine() -> None:
    assert loaded_after("plugins") == ["beamfilter_builtins._redact", "beamfilter_builtins._tool_policy"]


def test_the_durable_command_loads_dbos_only_when_it_runs() -> None:
    assert loaded_after("durable", "--help") == []


MCP_CONFIG = """\
[model]
use = "scripted"
script = ["hello"]

[[tools]]
use = "mcp"
command = ["npx", "-y", "@modelcontextprotocol/server-filesystem", "."]
"""


def test_chain_checks_an_mcp_toolset_without_the_sdk(tmp_path: Path) -> None:
    (tmp_path / "beamfilter.toml").write_text(MCP_CONFIG, encoding="utf-8")
    code = (
        "import contextlib, io, sys\n"
        "from beamfilter_core._cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['chain', 'beamfilter.toml'])\n"
        "print(code, sorted(m for m in ('mcp', 'anyio', 'pydantic') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert out.stdout.strip() == "0 []"


def test_an_mcp_toolset_without_the_sdk_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from beamfilter_builtins._mcp import mcp_toolset
    from beamfilter_core.errors import ConfigError

    monkeypatch.setitem(sys.modules, "mcp", None)  # find_spec: not installed
    with pytest.raises(ConfigError) as caught:
        mcp_toolset(command=["npx", "server"])
    assert str(caught.value) == "the mcp toolset needs the MCP SDK: pip install 'beamfilter-builtins[mcp]'"
