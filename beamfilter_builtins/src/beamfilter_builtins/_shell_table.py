"""The one program table of the ``shell`` rule: every family, its spellings, and all the rule knows of it.

A program is judged by its *family*: ``/usr/bin/python3.11``, ``pypy3`` and ``py`` are
``python``; ``perl5.36.0`` is ``perl``; ``tclsh8.6`` is ``tclsh``; ``gtar`` and ``bsdtar``
are ``tar``; ``nodejs`` is ``node``; ``mkfs.ext4`` is ``mkfs``. Each family has one
:class:`Program` record holding its spellings and every fact a dispatch path uses: how
its arguments are read for the code it runs (:attr:`Program.reader`: a wrapper, a
shell, an interpreter and its inline-code options ...), the options that make it run
code, what it writes or destroys (:attr:`Program.effect`), and what ``allow_commands``
refuses in it. :func:`family` maps a program word to its family and :func:`program` to
its record; no other module keeps a list of programs.
"""

from __future__ import annotations

import posixpath
import re

import attrs

__all__ = [
    "EFFECTS",
    "OPTION_KINDS",
    "PROGRAMS",
    "READERS",
    "Options",
    "Program",
    "Wrapper",
    "family",
    "index",
    "program",
    "strict_refusal",
]

#: How a family's arguments are read for the programs and code it runs (``""``: they run nothing).
READERS = frozenset(
    {"", "wrapper", "busybox", "netns", "hyperfine", "tmux", "screen", "shell", "at", "interpreter", "eval", "find"}
    | {"fd", "parallel", "git", "ssh", "options", "sed", "hash", "alias", "trap", "awk"}
)
#: What a family writes or destroys, read by :func:`._shell_effects.builtin_denials` (``""``: nothing it checks).
EFFECTS = frozenset(
    {"", "destructive", "arguments", "flag", "recursive", "find", "dd", "tee", "size", "copy", "move", "sync"}
    | {"rescue", "sed", "awk", "tar"}
)
#: What the value of a code-carrying option is: a shell command line ("shell"), a file
#: name that is a command after ``|`` ("pipe"), code in the program's own language
#: ("other"), such code only with a shell escape ("bang"), a pager command after ``!``/``|``
#: ("pager"), a socat address ("address") or a sqlite3 dot-command ("dot") in any word.
OPTION_KINDS = frozenset({"shell", "pipe", "other", "bang", "pager", "address", "dot"})


def _letters_or_names(value: object) -> frozenset[str]:
    return frozenset(str(value).split()) if not isinstance(value, frozenset) else value


@attrs.frozen
class Wrapper:
    """How a program that runs another one reads its options (GNU style), and what it runs."""

    short_values: str = ""  # short options that take a value (-u root, -uroot)
    short_flags: str = ""
    long_values: frozenset[str] = attrs.field(default=frozenset(), converter=_letters_or_names)
    long_flags: frozenset[str] = attrs.field(default=frozenset(), converter=_letters_or_names)
    positionals: int = 0  # words between the options and the command (timeout's duration)
    numeric: bool = False  # nice -5
    code: str = ""  # short options whose value is shell code (su -c)
    no_command: str = ""  # flags after which the wrapper runs nothing (sudo -l)
    shell: str = ""  # flags that make it run the rest through a shell (sudo -s)
    shell_long: frozenset[str] = attrs.field(default=frozenset(), converter=_letters_or_names)  # sudo --login
    chdir: str = ""  # short options whose value is the directory the program runs in (env -C)
    assigns: bool = False  # NAME=value words before the command set its environment (env)
    splits: str = ""  # short options whose value is split into the command (env -S)
    line: bool = False  # the command words are joined into one shell command line (watch, watchexec)
    line_off: frozenset[str] = attrs.field(default=frozenset(), converter=_letters_or_names)  # watch -x
    prefix: tuple[str, ...] = ()  # what runs its operands (capsh -- ARGS runs bash ARGS)
    reads_input: bool = False  # the command's last arguments are lines of the input (xargs)
    bare: tuple[str, ...] = ()  # what runs when no command is given (chroot DIR: sh -i)
    login: bool = False  # its operands are a user and a shell's arguments, never a command (su USER)
    takes_name: bool = False  # a first word that names the process (coproc NAME { ...; })


