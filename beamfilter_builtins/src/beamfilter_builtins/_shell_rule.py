"""The ``shell`` rule of ``tool_policy``: built-in denials, an allow-list, and opaque commands.

A command is parsed once (:mod:`._shell_syntax`), every program it runs is found
through wrappers and code-carrying arguments (:mod:`._shell_programs`), and each is
checked. Shell code found inside (``bash -c '…'``, ``watch …``, ``eval …``,
``git -c core.sshCommand=…``) is parsed and checked the same way. What cannot be known
before the command runs is *opaque*: denied unless ``allow_opaque``.
"""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from collections.abc import Iterator, Sequence

import attrs

from ._shell_programs import (
    Call,
    Code,
    EnvAssignment,
    StdinScript,
    normalise_path,
    program_name,
    unwrap,
)
from ._shell_syntax import Opaque, Redirect, Script, SimpleCommand, Word, parse_script

__all__ = ["ShellRule", "ShellVerdict"]

MAX_DEPTH = 8  # bash -c "bash -c '…'": nesting deeper than this is refused
CACHE_SIZE = 256  # verdicts remembered per rule
CACHED_LENGTH = 4096  # longer commands are not remembered (bounds the cache's memory)

_DESTRUCTIVE = frozenset(
    {"mkfs", "mkswap", "mkdosfs", "mkntfs", "shutdown", "reboot", "halt", "poweroff", "init", "telinit"}
    | {"fdisk", "sfdisk", "cfdisk", "gdisk", "sgdisk", "parted", "wipefs", "shred", "blkdiscard"}
)
_RECURSIVE_PROGRAMS = frozenset({"rm", "chmod", "chown", "chgrp"})
_COPIERS = frozenset({"cp", "install", "mv"})  # they write their target
_SIZERS = frozenset({"truncate", "fallocate"})  # they write every file they name
_DEVICE = re.compile(r"/dev/(sd|hd|nvme|xvd|vd|disk|mmcblk|dm-|md|loop|nbd|sr|zram|mapper/|mem$|kmem$|port$)")
_GLOB = re.compile(r"[*?\[]")
# Environment variables that load code into whatever runs next.
_LOADS_CODE = re.compile(r"LD_[A-Z_]+|BASH_ENV|ENV|BASH_FUNC_.*|PROMPT_COMMAND|PS4")
# Shell variables that change how later words are split, globbed or run.
_CHANGES_PARSING = re.compile(r"IFS|SHELLOPTS|BASHOPTS|GLOBIGNORE")
# Environment variables whose value is a command line that programs run.
_CODE_VARIABLES = re.compile(
    r".+_COMMAND|GIT_SSH|GIT_EDITOR|GIT_PAGER|GIT_EXTERNAL_DIFF|GIT_ASKPASS|SSH_ASKPASS|EDITOR|VISUAL|PAGER|MANPAGER"
    r"|LESSOPEN|LESSCLOSE|BROWSER|SUDO_ASKPASS|GIT_PROXY_COMMAND"
)
# Redirection targets that are not files a policy needs to check.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2"})


@attrs.frozen
class ShellVerdict:
    """The outcome for one command: why it is denied (or None) and the files it redirects to/from.

    ``redirects`` lets the policy check each target against the tool's path rules.
    """

    reason: str | None
    redirects: tuple[Redirect, ...] = ()


