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
from collections.abc import Sequence

import attrs

from ._shell_effects import Directories, builtin_denials, places, working_directories, write_denial
from ._shell_programs import (
    Call,
    Chdir,
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

# Environment variables that load code into whatever runs next.
_LOADS_CODE = re.compile(r"LD_[A-Z_]+|BASH_ENV|ENV|BASH_FUNC_.*|PROMPT_COMMAND|PS4")
# Shell variables that change how later words are split, globbed or run.
_CHANGES_PARSING = re.compile(r"IFS|SHELLOPTS|BASHOPTS|GLOBIGNORE|CDPATH")
# Environment variables whose value is a command line that programs run.
_CODE_VARIABLES = re.compile(
    r".+_COMMAND|GIT_SSH|GIT_EDITOR|GIT_PAGER|GIT_EXTERNAL_DIFF|GIT_ASKPASS|SSH_ASKPASS|EDITOR|VISUAL|PAGER|MANPAGER"
    r"|LESSOPEN|LESSCLOSE|BROWSER|SUDO_ASKPASS|GIT_PROXY_COMMAND"
)
# Redirection targets that are not files a policy needs to check.
_HARMLESS_TARGETS = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "/dev/fd/1", "/dev/fd/2"})
_GLOB = re.compile(r"[*?\[]|[@!+]\(")
# Builtins that set the variables they name: read NAME, printf -v NAME, mapfile NAME, getopts OPTS NAME.
_SETTERS = frozenset({"read", "printf", "mapfile", "readarray", "getopts"})
_DECLARES = frozenset({"declare", "typeset", "local", "export", "readonly"})


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
        self._collect(script, found, 0, None)
        cwds = working_directories(found.directories) if found.directories else ()
        if cwds:  # cd /dev && cat x > sda: decide again with every directory a cd may lead to
            found = _Findings(cwds=cwds)
            self._collect(script, found, 0, None)
        if found.error is not None:
            return ShellVerdict(found.error)
        normalised = " ; ".join(" ".join(str(w) for w in argv) for argv in found.argvs)
        for pattern in self.deny:
            if pattern.search(command) or pattern.search(normalised):
                return ShellVerdict(f"the command matches the deny pattern {pattern.pattern!r}")
        if _calls_itself(found.calls):
            found.denied.append(_FORK_BOMB)
        if self.builtin and found.denied:
            return ShellVerdict(found.denied[0])
        if found.not_allowed:
            return ShellVerdict(found.not_allowed[0])
        if found.opaque and not self.allow_opaque:
            return ShellVerdict(found.opaque[0] + " (allow_opaque is off)")
        return ShellVerdict(None, tuple(found.redirects))

    def _collect(self, script: Script, found: _Findings, depth: int, caller: str | None) -> None:
        """Check every command of ``script``; ``caller`` is the function the script runs in (eval in f)."""
        found.functions |= script.functions
        for command in script.commands:
            function = command.function or caller
            if function is not None and command.argv and command.argv[0] == function:
                found.denied.append(_FORK_BOMB)
            self._assignments(command, found, depth)
            for redirect in command.redirects:
                self._redirect(redirect, found)
            for finding in unwrap(command.argv, command.stdin):
                if isinstance(finding, Call):
                    found.argvs.append(finding.argv)
                    self._call(finding, found, depth, function)
                elif isinstance(finding, Code):
                    self._code(finding, found, depth, function)
                elif isinstance(finding, EnvAssignment):
                    self._assign(finding.name, finding.value, found, depth)
                elif isinstance(finding, StdinScript):
                    if finding.stdin is not None:
                        found.denied.append(f"the command pipes data into the interpreter {finding.program!r}")
                elif isinstance(finding, Chdir):
                    found.directories.append(finding.directory)
                else:
                    found.opaque.append(finding.reason)

    def _code(self, code: Code, found: _Findings, depth: int, caller: str | None = None) -> None:
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
        self._collect(nested, found, depth + 1, caller)

    def _assignments(self, command: SimpleCommand, found: _Findings, depth: int) -> None:
        for name, value in command.assignments:
            self._assign(name, value, found, depth)
        if command.argv and command.argv[0] in _DECLARES:
            options = [w for w in command.argv[1:] if isinstance(w, str) and w.startswith(("-", "+"))]
            for word in command.argv[1:]:
                if isinstance(word, str) and _NAME.fullmatch(word):
                    self._named(word, found)  # export LD_PRELOAD: set by read or ${X:=} before
            if any("n" in option for option in options):  # declare -n ref=IFS: ref names IFS
                for _, target in command.assignments:
                    if isinstance(target, str):
                        self._named(target, found)

    def _named(self, name: str, found: _Findings) -> bool:
        """Deny setting a variable that loads code or changes parsing; whether it did."""
        if _LOADS_CODE.fullmatch(name):
            found.denied.append(f"the command sets {name}, which loads code into the programs it runs")
        elif name == "CDPATH":
            found.denied.append("the command sets CDPATH, which changes the directory cd goes to")
        elif _CHANGES_PARSING.fullmatch(name):
            found.denied.append(f"the command sets {name}, which changes how the shell reads later commands")
        else:
            return False
        return True

    def _assign(self, name: str, value: Word, found: _Findings, depth: int) -> None:
        if not self._named(name, found) and _CODE_VARIABLES.fullmatch(name):
            self._code(Code(value, None, f"the variable {name}"), found, depth)
        if self.allow_env is not None and name not in self.allow_env:
            listed = ", ".join(sorted(self.allow_env)) or "none"
            found.not_allowed.append(f"the command assigns the variable {name!r}, which is not in allow_env ({listed})")

    def _redirect(self, redirect: Redirect, found: _Findings) -> None:
        target, operator = redirect.target, redirect.operator
        if isinstance(target, Opaque):
            found.opaque.append(f"the redirection {operator} {target} goes to a file only known at run time")
            return
        if _GLOB.search(target):  # bash expands a glob that matches one file: > /srv/work/lin* follows a link
            found.opaque.append(f"the redirection {operator} {target} goes to a file a glob chooses at run time")
            return
        for place in places(target, found.cwds):
            if place is None:
                found.opaque.append(
                    f"the redirection {operator} {target} goes to a file in a directory only known at run time"
                )
                continue
            denial = write_denial(place) if redirect.writes else None
            if denial is not None:
                found.denied.append(denial)
            if place not in _HARMLESS_TARGETS:
                found.redirects.append(redirect if place == target else Redirect(operator, place))

    def _call(self, call: Call, found: _Findings, depth: int, function: str | None) -> None:
        program = call.argv[0]
        if isinstance(program, Opaque):
            found.opaque.append(f"the program {program} is only known at run time")
            return
        if self.allow_commands is not None and _program_key(program) not in self.allow_commands:
            allowed = ", ".join(sorted(self.allow_commands))
            found.not_allowed.append(f"the program {program!r} is not in the allowed commands ({allowed})")
        name = program_name(program)
        args = call.argv[1:]
        found.calls.append((function, program))
        if name in {"cd", "pushd"}:
            found.directories.append(_directory(args))
        elif name in _SETTERS:
            for variable in _set_names(name, args):
                self._assign(variable, Opaque(f"<what {name} reads>"), found, depth)
        for denial in builtin_denials(name, args, found.cwds):
            (found.opaque if denial.startswith("?") else found.denied).append(denial.lstrip("?"))