@attrs.frozen
class Options:
    """The short (``-I CMD``, ``-ICMD``) and long options (any GNU abbreviation) whose value
    is a command; ``values``: the other short options that take a value; ``bundled``: the
    first word may bundle them without a dash (``tar xIf CMD archive``)."""

    short: str = ""
    long: tuple[str, ...] = ()
    values: str = ""
    bundled: bool = False


def _valid_runs(_: object, __: object, runs: tuple[tuple[str, str], ...]) -> None:
    bad = [kind for _option, kind in runs if kind not in OPTION_KINDS]
    if bad:
        msg = f"option kinds {bad} are not among {sorted(OPTION_KINDS)}"
        raise ValueError(msg)


@attrs.frozen
class Program:
    """Everything the shell rule knows about one family of programs."""

    name: str
    spellings: tuple[str, ...] = ()  # other names of the family (gtar, bsdtar)
    prefixes: tuple[str, ...] = ()  # any name starting so is the family (python3.11-dbg, mkfs.ext4)
    versioned: bool = False  # the name and spellings may carry a version (perl5.36.0, tclsh8.6)
    reader: str = attrs.field(default="", validator=attrs.validators.in_(READERS))
    wrapper: Wrapper | None = None  # reader "wrapper": how to find the program it runs
    code_options: tuple[str, ...] = ()  # reader "interpreter": the options giving inline code (-c, --eval)
    module_option: str = ""  # reader "interpreter": runs an installed module (python -m)
    reads_program: bool = True  # reader "interpreter": without a script it reads one from its input
    options: Options | None = None  # reader "options": the options whose value is a command
    runs: tuple[tuple[str, str], ...] = attrs.field(default=(), validator=_valid_runs)  # (option, kind)
    strict: tuple[str, ...] = ()  # options allow_commands refuses ("-S*": with anything attached)
    never_plain: bool = False  # never a plain command under allow_commands
    reserved: str = ""  # "word": a reserved word; "before": one a command follows ({, !, do)
    subscripts: bool = False  # evaluates a quoted array subscript: declare 'a[$(cmd)]'
    effect: str = attrs.field(default="", validator=attrs.validators.in_(EFFECTS))
    destroys: frozenset[str] = frozenset()  # effect "arguments"/"flag": the subcommands or option letters
    setter: str | None = None  # sets the variables it names; the letters of its options taking a value
    declares: bool = False  # declare, export: its NAME words are variables it sets
    changes_directory: bool = False  # cd, pushd
    sets_positional: bool = False  # set -- WORDS: "$@" is then those words

    def __attrs_post_init__(self) -> None:
        """A record holds the facts its reader and effect need, and no other's."""
        problems = [
            problem
            for problem, wrong in (
                ("a wrapper needs reader 'wrapper'", (self.wrapper is not None) != (self.reader == "wrapper")),
                ("options need reader 'options'", (self.options is not None) != (self.reader == "options")),
                ("code options belong to an interpreter", bool(self.code_options) and self.reader != "interpreter"),
                (
                    "a module option belongs to an interpreter",
                    bool(self.module_option) and self.reader != "interpreter",
                ),
                (
                    "effects 'arguments' and 'flag' need destroys",
                    bool(self.destroys) != (self.effect in {"arguments", "flag"}),
                ),
                ("reserved is 'word' or 'before'", self.reserved not in {"", "word", "before"}),
                ("find and fd read their strict options", self.reader in {"find", "fd"} and not self.strict),
            )
            if wrong
        ]
        if problems:
            msg = f"the program record {self.name!r} is inconsistent: " + "; ".join(problems)
            raise ValueError(msg)


_RECORDS: list[Program] = []


def _p(name: str, spellings: str = "", **facts: object) -> None:
    _RECORDS.append(Program(name, tuple(spellings.split()), **facts))  # type: ignore[arg-type]  # Program's fields


