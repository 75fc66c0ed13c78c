"""What a simple command really runs: through wrappers, ``-c`` strings and command options.

``sudo -u root timeout 5 rm -rf /`` runs three programs; ``bash -c 'rm -rf /'``,
``watch rm -rf /``, ``find / -exec rm {} ;`` and ``git -c core.sshCommand='rm …' fetch``
run code given as an argument. :func:`unwrap` lists every :class:`Call` (a program
with its arguments) and every piece of shell :class:`Code` (parsed again by the caller)
that a command line implies, and :class:`Unknown` where that cannot be told statically
(an option of a wrapper this table does not know, a variable as the program, ``python
-c``). Option tables follow the GNU/util-linux, sudo and bash manuals.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Iterator

import attrs

from ._shell_options import (
    COMMAND_LINES,
    RUNS_CODE,
    Code,
    Unknown,
    command_lines,
    git,
    option_code,
    runs_code,
    sed,
    ssh,
)
from ._shell_syntax import Opaque, Word
from ._shell_table import AWKS, CODE_OPTIONS, INTERPRETERS, SHELLS, family
from ._shell_wrappers import WRAPPERS, Wrapper

__all__ = [
    "INTERPRETERS",
    "SHELLS",
    "STDIN_PATHS",
    "Call",
    "Chdir",
    "Code",
    "EnvAssignment",
    "StdinScript",
    "Unknown",
    "normalise_path",
    "program_name",
    "unwrap",
]

MAX_WRAPPERS = 8  # sudo timeout nice env ... ls: deeper than this is opaque
STDIN_PATHS = frozenset({"-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0", "/proc/thread-self/fd/0"})


@attrs.frozen
class Call:
    """A program run with ``argv``; ``stdin`` says what data it reads (see SimpleCommand)."""

    argv: tuple[Word, ...]
    stdin: str | None


@attrs.frozen
class StdinScript:
    """An interpreter that reads its script from standard input (``| sh``, ``bash /dev/stdin``)."""

    program: str
    stdin: str | None


@attrs.frozen
class Chdir:
    """``env -C DIR cmd``, ``sudo -D DIR cmd``: the program runs in another directory."""

    directory: Word


@attrs.frozen
class EnvAssignment:
    """``env NAME=value cmd``: a variable set for the program it runs."""

    name: str
    value: Word


Finding = Call | Chdir | Code | EnvAssignment | StdinScript | Unknown


def program_name(word: str) -> str:
    """The family a program belongs to (:func:`._shell_table.family`: ``/usr/bin/python3.12`` → ``python``)."""
    return family(word)


def normalise_path(path: str) -> str:
    """``//dev/./sda`` → ``/dev/sda``: duplicate slashes and ``.`` segments removed, ``..``
    resolved lexically (bash does not resolve them for redirections either, but the
    kernel does, and ``/dev/..`` holds no symlink that changes the answer)."""
    if not path:
        return path
    normal = posixpath.normpath(path)
    return "/" + normal.lstrip("/") if path.startswith("/") else normal


def unwrap(argv: tuple[Word, ...], stdin: str | None, depth: int = 0) -> Iterator[Finding]:
    """Every program and piece of shell code ``argv`` runs, itself first."""
    if not argv:
        return
    program = argv[0]
    yield Call(argv, stdin)
    if isinstance(program, Opaque):
        return
    if depth > MAX_WRAPPERS:
        yield Unknown(f"more than {MAX_WRAPPERS} programs run each other in one command")
        return
    name = program_name(program)
    rest = argv[1:]
    if name in _RESERVED:
        # tree-sitter-bash reads "time { rm x; }" or "! for …; do rm x; done" as simple commands
        # named "{" or "do": bash runs a compound command there
        yield Unknown(f"the command has {program!r} where bash starts a compound command the policy cannot read")
        if name in _RESERVED_BEFORE_COMMAND:
            yield from unwrap(rest, stdin, depth + 1)
        return
    if name == "coproc" and len(rest) > 1 and isinstance(rest[1], str) and rest[1] in _RESERVED:
        rest = rest[1:]  # coproc NAME { …; }: NAME names the co-process
    if name in _EVALUATES_SUBSCRIPTS:
        quoted = next((w for w in rest if isinstance(w, str) and "[" in w and _RUNS_IN_SUBSCRIPT.search(w)), None)
        if quoted is not None:
            yield Unknown(f"{name} evaluates {quoted!r} as an array subscript, which may run the command in it")
    if name in RUNS_CODE:
        yield from runs_code(name, rest)
    if name in WRAPPERS:
        yield from _wrapped(name, rest, stdin, depth)
    elif name in {"busybox", "toybox"} and rest:
        yield from unwrap(rest, stdin, depth + 1)
    elif name == "ip" and len(rest) > 3 and rest[0] == "netns" and rest[1] == "exec":
        yield from unwrap(rest[3:], stdin, depth + 1)  # ip netns exec NAME cmd
    elif name in COMMAND_LINES:
        yield from command_lines(name, rest)
    elif name in SHELLS:
        yield from _shell(name, rest, stdin)
    elif name in {"at", "batch"} and "-f" not in rest:  # they run the commands they read
        yield StdinScript(name, stdin)
    elif name in INTERPRETERS:
        yield from _interpreter(name, rest, stdin)
    elif name == "eval":
        yield Code(_joined(rest[1:] if rest[:1] == ("--",) else rest), stdin, "eval")
    elif name in {"find", "fd"}:
        yield from _find(rest, depth, appends=name != "find")
    elif name == "parallel":
        yield Unknown("parallel builds the commands it runs from its arguments and input")
    elif name == "git":
        yield from git(rest)
    elif name == "ssh":
        yield from ssh(rest, stdin)
    elif name == "rsync":
        yield from option_code(rest, "e", ("--rsh",), "rsync", values="BfMT")
    elif name == "tar":
        yield from _tar(rest)
    elif name == "sed":
        yield from sed(rest)
    elif name == "hash" and any(isinstance(w, Opaque) or (w.startswith("-") and "p" in w) for w in rest):
        yield Unknown("hash -p makes a name run another program")
    elif name == "alias":
        for word in rest:
            if isinstance(word, Opaque):
                yield Unknown(f"the alias {word} is only known at run time")
            elif "=" in word:
                yield Code(word.partition("=")[2], None, "alias")
    elif name == "trap":
        operands = rest[1:] if rest[:1] == ("--",) else rest
        if operands and operands[0] not in {"-p", "-l", "-P"} and len(operands) > 1:
            yield Code(operands[0], None, "trap")
    elif name in AWKS:
        yield from _awk(name, rest, stdin)


# reserved words: a simple command never starts with them
_RESERVED_BEFORE_COMMAND = frozenset({"{", "!", "do", "then", "else", "elif", "if", "while", "until"})
_RESERVED = _RESERVED_BEFORE_COMMAND | frozenset({"}", "done", "fi", "esac", "for", "select", "case", "in", "[["})
_RESERVED |= frozenset({"]]", "function", "(("})
# builtins that evaluate a quoted array subscript arithmetically: declare 'a[$(cmd)]'
_EVALUATES_SUBSCRIPTS = frozenset(
    {"test", "[", "unset", "declare", "typeset", "local", "export", "readonly", "printf", "read", "let"}
    | {"mapfile", "readarray", "getopts", "wait", "printf", "shift", "return", "exit", "kill", "ulimit"}
)
_RUNS_IN_SUBSCRIPT = re.compile(r"\$\(|`")


def _joined(words: tuple[Word, ...]) -> Word:
    opaque = next((w for w in words if isinstance(w, Opaque)), None)
    return opaque if opaque is not None else " ".join(str(w) for w in words)


def _wrapped(name: str, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    spec = WRAPPERS[name]
    flags: set[str] = set()
    index = 0
    while index < len(rest):
        word = rest[index]
        if isinstance(word, Opaque):
            if index == 0 or not str(rest[index - 1]).startswith("-"):
                break  # an opaque command: reported as an opaque program below
            yield Unknown(f"the option {word} of {name!r} is only known at run time")
            return
        if word == "--":
            index += 1
            break
        if name == "env" and "=" in word and not word.startswith("-"):
            variable, _, value = word.partition("=")
            yield EnvAssignment(variable, value)
            index += 1  # NAME=value: an environment assignment (checked by the rule)
            continue
        if word.startswith("--") and len(word) > 2:
            option, equals, value = word[2:].partition("=")
            option = _unabbreviated(option, spec)
            if option in spec.long_values:
                directory: Word = value
                if not equals:
                    index += 1
                    directory = rest[index] if index < len(rest) else ""
                    value = str(directory)
                if option == "chdir":
                    yield Chdir(directory)
                if option in {"command", "split-string"}:
                    yield from _split_or_code(name, option, value, rest[index + 1 :], stdin, depth)
                    return
            elif option in spec.long_flags:
                flags.add(option)
            else:
                yield Unknown(f"{name!r} has the option {word!r}, so which program it runs is unknown")
                return
            index += 1
            continue
        if word.startswith("-") and len(word) > 1:
            letters = word[1:]
            if spec.numeric and letters.isdigit():
                index += 1
                continue
            position = 0
            while position < len(letters):
                letter = letters[position]
                if letter in spec.short_values:
                    value_word: Word = letters[position + 1 :]
                    if not value_word:
                        index += 1
                        value_word = rest[index] if index < len(rest) else ""
                    if letter in spec.code:
                        yield Code(value_word, stdin, f"{name} -{letter}")
                        return
                    if letter in spec.chdir:
                        yield Chdir(value_word)
                    if name == "env" and letter == "S":
                        yield from _split_or_code(
                            name, "split-string", str(value_word), rest[index + 1 :], stdin, depth
                        )
                        return
                    break
                if letter in spec.short_flags:
                    flags.add(letter)
                    position += 1
                    continue
                yield Unknown(f"{name!r} has the option '-{letter}', so which program it runs is unknown")
                return
            index += 1
            continue
        break
    if any(f in spec.no_command for f in flags if len(f) == 1):
        return
    if spec.code:  # flock FILE -c CODE, su USER -c CODE: the option may follow the operands
        for position in range(index, len(rest) - 1):
            if rest[position] in {f"-{spec.code}", "--command"}:
                yield Code(rest[position + 1], stdin, f"{name} -{spec.code}")
                return
    command = rest[index + spec.positionals :]
    if (name == "watch" and "x" not in flags and "exec" not in flags) or name == "watchexec":
        if command:  # the words are joined into one shell command line
            yield Code(_joined(command), None, name)
        return
    if name == "capsh" and command:  # capsh -- ARGS runs /bin/bash ARGS
        command = ("bash", *command)
    if flags & set(spec.shell) or (name == "sudo" and {"shell", "login"} & flags):
        yield Code(_joined(command), stdin, f"{name} -s") if command else Call(("sh",), stdin)
        return
    if name == "xargs":
        replace = _xargs_replace(rest[:index])
        if replace:  # -I {}: each {} in the command is a line of the input
            command = tuple(Opaque(w) if isinstance(w, str) and replace in w else w for w in command)
        command = (command or ("echo",)) + (Opaque("<arguments read from standard input>"),)
        stdin = None
    elif name == "chroot" and not command:
        command = ("sh", "-i")
    elif name in {"su", "runuser"}:
        if not command:
            yield Call(("sh",), stdin)
        return  # su USER: an interactive shell reading standard input, or -c code (above)
    if command:
        yield from unwrap(command, stdin, depth + 1)


def _unabbreviated(option: str, spec: Wrapper) -> str:
    """``option`` in full when it abbreviates exactly one long option of ``spec`` (GNU: ``--sig`` is ``--signal``)."""
    if option in spec.long_values or option in spec.long_flags:
        return option
    matches = [full for full in (*spec.long_values, *spec.long_flags) if full.startswith(option)]
    return matches[0] if len(matches) == 1 else option


def _xargs_replace(options: tuple[Word, ...]) -> str:
    """The replace string of xargs ``-I R``, ``-IR`` or ``--replace[=R]`` (``{}``), or ""."""
    for index, word in enumerate(options):
        if isinstance(word, str) and word.startswith("-I"):
            return word[2:] or str(options[index + 1]) if index + 1 < len(options) or word[2:] else "{}"
        if isinstance(word, str) and word.startswith("--replace"):
            return word.partition("=")[2] or "{}"
    return ""


def _split_or_code(
    name: str, option: str, value: str, rest: tuple[Word, ...], stdin: str | None, depth: int
) -> Iterator[Finding]:
    if option == "command":
        yield Code(value, stdin, f"{name} --command")
        return
    try:
        words = tuple(shlex.split(value))
    except ValueError:
        yield Unknown(f"{name} -S {value!r} cannot be split")
        return
    yield from unwrap(words + rest, stdin, depth + 1)


def _shell(name: str, rest: tuple[Word, ...], stdin: str | None) -> Iterator[Finding]:
    """bash [options] [-c CODE | SCRIPT | (stdin)]."""
    index = 0
    code = False
    reads_stdin = False
    while index < len(rest):
        word = rest[index]
        if word in {"-", "--"}:  # the end of the options, as "--" (bash - file runs file)
            index += 1
            break
        if isinstance(word, Opaque) or not word.startswith(("-", "+")):
            break
        index += 1
        if word in {"-o", "+o", "-O", "+O", "--rcfile", "--init-file"}:
            index += 1
            continue
        if word.startswith("--"):
            continue
        code = code or "c" in word[1:]
        reads_stdin = reads_stdin or "s" in word[1:] or "i" in word[1:]
    operands = rest[index:]
    if code:
        yield Code(operands[0] if operands else "", stdin, f"{name} -c")
    elif not operands or reads_stdin:
        yield StdinScript(name, stdin)
    else:
        yield from _script(name, operands[0], stdin)


def _script(name: str, script: Word, stdin: str | None) -> Iterator[Finding]:
    if isinstance(script, Opaque):
        yield Code(script, None, f"{name} {script}")
    elif script in STDIN_PATHS:
        yield StdinScript(name, stdin)


# Options of interpreters that take a value (so the value is not the script).
_VALUE_OPTIONS = frozenset({"-W", "-X", "-I", "-M", "-r", "--require", "--import", "--loader", "-d", "-f"})


_INLINE_CODE = re.compile(r"data:(?:text|application)/(?:javascript|ecmascript|x-typescript)|^-[Mm][^=]*[;(]", re.I)
_PRINTS_AND_EXITS = frozenset({"--version", "-V", "-v", "--help", "-h", "-version", "--v8-options"})


def _interpreter(name: str, rest: tuple[Word, ...], stdin: str | None) -> Iterator[Finding]:
    inline = next((w for w in rest if isinstance(w, str) and _INLINE_CODE.search(w)), None)
    if inline is not None:  # node --import=data:text/javascript,…; perl '-MPOSIX;system(…)'
        yield Unknown(f"{name} {inline[:40]!r} runs code that the policy cannot read")
        return
    found = interpreter_code(name, rest)
    if found is not None:
        option, code = found
        yield (
            Code(code, None, f"{name} {option}")
            if isinstance(code, Opaque)
            else Unknown(f"{name} {option} runs code that the policy cannot read")
        )
        return
    index = 0
    while index < len(rest):
        word = rest[index]
        if isinstance(word, Opaque) or word in STDIN_PATHS or not word.startswith("-"):
            break
        if word == "-m" and name == "python":
            return  # python -m MODULE runs an installed module
        if word in _PRINTS_AND_EXITS:
            return  # node --version: no program runs
        index += 2 if word in _VALUE_OPTIONS else 1
    if index >= len(rest):
        if name not in {"source", "."}:
            yield StdinScript(name, stdin)
        return
    yield from _script(name, rest[index], stdin)


def _find(rest: tuple[Word, ...], depth: int, appends: bool) -> Iterator[Finding]:
    """find -exec CMD {} ;, fd -x CMD: fd appends the path when CMD has no ``{}`` (``appends``)."""
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-exec", "-execdir", "-ok", "-okdir", "-x", "--exec", "-X", "--exec-batch"}:
            end = index + 1
            while end < len(rest) and rest[end] not in {";", "+", "\\;"}:
                end += 1
            # find passes paths that start with its start path; fd may pass a file named -rf
            paths = Opaque("<the paths fd finds>") if appends else Opaque("{}")
            command = tuple(paths if w == "{}" else w for w in rest[index + 1 : end])
            if appends and command and paths not in command:
                command += (paths,)
            if command:
                yield from unwrap(command, None, depth + 1)
            index = end
        index += 1


_TAR_CODE = ("--to-command", "--use-compress-program", "--info-script", "--new-volume-script", "--rsh-command")
_TAR_CODE_LONG = (*_TAR_CODE, "--checkpoint-action")


def _tar(rest: tuple[Word, ...]) -> Iterator[Finding]:
    """tar runs ``-I``/``-F``/``--to-command`` code (abbreviated, attached, or in the old
    bundled first word: ``tar xIf CMD archive``)."""
    yield from option_code(rest, "IF", _TAR_CODE_LONG, "tar", values="bCfgHKLNTVX")
    first = rest[0] if rest else ""
    if isinstance(first, str) and first and not first.startswith("-"):
        following = iter(rest[1:])
        for letter in first:
            if letter in "bCfgHKLNTVXIF":
                value = next(following, "")
                if letter in "IF":
                    yield Code(value, None, f"tar {letter}")


def _awk(name: str, rest: tuple[Word, ...], stdin: str | None) -> Iterator[Finding]:
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in {"-f", "--file"}:
            if index + 1 < len(rest) and rest[index + 1] in STDIN_PATHS:
                yield StdinScript(name, stdin)  # -f /dev/stdin: the program is read from the input
            return  # the program is in a file
        if isinstance(word, str) and (word in {"-e", "--source"} or word.startswith("--source=")):
            following = rest[index + 1] if index + 1 < len(rest) else ""
            yield from _awk_program(name, word.partition("=")[2] if "=" in word else following)
            index += 1 if "=" in word else 2
            continue
        if word in {"-v", "-F", "--assign", "--field-separator"}:
            index += 2
            continue
        if isinstance(word, str) and word.startswith("-") and len(word) > 1:
            index += 1
            continue
        break
    if index < len(rest):
        yield from _awk_program(name, rest[index])


def _awk_program(name: str, program: Word) -> Iterator[Finding]:
    if isinstance(program, Opaque):
        yield Unknown(f"the {name} program {program} is only known at run time")
    elif "system" in program or "|" in program:
        yield Unknown(f"the {name} program runs commands (system() or a pipe), which the policy does not read")


def interpreter_code(name: str, rest: tuple[Word, ...]) -> tuple[str, Word] | None:
    """The option and code an interpreter runs from its arguments (``python -c CODE``), or None."""
    options = CODE_OPTIONS.get(name, ())
    for index, word in enumerate(rest):
        if not isinstance(word, str):
            continue
        for option in options:
            if word == option:
                return option, rest[index + 1] if index + 1 < len(rest) else ""
            if option.startswith("--") and word.startswith(option + "="):  # node --eval=CODE
                return option, word.partition("=")[2]
            if option.startswith("-") and len(option) == 2 and word[:1] == "-" and word[1:2] != "-":
                letters = word[1:]
                if option[1] in letters:  # -e'code', or bundled: perl -pe CODE, python -Bc CODE
                    joined = letters[letters.index(option[1]) + 1 :]
                    return option, joined or (rest[index + 1] if index + 1 < len(rest) else "")
    return None
