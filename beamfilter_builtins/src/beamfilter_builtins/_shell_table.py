"""The one program table of the ``shell`` rule: every spelling of a program, and its family.

A program is judged by its *family*: ``/usr/bin/python3.11``, ``pypy3`` and ``py`` are
``python``; ``perl5.36.0`` is ``perl``; ``tclsh8.6`` is ``tclsh``; ``gtar`` and ``bsdtar``
are ``tar``; ``nodejs`` is ``node``; ``mkfs.ext4`` is ``mkfs``. :func:`family` is the only
place that maps a program word to the name every other table (wrappers, interpreters,
destructive programs, code-running options) is keyed by, so each dispatch path sees the
same family for the same program.
"""

from __future__ import annotations

import posixpath
import re

__all__ = [
    "ALIASES",
    "AWKS",
    "CODE_OPTIONS",
    "INTERPRETERS",
    "NEVER_PLAIN",
    "SHELLS",
    "VERSIONED",
    "family",
    "strict_refusal",
]

#: Spellings of a program that are another program's family (GNU ``g`` prefixes, BSD and
#: busybox variants, distribution names).
ALIASES: dict[str, str] = {
    "gtar": "tar",
    "bsdtar": "tar",
    "star": "tar",
    "nodejs": "node",
    "py": "python",
    "pypy": "python",
    "gawk": "awk",
    "mawk": "awk",
    "nawk": "awk",
    "original-awk": "awk",
    "busybox-awk": "awk",
    "gsed": "sed",
    "gfind": "find",
    "gxargs": "xargs",
    "genv": "env",
    "gtimeout": "timeout",
    "gnice": "nice",
    "gnohup": "nohup",
    "gstdbuf": "stdbuf",
    "gchroot": "chroot",
    "gdd": "dd",
    "grm": "rm",
    "gcp": "cp",
    "gmv": "mv",
    "gtee": "tee",
    "gtruncate": "truncate",
    "gchmod": "chmod",
    "gchown": "chown",
    "gchgrp": "chgrp",
    "ginstall": "install",
    "mke2fs": "mkfs",
    "fdfind": "fd",
    "proxychains4": "proxychains",
    "bash5": "bash",
    "rbash": "bash",
    "ksh93": "ksh",
    "jimsh": "tclsh",
    "wish": "tclsh",
    "luajit": "lua",
    "texlua": "lua",
    "php-cgi": "php",
    "php-cli": "php",
    "irb": "ruby",
    "jruby": "ruby",
    "powershell": "pwsh",
    "pwsh-preview": "pwsh",
    "Rscript": "R",
    "ncat": "nc",
    "emacs-nox": "emacs",
    "emacsclient": "emacs",
    "gdb-multiarch": "gdb",
    "bsdmainutils-more": "more",
    "netcat": "nc",
    "nc.openbsd": "nc",
    "nc.traditional": "nc",
    "vim": "vi",
    "nvim": "vi",
    "vim.basic": "vi",
    "vim.tiny": "vi",
    "view": "vi",
    "ex": "vi",
    "rvim": "vi",
    "gvim": "vi",
}