def _each(names: str, **facts: object) -> None:
    for name in names.split():
        _RECORDS.append(Program(name, **facts))  # type: ignore[arg-type]  # Program's fields


def _w(name: str, spellings: str = "", *, never_plain: bool = False, runs: object = (), **facts: object) -> None:
    wrapper = Wrapper(**facts)  # type: ignore[arg-type]  # Wrapper's fields
    _p(name, spellings, reader="wrapper", wrapper=wrapper, never_plain=never_plain, runs=runs)


# -- shells and interpreters: code given with -c, -e, --eval=, or read from the input
_each("sh posh oksh loksh hush lksh", reader="shell")
_p("bash", "bash5 rbash", reader="shell", versioned=True)
_p("ksh", "ksh93", reader="shell", versioned=True)
_each("zsh dash mksh yash ash", reader="shell", versioned=True)
_p(
    "python",
    "py pypy",
    prefixes=("python",),
    versioned=True,
    reader="interpreter",
    code_options=("-c",),
    module_option="-m",
)
_p("perl", versioned=True, reader="interpreter", code_options=("-e", "-E"))
_p("ruby", "irb jruby", versioned=True, reader="interpreter", code_options=("-e",))
_p("node", "nodejs", versioned=True, reader="interpreter", code_options=("-e", "--eval", "-p", "--print"))
_p("php", "php-cgi php-cli", versioned=True, reader="interpreter", code_options=("-r", "-B", "-R", "-E", "-F"))
_p("lua", "luajit texlua", versioned=True, reader="interpreter", code_options=("-e", "-l"))
_p("tclsh", "jimsh wish", versioned=True, reader="interpreter", code_options=("-c",))
_p("fish", versioned=True, reader="interpreter", code_options=("-c", "--command", "-C", "--init-command"))
_each("csh tcsh expect", versioned=True, reader="interpreter", code_options=("-c",))
_p(
    "pwsh",
    "powershell pwsh-preview",
    versioned=True,
    reader="interpreter",
    code_options=("-c", "-command", "-Command", "-e", "-EncodedCommand", "-encodedcommand", "-ec"),
)
_p("R", "Rscript", versioned=True, reader="interpreter", code_options=("-e", "--expr"))
_p("deno", versioned=True, reader="interpreter", code_options=("eval",))
_p("bun", versioned=True, reader="interpreter", code_options=("-e", "--eval", "-p", "--print"))
_each("jshell groovy", versioned=True, reader="interpreter")
_p("osascript", versioned=True, reader="interpreter", code_options=("-e",))
_p("guile", versioned=True, reader="interpreter", code_options=("-c", "-e", "-l"))
_p("julia", versioned=True, reader="interpreter", code_options=("-e", "--eval", "-E", "--print", "-L", "--load"))
_each("ed red", reader="interpreter")
_each("source .", reader="interpreter", reads_program=False, never_plain=True)
_p("awk", "gawk mawk nawk original-awk busybox-awk", versioned=True, reader="awk", effect="awk")

