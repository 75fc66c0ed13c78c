"""Run a program in an OS sandbox: bubblewrap namespaces around one subprocess.

The sandbox sees the system folders read-only, ``workdir`` and ``writable`` read-write,
``readable`` read-only, a private ``/tmp``, a fresh ``/proc`` and a minimal ``/dev``,
and nothing else: no home folder, no other users' files, no host ``/tmp``. It has its
own user, PID, IPC, UTS and (unless ``network=True``) network namespaces, no
capabilities, a new session (no terminal to inject into) and an environment cleared but
for a small fixed set. When the program exits, or ``timeout`` passes, or the caller is
cancelled, the PID namespace ends and the kernel kills every process left in it.

``sandbox="none"`` runs the program unconfined (only when asked for by name): same
environment and caps, but no isolation, and children that leave its process group may
outlive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import os
import shutil
import signal
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import attrs

from beamfilter_core.errors import ConfigError, SandboxError

__all__ = ["Sandbox", "SandboxMode", "SandboxResult", "find_bwrap", "run_sandboxed"]

SandboxMode = Literal["auto", "none"]

INSTALL = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"

#: Top-level system folders mounted read-only (a merged-/usr link is recreated as a link).
_SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
#: The parts of /etc programs need to start, find users and their own links; the rest
#: (shadow, ssh host keys, credentials of services) stays invisible. Each is one mount,
#: and mounts are most of the start cost: the list is kept short.
_ETC = ("alternatives", "group", "hosts", "ld.so.cache", "localtime", "nsswitch.conf", "passwd", "ssl")
#: What name resolution and TLS need as well, mounted only with ``network=True``.
_ETC_NETWORK = ("ca-certificates", "gai.conf", "host.conf", "protocols", "resolv.conf", "services")
#: Folders that may never be made writable or readable as a whole.
_REFUSED = frozenset({"/", "/etc", "/proc", "/sys", "/dev", "/boot", "/root", "/home", "/tmp", "/var", "/run"}) | {
    f"/{name}" for name in _SYSTEM
}
_SAFE_ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "TMPDIR": "/tmp", "TERM": "dumb"}
#: Seconds to wait for the pipes to close once the program was killed.
_DRAIN = 5.0


@attrs.frozen(slots=True)
class SandboxResult:
    """What one sandboxed program did.

    ``exit_code`` is its exit status (128 + N when signal N killed it), or None when it
    was stopped at ``timeout``. ``stdout`` and ``stderr`` are decoded as UTF-8 and end
    with ``[output cut: N more bytes]`` when they went over ``max_output``.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    timeout: float = 0.0
    stdout_cut: int = 0
    stderr_cut: int = 0
    sandboxed: bool = True

    @property
    def ok(self) -> bool:
        """True when the program exited with status 0."""
        return self.exit_code == 0

    def render(self) -> str:
        """The text a model reads: the status line, then stdout and stderr if not empty."""
        if self.timed_out:
            head = f"timed out after {self.timeout:g} s; the command and every process it started were stopped"
        else:
            head = f"exit status {self.exit_code}"
        parts = [head]
        if self.stdout:
            parts.append(f"stdout:\n{self.stdout.removesuffix(chr(10))}")
        if self.stderr:
            parts.append(f"stderr:\n{self.stderr.removesuffix(chr(10))}")
        return "\n".join(parts)


def find_bwrap(bwrap: str | None = None) -> str:
    """The bubblewrap program: ``bwrap`` as given (a path, or a name looked up on PATH),
    else ``bwrap`` on PATH.

    Raises:
        SandboxError: it is not there, naming what to install.
    """
    name = bwrap or "bwrap"
    found = shutil.which(name)
    if found is None:
        where = f"{name!r} is not an executable file" if os.sep in name else f"no {name!r} program on PATH"
        msg = f'the OS sandbox needs bubblewrap and {where}; {INSTALL}. (sandbox = "none" runs commands unconfined.)'
        raise SandboxError(msg)
    return os.path.abspath(found)


