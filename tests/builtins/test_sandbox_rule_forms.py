"""What the shell rule cannot decide is harmless in the sandbox.

``SANDBOX`` (tests/_shell_attacks.py) lists commands no static reading can judge: a script
file, a build, a program's own behaviour, a repository's hooks. Here each runs in the
``shell`` toolset's sandbox with hostile files in its workdir (every script, Makefile,
hook and test tries to overwrite a sentinel outside, plant a file in /etc and delete the
outside folder); afterwards nothing outside the workdir changed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from _shell_attacks import SANDBOX
from _support import IN_CI

from beamfilter_builtins import run_sandboxed

BWRAP = shutil.which("bwrap")
if BWRAP is None and IN_CI:
    pytest.fail("required in CI: bubblewrap (apt-get install bubblewrap)", pytrace=False)
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")

SENTINEL = "sentinel: must never change\n"


def _hostile(work: Path, outside: Path, token: str) -> None:
    """Files that do harm outside the workdir when a build, a script or a hook runs them."""
    shell = f"echo pwned > {outside}/sentinel.txt; echo x > /etc/{token}; rm -rf {outside}; echo x > ../{token}\n"
    python = (
        f"import shutil\nopen({str(outside / 'sentinel.txt')!r}, 'w').write('pwned')\n"
        f"open('/etc/{token}', 'w')\nshutil.rmtree({str(outside)!r})\n"
    )
    (work / "build.py").write_text(python)
    (work / "conftest.py").write_text(python)
    (work / "Makefile").write_text(f"all:\n\t{shell}")
    for name in ("script.sh", "install.sh", "configure"):
        (work / name).write_text(f"#!/bin/sh\n{shell}")
        (work / name).chmod(0o755)
    (work / "script.pl").write_text(f"system(q{{{shell.strip()}}});\n")
    (work / "app.js").write_text(f"require('child_process').execSync({shell.strip()!r});\n")
    (work / "package.json").write_text('{"name": "x", "version": "1.0.0", "scripts": {"test": "sh script.sh"}}\n')
    (work / "Cargo.toml").write_text('[package]\nname = "x"\nversion = "0.1.0"\nbuild = "build.rs"\n')
    (work / ".gitconfig").write_text("[user]\n\tname = x\n\temail = x@example.com\n")
    subprocess.run(["git", "init", "-q", str(work)], check=True)
    hook = work / ".git" / "hooks" / "pre-commit"
    hook.write_text(f"#!/bin/sh\n{shell}")
    hook.chmod(0o755)


def _tree(root: Path, skip: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        out[str(path)] = path.read_bytes() if path.is_file() and not path.is_symlink() else "other"
    return out


@pytest.mark.parametrize("command", SANDBOX)
def test_what_only_the_sandbox_decides_is_harmless_in_it(command: str, tmp_path: Path) -> None:
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "sentinel.txt").write_text(SENTINEL)
    token = f"escape-{uuid.uuid4().hex}"
    _hostile(work, outside, token)
    before = _tree(tmp_path, work)
    result = asyncio.run(run_sandboxed(["bash", "-c", command], workdir=work, timeout=5))
    assert (outside / "sentinel.txt").read_text() == SENTINEL, result.render()
    assert _tree(tmp_path, work) == before
    assert [p for p in ("/etc", "/tmp", "/") if os.path.exists(os.path.join(p, token))] == []
    if command == "cat ~/.ssh/id_rsa":  # HOME is the workdir: the host's home folder is not there
        assert result.stderr == f"cat: {work}/.ssh/id_rsa: No such file or directory\n"


def test_the_table_is_the_rule_tables_own() -> None:
    assert len(SANDBOX) >= 10
    assert "kill -9 -1" in SANDBOX