# -- programs that run another program: how each reads its options (GNU/util-linux, sudo and bash manuals)
_w(
    "sudo",
    short_values="ugpCDrtUThR",
    short_flags="AbEHnPSsiKkVlve",
    long_values="user group prompt close-from chdir role type other-user host chroot command-timeout",
    long_flags="askpass background preserve-env set-home non-interactive preserve-groups stdin shell login "
    "reset-timestamp remove-timestamp list validate edit",
    no_command="KkVlve",
    shell="si",
    shell_long="shell login",
    chdir="D",
)
_w("doas", short_values="uC", short_flags="ns", shell="s")
_p(
    "env",
    "genv",
    reader="wrapper",
    strict=("-S*", "--sp*"),  # -S/--split-string (any abbreviation) builds the command from a string
    wrapper=Wrapper(
        short_values="uCS",
        short_flags="i0v",
        long_values="unset chdir split-string",
        long_flags="ignore-environment null debug",
        chdir="C",
        assigns=True,
        splits="S",
    ),
)
_w("nohup", "gnohup")
_w(
    "time",
    short_values="fo",
    short_flags="pavq",
    long_values="format output",
    long_flags="portability append verbose quiet",
    never_plain=True,
)
_w("command", short_flags="pvV", no_command="vV", never_plain=True)
_w("builtin", never_plain=True)
_w("exec", short_values="a", short_flags="cl", never_plain=True)
_w("coproc", never_plain=True, takes_name=True)
_w("nice", "gnice", short_values="n", long_values="adjustment", numeric=True)
_w(
    "ionice",
    short_values="cnp",
    short_flags="t",
    long_values="class classdata pid",
    long_flags="ignore",
    no_command="p",
)
_w(
    "timeout",
    "gtimeout",
    short_values="sk",
    short_flags="v",
    long_values="signal kill-after",
    long_flags="preserve-status foreground verbose",
    positionals=1,
)
_w(
    "xargs",
    "gxargs",
    short_values="adEILnPs",
    short_flags="0oprtx",
    long_values="arg-file delimiter eof replace max-lines max-args max-procs max-chars process-slot-var",
    long_flags="null open-tty interactive no-run-if-empty verbose exit show-limits",
    reads_input=True,
    never_plain=True,
)
_w(
    "strace",
    short_values="eopsuEaIbOSPXU",
    short_flags="fFcCdDhiqrtTvVwxyzZkn",
    long_values="expr output attach string-limit user env columns",
    long_flags="follow-forks summary-only summary-wall-clock decode-fds",
    runs=(("-o", "pipe"), ("--output", "pipe")),
)
_w("ltrace", short_values="aeEFlnopsuAD", short_flags="bcCfhiLrStTV", runs=(("-o", "pipe"), ("--output", "pipe")))
_w(
    "watch",
    short_values="nq",
    short_flags="bcdegptwrx",
    long_values="interval equexit",
    long_flags="beep color differences errexit chgexit precise no-title no-wrap exec no-rerun",
    line=True,
    line_off="x exec",
)
_w("setsid", short_flags="cfw", long_flags="ctty fork wait")
_w("chroot", "gchroot", long_values="userspec groups", long_flags="skip-chdir", positionals=1, bare=("sh", "-i"))
_w("stdbuf", "gstdbuf", short_values="ioe", long_values="input output error")
_w("unbuffer", short_flags="p")
_w("torsocks", short_values="uapP", short_flags="idq")
_w("proxychains", "proxychains4", short_values="f", short_flags="q")
_w(
    "flock",
    short_values="wEc",
    short_flags="sxunoF",
    long_values="timeout conflict-exit-code command",
    long_flags="shared exclusive unlock nonblock close no-fork verbose",
    positionals=1,
    code="c",
)
_w(
    "su",
    short_values="cgGsw",
    short_flags="lmpfP",
    long_values="command group supp-group shell whitelist-environment",
    long_flags="login preserve-environment pty",
    code="c",
    login=True,
)
_w(
    "runuser",
    short_values="cgGsuw",
    short_flags="lmpfP",
    long_values="command group supp-group shell user",
    long_flags="login preserve-environment pty",
    code="c",
    login=True,
)
_w(
    "script",
    short_values="cEtTIOBm",
    short_flags="aefqr",
    long_values="command echo timing log-in log-out log-io logging-format",
    long_flags="append return flush quiet",
    code="c",
)
_w("taskset", short_flags="ac", long_flags="all-tasks cpu-list", positionals=1, no_command="p")
_w(
    "chrt",
    short_flags="abdfiormRv",
    long_values="sched-runtime sched-deadline sched-period",
    positionals=1,
    no_command="p",
)
_w("caffeinate", short_values="tw", short_flags="dimsu")
_w("pkexec", long_values="user", long_flags="disable-internal-agent keep-cwd")
_w(
    "run0",
    short_values="uDg",
    long_values="user group chdir unit property description slice nice setenv background machine",
    long_flags="no-ask-password",
    chdir="D",
)
_w("sg", short_values="c", positionals=1, code="c")
_w(
    "nsenter",
    short_values="tSGwre",
    short_flags="amuinpUCTFZ",
    long_values="target setuid setgid wd root env",
    long_flags="all mount uts ipc net pid user cgroup time preserve-credentials no-fork follow-context",
)
_w(
    "unshare",
    short_values="SGRw",
    short_flags="muinpUCTfrc",
    long_values="setuid setgid root wd propagation map-user map-group",
    long_flags="mount uts ipc net pid user cgroup time fork map-root-user map-current-user kill-child mount-proc",
)
# options these take are many: any option makes the command opaque, none runs the program
_each(
    "firejail fakeroot fakechroot eatmydata proot catchsegv valgrind setpriv prlimit numactl xvfb-run dbus-run-session",
    reader="wrapper",
    wrapper=Wrapper(),
)
_each("dbus-launch chpst softlimit daemonize systemd-nspawn bwrap trickle nocache", reader="wrapper", wrapper=Wrapper())
_w("rlwrap", runs=(("-z", "other"), ("--filter", "other")))
_w("capsh", prefix=("bash",))  # capsh -- -c CODE: its options are opaque, and "--" hands the rest to bash
_w("chronic", short_flags="ev")
_w("faketime", short_flags="f", positionals=1)
_w("sshpass", short_values="pfd", short_flags="ve")
_w("cgexec", short_values="g", long_flags="sticky")
_w(
    "cpulimit",
    short_values="lpe",
    short_flags="zikvf",
    long_values="limit pid exe",
    long_flags="lazy include-children kill verbose foreground",
)
_each("envdir setuidgid", reader="wrapper", wrapper=Wrapper(positionals=1))
_w("tsp", short_flags="nfgB")
_w("entr", short_flags="acdnprsz", shell="s")
_w("watchexec", line=True)  # its command runs through a shell
_w(
    "systemd-run",
    short_values="pEuHMd",
    short_flags="qtPG",
    long_values="unit property description slice uid gid nice working-directory setenv",
    long_flags="user system scope pty pipe wait quiet collect same-dir",
)
_p("busybox", prefixes=("busybox",), reader="busybox")  # busybox APPLET ...: the applet runs (busybox.static too)
_p("toybox", prefixes=("toybox",), reader="busybox")
_p("ip", reader="netns")  # ip netns exec NAME cmd
_each("at batch", reader="at", never_plain=True)  # they run the commands they read
_p("parallel", reader="parallel", never_plain=True)

