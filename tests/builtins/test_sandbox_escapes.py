"""run_sandboxed against escape attempts, with the real bubblewrap.

Every attempt runs as a bash command in a sandbox whose workdir is ``work/``; a folder
``outside/`` beside it holds a sentinel and a secret. After each attempt the sentinel is
untouched, no file outside ``work/`` appeared or changed, and no file carrying the
attempt's token exists in the host's /, /etc, /root, /tmp, /usr or /dev/shm.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import time
import uuid
from pathlib import Path

import pytest
from _support import IN_CI

from beamfilter_builtins import run_sandboxed
from beamfilter_builtins._sandbox import Sandbox
from beamfilter_core.errors import SandboxError

BWRAP = shutil.which("bwrap")
if BWRAP is None and IN_CI:
    pytest.fail("required in CI: bubblewrap (apt-get install bubblewrap)", pytrace=False)
pytestmark = pytest.mark.skipif(BWRAP is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")

SENTINEL = "sentinel: must never change\n"
SECRET = "secret-4f9a8b7c6d5e"

#: (name, bash command): {out} is the outside folder, {tok} a token unique to the attempt.
ESCAPES: list[tuple[str, str]] = [
    ("write /etc", "echo x > /etc/{tok}"),
    ("write host /tmp", "echo x > /tmp/{tok} && cat /tmp/{tok}"),
    ("write the home folder", "echo x > ~/{tok}; echo x > /root/{tok}; echo x > ~root/{tok}"),
    ("write ../ of workdir", "echo x > ../{tok}; echo x > ../../{tok}; echo x > ../outside/{tok}"),
    ("overwrite the sentinel by path", "echo pwned > {out}/sentinel.txt"),
    ("append to the sentinel", "echo pwned >> {out}/sentinel.txt"),
    ("symlink made inside", "ln -s {out}/sentinel.txt link && echo pwned > link"),
    ("symlink planted by the host", "echo pwned > planted && echo pwned > planted_dir/{tok}"),
    ("hard link", "ln {out}/sentinel.txt hard && echo pwned > hard"),
    (
        "here-doc into python",
        "python3 - <<'EOF'\nopen('{out}/sentinel.txt', 'w').write('pwned')\nopen('/etc/{tok}', 'w')\nEOF",
    ),
    ("here-doc into perl", "perl <<'EOF'\nopen(F, '>', '{out}/sentinel.txt'); print F 'pwned';\nEOF"),
    ("via /proc/self/root", "echo pwned > /proc/self/root{out}/sentinel.txt; echo x > /proc/self/root/etc/{tok}"),
    ("via /proc/1/root", "echo x > /proc/1/root/etc/{tok}; echo x > /proc/1/root/{tok}"),
    ("write the root folder", "cd / && touch {tok}; mkdir /{tok}"),
    ("write /usr", "mkdir -p /usr/{tok}; cp /bin/sh /usr/bin/{tok}"),
    ("exec redirection", "exec 3> {out}/sentinel.txt; echo pwned >&3"),
    ("dd", "echo pwned | dd of={out}/sentinel.txt"),
    ("tar into /etc", "mkdir d && echo x > d/{tok} && tar cf a.tar d && tar -C /etc -xf a.tar"),
    ("remount read-write", "mount -o remount,rw / && echo x > /etc/{tok}"),
    ("bind mount", "mount --bind . /etc && echo x > /etc/{tok}"),
    ("new user namespace", "unshare -Ur sh -c 'echo x > /etc/{tok}'; unshare -m sh -c 'echo x > /etc/{tok}'"),
    ("chroot", "chroot / sh -c 'echo x > /etc/{tok}'"),
    ("/dev/shm", "echo x > /dev/shm/{tok}"),
    ("sysfs", "echo x > /sys/{tok}"),
    ("sudo and su", "sudo sh -c 'echo x > /etc/{tok}'; su -c 'echo x > /etc/{tok}'"),
    ("setuid copy", "cp /bin/sh ./sh && chmod u+s ./sh && ./sh -p -c 'echo x > /etc/{tok}'"),
    ("kill every process it can see", "kill -9 -1; echo x > /etc/{tok}"),
]


def _tree(root: Path, skip: Path) -> dict[str, bytes | str]:
    """Every path under ``root`` (but ``skip``) with its bytes (a link: its target)."""
    out: dict[str, bytes | str] = {}
    for path in sorted(root.rglob("*")):
        if path == skip or skip in path.parents:
            continue
        if path.is_symlink():
            out[str(path)] = os.readlink(path)
        elif path.is_file():
            out[str(path)] = path.read_bytes()
        else:
            out[str(path)] = "dir"
    return out


def _token_files(token: str) -> list[str]:
    found = []
    for folder in ("/", "/etc", "/root", "/tmp", "/usr", "/usr/bin", "/dev/shm"):
        with_token = [name for name in os.listdir(folder) if token in name] if os.path.isdir(folder) else []
        found += [os.path.join(folder, name) for name in with_token]
    return found


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    work = tmp_path / "work"
    outside = tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    (outside / "sentinel.txt").write_text(SENTINEL)
    (outside / "secret.txt").write_text(SECRET)
    (work / "planted").symlink_to(outside / "sentinel.txt")
    (work / "planted_dir").symlink_to(outside)
    return work, outside


@pytest.mark.parametrize(("name", "command"), ESCAPES, ids=[name for name, _ in ESCAPES])
def test_an_escape_attempt_changes_nothing_outside_workdir(
    name: str, command: str, places: tuple[Path, Path], tmp_path: Path
) -> None:
    work, outside = places
    token = f"escape-{uuid.uuid4().hex}"
    before = _tree(tmp_path, work)
    # `kill -9 -1` inside reaches only the sandbox's processes: this test process lives on
    result = asyncio.run(
        run_sandboxed(["bash", "-c", command.format(out=outside, tok=token)], workdir=work, timeout=20)
    )
    assert result.timed_out is False, result.render()
    assert (outside / "sentinel.txt").read_text() == SENTINEL
    assert _tree(tmp_path, work) == before
    assert _token_files(token) == []


def test_the_table_has_at_least_twenty_attempts() -> None:
    assert len(ESCAPES) >= 20
    assert len({name for name, _ in ESCAPES}) == len(ESCAPES)


def test_writes_inside_the_private_tmp_and_the_parent_stay_in_the_sandbox(places: tuple[Path, Path]) -> None:
    work, _ = places
    token = f"escape-{uuid.uuid4().hex}"
    result = asyncio.run(
        run_sandboxed(["bash", "-c", f"echo in > /tmp/{token} && cat /tmp/{token} && echo ok > mine"], workdir=work)
    )
    assert (result.exit_code, result.stdout, result.stderr) == (0, "in\n", "")
    assert not Path(f"/tmp/{token}").exists()
    assert (work / "mine").read_text() == "ok\n"


@pytest.mark.parametrize(
    ("name", "command"),
    [
        ("background", "(sleep 0.6; echo late > late-bg) &"),
        ("nohup", "nohup sh -c 'sleep 0.6; echo late > late-nohup' >/dev/null 2>&1 &"),
        ("setsid", "setsid sh -c 'sleep 0.6; echo late > late-setsid' &"),
        ("double fork", "sh -c '(sleep 0.6; echo late > late-fork) &' &"),
        ("disowned", "sleep 0.6 && echo late > late-disown & disown"),
    ],
)
def test_no_process_outlives_the_command(name: str, command: str, places: tuple[Path, Path]) -> None:
    work, _ = places
    result = asyncio.run(run_sandboxed(["bash", "-c", f"{command}\necho started"], workdir=work))
    assert (result.exit_code, result.stdout) == (0, "started\n")
    time.sleep(1.2)
    assert sorted(p.name for p in work.iterdir() if p.name.startswith("late")) == []


def _host_processes(marker: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"{pid}: {cmdline}")
    return found


def test_a_timeout_kills_the_whole_process_tree(places: tuple[Path, Path]) -> None:
    work, _ = places
    marker = f"marker{uuid.uuid4().hex[:12]}"
    command = (
        f"(exec -a {marker}-bg sleep 300) & "
        f"setsid bash -c 'exec -a {marker}-setsid sleep 300' & "
        f"nohup bash -c 'exec -a {marker}-nohup sleep 300' >/dev/null 2>&1 & "
        f"sleep 0.3; echo up; exec -a {marker}-main sleep 300"
    )
    started = time.monotonic()
    result = asyncio.run(run_sandboxed(["bash", "-c", command], workdir=work, timeout=1.5))
    took = time.monotonic() - started
    assert (result.timed_out, result.exit_code, result.stdout) == (True, None, "up\n")
    assert 1.5 <= took < 6, took
    assert result.render() == (
        "timed out after 1.5 s; the command and every process it started were stopped\nstdout:\nup"
    )
    assert result.ok is False
    time.sleep(0.3)
    assert _host_processes(marker) == []


def test_cancelling_the_caller_kills_the_sandbox(places: tuple[Path, Path]) -> None:
    work, _ = places
    marker = f"marker{uuid.uuid4().hex[:12]}"

    async def main() -> None:
        task = asyncio.create_task(
            run_sandboxed(["bash", "-c", f"exec -a {marker} sleep 300"], workdir=work, timeout=60)
        )
        for _ in range(200):  # until the sandboxed program runs (a loaded machine starts it late)
            if _host_processes(marker):
                break
            await asyncio.sleep(0.05)
        assert _host_processes(marker) != []
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    time.sleep(0.3)
    assert _host_processes(marker) == []


def test_files_outside_cannot_be_read(places: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    work, outside = places
    host_tmp = Path(f"/tmp/beamfilter-secret-{uuid.uuid4().hex}")
    host_tmp.write_text(SECRET)
    monkeypatch.setenv("BEAMFILTER_TEST_SECRET", SECRET)
    try:
        command = (
            f"cat {outside}/secret.txt; cat {host_tmp}; cat planted_dir/secret.txt; ls /root; ls /home; "
            "cat /etc/shadow; cat /proc/*/environ; env; grep -rl secret- /tmp /etc 2>/dev/null | head -3"
        )
        result = asyncio.run(run_sandboxed(["bash", "-c", command], workdir=work, timeout=20))
    finally:
        host_tmp.unlink()
    assert result.timed_out is False
    assert SECRET not in result.stdout + result.stderr
    assert f"cat: {outside}/secret.txt: No such file or directory" in result.stderr
    assert f"cat: {host_tmp}: No such file or directory" in result.stderr
    assert "ls: cannot access '/root': No such file or directory" in result.stderr
    assert "ls: cannot access '/home': No such file or directory" in result.stderr
    assert "cat: /etc/shadow: No such file or directory" in result.stderr
    env = dict(line.split("=", 1) for line in result.stdout.splitlines() if "=" in line and "/" not in line[:1])
    assert env["HOME"] == str(work)
    assert env["PATH"] == "/usr/local/bin:/usr/bin:/bin"
    assert "BEAMFILTER_TEST_SECRET" not in result.stdout


class _Listener:
    """A real TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen()
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.mark.parametrize("network", [False, True], ids=["network-off", "network-on"])
def test_a_listener_on_loopback_gets_no_connection_unless_network_is_on(
    network: bool, places: tuple[Path, Path]
) -> None:
    work, _ = places
    listener = _Listener()
    try:
        command = (
            f"echo hi > /dev/tcp/127.0.0.1/{listener.port} && echo bash-connected; "
            "python3 -c \"import socket; socket.create_connection(('127.0.0.1', "
            f"{listener.port}), timeout=2); print('python-connected')\""
        )
        result = asyncio.run(run_sandboxed(["bash", "-c", command], workdir=work, network=network, timeout=20))
        time.sleep(0.3)
    finally:
        listener.close()
    if network:
        assert (listener.accepted, result.stdout) == (2, "bash-connected\npython-connected\n")
    else:
        assert (listener.accepted, result.stdout) == (0, "")
        assert "Connection refused" in result.stderr


