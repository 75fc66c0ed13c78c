"""The ``shell`` rule of ``tool_policy``: built-in denials, an allow-list, and opaque commands.

A command is parsed once (:mod:`._shell_syntax`), every program it runs is found
through wrappers and code-carrying arguments (:mod:`._shell_programs`), and each is
checked. Shell code found inside (``bash -c '…'``, ``watch …``, ``eval …``,
``git -c core.sshCommand=…``) is parsed and checked the same way. What cannot be known
before the command runs is *opaque*, and so is a command the rule cannot read (a
syntax error, past a size or nesting budget): ``on_opaque`` decides (deny, pause, allow).

With ``allow_commands`` the rule is strict by construction: only plain simple commands
(a listed program, literal words, redirections) joined by ``;``, ``&&``, ``||`` and ``|``
pass; anything more — a group or loop, a substitution, an expansion, a here-document,
a builtin that runs code (``eval``, ``trap``, ``source`` ...), an option that makes a
program run code (``find -exec``, ``git rebase -x``, ``tar --to-command``) — is opaque.

This is a speed bump that explains, not a wall: bash has more ways to run code than
any static reading catches. Enforcement is the ``shell`` toolset's sandbox.
"""

from __future__ import annotations

import contextlib
import re
from collections import OrderedDict
from collections.abc import Sequence

import attrs

from beamfilter_core.errors import ConfigError

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
from ._shell_syntax import MAX_NODES, Opaque, Redirect, Script, SimpleCommand, Word, parse_script
from ._shell_table import program as program_record
from ._shell_table import strict_refusal
from ._shell_words import glob_base

__all__ = ["ON_OPAQUE", "ShellRule", "ShellVerdict"]

#: What ``on_opaque`` may be: deny (the default), pause for a human, or allow (not with ``allow_commands``).
ON_OPAQUE = ("deny", "pause", "allow")

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