#: Families whose programs carry a version in their name (``python3.11``, ``perl5.36.0``,
#: ``tclsh8.6``, ``lua5.4``, ``php8.2``, ``ruby3.1``, ``node18``, ``pypy3.10``).
VERSIONED = (
    "python",
    "pypy",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "tclsh",
    "wish",
    "jimsh",
    "pwsh",
    "bash",
    "zsh",
    "ksh",
    "gawk",
    "awk",
    "guile",
    "julia",
    "Rscript",
    "R",
    "deno",
    "bun",
    "irb",
    "expect",
    "jshell",
    "groovy",
    "osascript",
    "fish",
    "tcsh",
    "csh",
    "mksh",
    "dash",
    "yash",
    "ash",
)
_VERSION = re.compile(r"(?P<name>" + "|".join(sorted(VERSIONED, key=len, reverse=True)) + r")[-_.]?v?\d[\w.+-]*")

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "yash", "ash", "posh", "oksh", "loksh", "hush", "lksh"})
#: Interpreters whose code a shell parser cannot read: their ``-c``/``-e`` code is opaque.
INTERPRETERS = frozenset(
    {"python", "perl", "ruby", "node", "php", "lua", "tclsh", "fish", "csh", "tcsh", "pwsh", "R", "deno", "bun"}
    | {"jshell", "groovy", "osascript", "expect", "guile", "julia", "source", ".", "ed", "red"}
)
#: The options that give an interpreter its code as an argument (``-e CODE``, ``--eval=CODE``).
CODE_OPTIONS: dict[str, tuple[str, ...]] = {
    "python": ("-c",),
    "perl": ("-e", "-E"),
    "ruby": ("-e",),
    "node": ("-e", "--eval", "-p", "--print"),
    "php": ("-r", "-B", "-R", "-E", "-F"),
    "lua": ("-e", "-l"),
    "R": ("-e", "--expr"),
    "bun": ("-e", "--eval", "-p", "--print"),
    "deno": ("eval",),
    "fish": ("-c", "--command", "-C", "--init-command"),
    "csh": ("-c",),
    "tcsh": ("-c",),
    "pwsh": ("-c", "-command", "-Command", "-e", "-EncodedCommand", "-encodedcommand", "-ec"),
    "osascript": ("-e",),
    "expect": ("-c",),
    "tclsh": ("-c",),
    "guile": ("-c", "-e", "-l"),
    "julia": ("-e", "--eval", "-E", "--print", "-L", "--load"),
}
AWKS = frozenset({"awk"})

#: Shell builtins and keywords that are never a plain command under ``allow_commands``:
#: they run code given as words, change what later words mean, or hide which program runs.
NEVER_PLAIN = frozenset(
    {"eval", "trap", "hash", "exec", "source", ".", "builtin", "command", "alias", "unalias", "enable"}
    | {"set", "shopt", "fc", "bind", "complete", "compgen", "coproc", "time", "let", "declare", "typeset"}
    | {"local", "export", "readonly", "unset", "mapfile", "readarray", "getopts", "wait", "history"}
    | {"function", "select", "caller", "disown", "fg", "bg"}
    | {"{", "}", "[[", "]]", "!", "((", "))", "xargs", "parallel", "at", "batch"}
)


def family(word: str) -> str:
    """The family of the program ``word`` names (``/usr/bin/python3.11`` → ``python``)."""
    name = posixpath.basename(word)
    alias = ALIASES.get(name)
    if alias is not None:
        return alias
    if name.startswith("python"):
        return "python"
    if name.startswith(("busybox", "toybox")):  # busybox-x86_64, busybox.static
        return name[:7]
    if name.startswith(("mkfs", "mke2fs")):
        return "mkfs"
    versioned = _VERSION.fullmatch(name)
    if versioned is not None:
        base = versioned.group("name")
        return ALIASES.get(base, "python" if base == "pypy" else base)
    return name


# options that make a program run a command built from its arguments, refused under allow_commands
_STRICT_OPTIONS: dict[str, tuple[str, ...]] = {
    "env": ("-S", "--split-string", "--sp", "--spl", "--spli", "--split", "--split-"),
    "find": ("-exec", "-execdir", "-ok", "-okdir"),
    "fd": ("-x", "-X", "--exec", "--exec-batch"),
}


def strict_refusal(name: str, args: tuple[object, ...]) -> str | None:
    """Why ``allow_commands`` refuses these arguments of the family ``name`` (an option that
    runs a command built from the arguments), or None."""
    options = _STRICT_OPTIONS.get(name)
    if options is None:
        return None
    for arg in args:
        if not isinstance(arg, str) or not arg.startswith("-"):
            if name == "env":
                return None  # env's options end at its command
            continue
        if any(arg == o or (o.startswith(("-S", "--s")) and arg.startswith(o)) for o in options):
            return f"{name} {arg.partition('=')[0]} runs a command built from its arguments"
    return None