def test_unix_sockets_of_the_host_cannot_be_reached(places: tuple[Path, Path]) -> None:
    work, outside = places
    name = f"beamfilter-{uuid.uuid4().hex}"
    abstract = socket.socket(socket.AF_UNIX)
    abstract.bind(f"\0{name}")
    abstract.listen()
    path = outside / "s.sock"
    on_disk = socket.socket(socket.AF_UNIX)
    on_disk.bind(str(path))
    on_disk.listen()
    try:
        code = (
            "import socket\n"
            "for where in ({abstract!r}, {path!r}):\n"
            "    s = socket.socket(socket.AF_UNIX)\n"
            "    try:\n"
            "        s.connect(where)\n"
            "        print('connected', where)\n"
            "    except OSError as exc:\n"
            "        print('refused', type(exc).__name__)\n"
        ).format(abstract=f"\0{name}", path=str(path))
        result = asyncio.run(run_sandboxed(["python3", "-c", code], workdir=work, timeout=20))
    finally:
        abstract.close()
        on_disk.close()
    assert result.stdout == "refused ConnectionRefusedError\nrefused FileNotFoundError\n", result.render()


def test_the_host_name_cannot_be_changed(places: tuple[Path, Path]) -> None:
    work, _ = places
    before = socket.gethostname()
    result = asyncio.run(
        run_sandboxed(["bash", "-c", "hostname pwned; echo pwned > /proc/sys/kernel/hostname; hostname"], workdir=work)
    )
    assert socket.gethostname() == before
    assert "pwned" not in before
    assert result.timed_out is False


