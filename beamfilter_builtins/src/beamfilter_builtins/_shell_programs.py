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
from collections.abc import Callable, Iterator

import attrs

from ._shell_options import (
    Code,
    Unknown,
    git,
    hyperfine,
    option_code,
    runs_code,
    screen,
    sed,
    ssh,
    tmux,
)
from ._shell_syntax import Opaque, Word
from ._shell_table import PROGRAMS, Options, Program, Wrapper, family
from ._shell_table import program as program_record

__all__ = [
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
# how a reader of the table is called: (family, its record, the arguments, standard input, depth)
_Reader = Callable[[str, Program, tuple[Word, ...], str | None, int], Iterator[Finding]]


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
    record = program_record(name)
    rest = argv[1:]
    if record.reserved:
        # tree-sitter-bash reads "time { rm x; }" or "! for …; do rm x; done" as simple commands
        # named "{" or "do": bash runs a compound command there
        yield Unknown(f"the command has {program!r} where bash starts a compound command the policy cannot read")
        if record.reserved == "before":
            yield from unwrap(rest, stdin, depth + 1)
        return
    wrapper = record.wrapper
    named = wrapper is not None and wrapper.takes_name and len(rest) > 1 and isinstance(rest[1], str)
    if named and program_record(str(rest[1])).reserved:
        rest = rest[1:]  # coproc NAME { …; }: NAME names the co-process
    if record.subscripts:
        quoted = next((w for w in rest if isinstance(w, str) and "[" in w and _RUNS_IN_SUBSCRIPT.search(w)), None)
        if quoted is not None:
            yield Unknown(f"{name} evaluates {quoted!r} as an array subscript, which may run the command in it")
    if record.runs:
        yield from runs_code(name, rest)
    yield from _READERS[record.reader](name, record, rest, stdin, depth)


def _nothing(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    return iter(())


def _busybox(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    if rest:  # busybox APPLET ARGS runs APPLET
        yield from unwrap(rest, stdin, depth + 1)


def _netns(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    if len(rest) > 3 and rest[0] == "netns" and rest[1] == "exec":
        yield from unwrap(rest[3:], stdin, depth + 1)  # ip netns exec NAME cmd


def _at(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    if "-f" not in rest:  # they run the commands they read
        yield StdinScript(name, stdin)


def _eval(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    yield Code(_joined(rest[1:] if rest[:1] == ("--",) else rest), stdin, "eval")


def _parallel(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    yield Unknown("parallel builds the commands it runs from its arguments and input")


def _options(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    """rsync -e CMD, tar -I/-F/--to-command CMD (abbreviated, attached, or in the old bundled
    first word: ``tar xIf CMD archive``)."""
    options: Options = record.options  # type: ignore[assignment]  # the table checks reader "options" has them
    yield from option_code(rest, options.short, options.long, name, values=options.values)
    first = rest[0] if rest else ""
    if options.bundled and isinstance(first, str) and first and not first.startswith("-"):
        following = iter(rest[1:])
        for letter in first:
            if letter in options.values or letter in options.short:
                value = next(following, "")
                if letter in options.short:
                    yield Code(value, None, f"{name} {letter}")


def _hash(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    if any(isinstance(w, Opaque) or (w.startswith("-") and "p" in w) for w in rest):
        yield Unknown("hash -p makes a name run another program")


def _alias(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    for word in rest:
        if isinstance(word, Opaque):
            yield Unknown(f"the alias {word} is only known at run time")
        elif "=" in word:
            yield Code(word.partition("=")[2], None, "alias")


def _trap(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    operands = rest[1:] if rest[:1] == ("--",) else rest
    if operands and operands[0] not in {"-p", "-l", "-P"} and len(operands) > 1:
        yield Code(operands[0], None, "trap")


# a quoted array subscript that runs a command: declare 'a[$(cmd)]'
_RUNS_IN_SUBSCRIPT = re.compile(r"\$\(|`")


def _joined(words: tuple[Word, ...]) -> Word:
    opaque = next((w for w in words if isinstance(w, Opaque)), None)
    return opaque if opaque is not None else " ".join(str(w) for w in words)


def _wrapped(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    """sudo -u root timeout 5 CMD: the program a wrapper runs, found with its :class:`.Wrapper` record."""
    spec: Wrapper = record.wrapper  # type: ignore[assignment]  # the table checks reader "wrapper" has one
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
        if spec.assigns and "=" in word and not word.startswith("-"):
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
                    if letter in spec.splits:
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
    if spec.line and not flags & spec.line_off:
        if command:  # the words are joined into one shell command line
            yield Code(_joined(command), None, name)
        return
    if spec.prefix and command:  # capsh -- ARGS runs /bin/bash ARGS
        command = (*spec.prefix, *command)
    if flags & set(spec.shell) or flags & spec.shell_long:
        yield Code(_joined(command), stdin, f"{name} -s") if command else Call(("sh",), stdin)
        return
    if spec.reads_input:
        replace = _xargs_replace(rest[:index])
        if replace:  # -I {}: each {} in the command is a line of the input
            command = tuple(Opaque(w) if isinstance(w, str) and replace in w else w for w in command)
        command = (command or ("echo",)) + (Opaque("<arguments read from standard input>"),)
        stdin = None
    elif spec.bare and not command:
        command = spec.bare
    elif spec.login:
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


def _shell(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
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


def _interpreter(
    name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int
) -> Iterator[Finding]:
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
        if word == record.module_option:
            return  # python -m MODULE runs an installed module
        if word in _PRINTS_AND_EXITS:
            return  # node --version: no program runs
        index += 2 if word in _VALUE_OPTIONS else 1
    if index >= len(rest):
        if record.reads_program:
            yield StdinScript(name, stdin)
        return
    yield from _script(name, rest[index], stdin)


# find -exec and fd -x: either program's spelling is read as one (fd . -exec rm -rf / ; fails closed)
_EXEC_OPTIONS = frozenset(option for r in PROGRAMS.values() if r.reader in {"find", "fd"} for option in r.strict)


def _find(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    """find -exec CMD {} ;, fd -x CMD (the options of :attr:`.Program.strict`): fd appends
    the path when CMD has no ``{}``."""
    appends = record.reader == "fd"
    index = 0
    while index < len(rest):
        word = rest[index]
        if word in _EXEC_OPTIONS:
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


def _awk(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
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
    options = program_record(name).code_options
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


def _ssh(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
    yield from ssh(rest, stdin)


def _on_arguments(read: Callable[[tuple[Word, ...]], Iterator[Code | Unknown]]) -> _Reader:
    """A reader for a family whose findings come from its arguments alone (git, sed, tmux ...)."""

    def reader(name: str, record: Program, rest: tuple[Word, ...], stdin: str | None, depth: int) -> Iterator[Finding]:
        return read(rest)

    return reader


# how each reader of the table (:data:`._shell_table.READERS`) finds what a call runs
_READERS: dict[str, _Reader] = {
    "": _nothing,
    "wrapper": _wrapped,
    "busybox": _busybox,
    "netns": _netns,
    "hyperfine": _on_arguments(hyperfine),
    "tmux": _on_arguments(tmux),
    "screen": _on_arguments(screen),
    "shell": _shell,
    "at": _at,
    "interpreter": _interpreter,
    "eval": _eval,
    "find": _find,
    "fd": _find,
    "parallel": _parallel,
    "git": _on_arguments(git),
    "ssh": _ssh,
    "options": _options,
    "sed": _on_arguments(sed),
    "hash": _hash,
    "alias": _alias,
    "trap": _trap,
    "awk": _awk,
}
