"""How programs that run another program read their options (GNU style): ``sudo``, ``timeout``, ``env``, ...

:func:`._shell_programs.unwrap` reads a wrapper's options with its entry here to find the
program it runs. Tables follow the GNU/util-linux, sudo and bash manuals; an option that
is not listed makes the command opaque.
"""

from __future__ import annotations

import attrs

__all__ = ["WRAPPERS", "Wrapper"]


@attrs.frozen
class Wrapper:
    """How a program that runs another one reads its options (GNU style)."""

    short_values: str = ""  # short options that take a value (-u root, -uroot)
    short_flags: str = ""
    long_values: frozenset[str] = frozenset()
    long_flags: frozenset[str] = frozenset()
    positionals: int = 0  # words between the options and the command (timeout's duration)
    numeric: bool = False  # nice -5
    code: str = ""  # short options whose value is shell code (su -c)
    no_command: str = ""  # flags after which the wrapper runs nothing (sudo -l)
    shell: str = ""  # flags that make it run the rest through a shell (sudo -s, watch without -x)
    chdir: str = ""  # short options whose value is the directory the program runs in (env -C)


def _w(**kwargs: object) -> Wrapper:
    for key in ("long_values", "long_flags"):
        if key in kwargs:
            kwargs[key] = frozenset(str(kwargs[key]).split())
    return Wrapper(**kwargs)  # type: ignore[arg-type]  # kwargs are the fields above