def test_no_user_namespace_can_be_made_inside(places: tuple[Path, Path]) -> None:
    work, _ = places
    result = asyncio.run(run_sandboxed(["bash", "-c", "unshare -U true; echo status=$?"], workdir=work))
    assert result.stdout == "status=1\n", result.render()
    assert result.stderr.startswith("unshare: unshare failed: ")


def test_a_folder_turned_into_a_link_by_one_command_is_not_mounted_by_the_next(places: tuple[Path, Path]) -> None:
    work, _ = places
    (work / "a" / "cache").mkdir(parents=True)
    token = f"escape-{uuid.uuid4().hex}"
    box = Sandbox.create(workdir=work, writable=[work / "a" / "cache"])
    swap = asyncio.run(box.run(["bash", "-c", "mv a a2 && mkdir a && ln -s /etc a/cache && echo swapped"]))
    assert (swap.exit_code, swap.stdout) == (0, "swapped\n")
    with pytest.raises(SandboxError) as given:
        asyncio.run(box.run(["bash", "-c", f"echo x > a/cache/{token}"]))
    assert str(given.value) == (
        f"the folder {work}/a/cache now resolves to /etc (a link was put in its path); it is not mounted"
    )
    assert _token_files(token) == []


def test_a_readable_folder_swapped_for_a_link_on_the_host_is_not_mounted(places: tuple[Path, Path]) -> None:
    work, outside = places
    shared = outside / "shared"
    shared.mkdir()
    box = Sandbox.create(workdir=work, readable=[shared])
    shared.rmdir()
    shared.symlink_to("/root")
    with pytest.raises(SandboxError, match=r"now resolves to /root \(a link was put in its path\); it is not mounted$"):
        asyncio.run(box.run(["ls", str(shared)]))