@attrs.frozen
class ShellVerdict:
    """The outcome for one command: why it is denied (or None) and the files it redirects to/from.

    ``redirects`` lets the policy check each target against the tool's path rules.
    """

    reason: str | None
    redirects: tuple[Redirect, ...] = ()
    #: The reason is that the command is opaque or unreadable (``on_opaque`` decides),
    #: not that a rule denies it.
    opaque: bool = False
    #: When the only reason is globs that may leave the working directory (under
    #: ``allow_commands``): the directories their matches lie in (``/srv/*`` → ``/srv``). The
    #: policy lets the command pass when the tool's path rules hold each of them.
    globs: tuple[str, ...] = ()


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
        allow_opaque: The old spelling of ``on_opaque="allow"``.
        on_opaque: What becomes of an opaque command — one whose effect cannot be known
            before it runs (a variable as the program or as the target of a built-in rule,
            ``python -c``, an unknown wrapper option), that the rule cannot read, or, with
            ``allow_commands``, that is more than plain commands: ``"deny"`` (default),
            ``"pause"`` (a human decides; the verdict says ``opaque``) or ``"allow"`` (not
            with ``allow_commands``; unreadable commands stay denied).
    """

    __slots__ = ("_cache", "allow_commands", "allow_env", "builtin", "deny", "on_opaque")

    def __init__(
        self,
        deny: Sequence[re.Pattern[str]],
        allow_commands: frozenset[str] | None,
        builtin: bool,
        *,
        allow_env: frozenset[str] | None = None,
        allow_opaque: bool = False,
        on_opaque: str | None = None,
    ) -> None:
        self.deny = tuple(deny)
        self.allow_commands = None if allow_commands is None else frozenset(_program_key(c) for c in allow_commands)
        self.allow_env = allow_env if allow_env is not None or allow_commands is None else frozenset()
        self.builtin = builtin
        if on_opaque is None:
            on_opaque = "allow" if allow_opaque else "deny"
        elif allow_opaque and on_opaque != "allow":
            msg = f"ShellRule(allow_opaque=True, on_opaque={on_opaque!r}) contradict each other; give on_opaque only."
            raise ConfigError(msg)
        if on_opaque not in ON_OPAQUE:
            msg = f"ShellRule(on_opaque={on_opaque!r}) is invalid; give one of 'deny', 'pause', 'allow'."
            raise ConfigError(msg)
        if on_opaque == "allow" and allow_commands is not None:
            msg = (
                "ShellRule(on_opaque='allow') cannot be used with allow_commands: under an allow-list only "
                "plain commands pass; give on_opaque='deny' or 'pause'."
            )
            raise ConfigError(msg)
        self.on_opaque = on_opaque
        # A verdict depends on the command text alone: models repeat commands, and parsing a
        # pipeline of three or more commands costs tree-sitter-bash about 0.1 ms.
        self._cache: OrderedDict[str, ShellVerdict] = OrderedDict()

    @property
    def allow_opaque(self) -> bool:
        """Whether opaque commands pass (``on_opaque="allow"``)."""
        return self.on_opaque == "allow"

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
        try:
            return self._decide(command)
        except RecursionError:  # a safety net: parsing and nesting are bounded
            return ShellVerdict("the command nests too deeply for the policy to read", opaque=True)

    def _decide(self, command: str) -> ShellVerdict:
        if "\x00" in command:
            return ShellVerdict("the command contains a NUL byte")
        if not command.isascii():
            try:
                command.encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate (e.g. read with surrogateescape)
                return ShellVerdict("the command contains a lone surrogate, which is not text a shell reads")
        budget = [MAX_NODES]
        script = parse_script(command, budget)
        if script.error is not None:
            return ShellVerdict(script.error, opaque=True)
        found = _Findings(budget=budget)
        self._collect(script, found, 0, None)
        cwds = working_directories(found.directories) if found.directories else ()
        if cwds:  # cd /dev && cat x > sda: decide again with every directory a cd may lead to
            found = _Findings(cwds=cwds, budget=[MAX_NODES])
            self._collect(script, found, 0, None)
        if found.error is not None:
            return ShellVerdict(found.error, opaque=True)
        normalised = " ; ".join(" ".join(str(w) for w in argv) for argv in found.argvs) if self.deny else ""
        for pattern in self.deny:
            if pattern.search(command) or pattern.search(normalised):
                return ShellVerdict(f"the command matches the deny pattern {pattern.pattern!r}")
        if _calls_itself(found.calls):
            found.denied.append(_FORK_BOMB)
        reopened = next((path for path, fd in found.reopened if fd in found.read_descriptors), None)
        if reopened is not None:
            found.opaque.append(
                f"the command writes {reopened}, which re-opens for writing a descriptor redirected from a file "
                "for reading"
            )
        if self.builtin and found.denied:
            return ShellVerdict(found.denied[0])
        if found.not_allowed:
            return ShellVerdict(found.not_allowed[0])
        if found.opaque and self.on_opaque != "allow":
            suffix = (
                " (on_opaque is 'pause': a human decides)" if self.on_opaque == "pause" else " (allow_opaque is off)"
            )
            globs = _glob_bases(found)
            return ShellVerdict(found.opaque[0] + suffix, tuple(found.redirects) if globs else (), True, globs)
        return ShellVerdict(None, tuple(found.redirects))

    def _collect(self, script: Script, found: _Findings, depth: int, caller: str | None) -> None:
        """Check every command of ``script``; ``caller`` is the function the script runs in (eval in f)."""
        found.functions |= script.functions
        strict = self.allow_commands is not None
        found.opaque.extend(script.hidden)
        for command in script.commands:
            function = command.function or caller
            if function is not None and command.argv and command.argv[0] == function:
                found.denied.append(_FORK_BOMB)
            self._assignments(command, found, depth)
            for word in {w for w in command.argv if isinstance(w, str) and ("/dev/" in w or "/proc/" in w)}:
                _reopens(word.partition("=")[2] if word.startswith("of=") else word, found)  # tee /dev/fd/3
            for redirect in command.redirects:
                self._redirect(redirect, found)
            for finding in unwrap(command.argv, command.stdin):
                if isinstance(finding, Call):
                    found.argvs.append(finding.argv)
                    self._call(finding, found, depth, function)
                elif isinstance(finding, Code):
                    if strict:  # never plain, but its denials and unlisted programs explain more
                        found.opaque.append(f"{finding.via} runs code given in its arguments")
                    self._code(finding, found, depth, function)
                elif isinstance(finding, EnvAssignment):
                    self._assign(finding.name, finding.value, found, depth)
                elif isinstance(finding, StdinScript):
                    if finding.stdin is not None:
                        found.denied.append(f"the command pipes data into the interpreter {finding.program!r}")
                    elif strict:
                        found.opaque.append(f"the interpreter {finding.program!r} reads its program from its input")
                elif isinstance(finding, Chdir):
                    found.directories.append(finding.directory)
                else:
                    found.opaque.append(finding.reason)
        if strict:  # after the findings of each command, which explain more
            found.opaque.extend(map(_plain_only, script.constructs))
            if script.globs:  # read only when globs are all that makes the command opaque
                found.globs.append(script.globs)

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
        nested = parse_script(text, found.budget)
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
        if command.argv and isinstance(command.argv[0], str) and program_record(command.argv[0]).declares:
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
        elif name in {"BASH_CMDS", "BASH_ALIASES"}:  # BASH_CMDS[ls]=/bin/sh is hash -p
            found.denied.append(f"the command sets {name}, which makes a name run another program")
        elif _CHANGES_PARSING.fullmatch(name):
            found.denied.append(f"the command sets {name}, which changes how the shell reads later commands")
        else:
            return False
        return True

    def _assign(self, name: str, value: Word, found: _Findings, depth: int) -> None:
        if isinstance(value, str) and "[" in value and ("$(" in value or "`" in value):
            # x='a[$(cmd)]'; echo $((x)): arithmetic on x evaluates the subscript and runs cmd
            found.opaque.append(f"the value of {name} holds a command in a subscript, which arithmetic on it runs")
        if not self._named(name, found) and _CODE_VARIABLES.fullmatch(name):
            self._code(Code(value, None, f"the variable {name}"), found, depth)
        if self.allow_env is not None and name not in self.allow_env:
            listed = ", ".join(sorted(self.allow_env)) or "none"
            found.not_allowed.append(f"the command assigns the variable {name!r}, which is not in allow_env ({listed})")

    def _redirect(self, redirect: Redirect, found: _Findings) -> None:
        target, operator = redirect.target, redirect.operator
        if isinstance(target, str):
            if operator == "<":  # 1< file, 3< file, < file: the descriptor names a file opened for reading
                found.read_descriptors.add(redirect.descriptor or "0")
            if redirect.writes:
                _reopens(target, found)
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
            if found.positional and _POSITIONAL.search(program.source):
                found.denied.append(f"the command runs {program} after setting the positional parameters with set")
            found.opaque.append(f"the program {program} is only known at run time")
            return
        name = program_name(program)
        record = program_record(name)
        args = call.argv[1:]
        if self.allow_commands is not None:
            if _program_key(program) not in self.allow_commands:
                allowed = ", ".join(sorted(self.allow_commands))
                found.not_allowed.append(f"the program {program!r} is not in the allowed commands ({allowed})")
            elif record.never_plain or program_record(program).never_plain:
                found.opaque.append(
                    f"the program {program!r} runs code, changes the shell or hides which program runs; "
                    "allow_commands allows only plain commands"
                )
            refusal = strict_refusal(name, args)
            if refusal is not None:
                found.opaque.append(refusal)
            hidden = next((a for a in args if isinstance(a, Opaque)), None)
            if hidden is not None:
                found.opaque.append(f"the argument {hidden} of {program!r} is only known at run time")
        if record.sets_positional and any(
            isinstance(a, Opaque) or not a.startswith(("-", "+")) or a == "--" for a in args
        ):
            found.positional = True
        found.calls.append((function, program))
        if record.changes_directory:
            found.directories.append(_directory(args))
        elif record.setter is not None:
            for variable in _set_names(name, args):
                self._assign(variable, Opaque(f"<what {name} reads>"), found, depth)
        for denial in builtin_denials(name, args, found.cwds):
            if denial.startswith("?"):
                found.opaque.append(denial[1:])
            else:
                found.denied.append(denial)
                break  # one denial says enough, and the rest of a long command is not worth checking


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
    budget: list[int] = attrs.Factory(lambda: [MAX_NODES])  # syntax nodes still allowed for nested code
    read_descriptors: set[str] = attrs.Factory(set)  # descriptors redirected from a file (3< x, 1< x, < x)
    reopened: list[tuple[str, str]] = attrs.Factory(list)  # paths re-opening a descriptor, and which
    positional: bool = False  # set -- WORDS: "$@" is then those words
    globs: list[tuple[tuple[str, str], ...]] = attrs.Factory(list)  # (construct, glob) of globs leaving the cwd


def _plain_only(construct: str) -> str:
    return (
        f"the command has {construct}, and allow_commands allows only plain commands "
        "(a listed program, literal words and redirections)"
    )


def _glob_bases(found: _Findings) -> tuple[str, ...]:
    """Where the matches of the command's globs lie, when globs are all that makes it opaque,
    else (): a glob in a directory a ``cd`` may change is only known at run time."""
    if not found.globs:
        return ()
    globs = {_plain_only(construct): glob for script in found.globs for construct, glob in script}
    if any(reason not in globs for reason in found.opaque):
        return ()
    bases: dict[str, None] = {}
    for reason in dict.fromkeys(found.opaque):
        base = glob_base(globs[reason])
        every = [] if base is None else places(base, found.cwds)
        if not every or None in every:
            return ()
        bases.update(dict.fromkeys(p for p in every if p is not None))
    return tuple(bases)


_FORK_BOMB = "the command is a fork bomb (a function that calls itself)"
# paths that open a descriptor of the process again (a write through them may reach a file opened for reading)
_DESCRIPTOR_PATH = re.compile(r"/dev/(?:(stdin|stdout|stderr)|fd/(\d+))|/proc/(?:self|thread-self|\d+)/fd/(\d+)")
_STANDARD = {"stdin": "0", "stdout": "1", "stderr": "2"}


def _reopens(path: str, found: _Findings) -> None:
    """Note a write through ``path`` when it re-opens a descriptor (``/dev/stdout``, ``/dev/fd/3``)."""
    match = _DESCRIPTOR_PATH.fullmatch(normalise_path(path)) if path.startswith("/") else None
    if match is not None:
        found.reopened.append((path, _STANDARD.get(match.group(1) or "", match.group(2) or match.group(3) or "")))


_POSITIONAL = re.compile(r"\$\{?[@*0-9]")
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


def _set_names(name: str, args: tuple[Word, ...]) -> list[str]:
    """The variables ``read``, ``printf -v``, ``mapfile`` and ``getopts`` set (the letters of
    :attr:`.Program.setter` take a value: read -p PROMPT NAME; -a NAME names an array)."""
    values = program_record(name).setter or ""
    words = [str(a) for a in args]
    if name == "getopts":
        return words[1:2]
    if name == "printf":
        for index, word in enumerate(words):
            if word.startswith("-v"):
                return [word[2:] or (words[index + 1] if index + 1 < len(words) else "")]
        return []
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