WRAPPERS: dict[str, Wrapper] = {
    "sudo": _w(
        short_values="ugpCDrtUThR",
        short_flags="AbEHnPSsiKkVlve",
        long_values="user group prompt close-from chdir role type other-user host chroot command-timeout",
        long_flags="askpass background preserve-env set-home non-interactive preserve-groups stdin shell login "
        "reset-timestamp remove-timestamp list validate edit",
        no_command="KkVlve",
        shell="si",
        chdir="D",
    ),
    "doas": _w(short_values="uC", short_flags="ns", shell="s"),
    "env": _w(
        short_values="uCS",
        short_flags="i0v",
        long_values="unset chdir split-string",
        long_flags="ignore-environment null debug",
        chdir="C",
    ),
    "nohup": _w(),
    "time": _w(
        short_values="fo",
        short_flags="pavq",
        long_values="format output",
        long_flags="portability append verbose quiet",
    ),
    "command": _w(short_flags="pvV", no_command="vV"),
    "builtin": _w(),
    "exec": _w(short_values="a", short_flags="cl"),
    "coproc": _w(),
    "nice": _w(short_values="n", long_values="adjustment", numeric=True),
    "ionice": _w(
        short_values="cnp", short_flags="t", long_values="class classdata pid", long_flags="ignore", no_command="p"
    ),
    "timeout": _w(
        short_values="sk",
        short_flags="v",
        long_values="signal kill-after",
        long_flags="preserve-status foreground verbose",
        positionals=1,
    ),
    "xargs": _w(
        short_values="adEILnPs",
        short_flags="0oprtx",
        long_values="arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var",
        long_flags="null open-tty interactive no-run-if-empty verbose exit show-limits",
    ),
    "strace": _w(
        short_values="eopsuEaIbOSPXU",
        short_flags="fFcCdDhiqrtTvVwxyzZkn",
        long_values="expr output attach string-limit user env columns",
        long_flags="follow-forks summary-only summary-wall-clock decode-fds",
    ),
    "ltrace": _w(short_values="aeEFlnopsuAD", short_flags="bcCfhiLrStTV"),
    "watch": _w(
        short_values="nq",
        short_flags="bcdegptwrx",
        long_values="interval equexit",
        long_flags="beep color differences errexit chgexit precise no-title no-wrap exec no-rerun",
        shell="",
    ),
    "setsid": _w(short_flags="cfw", long_flags="ctty fork wait"),
    "chroot": _w(long_values="userspec groups", long_flags="skip-chdir", positionals=1),
    "stdbuf": _w(short_values="ioe", long_values="input output error"),
    "unbuffer": _w(short_flags="p"),
    "torsocks": _w(short_values="uapP", short_flags="idq"),
    "proxychains": _w(short_values="f", short_flags="q"),
    "flock": _w(
        short_values="wEc",
        short_flags="sxunoF",
        long_values="timeout conflict-exit-code command",
        long_flags="shared exclusive unlock nonblock close no-fork verbose",
        positionals=1,
        code="c",
    ),
    "su": _w(
        short_values="cgGsw",
        short_flags="lmpfP",
        long_values="command group supp-group shell whitelist-environment",
        long_flags="login preserve-environment pty",
        code="c",
    ),
    "runuser": _w(
        short_values="cgGsuw",
        short_flags="lmpfP",
        long_values="command group supp-group shell user",
        long_flags="login preserve-environment pty",
        code="c",
    ),
    "script": _w(
        short_values="cEtTIOBm",
        short_flags="aefqr",
        long_values="command echo timing log-in log-out log-io logging-format",
        long_flags="append return flush quiet",
        code="c",
    ),
    "taskset": _w(short_flags="ac", long_flags="all-tasks cpu-list", positionals=1, no_command="p"),
    "chrt": _w(
        short_flags="abdfiormRv", long_values="sched-runtime sched-deadline sched-period", positionals=1, no_command="p"
    ),
    "caffeinate": _w(short_values="tw", short_flags="dimsu"),
    "pkexec": _w(long_values="user", long_flags="disable-internal-agent keep-cwd"),
    "run0": _w(
        short_values="uDg",
        long_values="user group chdir unit property description slice nice setenv background machine",
        long_flags="no-ask-password",
        chdir="D",
    ),
    "sg": _w(short_values="c", positionals=1, code="c"),
    "nsenter": _w(
        short_values="tSGwre",
        short_flags="amuinpUCTFZ",
        long_values="target setuid setgid wd root env",
        long_flags="all mount uts ipc net pid user cgroup time preserve-credentials no-fork follow-context",
    ),
    "unshare": _w(
        short_values="SGRw",
        short_flags="muinpUCTfrc",
        long_values="setuid setgid root wd propagation map-user map-group",
        long_flags="mount uts ipc net pid user cgroup time fork map-root-user map-current-user kill-child mount-proc",
    ),
    # options these take are many: any option makes the command opaque, none runs the program
    **{name: _w() for name in ("firejail", "fakeroot", "fakechroot", "eatmydata", "proot", "catchsegv", "valgrind")},
    **{name: _w() for name in ("setpriv", "prlimit", "numactl", "xvfb-run", "dbus-run-session", "dbus-launch")},
    **{name: _w() for name in ("rlwrap", "chpst", "softlimit", "daemonize", "systemd-nspawn", "bwrap", "trickle")},
    "capsh": _w(),  # capsh -- -c CODE: its options are opaque, and "--" hands the rest to a shell
    "chronic": _w(short_flags="ev"),
    "faketime": _w(short_flags="f", positionals=1),
    "sshpass": _w(short_values="pfd", short_flags="ve"),
    "cgexec": _w(short_values="g", long_flags="sticky"),
    "cpulimit": _w(
        short_values="lpe",
        short_flags="zikvf",
        long_values="limit pid exe",
        long_flags="lazy include-children kill verbose foreground",
    ),
    "envdir": _w(positionals=1),
    "setuidgid": _w(positionals=1),
    "tsp": _w(short_flags="nfgB"),
    "entr": _w(short_flags="acdnprsz", shell="s"),
    "watchexec": _w(),  # its command runs through a shell (see unwrap)
    "nocache": _w(),
    "systemd-run": _w(
        short_values="pEuHMd",
        short_flags="qtPG",
        long_values="unit property description slice uid gid nice working-directory setenv",
        long_flags="user system scope pty pipe wait quiet collect same-dir",
    ),
}