@functools.lru_cache(maxsize=8)
def _features(bwrap: str) -> frozenset[str]:
    """The options of this bubblewrap that older ones lack, asked once: ``--disable-userns``
    and ``--bind-fd`` (0.8.0 and later)."""
    try:
        shown = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return frozenset()  # the sandbox's own start reports a broken bwrap
    return frozenset(o for o in ("--disable-userns", "--bind-fd") if o in shown.stdout + shown.stderr)


def _pin(folders: Sequence[str]) -> dict[str, int]:
    """An ``O_PATH`` descriptor of each folder, checked to still be that folder.

    A command may turn a folder it can write into a link (``mv a a2; ln -s /etc a/cache``);
    the next sandbox must mount the folder that was checked, never where a link now points.

    Raises:
        SandboxError: a folder is gone or now resolves elsewhere.
    """
    pinned: dict[str, int] = {}
    try:
        for path in folders:
            try:
                fd = os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
            except OSError as exc:
                msg = f"the folder {path} cannot be opened for the sandbox: {exc.strerror}"
                raise SandboxError(msg) from exc
            pinned[path] = fd
            now = os.readlink(f"/proc/self/fd/{fd}")
            if now != path:
                msg = f"the folder {path} now resolves to {now} (a link was put in its path); it is not mounted"
                raise SandboxError(msg)
    except SandboxError:
        for fd in pinned.values():
            os.close(fd)
        raise
    return pinned


def _folder(path: str | os.PathLike[str], where: str) -> str:
    """``path`` as an existing absolute folder with links resolved, never a whole system folder."""
    resolved = os.path.realpath(os.fspath(path))
    if not os.path.isdir(resolved):
        msg = f"{where} is {os.fspath(path)!r}, which is not an existing folder; create it or give another."
        raise ConfigError(msg)
    if resolved in _REFUSED:
        msg = f"{where} is {os.fspath(path)!r}, a system folder as a whole; give a project folder inside it instead."
        raise ConfigError(msg)
    return resolved


def _check_env(env: Mapping[str, str] | None) -> dict[str, str]:
    out = dict(_SAFE_ENV)
    for key, value in (env or {}).items():
        if not (isinstance(key, str) and key and key.replace("_", "a").isalnum() and not key[0].isdigit()):
            msg = f"env has the name {key!r}; give names of letters, digits and '_' (not starting with a digit)."
            raise ConfigError(msg)
        if not isinstance(value, str) or "\0" in value:
            msg = f"env[{key!r}] is {value!r}; give a text without NUL characters."
            raise ConfigError(msg)
        out[key] = value
    return out


