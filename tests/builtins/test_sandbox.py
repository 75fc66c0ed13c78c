"""The shell toolset and run_sandboxed: results, caps, errors, config, chain, an ordinary user.

Everything runs the real bubblewrap; a missing one is simulated by pointing the lookup
(``bwrap=`` or PATH) at a place without it, and a broken one by a program that fails as
bwrap does when it cannot create namespaces.
"""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import shutil
import tempfile
import textwrap
import warnings
from pathlib import Path

import attrs
import pytest
from _support import IN_CI

from beamfilter_builtins import SandboxResult, run_sandboxed
from beamfilter_builtins._sandbox import Sandbox, find_bwrap
from beamfilter_builtins._sandboxed_shell import SHELL, ShellToolset, shell_toolset
from beamfilter_core import ChatResponse, Kernel, ScriptedModel, ToolCall
from beamfilter_core._cli import main
from beamfilter_core.errors import ConfigError, SandboxError, ToolsetError

BWRAP = shutil.which("bwrap")
if BWRAP is None and IN_CI:
    pytest.fail("required in CI: bubblewrap (apt-get install bubblewrap)", pytrace=False)
needs_bwrap = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")

INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"


def run(argv: list[str], workdir: Path, **options: object) -> SandboxResult:
    return asyncio.run(run_sandboxed(argv, workdir=workdir, **options))  # type: ignore[arg-type]


@pytest.fixture
def broken_bwrap(tmp_path: Path) -> str:
    """A bwrap that fails the way it does where user namespaces are not allowed."""
    path = tmp_path / "bin" / "bwrap"
    path.parent.mkdir()
    path.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n")
    path.chmod(0o755)
    return str(path)


# -- results -------------------------------------------------------------------------


@needs_bwrap
def test_the_result_carries_exit_status_stdout_and_stderr(tmp_path: Path) -> None:
    result = run(["bash", "-c", "echo out; echo err >&2; pwd; exit 3"], tmp_path)
    assert result == SandboxResult(3, f"out\n{tmp_path}\n", "err\n", timeout=60.0)
    assert result.ok is False
    assert result.render() == f"exit status 3\nstdout:\nout\n{tmp_path}\nstderr:\nerr"
    assert run(["true"], tmp_path).render() == "exit status 0"


@needs_bwrap
def test_a_signal_is_reported_as_a_shell_does(tmp_path: Path) -> None:
    assert run(["bash", "-c", "kill -9 $$"], tmp_path).exit_code == 137


@needs_bwrap
def test_output_is_capped_per_stream_with_a_marker(tmp_path: Path) -> None:
    result = run(["bash", "-c", "head -c 100000 /dev/zero | tr '\\0' a; printf 'bcd' >&2"], tmp_path, max_output=10)
    assert result.stdout == "aaaaaaaaaa\n[output cut: 99990 more bytes]"
    assert (result.stdout_cut, result.stderr, result.stderr_cut) == (99990, "bcd", 0)


@needs_bwrap
def test_an_unknown_program_is_its_exit_status_not_an_error(tmp_path: Path) -> None:
    result = run(["no-such-program"], tmp_path)
    assert (result.exit_code, result.stderr) == (1, "bwrap: execvp no-such-program: No such file or directory\n")


@needs_bwrap
def test_env_adds_to_a_cleared_environment_and_readable_folders_are_read_only(tmp_path: Path) -> None:
    work, data, out = tmp_path / "work", tmp_path / "data", tmp_path / "out"
    for folder in (work, data, out):
        folder.mkdir()
    (data / "in.txt").write_text("input")
    command = f"env | sort; cat {data}/in.txt; echo x > {data}/new; echo y > {out}/made"
    result = run(["bash", "-c", command], work, env={"MODE": "test"}, readable=[data], writable=[out])
    names = [line.split("=", 1)[0] for line in result.stdout.splitlines() if "=" in line]
    assert names == ["HOME", "LANG", "MODE", "PATH", "PWD", "SHLVL", "TERM", "TMPDIR", "_"]
    assert "MODE=test\n" in result.stdout
    assert result.stdout.endswith("\ninput")
    assert f"{data}/new: Read-only file system" in result.stderr
    assert not (data / "new").exists()
    assert (out / "made").read_text() == "y\n"


# -- sandbox = "none" ----------------------------------------------------------------