# -- ordinary programs with options or operands that run a command
_p("find", "gfind", reader="find", effect="find", strict=("-exec", "-execdir", "-ok", "-okdir"))
_p("fd", "fdfind", reader="fd", strict=("-x", "-X", "--exec", "--exec-batch"))
_p("git", reader="git")
_p("ssh", reader="ssh")
_p("rsync", reader="options", options=Options("e", ("--rsh",), "BfMT"), effect="sync")
_TAR_CODE = (
    *("--to-command", "--use-compress-program", "--info-script", "--new-volume-script", "--rsh-command"),
    "--checkpoint-action",  # --checkpoint-action=exec=CMD
)
_p(
    "tar",
    "gtar bsdtar star",
    reader="options",
    effect="tar",
    options=Options(
        "IF",
        _TAR_CODE,
        "bCfgHKLNTVX",
        bundled=True,
    ),
)
_p("sed", "gsed", reader="sed", effect="sed")
_p("hyperfine", reader="hyperfine")  # each operand runs through a shell
_p("tmux", reader="tmux")  # tmux new 'cmd': a command line
_p("screen", reader="screen")
_p("man", runs=(("-P", "shell"), ("--pager", "shell"), ("-H", "shell"), ("--html", "shell")))
_p("zip", runs=(("-TT", "shell"), ("--unzip-command", "shell")))
_p("tcpdump", runs=(("-z", "other"), ("--postrotate-command", "other")))
_p(
    "vi",
    "vim nvim vim.basic vim.tiny view ex rvim gvim",
    runs=(("-c", "other"), ("--cmd", "other"), ("-S", "other"), ("+", "other")),
)
_p("less", runs=(("+", "pager"),))
_p("more", "bsdmainutils-more", runs=(("+", "pager"),))
_p(
    "gdb",
    "gdb-multiarch",
    runs=tuple((o, "other") for o in ("-ex", "-iex", "--eval-command", "-eval-command", "-x", "-ix")),
)
_p("lldb", runs=(("-o", "other"), ("--one-line", "other"), ("-s", "other"), ("--source", "other")))
_p(
    "emacs",
    "emacs-nox emacsclient",
    runs=(("--eval", "other"), ("-l", "other"), ("--load", "other"), ("-f", "other"), ("--funcall", "other")),
)
_p("make", runs=(("--eval", "other"), ("-E", "other")))
_p("nc", "ncat netcat nc.openbsd nc.traditional", runs=(("-e", "other"), ("-c", "shell")))
_p("openssl", runs=(("-engine", "other"),))
_p("nmap", runs=(("--script", "other"),))
_p("sort", runs=(("--compress-program", "other"),))
_p("split", runs=(("--filter", "shell"),))
_p("wget", runs=(("--use-askpass", "other"), ("-e", "other"), ("--execute", "other")))
_p("scp", runs=(("-S", "other"),))
_p("sftp", runs=(("-S", "other"), ("-D", "other")))
_each("mysql mariadb", runs=(("-e", "bang"), ("--execute", "bang")))
_p("psql", runs=(("-c", "bang"), ("--command", "bang")))
_p("sqlite3", runs=(("", "dot"), ("-cmd", "bang")))  # .shell CMD, .system CMD, .once |CMD
_p("dc", runs=(("-e", "bang"), ("--expression", "bang")))
_each("gnuplot ghc scala", runs=(("-e", "other"),))
_p("octave", runs=(("--eval", "other"),))
_each("racket elixir", runs=(("-e", "other"), ("--eval", "other")))
_p("sbcl", runs=(("--eval", "other"),))
_p("clisp", runs=(("-x", "other"),))
_p("erl", runs=(("-eval", "other"),))
_p("swipl", runs=(("-g", "other"),))
_p("socat", runs=(("", "address"),))  # EXEC:cmd, SYSTEM:cmd