@attrs.frozen(slots=True)
class Sandbox:
    """A checked sandbox configuration; :meth:`run` runs one program in it.

    Build one with :meth:`create` (which checks every value and finds bubblewrap).
    """

    workdir: str
    writable: tuple[str, ...] = ()
    readable: tuple[str, ...] = ()
    network: bool = False
    timeout: float = 60.0
    max_output: int = 30_000
    env: Mapping[str, str] = attrs.field(factory=lambda: dict(_SAFE_ENV))
    mode: SandboxMode = "auto"
    bwrap: str | None = None
    #: Options of this bubblewrap that older ones lack (see :func:`_features`).
    features: frozenset[str] = frozenset()

    @classmethod
    def create(
        cls,
        *,
        workdir: str | os.PathLike[str],
        writable: Sequence[str | os.PathLike[str]] = (),
        readable: Sequence[str | os.PathLike[str]] = (),
        network: bool = False,
        timeout: float = 60.0,
        max_output: int = 30_000,
        env: Mapping[str, str] | None = None,
        sandbox: SandboxMode = "auto",
        bwrap: str | None = None,
    ) -> Sandbox:
        """A sandbox with every value checked.

        Raises:
            ConfigError: a folder is missing or a whole system folder, a number is out
                of range, an env name or value is malformed.
            SandboxError: ``sandbox="auto"`` and bubblewrap is not found.
        """
        if sandbox not in ("auto", "none"):
            msg = f'sandbox is {sandbox!r}; give "auto" (bubblewrap) or "none" (no isolation).'
            raise ConfigError(msg)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < math.inf:
            msg = f"timeout is {timeout!r}; give a positive number of seconds."
            raise ConfigError(msg)
        if isinstance(max_output, bool) or not isinstance(max_output, int) or max_output < 1:
            msg = f"max_output is {max_output!r}; give a positive number of bytes per stream."
            raise ConfigError(msg)
        if isinstance(writable, str) or isinstance(readable, str):
            msg = 'writable and readable are lists of folders, e.g. ["build", "/srv/cache"]; got a single text.'
            raise ConfigError(msg)
        found = find_bwrap(bwrap) if sandbox == "auto" else None
        return cls(
            workdir=_folder(workdir, "workdir"),
            writable=tuple(_folder(p, f"writable[{i}]") for i, p in enumerate(writable)),
            readable=tuple(_folder(p, f"readable[{i}]") for i, p in enumerate(readable)),
            network=bool(network),
            timeout=float(timeout),
            max_output=max_output,
            env=_check_env(env),
            mode=sandbox,
            bwrap=found,
            features=_features(found) if found is not None else frozenset(),
        )

    @property
    def folders(self) -> tuple[str, ...]:
        """The folders mounted from the host: workdir, writable, readable."""
        return (self.workdir, *self.writable, *self.readable)

    def argv(self, command: Sequence[str], status_fd: int, pinned: Mapping[str, int] | None = None) -> list[str]:
        """The bubblewrap command line that runs ``command`` (bwrap arguments are ordered:
        later mounts cover earlier ones). With ``pinned`` (descriptors from :func:`_pin`)
        the folders are mounted from those descriptors, not looked up by path again."""
        args = [str(self.bwrap), "--unshare-user", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
        args += ["--unshare-cgroup-try", *([] if self.network else ["--unshare-net"])]
        args += ["--disable-userns"] if "--disable-userns" in self.features else []
        args += ["--die-with-parent", "--new-session", "--cap-drop", "ALL", "--clearenv"]
        for key, value in {**self.env, "HOME": self.workdir}.items():
            args += ["--setenv", key, value]
        for name in _SYSTEM:
            top = f"/{name}"
            if os.path.islink(top):  # merged /usr: /bin -> usr/bin
                args += ["--symlink", os.readlink(top), top]
            elif os.path.isdir(top):
                args += ["--ro-bind", top, top]
        for name in (*_ETC, *(_ETC_NETWORK if self.network else ())):
            args += ["--ro-bind-try", f"/etc/{name}", f"/etc/{name}"]
        args += ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
        # shallowest first, so a folder named inside another keeps its own mode
        folders = [(p, "--ro-bind") for p in self.readable] + [(p, "--bind") for p in (self.workdir, *self.writable)]
        for path, how in sorted(folders, key=lambda item: item[0].count("/")):
            args += [f"{how}-fd", str(pinned[path]), path] if pinned is not None else [how, path, path]
        args += ["--remount-ro", "/", "--chdir", self.workdir, "--json-status-fd", str(status_fd), "--", *command]
        return args

    async def run(self, command: Sequence[str]) -> SandboxResult:
        """Run ``command`` (a program and its arguments) in this sandbox.

        Raises:
            SandboxError: bubblewrap is gone, or it could not set the sandbox up.
            ConfigError: ``command`` is not a non-empty list of texts.
        """
        if isinstance(command, str) or not command or not all(isinstance(a, str) and "\0" not in a for a in command):
            msg = f'command is {command!r}; give the program and its arguments as a list, e.g. ["ls", "-l"].'
            raise ConfigError(msg)
        if self.mode == "none":
            return await _collect(self, list(command), None)
        bwrap = find_bwrap(self.bwrap)  # it may have gone since the sandbox was made
        box = attrs.evolve(self, bwrap=bwrap)
        pinned = _pin(box.folders)
        try:
            read_fd, write_fd = os.pipe()  # _collect closes both
            by_fd = pinned if "--bind-fd" in box.features else None
            argv = box.argv(command, write_fd, by_fd)
            return await _collect(box, argv, (read_fd, write_fd), tuple(pinned.values()) if by_fd else ())
        finally:
            for fd in pinned.values():
                os.close(fd)


async def _read(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, int]:
    """Up to ``cap`` bytes of ``stream``, then the count of the bytes drained past it."""
    kept = bytearray()
    dropped = 0
    while chunk := await stream.read(65536):
        room = max(0, cap - len(kept))
        kept += chunk[:room]
        dropped += len(chunk) - min(room, len(chunk))
    return bytes(kept), dropped


def _text(data: bytes, dropped: int) -> str:
    text = data.decode("utf-8", errors="replace")
    return f"{text}\n[output cut: {dropped} more bytes]" if dropped else text


def _kill(process: asyncio.subprocess.Process) -> None:
    # the program leads its own process group; under bwrap, killing bwrap ends the PID namespace
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _exited(process: asyncio.subprocess.Process, seconds: float, confined: bool) -> bool:
    """Wait for the program to exit; False when ``seconds`` passed first.

    ``Process.wait`` also waits for its pipes to close: under bwrap they close with the
    PID namespace, while an unconfined child that left the group may hold them open, so
    there the exit status itself is polled.
    """
    if confined:
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), None if math.isinf(seconds) else seconds)
        except TimeoutError:
            return False
        return True
    deadline = asyncio.get_running_loop().time() + seconds
    delay = 0.0005  # short commands are seen at once, long ones polled every 20 ms
    while process.returncode is None:
        if asyncio.get_running_loop().time() >= deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.02)
    return True