def test_sandbox_none_runs_unconfined_only_when_asked(tmp_path: Path) -> None:
    marker = tmp_path / "outside.txt"
    work = tmp_path / "work"
    work.mkdir()
    result = run(["sh", "-c", f"echo x > {marker}; echo $HOME; exit 4"], work, sandbox="none", bwrap="/nowhere/bwrap")
    assert (result.exit_code, result.stdout, result.sandboxed) == (4, f"{work}\n", False)
    assert marker.read_text() == "x\n"
    assert run(["sh", "-c", "kill -9 $$"], work, sandbox="none").exit_code == 137
    missing = run(["no-such-program"], work, sandbox="none")
    assert (missing.exit_code, missing.stderr) == (127, "no-such-program: No such file or directory")


def test_sandbox_none_times_out_and_kills_its_process_group(tmp_path: Path) -> None:
    result = run(["sh", "-c", "echo up; sleep 30"], tmp_path, sandbox="none", timeout=0.5)
    assert (result.timed_out, result.exit_code, result.stdout) == (True, None, "up\n")


def test_sandbox_none_gives_up_on_a_pipe_held_by_an_escaped_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from beamfilter_builtins import _sandbox

    monkeypatch.setattr(_sandbox, "_DRAIN", 0.3)  # a process outside the group keeps stdout open
    command = "setsid sh -c 'echo > ready; exec sleep 3' & while [ ! -e ready ]; do sleep 0.01; done; echo up"
    result = run(["sh", "-c", command], tmp_path, sandbox="none", timeout=5)
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


# -- errors --------------------------------------------------------------------------


def test_a_missing_bwrap_is_a_sandbox_error_never_a_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SandboxError) as given:
        run(["true"], tmp_path, bwrap="/nowhere/bwrap")
    assert str(given.value) == (
        f"the OS sandbox needs bubblewrap and '/nowhere/bwrap' is not an executable file; {INSTALL}. "
        '(sandbox = "none" runs commands unconfined.)'
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(SandboxError) as on_path:
        find_bwrap()
    assert str(on_path.value) == (
        f"the OS sandbox needs bubblewrap and no 'bwrap' program on PATH; {INSTALL}. "
        '(sandbox = "none" runs commands unconfined.)'
    )
    assert isinstance(on_path.value, ConfigError)
    with pytest.raises(SandboxError):
        ShellToolset(workdir=tmp_path)


@needs_bwrap
def test_bwrap_gone_after_start_fails_the_call(tmp_path: Path) -> None:
    copy = tmp_path / "bwrap"
    shutil.copy(str(BWRAP), copy)
    box = Sandbox.create(workdir=tmp_path, bwrap=str(copy))
    copy.unlink()
    with pytest.raises(SandboxError, match=r"'.*/bwrap' is not an executable file"):
        asyncio.run(box.run(["true"]))


def test_a_bwrap_that_cannot_start_is_a_sandbox_error(tmp_path: Path) -> None:
    garbage = tmp_path / "bwrap"
    garbage.write_bytes(b"\0\1\2 not a program")
    garbage.chmod(0o755)
    with pytest.raises(SandboxError) as given:
        run(["true"], tmp_path, bwrap=str(garbage))
    assert str(given.value) == (
        f"bubblewrap ({garbage}) could not be started: [Errno 8] Exec format error: '{garbage}'; {INSTALL}."
    )


def test_a_bwrap_that_cannot_set_up_is_a_sandbox_error(tmp_path: Path, broken_bwrap: str) -> None:
    with pytest.raises(SandboxError) as given:
        run(["true"], tmp_path, bwrap=broken_bwrap)
    assert str(given.value) == (
        f"bubblewrap ({broken_bwrap}) could not set the sandbox up: bwrap: No permissions to create new namespace"
    )


def test_the_toolset_checks_bwrap_at_open(tmp_path: Path, broken_bwrap: str) -> None:
    toolset = ShellToolset(workdir=tmp_path, bwrap=broken_bwrap)
    kernel = Kernel(ScriptedModel(["never"]), tools=[toolset])
    with pytest.raises(ToolsetError) as given:
        kernel.run_sync("hi")
    assert str(given.value) == (
        f"the shell toolset cannot start: bubblewrap ({broken_bwrap}) could not set the sandbox up: "
        "bwrap: No permissions to create new namespace"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"workdir": "/nope/x"}, "workdir is '/nope/x', which is not an existing folder; create it or give another."),
        ({"workdir": "/"}, "workdir is '/', a system folder as a whole; give a project folder inside it instead."),
        ({"writable": ["/etc"]}, "writable[0] is '/etc', a system folder as a whole; give a project folder inside it"),
        ({"readable": ["/usr/../usr"]}, "readable[0] is '/usr/../usr', a system folder as a whole;"),
        ({"writable": "/srv"}, 'writable and readable are lists of folders, e.g. ["build", "/srv/cache"]'),
        ({"timeout": 0}, "timeout is 0; give a positive number of seconds."),
        ({"timeout": float("nan")}, "timeout is nan; give a positive number of seconds."),
        ({"timeout": True}, "timeout is True; give a positive number of seconds."),
        ({"max_output": 0}, "max_output is 0; give a positive number of bytes per stream."),
        ({"sandbox": "off"}, 'sandbox is \'off\'; give "auto" (bubblewrap) or "none" (no isolation).'),
        ({"env": {"A=B": "x"}}, "env has the name 'A=B'; give names of letters, digits and '_'"),
        ({"env": {"1A": "x"}}, "env has the name '1A'; give names of letters"),
        ({"env": {"A": "x\0y"}}, "env['A'] is 'x\\x00y'; give a text without NUL characters."),
    ],
)
def test_bad_values_are_config_errors_naming_the_value(
    options: dict[str, object], message: str, tmp_path: Path
) -> None:
    given = {"workdir": tmp_path, "sandbox": "none", **options}
    with pytest.raises(ConfigError) as error:
        Sandbox.create(**given)  # type: ignore[arg-type]
    assert str(error.value).startswith(message)