class ShellRule:
    """Built-in denials for dangerous shell commands, user deny patterns and an allow-list.

    Args:
        deny: Regular expressions searched in the raw command *and* in its normalised
            form (each command's expanded words joined by spaces, commands by ``;``).
        allow_commands: When given, every program the command runs — after wrappers
            such as ``sudo``, ``timeout``, ``xargs``, in ``bash -c``, ``find -exec``,
            substitutions and functions — must be listed. A bare name (``ls``) matches
            only a bare program; ``/usr/bin/ls`` or ``./ls`` only the same path.
        allow_env: Variables a command may assign (``FOO=1 cmd``, ``export FOO=1``).
            Checked when ``allow_commands`` is given or this is set.
        builtin: Apply the built-in denials (recursive delete of ``/`` or home, data
            piped into an interpreter, generated code, ``mkfs``, raw device writes,
            fork bombs, variables that load code, ...).
        allow_opaque: Allow what cannot be known before the command runs (a variable as
            the program or as the target of a built-in rule, ``python -c``, an unknown
            wrapper option). Off: such commands are denied.
    """

    __slots__ = ("_cache", "allow_commands", "allow_env", "allow_opaque", "builtin", "deny")

    def __init__(
        self,
        deny: Sequence[re.Pattern[str]],
        allow_commands: frozenset[str] | None,
        builtin: bool,
        *,
        allow_env: frozenset[str] | None = None,
        allow_opaque: bool = False,
    ) -> None:
        self.deny = tuple(deny)
        self.allow_commands = None if allow_commands is None else frozenset(_program_key(c) for c in allow_commands)
        self.allow_env = allow_env if allow_env is not None or allow_commands is None else frozenset()
        self.builtin = builtin
        self.allow_opaque = allow_opaque
        # A verdict depends on the command text alone: models repeat commands, and parsing a
        # pipeline of three or more commands costs tree-sitter-bash about 0.1 ms.
        self._cache: OrderedDict[str, ShellVerdict] = OrderedDict()

    def check(self, command: str) -> str | None:
        """Why ``command`` is denied, or None."""
        return self.analyse(command).reason

    def analyse(self, command: str) -> ShellVerdict:
        """Decide on ``command`` and list its redirections (for the path rules)."""
        cache = self._cache
        verdict = cache.get(command)
        if verdict is not None:
            with contextlib.suppress(KeyError):  # another thread may have evicted it meanwhile
                cache.move_to_end(command)
            return verdict
        verdict = self._analyse(command)
        if len(command) <= CACHED_LENGTH:
            cache[command] = verdict
            while len(cache) > CACHE_SIZE:
                with contextlib.suppress(KeyError):
                    cache.popitem(last=False)
        return verdict

    def _analyse(self, command: str) -> ShellVerdict:
        if "\x00" in command:
            return ShellVerdict("the command contains a NUL byte")
        if not command.isascii():
            try:
                command.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (e.g. read with surrogateescape)
                return ShellVerdict("the command contains a lone surrogate, which is not text a shell reads")
        script = parse_script(command)
        if script.error is not None:
            return ShellVerdict(script.error)
        found = _Findings()
        self._collect(script, found, 0)
        if found.error is not None:
            return ShellVerdict(found.error)
        normalised = " ; ".join(" ".join(str(w) for w in argv) for argv in found.argvs)
        for pattern in self.deny:
            if pattern.search(command) or pattern.search(normalised):
                return ShellVerdict(f"the command matches the deny pattern {pattern.pattern!r}")
        if self.builtin and found.denied:
            return ShellVerdict(found.denied[0])
        if found.not_allowed:
            return ShellVerdict(found.not_allowed[0])
        if found.opaque and not self.allow_opaque:
            return ShellVerdict(found.opaque[0] + " (allow_opaque is off)")
        return ShellVerdict(None, tuple(found.redirects))

    def _collect(self, script: Script, found: _Findings, depth: int) -> None:
        for command in script.commands:
            if command.function is not None and command.argv and command.argv[0] == command.function:
                found.denied.append("the command is a fork bomb (a function that calls itself)")
            self._assignments(command, found, depth)
            for redirect in command.redirects:
                self._redirect(redirect, found)
            for finding in unwrap(command.argv, command.stdin):
                if isinstance(finding, Call):
                    found.argvs.append(finding.argv)
                    self._call(finding, found, script)
                elif isinstance(finding, Code):
                    self._code(finding, found, depth)
                elif isinstance(finding, EnvAssignment):
                    self._assign(finding.name, finding.value, found, depth)
                elif isinstance(finding, StdinScript):
                    if finding.stdin is not None:
                        found.denied.append(f"the command pipes data into the interpreter {finding.program!r}")
                else:
                    found.opaque.append(finding.reason)

    def _code(self, code: Code, found: _Findings, depth: int) -> None:
        text = code.text
        if isinstance(text, Opaque):
            if _is_substitution(text):
                found.denied.append(f"the command runs code generated by a command substitution ({code.via})")
            else:
                found.opaque.append(f"{code.via} runs {text}, which is only known at run time")
            return
        if depth >= MAX_DEPTH:
            found.error = f"the command nests code more than {MAX_DEPTH} levels deep"
            return
        nested = parse_script(text)
        if nested.error is not None:
            found.error = f"the code run by {code.via} is unreadable: {nested.error}"
            return
        if code.stdin is not None:  # bash -c 'sh' < data: the inner commands read that data
            nested = attrs.evolve(
                nested, commands=tuple(attrs.evolve(c, stdin=c.stdin or code.stdin) for c in nested.commands)
            )
        self._collect(nested, found, depth + 1)

    def _assignments(self, command: SimpleCommand, found: _Findings, depth: int) -> None:
        for name, value in command.assignments:
            self._assign(name, value, found, depth)

    def _assign(self, name: str, value: Word, found: _Findings, depth: int) -> None:
        if _LOADS_CODE.fullmatch(name):
            found.denied.append(f"the command sets {name}, which loads code into the programs it runs")
        elif _CHANGES_PARSING.fullmatch(name):
            found.denied.append(f"the command sets {name}, which changes how the shell reads later commands")
        elif _CODE_VARIABLES.fullmatch(name):
            self._code(Code(value, None, f"the variable {name}"), found, depth)
        if self.allow_env is not None and name not in self.allow_env:
            listed = ", ".join(sorted(self.allow_env)) or "none"
            found.not_allowed.append(f"the command assigns the variable {name!r}, which is not in allow_env ({listed})")

    def _redirect(self, redirect: Redirect, found: _Findings) -> None:
        target = redirect.target
        if isinstance(target, Opaque):
            found.opaque.append(f"the redirection {redirect.operator} {target} goes to a file only known at run time")
            return
        if redirect.writes and _DEVICE.match(normalise_path(target)):
            found.denied.append("the command writes a raw device")
        if target not in _HARMLESS_TARGETS:
            found.redirects.append(redirect)

    def _call(self, call: Call, found: _Findings, script: Script) -> None:
        program = call.argv[0]
        if isinstance(program, Opaque):
            found.opaque.append(f"the program {program} is only known at run time")
            return
        if self.allow_commands is not None and _program_key(program) not in self.allow_commands:
            allowed = ", ".join(sorted(self.allow_commands))
            found.not_allowed.append(f"the program {program!r} is not in the allowed commands ({allowed})")
        for denial in _builtin(program_name(program), call.argv[1:]):
            (found.opaque if denial.startswith("?") else found.denied).append(denial.lstrip("?"))