# -- shell builtins and reserved words: what they evaluate, set, or hide
_p("eval", reader="eval", never_plain=True)
_p("trap", reader="trap", never_plain=True)
_p("hash", reader="hash", never_plain=True)
_p("alias", reader="alias", never_plain=True)
_p("enable", runs=(("-f", "other"),), never_plain=True)
_each("mapfile readarray", runs=(("-C", "shell"),), never_plain=True, subscripts=True, setter="dnOsuCc")
_p("read", subscripts=True, setter="dinNptu")
_p("printf", subscripts=True, setter="")
_p("getopts", subscripts=True, setter="", never_plain=True)
_each("declare typeset local export readonly", subscripts=True, declares=True, never_plain=True)
_each("unset let wait", subscripts=True, never_plain=True)
_each("test [ shift return exit kill ulimit", subscripts=True)
_p("set", never_plain=True, sets_positional=True)
_each("cd pushd", changes_directory=True)
_each("unalias shopt fc bind complete compgen history caller disown fg bg ))", never_plain=True)
_each("{ !", never_plain=True, reserved="before")
_each("do then else elif if while until", reserved="before")
_each("} [[ ]] (( select function", never_plain=True, reserved="word")
_each("done fi esac for case in", reserved="word")

# -- what programs destroy or write
_p("mkfs", "mke2fs", prefixes=("mkfs", "mke2fs"), effect="destructive")
_each(
    "mkswap mkdosfs mkntfs mkexfatfs mkfatfs mkreiserfs mkudffs mkbtrfs shutdown reboot halt poweroff init"
    " telinit kexec fdisk sfdisk cfdisk gdisk sgdisk parted wipefs shred blkdiscard sg_format lvremove vgremove"
    " pvremove",
    effect="destructive",
)
_p(
    "systemctl",
    effect="arguments",
    destroys=frozenset(
        {"poweroff", "reboot", "halt", "kexec", "soft-reboot"}
        | {"poweroff.target", "reboot.target", "halt.target", "kexec.target"}
    ),
)
_p("loginctl", effect="arguments", destroys=frozenset({"poweroff", "reboot", "halt"}))
_p("nvme", effect="arguments", destroys=frozenset({"format", "sanitize"}))
_p("cryptsetup", effect="arguments", destroys=frozenset({"luksFormat", "erase", "luksErase"}))
_p("zpool", effect="arguments", destroys=frozenset({"destroy", "labelclear"}))
_p("mdadm", effect="arguments", destroys=frozenset({"--zero-superblock"}))
_p(
    "hdparm",
    effect="arguments",
    destroys=frozenset({"--security-erase", "--security-erase-enhanced", "--trim-sector-ranges", "--write-sector"}),
)
_p("badblocks", effect="flag", destroys=frozenset({"w"}))  # badblocks -w writes every block
_p("rm", "grm", effect="recursive")
_p("chmod", "gchmod", effect="recursive")
_p("chown", "gchown", effect="recursive")
_p("chgrp", "gchgrp", effect="recursive")
_each("chattr setfacl srm wipe", effect="recursive")
_p("cp", "gcp", effect="copy")
_p("install", "ginstall", effect="copy")
_p("mv", "gmv", effect="move")
_p("ddrescue", effect="rescue")
_p("truncate", "gtruncate", effect="size")
_p("fallocate", effect="size")
_p("dd", "gdd", effect="dd")
_each("dcfldd dc3dd", effect="dd")
_p("tee", "gtee", effect="tee")