@pytest.mark.parametrize("command", ["ls", [], ["ls", 3], ["a\0b"]])
def test_a_command_must_be_a_list_of_texts(command: object, tmp_path: Path) -> None:
    box = Sandbox.create(workdir=tmp_path, sandbox="none")
    with pytest.raises(ConfigError, match=r"give the program and its arguments as a list"):
        asyncio.run(box.run(command))  # type: ignore[arg-type]


# -- the toolset through a kernel ---------------------------------------------------


def _script(*commands: str) -> ScriptedModel:
    calls = [ChatResponse.tool_calls(ToolCall("shell", {"command": c}, f"c{i}")) for i, c in enumerate(commands)]
    return ScriptedModel([*calls, "done"])


@needs_bwrap
def test_the_shell_tool_runs_in_the_sandbox_through_a_kernel(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    work = tmp_path / "work"
    work.mkdir()
    model = _script("echo hi > f.txt && cat f.txt", f"echo pwned > {outside}; exit 2", "sleep 30")
    kernel = Kernel(model, tools=[ShellToolset(workdir=work, timeout=2)])
    result = kernel.run_sync("make a file")
    assert result.text == "done"
    tool_texts = [m.text for m in result.messages if m.role == "tool"]
    assert tool_texts == [
        "exit status 0\nstdout:\nhi",
        "exit status 2",  # written to the sandbox's private /tmp, which holds the workdir's parents
        "timed out after 2 s; the command and every process it started were stopped",
    ]
    assert (work / "f.txt").read_text() == "hi\n"
    assert not outside.exists()
    [tool] = kernel.tools
    assert (tool.name, tool.workdir) == ("shell", str(work))
    assert tool.description == (
        f"Run a shell command in a sandbox and return its exit status, stdout and stderr. "
        f"The current folder is {work} (writable); the network is off; a command is stopped after 2 s."
    )
    assert repr(ShellToolset(workdir=work)) == f"ShellToolset(workdir={str(work)!r}, sandbox='auto')"
    assert SHELL.endswith("bash")


@needs_bwrap
def test_a_call_fails_when_bwrap_is_gone(tmp_path: Path) -> None:
    copy = tmp_path / "bwrap"
    shutil.copy(str(BWRAP), copy)
    toolset = ShellToolset(workdir=tmp_path, bwrap=str(copy))

    async def go() -> list[str]:
        kernel = Kernel(_script("true"), tools=[toolset])
        await kernel.start()
        copy.unlink()
        result = await kernel.run("go")
        return [m.text for m in result.messages if m.role == "tool"]

    [text] = asyncio.run(go())
    assert text.startswith("The command did not run: the OS sandbox needs bubblewrap and '")


def _config(folder: Path, options: str) -> Path:
    (folder / "work").mkdir(exist_ok=True)
    path = folder / "beamfilter.toml"
    path.write_text(
        textwrap.dedent(
            """\
            [model]
            use = "scripted"
            script = [
              { tool_calls = [{ name = "shell", arguments = { command = "pwd; echo saved > out.txt" } }] },
              "ok",
            ]

            [[tools]]
            use = "shell"
            """
        )
        + options
    )
    return path


@needs_bwrap
def test_workdir_is_relative_to_the_config_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir("/")
    kernel = Kernel.from_config(_config(tmp_path, 'workdir = "work"\ntimeout = 5\n'))
    result = kernel.run_sync("save")
    assert result.messages[2].text == f"exit status 0\nstdout:\n{tmp_path / 'work'}"
    assert (tmp_path / "work" / "out.txt").read_text() == "saved\n"


def test_a_config_without_bwrap_lists_the_problem(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as given:
        Kernel.from_config(_config(tmp_path, 'workdir = "work"\nbwrap = "/nowhere/bwrap"\n'))
    assert given.value.problems == (
        f"tools[0]: the OS sandbox needs bubblewrap and '/nowhere/bwrap' is not an executable file; {INSTALL}. "
        '(sandbox = "none" runs commands unconfined.)',
    )


def test_a_config_needs_a_workdir(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as given:
        Kernel.from_config(_config(tmp_path, 'sandbox = "none"\n'))
    assert len(given.value.problems) == 1
    assert "workdir" in given.value.problems[0]


def test_the_factory_resolves_folders_against_the_working_folder_without_a_config(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "w").mkdir()
    (tmp_path / "x").mkdir()
    monkeypatch.chdir(tmp_path)
    toolset = shell_toolset(workdir="w", writable=["x"], readable=["x"], sandbox="none")
    assert (toolset.sandbox.workdir, toolset.sandbox.writable) == (str(tmp_path / "w"), (str(tmp_path / "x"),))
    assert toolset.name == f'shell (UNSANDBOXED: sandbox = "none", workdir {tmp_path / "w"}, network off)'


@needs_bwrap
@pytest.mark.parametrize(
    ("options", "shown"),
    [
        ('workdir = "work"\n', "shell (bubblewrap sandbox, workdir {work}, network off)"),
        ('workdir = "work"\nnetwork = true\n', "shell (bubblewrap sandbox, workdir {work}, network on)"),
        ('workdir = "work"\nsandbox = "none"\n', 'shell (UNSANDBOXED: sandbox = "none", workdir {work}, network off)'),
    ],
)
def test_chain_shows_how_the_shell_runs(
    options: str, shown: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = _config(tmp_path, options)
    assert main(["chain", str(config)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [
        f"{config}: model core:scripted, 0 filters, 1 toolset",
        f"tools[0] shell: {shown.format(work=tmp_path / 'work')}",
    ]
    assert f"  tools[0].workdir: work -> {tmp_path / 'work'}" in lines


# -- an ordinary user ------------------------------------------------------------------


@needs_bwrap
def test_the_sandbox_works_for_an_ordinary_user() -> None:
    if os.geteuid() != 0:
        pytest.skip("not root: every other test here already runs as an ordinary user")
    user = pwd.getpwnam("nobody")
    folder = Path(tempfile.mkdtemp(prefix="beamfilter-user-"))
    try:
        work, outside = folder / "work", folder / "outside"
        work.mkdir()
        outside.mkdir()
        (outside / "sentinel.txt").write_text("keep")
        for path in (folder, work, outside, outside / "sentinel.txt"):
            os.chown(path, user.pw_uid, user.pw_gid)
        command = f"id -u; echo made > made.txt; echo pwned > {outside}/sentinel.txt; ls /root"
        read_end, write_end = os.pipe()
        with warnings.catch_warnings():  # a thread of the test runner is not used by the child
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:  # pragma: no cover  # the child reports through the pipe and never returns
            code = 1
            try:
                os.close(read_end)
                os.setgroups([])
                os.setgid(user.pw_gid)
                os.setuid(user.pw_uid)
                result = asyncio.run(run_sandboxed(["bash", "-c", command], workdir=work, timeout=20))
                os.write(write_end, json.dumps([result.exit_code, result.stdout, result.stderr]).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            report = pipe.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0, report
        exit_code, stdout, stderr = json.loads(report)
        assert stdout == f"{user.pw_uid}\n"
        assert f"{outside}/sentinel.txt: No such file or directory" in stderr
        assert "ls: cannot access '/root': No such file or directory" in stderr
        assert exit_code == 2
        assert (work / "made.txt").read_text() == "made\n"
        assert (work / "made.txt").stat().st_uid == user.pw_uid
        assert (outside / "sentinel.txt").read_text() == "keep"
    finally:
        shutil.rmtree(folder)


@needs_bwrap
def test_a_malformed_call_is_a_failure_the_model_reads(tmp_path: Path) -> None:
    calls = [
        ToolCall("shell", {"command": "echo a\0b"}, "c1"),
        ToolCall("shell", {"cmd": "ls"}, "c2"),
        ToolCall("shell", {"command": 5}, "c3"),
        ToolCall("shell", {"command": ""}, "c4"),
    ]
    kernel = Kernel(ScriptedModel([ChatResponse.tool_calls(*calls), "done"]), tools=[ShellToolset(workdir=tmp_path)])
    texts = [m.text for m in kernel.run_sync("go").messages if m.role == "tool"]
    assert texts == [
        "Invalid arguments for tool 'shell': data.command must match pattern ^[^\\x00]*$. Fix them and call again.",
        "Invalid arguments for tool 'shell': data must contain ['command'] properties. Fix them and call again.",
        "Invalid arguments for tool 'shell': data.command must be string. Fix them and call again.",
        "Invalid arguments for tool 'shell': data.command must be longer than or equal to 1 characters. "
        "Fix them and call again.",
    ]


@needs_bwrap
def test_endless_output_is_drained_capped_and_stopped(tmp_path: Path) -> None:
    result = run(["yes"], tmp_path, timeout=1, max_output=8)
    assert (result.timed_out, result.exit_code) == (True, None)
    assert result.stdout.startswith("y\ny\ny\ny\n\n[output cut: ")
    assert result.stdout_cut > 1_000_000  # read all along, so `yes` never blocked on a full pipe


@needs_bwrap
def test_stdin_is_empty(tmp_path: Path) -> None:
    result = run(["bash", "-c", "cat; read -r line; echo read=$?"], tmp_path, timeout=5)
    assert (result.exit_code, result.stdout) == (0, "read=1\n")


def test_a_folder_that_links_to_a_system_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "all").symlink_to("/")
    with pytest.raises(ConfigError) as given:
        Sandbox.create(workdir=tmp_path, writable=[tmp_path / "all"], sandbox="none")
    assert str(given.value) == (
        f"writable[0] is '{tmp_path / 'all'}', a system folder as a whole; give a project folder inside it instead."
    )


@needs_bwrap
def test_a_workdir_removed_after_the_start_is_reported(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    confined = Sandbox.create(workdir=work)
    unconfined = Sandbox.create(workdir=work, sandbox="none")
    work.rmdir()
    with pytest.raises(SandboxError) as given:
        asyncio.run(confined.run(["true"]))
    assert str(given.value) == f"the folder {work} cannot be opened for the sandbox: No such file or directory"
    result = asyncio.run(unconfined.run(["true"]))
    assert (result.exit_code, result.stderr) == (127, f"{work}: No such file or directory")


@needs_bwrap
def test_commands_run_side_by_side_in_sandboxes_of_their_own(tmp_path: Path) -> None:
    async def three() -> list[SandboxResult]:
        return list(
            await asyncio.gather(
                *(
                    run_sandboxed(
                        ["bash", "-c", f"echo {n} > /tmp/n; sleep 0.2; cat /tmp/n > out{n}"], workdir=tmp_path
                    )
                    for n in range(3)
                )
            )
        )

    assert [r.exit_code for r in asyncio.run(three())] == [0, 0, 0]
    assert [(tmp_path / f"out{n}").read_text() for n in range(3)] == ["0\n", "1\n", "2\n"]


@needs_bwrap
def test_a_bubblewrap_without_bind_fd_mounts_the_folders_by_path(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    box = attrs.evolve(Sandbox.create(workdir=tmp_path, writable=[tmp_path / "out"]), features=frozenset())
    assert "--bind-fd" not in box.argv(["true"], 3)
    assert "--disable-userns" not in box.argv(["true"], 3)
    result = asyncio.run(box.run(["bash", "-c", "echo a > out/f && echo b > g && cat out/f g"]))
    assert (result.exit_code, result.stdout) == (0, "a\nb\n")


@needs_bwrap
def test_a_stopped_sandbox_is_never_waited_on_for_ever(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from beamfilter_builtins import _sandbox

    monkeypatch.setattr(_sandbox, "_DRAIN", 0.0)  # no time for bwrap's pipes to close after the kill
    result = run(["sleep", "30"], tmp_path, timeout=0.3)
    assert (result.timed_out, result.exit_code, result.stdout, result.stderr) == (True, None, "", "")