async def _abandon(readers: asyncio.Future[Any], process: asyncio.subprocess.Process) -> None:
    """Stop reading and close the pipes (the transport would else outlive the loop)."""
    readers.cancel()
    await asyncio.wait([readers])
    if not readers.cancelled():
        readers.exception()  # retrieved, so never logged as lost
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()
    await _exited(process, _DRAIN, confined=False)  # reaped before the loop may close


def _statuses(fd: int) -> list[dict[str, object]]:
    """The JSON documents bwrap wrote on its status pipe (never blocks)."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 65536):
            data += chunk
    found: list[dict[str, object]] = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict):
                found.append(item)
    return found


async def _collect(
    sandbox: Sandbox, argv: list[str], status: tuple[int, int] | None, keep: tuple[int, ...] = ()
) -> SandboxResult:
    """Run ``argv``, keep its capped output, stop it at the timeout or on cancellation.
    ``status`` is bwrap's status pipe (read end, write end), None when unconfined; ``keep``
    more descriptors bwrap is given (the pinned folders)."""
    try:
        return await _supervise(sandbox, argv, status, keep)
    finally:
        if status is not None:
            os.close(status[0])


async def _supervise(
    sandbox: Sandbox, argv: list[str], status: tuple[int, int] | None, keep: tuple[int, ...]
) -> SandboxResult:
    try:
        process = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=sandbox.workdir,
            env={**sandbox.env, "HOME": sandbox.workdir},
            start_new_session=True,
            pass_fds=(status[1], *keep) if status else (),
        )
    except OSError as exc:
        if status is not None:
            hint = f"; {INSTALL}" if exc.filename in (None, argv[0]) else ""  # else the workdir went away
            msg = f"bubblewrap ({argv[0]}) could not be started: {exc}{hint}."
            raise SandboxError(msg) from exc
        # as a shell reports a program it cannot run (or the workdir, if that went away)
        where = exc.filename if isinstance(exc.filename, str) else argv[0]
        return SandboxResult(127, "", f"{where}: {exc.strerror}", timeout=sandbox.timeout, sandboxed=False)
    finally:
        if status is not None:
            os.close(status[1])  # only bwrap writes to it now, so the read end sees its end
    assert process.stdout is not None  # PIPE was asked for
    assert process.stderr is not None
    readers = asyncio.gather(_read(process.stdout, sandbox.max_output), _read(process.stderr, sandbox.max_output))
    confined = status is not None
    try:
        timed_out = not await _exited(process, sandbox.timeout, confined)
        # whatever is left (a timeout, or children of an unconfined command) is killed
        _kill(process)
        if not await _exited(process, _DRAIN, confined):  # pipes still open: never wait on them for ever
            await _exited(process, math.inf, confined=False)
        try:
            (out, out_cut), (err, err_cut) = await asyncio.wait_for(asyncio.shield(readers), _DRAIN)
        except TimeoutError:  # a pipe held open by a process that left the group (unconfined only)
            await _abandon(readers, process)
            (out, out_cut), (err, err_cut) = (b"", 0), (b"", 0)
    except BaseException:  # cancelled by the caller: nothing may outlive it
        _kill(process)
        await _abandon(readers, process)
        raise
    code = process.returncode
    if status is not None:
        statuses = _statuses(status[0])
        if not timed_out and not any("child-pid" in s for s in statuses):
            reason = err.decode("utf-8", errors="replace").strip() or f"exit status {code}"
            msg = f"bubblewrap ({argv[0]}) could not set the sandbox up: {reason}"
            raise SandboxError(msg)
        codes = [s["exit-code"] for s in statuses if isinstance(s.get("exit-code"), int)]
        code = int(str(codes[-1])) if codes else code
    elif code is not None and code < 0:
        code = 128 - code
    return SandboxResult(
        exit_code=None if timed_out else code,
        stdout=_text(out, out_cut),
        stderr=_text(err, err_cut),
        timed_out=timed_out,
        timeout=sandbox.timeout,
        stdout_cut=out_cut,
        stderr_cut=err_cut,
        sandboxed=status is not None,
    )


async def run_sandboxed(
    argv: Sequence[str],
    *,
    workdir: str | os.PathLike[str],
    writable: Sequence[str | os.PathLike[str]] = (),
    readable: Sequence[str | os.PathLike[str]] = (),
    network: bool = False,
    timeout: float = 60.0,  # noqa: ASYNC109  # the sandbox's own deadline: it kills the whole process tree
    max_output: int = 30_000,
    env: Mapping[str, str] | None = None,
    sandbox: SandboxMode = "auto",
    bwrap: str | None = None,
) -> SandboxResult:
    """Run ``argv`` in the same OS sandbox as the ``shell`` toolset and return what it did.

    ``workdir`` (the current folder) and ``writable`` are read-write, ``readable``
    read-only; the system folders are read-only and everything else is invisible. The
    network is off unless ``network=True``. After ``timeout`` seconds the program and
    every process it started are killed (``result.timed_out``); each of stdout and stderr
    keeps its first ``max_output`` bytes. ``env`` adds variables to a cleared
    environment. ``bwrap`` names the bubblewrap program (default: ``bwrap`` on PATH).

    Example::

        result = await run_sandboxed(["python3", "build.py"], workdir="/srv/project", timeout=30)
        if not result.ok:
            raise RuntimeError(result.render())

    Raises:
        SandboxError: bubblewrap is missing or cannot set the sandbox up (never a
            silent run without it; ``sandbox="none"`` must be asked for).
        ConfigError: a value is wrong (a missing folder, a whole system folder, a
            non-positive timeout, ``argv`` not a list of texts).
    """
    box = Sandbox.create(
        workdir=workdir,
        writable=writable,
        readable=readable,
        network=network,
        timeout=timeout,
        max_output=max_output,
        env=env,
        sandbox=sandbox,
        bwrap=bwrap,
    )
    return await box.run(argv)