@attrs.define
class _Findings:
    denied: list[str] = attrs.Factory(list)
    not_allowed: list[str] = attrs.Factory(list)
    opaque: list[str] = attrs.Factory(list)
    redirects: list[Redirect] = attrs.Factory(list)
    argvs: list[tuple[Word, ...]] = attrs.Factory(list)
    error: str | None = None


def _program_key(program: str) -> str:
    """Bare names stay as they are; a path-qualified program is normalised (``.//ls`` → ``./ls``)."""
    if "/" not in program:
        return program
    normal = normalise_path(program)
    return normal if normal.startswith(("/", "~")) or "/" in normal else "./" + normal


def _is_substitution(word: Opaque) -> bool:
    return any(mark in word.source for mark in ("$(", "`", "<(", ">("))


def _builtin(name: str, args: tuple[Word, ...]) -> Iterator[str]:
    """The built-in denials of one program call; a leading ``?`` marks an opaque finding."""
    if name in _DESTRUCTIVE:
        yield f"the program {name!r} is destructive"
    elif name in _RECURSIVE_PROGRAMS:
        yield from _recursive_change(name, args)
    elif name == "find":
        yield from _find(args)
    elif name == "dd":
        for arg in args:
            if isinstance(arg, Opaque):
                yield f"?dd has the operand {arg}, which is only known at run time"
            elif arg.startswith("of=") and _DEVICE.match(normalise_path(arg[3:])):
                yield "the command writes a raw device with dd"
    elif name == "tee" and any(isinstance(a, str) and _DEVICE.match(normalise_path(a)) for a in args):
        yield "the command writes a raw device"
    elif name in _COPIERS | _SIZERS and _writes_a_device(name, args):
        yield f"the command writes a raw device with {name}"


def _is_device(path: str) -> bool:
    return _DEVICE.match(normalise_path(path)) is not None