def index(records: list[Program]) -> tuple[dict[str, Program], dict[str, str]]:
    """The records by family name, and every spelling (a family's own name too) → its family;
    a family with two records, or a spelling of two families, is refused."""
    programs: dict[str, Program] = {}
    spellings: dict[str, str] = {}
    for record in records:
        if record.name in programs:
            msg = f"the program {record.name!r} has two records"
            raise ValueError(msg)
        programs[record.name] = record
        for spelling in (record.name, *record.spellings):
            if spellings.setdefault(spelling, record.name) != record.name:
                msg = f"{spelling!r} is a spelling of both {spellings[spelling]!r} and {record.name!r}"
                raise ValueError(msg)
    return programs, spellings


#: Every family's record, keyed by its name.
PROGRAMS, _SPELLINGS = index(_RECORDS)
_PREFIXES = [(prefix, record.name) for record in PROGRAMS.values() for prefix in record.prefixes]
_VERSIONED = sorted(
    (s for r in PROGRAMS.values() if r.versioned for s in (r.name, *r.spellings)), key=len, reverse=True
)
_VERSION = re.compile(r"(?P<name>" + "|".join(map(re.escape, _VERSIONED)) + r")[-_.]?v?\d[\w.+-]*")
_PREFIX_TUPLE = tuple(prefix for prefix, _ in _PREFIXES)
_NONE = Program("")


def family(word: str) -> str:
    """The family of the program ``word`` names (``/usr/bin/python3.11`` → ``python``)."""
    name = posixpath.basename(word)
    known = _SPELLINGS.get(name)
    if known is not None:
        return known
    if name.startswith(_PREFIX_TUPLE):
        return next(family_name for prefix, family_name in _PREFIXES if name.startswith(prefix))
    versioned = _VERSION.fullmatch(name)
    if versioned is not None:
        return _SPELLINGS[versioned.group("name")]
    return name


def program(name: str) -> Program:
    """The record of the family ``name`` (a family name, see :func:`family`); a program
    the table does not list runs nothing and destroys nothing it knows of."""
    return PROGRAMS.get(name, _NONE)


def strict_refusal(name: str, args: tuple[object, ...]) -> str | None:
    """Why ``allow_commands`` refuses these arguments of the family ``name`` (an option that
    runs a command built from the arguments: :attr:`Program.strict`), or None."""
    record = program(name)
    if not record.strict:
        return None
    for arg in args:
        if not isinstance(arg, str) or not arg.startswith("-"):
            if record.wrapper is not None:
                return None  # a wrapper's options end at its command (env -i A=1 ls -S)
            continue
        if any(arg == o or (o.endswith("*") and arg.startswith(o[:-1])) for o in record.strict):
            return f"{name} {arg.partition('=')[0]} runs a command built from its arguments"
    return None