@attrs.define
class _Findings:
    denied: list[str] = attrs.Factory(list)
    not_allowed: list[str] = attrs.Factory(list)
    opaque: list[str] = attrs.Factory(list)
    redirects: list[Redirect] = attrs.Factory(list)
    argvs: list[tuple[Word, ...]] = attrs.Factory(list)
    error: str | None = None
    cwds: Directories = ()  # the directories a cd in the command may lead to (second pass)
    directories: list[Word] = attrs.Factory(list)  # the targets of cd, pushd, env -C, sudo -D
    functions: frozenset[str] = frozenset()  # the functions the command (or code it runs) defines
    calls: list[tuple[str | None, str]] = attrs.Factory(list)  # (the function calling, the program)


_FORK_BOMB = "the command is a fork bomb (a function that calls itself)"
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _calls_itself(calls: list[tuple[str | None, str]]) -> bool:
    """Whether functions call each other in a cycle (a(){ b|b& }; b(){ a|a& }); a direct
    self-call is reported where it is found."""
    edges: dict[str, set[str]] = {}
    for caller, program in calls:
        if caller is not None and caller != program:
            edges.setdefault(caller, set()).add(program)
    for start in edges:
        seen: set[str] = set()
        stack = list(edges[start])
        while stack:
            current = stack.pop()
            if current == start:
                return True
            if current not in seen:
                seen.add(current)
                stack.extend(edges.get(current, ()))
    return False


def _directory(args: tuple[Word, ...]) -> Word:
    """Where ``cd``/``pushd`` ``args`` go: ``~`` without an operand, None-like Opaque for ``+N``/``-N``."""
    operands = [a for a in args if not (isinstance(a, str) and a.startswith("-") and a != "-")]
    if not operands:
        return "~"
    target = operands[0]
    if isinstance(target, str) and target[:1] == "+":  # pushd +2: a directory of the stack
        return Opaque(target)
    return target


# options of read and mapfile that take a value (read -p PROMPT NAME); -a NAME names an array
_SETTER_VALUES = {"read": "dinNptu", "mapfile": "dnOsuCc", "readarray": "dnOsuCc"}


def _set_names(name: str, args: tuple[Word, ...]) -> list[str]:
    """The variables ``read``, ``printf -v``, ``mapfile`` and ``getopts`` set."""
    words = [str(a) for a in args]
    if name == "getopts":
        return words[1:2]
    if name == "printf":
        for index, word in enumerate(words):
            if word.startswith("-v"):
                return [word[2:] or (words[index + 1] if index + 1 < len(words) else "")]
        return []
    values = _SETTER_VALUES[name]
    names: list[str] = []
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("-") and len(word) > 1:
            for position, letter in enumerate(word[1:], 1):
                if letter in values or letter == "a":
                    joined = word[position + 1 :]
                    if letter == "a":
                        names.append(joined or (words[index] if index < len(words) else ""))
                    index += 0 if joined else 1
                    break
            continue
        names.append(word)
    return [n for n in names if _NAME.fullmatch(n)]


def _program_key(program: str) -> str:
    """Bare names stay as they are; a path-qualified program is normalised (``.//ls`` → ``./ls``)."""
    if "/" not in program:
        return program
    normal = normalise_path(program)
    return normal if normal.startswith(("/", "~")) or "/" in normal else "./" + normal


def _is_substitution(word: Opaque) -> bool:
    return any(mark in word.source for mark in ("$(", "`", "<(", ">("))