def _writes_a_device(name: str, args: tuple[Word, ...]) -> bool:
    """Whether a copier or sizer writes a device. truncate and fallocate write every file
    they name. cp, install and mv write their target (the last operand, ``-t DIR``,
    ``-tDIR``, ``--target-directory=DIR``), mv also its sources (moving a device node away
    is no read); only the source of a plain copy is read (cp /dev/sda x.img). With ``-t``
    a device operand is not told apart from the target: it is refused."""
    if name in _SIZERS:
        return any(isinstance(a, str) and not a.startswith("-") and _is_device(a) for a in args)
    operands: list[Word] = []
    targeted = options_done = False
    for arg in args:
        if isinstance(arg, str) and not options_done and arg.startswith("-") and arg != "-":
            if arg == "--":
                options_done = True
                continue
            long = arg.startswith("--")
            targeted = targeted or arg.startswith("--target-directory") or (not long and "t" in arg[1:])
            # a value joined to its option: --target-directory=/dev/sda, -vt/dev/sda
            value = arg.partition("=")[2] if long else arg[arg.find("/") :] if "/" in arg else ""
            if value and _is_device(value):
                return True
            continue
        operands.append(arg)
    written = operands if targeted or name == "mv" else operands[1:]
    return any(isinstance(word, str) and _is_device(word) for word in written)


def _recursive_change(name: str, args: tuple[Word, ...]) -> Iterator[str]:
    recursive = False
    maybe_recursive = False  # rm "$OPT" /: the option may be -r
    operands: list[Word] = []
    options = True
    for arg in args:
        if isinstance(arg, Opaque):
            maybe_recursive = maybe_recursive or options
            operands.append(arg)
        elif options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            long = arg.startswith("--")
            recursive = recursive or arg == "--recursive" or (not long and ("r" in arg or "R" in arg))
        else:
            operands.append(arg)
    for target in operands:
        if isinstance(target, Opaque):
            # unquoted, $X may split into "-rf /"; quoted, it is one word: harmful only with -r
            if recursive or not _one_word(target):
                yield f"?{name}{' -r' if recursive else ''} runs on {target}, which is only known at run time"
        elif _sweeping(target):
            if recursive:
                yield f"the command runs {name} recursively from / or the home directory"
            elif maybe_recursive:
                yield f"?{name} runs on {target} with options only known at run time"


def _one_word(word: Opaque) -> bool:
    return word.source.startswith('"') and word.source.endswith('"')  # "$x": never a lone quote


# a name made of wildcards alone (``*``, ``.*``, ``.[!.]*``): it matches every entry, or every hidden one
_WILDCARD = re.compile(r"(?:[.*?]|\[[^]/]*\])*\*(?:[.*?]|\[[^]/]*\])*")


def _sweeping(target: str, cwd: bool = True) -> bool:
    """Whether ``target`` is ``/``, a home directory or (with ``cwd``) the current directory
    as a whole (after ``//``, ``.`` and ``..`` are resolved), or a glob over one (``/**``)."""
    root = target.startswith("/")
    if not cwd and not root and not target.startswith("~"):
        return False
    rest = target.partition("/")[2] if target.startswith("~") else target
    stack: list[str] = []
    for part in rest.split("/"):
        if part in {"", "."}:
            continue
        if _GLOB.search(part):
            # any glob directly under / is a disaster (/b*); under home or . only a bare wildcard
            return not stack and (root or _WILDCARD.fullmatch(part) is not None)
        if part == "..":
            if not stack:
                return True  # above the starting directory
            stack.pop()
        else:
            stack.append(part)
    return not stack


_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir"})


def _find(args: tuple[Word, ...]) -> Iterator[str]:
    index = 0
    while (
        index < len(args)
        and isinstance(args[index], str)
        and str(args[index]).startswith(("-H", "-L", "-P", "-O", "-D"))
    ):
        index += 2 if args[index] == "-D" else 1
    starts: list[Word] = []
    for arg in args[index:]:
        if isinstance(arg, str) and arg.startswith(("-", "(", "!", ",")) and arg != "-":
            break
        starts.append(arg)
    if not any(a in _FIND_ACTIONS for a in args if isinstance(a, str)):
        return
    for start in starts or ["."]:
        if isinstance(start, Opaque):
            yield f"?find deletes or runs commands from {start}, which is only known at run time"
        elif _sweeping(start, cwd=False):  # find . -name '*.pyc' -delete is everyday work
            yield "the command deletes or runs commands on every file from / or the home directory"
