"""Options that make an ordinary program run other code: ``git``, ``tar``, ``rsync``, ``ssh``, ``sed`` ...

Each reader walks a call's arguments as the program reads them — GNU long options in
any unambiguous abbreviation (``--to-comm=``), values attached to short options
(``-I'sh -c x'``, ``-xIcmd``) — and yields the :class:`Code` it would run or an
:class:`Unknown` when that cannot be told. Under ``allow_commands`` every such finding
makes the command opaque; otherwise the code is parsed and checked like the command.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator

import attrs

from ._shell_syntax import Opaque, Word
from ._shell_table import program

__all__ = [
    "Code",
    "Unknown",
    "git",
    "long_option",
    "option_code",
    "hyperfine",
    "runs_code",
    "screen",
    "sed",
    "ssh",
    "tmux",
]


@attrs.frozen
class Code:
    """Shell code a command runs (``bash -c``, ``watch``, ``eval``); ``via`` names the carrier."""

    text: Word
    stdin: str | None
    via: str


@attrs.frozen
class Unknown:
    """Something that runs but cannot be known before the command runs, and why."""

    reason: str


def long_option(word: str, options: tuple[str, ...]) -> tuple[str, str | None] | None:
    """The option of ``options`` that ``word`` names, in full or abbreviated as GNU getopt
    takes it (``--to-comm=x`` → ``("--to-command", "x")``), with its attached value."""
    if not word.startswith("--") or len(word) < 4:
        return None
    name, equals, value = word.partition("=")
    for option in options:
        if option.startswith(name):  # an abbreviation (ambiguous ones too: fail closed)
            return option, value if equals else None
    return None


def option_code(
    rest: tuple[Word, ...], short: str, long: tuple[str, ...], via: str, values: str = ""
) -> Iterator[Code | Unknown]:
    """Code given by short options ``short`` (``-I CMD``, ``-ICMD``, ``-xICMD``; ``values``:
    the other short options that take a value) or long options ``long`` (abbreviated too)."""
    for index, word in enumerate(rest):
        if isinstance(word, Opaque):
            continue
        following: Word = rest[index + 1] if index + 1 < len(rest) else ""
        found = long_option(word, long)
        if found is not None:
            option, value = found
            text: Word = value if value is not None else following
            if option == "--checkpoint-action":
                text = str(text)
                if text.startswith("exec="):
                    yield Code(text[5:], None, f"{via} {option}")
                continue
            yield Code(text, None, f"{via} {option}")
            continue
        if word.startswith("-") and not word.startswith("--") and len(word) > 1:
            letters = word[1:]
            for position, letter in enumerate(letters):
                if letter in short:
                    yield Code(letters[position + 1 :] or following, None, f"{via} -{letter}")
                    break
                if letter in values:
                    break


# git: configuration keys whose value is a command line (git-config(1)); alias.* runs with '!'
_GIT_CODE_KEYS = re.compile(
    r"core\.(sshcommand|pager|editor|askpass|fsmonitor|gitproxy|alternaterefscommand|hookspath)"
    r"|sequence\.editor|diff\.external|diff\..+\.(command|textconv)|merge\..+\.driver|filter\..+\.(clean|smudge|process)"
    r"|credential(\..+)?\.helper|pager\..+|gpg(\..+)?\.program|uploadpack\.packobjectshook|remote\..+\.(uploadpack|receivepack)"
    r"|interactive\.difffilter|(web|browser\..+|man\..+|mergetool\..+|difftool\..+)\.(browser|cmd|path)|submodule\..+\.update"
    r"|include\.path|includeif\..+|protocol\..+\.allow|ssh\.variant|receive\.procreceiverefs|sendemail\..+"
    r"|http\..*proxy.*|url\..+\.(insteadof|pushinsteadof)|core\.(editor|pager)|gpg\.ssh\..+|tag\.gpgsign"
    r"|log\.showsignature|difftool\..+|mergetool\..+|alias\..+",
)
# git subcommands and their options that run a command line
_GIT_SUBCOMMAND_CODE: dict[str, tuple[str, tuple[str, ...]]] = {
    "rebase": ("x", ("--exec",)),
    "difftool": ("x", ("--extcmd",)),
    "grep": ("O", ("--open-files-in-pager",)),
    "clone": ("u", ("--upload-pack", "--template")),
    "fetch": ("", ("--upload-pack",)),
    "pull": ("", ("--upload-pack",)),
    "ls-remote": ("", ("--upload-pack",)),
    "push": ("", ("--receive-pack", "--exec")),
    "archive": ("", ("--exec",)),
    "send-email": ("", ("--sendmail-cmd", "--smtp-server", "--to-cmd", "--cc-cmd", "--header-cmd")),
    "filter-branch": (
        "",
        tuple(f"--{kind}-filter" for kind in ("env", "tree", "index", "parent", "msg", "commit", "tag-name")),
    ),
}
# subcommands whose operands are a command line (git submodule foreach CMD, git bisect run CMD)
_GIT_RUNS = {("submodule", "foreach"), ("bisect", "run")}


def git(rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """What ``git`` runs: ``-c`` settings, subcommand options (``rebase -x``) and ``submodule foreach``."""
    index = 0
    while index < len(rest):
        word = rest[index]
        if isinstance(word, Opaque):
            yield Unknown(f"git has the argument {word}, which is only known at run time")
            return
        if word in {"-c", "--config-env"} or word.startswith(("--config-env=", "--exec-path", "-c")):
            if word.startswith("-c") and len(word) > 2:  # -ccore.pager=x: the value attached
                value: Word = word[2:]
                index += 1
            else:
                value = word.partition("=")[2] if "=" in word else (rest[index + 1] if index + 1 < len(rest) else "")
                index += 1 if "=" in word else 2
            if word.startswith(("--config-env", "--exec-path")) or isinstance(value, Opaque):
                shown = word if "=" in word or (len(word) > 2 and word.startswith("-c")) else f"{word} {value}"
                yield Unknown(f"git {shown} takes a setting from outside the command")
                return
            yield from _git_setting(value, "git -c")
            continue
        if word in {"-C", "--git-dir", "--work-tree", "--namespace", "--super-prefix", "--list-cmds"}:
            index += 2
            continue
        if word.startswith("-"):
            index += 1
            continue
        break
    if index >= len(rest):
        return
    subcommand = str(rest[index])
    arguments = rest[index + 1 :]
    for word in arguments:
        if isinstance(word, Opaque):
            yield Unknown(f"git {subcommand} has the argument {word}, which is only known at run time")
            return
    if subcommand == "config":
        yield from _git_config(arguments)
        return
    if arguments and (subcommand, arguments[0]) in _GIT_RUNS:
        # foreach joins its words into one shell command; bisect run runs its words as a command
        words = [str(a) for a in arguments[1:] if a not in {"--recursive", "-q", "--quiet"}]
        text = " ".join(words) if subcommand == "submodule" else shlex.join(words)
        yield Code(text, None, f"git {subcommand} {arguments[0]}")
        return
    if subcommand in {"submodule", "bisect"} and any(a in {"foreach", "run"} for a in arguments):
        yield Unknown(f"git {subcommand} runs a command given in its arguments")
        return
    short, long = _GIT_SUBCOMMAND_CODE.get(subcommand, ("", ()))
    long = (*long, "--upload-pack", "--receive-pack", "--exec")
    yield from option_code(arguments, short, long, f"git {subcommand}")


def _git_setting(value: Word, via: str) -> Iterator[Code | Unknown]:
    key, _, setting = str(value).partition("=")
    lowered = key.lower()
    if lowered.startswith("alias."):
        if setting.lstrip().startswith("!"):
            yield Code(setting.lstrip()[1:], None, f"{via} {key}")
    elif _GIT_CODE_KEYS.fullmatch(lowered):
        yield Code(setting, None, f"{via} {key}")


def _git_config(arguments: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """``git config KEY VALUE`` (and ``git config set``): a command line stored for later runs."""
    operands = [str(a) for a in arguments if not str(a).startswith("-")]
    if operands[:1] in (["set"], ["add"]):
        operands = operands[1:]
    if len(operands) >= 2:
        key = operands[0].lower()
        if (key.startswith("alias.") and operands[1].lstrip().startswith("!")) or (
            not key.startswith("alias.") and _GIT_CODE_KEYS.fullmatch(key)
        ):
            yield Code(operands[1].lstrip().removeprefix("!"), None, f"git config {operands[0]}")


_SSH_CODE_OPTIONS = re.compile(
    r"(proxycommand|localcommand|knownhostscommand|remotecommand|permitlocalcommand)\s*[= ]\s*(.*)", re.I | re.S
)


def ssh(rest: tuple[Word, ...], stdin: str | None) -> Iterator[Code | Unknown]:
    """``ssh -o ProxyCommand=…`` runs locally; the remote command is code too."""
    index = 0
    while index < len(rest):
        word = rest[index]
        if isinstance(word, Opaque) or not word.startswith("-") or word == "--":
            index += word == "--"
            break
        letter = word[1:2]
        value: Word = word[2:]
        if letter in "BbcDEeFIiJLlmOopQRSWw":
            if not value:
                index += 1
                value = rest[index] if index < len(rest) else ""
            if letter == "o":
                if isinstance(value, Opaque):
                    yield Unknown(f"ssh -o {value} is only known at run time")
                    return
                match = _SSH_CODE_OPTIONS.fullmatch(value)
                if match:
                    yield Code(match.group(2), None, f"ssh -o {match.group(1)}")
            elif letter == "F":
                yield Unknown("ssh -F reads options (which may run commands) from a file the policy does not read")
                return
        index += 1
    remote = rest[index + 1 :]
    if remote:
        opaque = next((w for w in remote if isinstance(w, Opaque)), None)
        yield Code(opaque if opaque is not None else " ".join(str(w) for w in remote), stdin, "ssh")


# sed: the e command, and the e flag of s, run the pattern space as a command (GNU)
_SED_E_COMMAND = re.compile(
    r"(?:^|[;\n{}])\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/)?\s*(?:,\s*(?:\d+|\$|/(?:[^/\\]|\\.)*/))?\s*!?\s*e(?:\s|;|$)"
)
_SED_E_FLAG = re.compile(r"s(.)(?:(?!\1)[^\\]|\\.)*\1(?:(?!\1)[^\\]|\\.)*\1[gpIiMm0-9w]*e", re.S)


def sed(rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """GNU sed runs commands with ``e`` (``sed 'e rm x'``, ``s/x/cmd/e``): unknown."""
    scripts: list[Word] = []
    operands: list[Word] = []
    index = 0
    while index < len(rest):
        word = rest[index]
        index += 1
        if not isinstance(word, str) or word == "-" or not word.startswith("-"):
            operands.append(word)
        elif word.startswith("--"):
            option, equals, value = word.partition("=")
            if option in {"--expression", "--file"}:
                if not equals:
                    value = str(rest[index]) if index < len(rest) else ""
                    index += 1
                scripts.append(value if option == "--expression" else "")
        else:  # bundled short options: -ne SCRIPT, -es/a/b/, -f FILE, -i.bak, -l 80
            for position, letter in enumerate(word[1:], 1):
                if letter in "efl":
                    attached: Word = word[position + 1 :]
                    if not attached:
                        attached = rest[index] if index < len(rest) else ""
                        index += 1
                    if letter != "l":
                        scripts.append(attached if letter == "e" else "")
                    break
                if letter == "i":
                    break  # -i[SUFFIX]
    if not scripts and operands:
        scripts.append(operands[0])
    for script in scripts:
        if isinstance(script, Opaque):
            yield Unknown(f"the sed script {script} is only known at run time")
            return
        if _SED_E_COMMAND.search(script) or _SED_E_FLAG.search(script):
            yield Unknown(f"sed {script!r} runs commands (the e command or flag), which the policy does not read")
            return


_HARMLESS_PLUS = re.compile(r"\d+|[/?][^|!]*")  # +10 (a line), +/text (a search)


def runs_code(name: str, rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """The commands in the options of the family ``name`` (its :attr:`.Program.runs`):
    socat's ``exec:``/``system:`` addresses and sqlite3's dot-commands in any word."""
    options = program(name).runs
    anywhere = [_ANYWHERE[kind] for _, kind in options if kind in _ANYWHERE]
    if anywhere:
        for word in rest:
            if isinstance(word, str) and any(pattern.search(word) for pattern in anywhere):
                yield Unknown(f"{name} {word!r} runs a command")
                return
    for index, word in enumerate(rest):
        if not isinstance(word, str):
            continue
        following: Word = rest[index + 1] if index + 1 < len(rest) else ""
        for option, kind in options:
            if kind in _ANYWHERE:
                continue
            value = _option_value(word, option, kind, following)
            if value is None:
                continue
            if kind == "bang":  # mysql -e, psql -c, dc -e: code only with a shell escape
                if isinstance(value, str) and not _SHELL_ESCAPE.search(value):
                    continue
                kind = "other"
            if kind == "pipe":
                if isinstance(value, str) and value.startswith(("|", "!")):
                    yield Code(value[1:], None, f"{name} {option}")
                    return
                continue
            if kind == "shell":
                yield Code(value, None, f"{name} {option}")
            else:
                yield Unknown(f"{name} {option} runs code in its own language, which the policy does not read")
            return


_SHELL_ESCAPE = re.compile(r"!|\bsystem\b|\bprogram\b", re.I)
_SQLITE_SHELL = re.compile(r"(?:^|[;\n])\s*\.(?:shell|system)\b|\.(?:once|output)\s+['\"]?\|")
# kinds of code found in any word: socat's EXEC:cmd and SYSTEM:cmd addresses, sqlite3's .shell CMD
_ANYWHERE = {"address": re.compile(r"(?i)(?:^|[,!])(?:exec|system):"), "dot": _SQLITE_SHELL}


def _option_value(word: str, option: str, kind: str, following: Word) -> Word | None:
    """The value ``word`` gives ``option`` (``-e X``, ``-eX``, ``--eval=X``, ``--ev X``, ``+cmd``), or None."""
    if option == "+":
        if not word.startswith("+") or len(word) < 2 or _HARMLESS_PLUS.fullmatch(word[1:]):
            return None
        if kind == "pager" and not any(mark in word for mark in "!|"):
            return None  # less +G, +F: commands of the pager, not a shell
        return word[1:]
    if word == option:
        return following
    if option.startswith("--"):
        found = long_option(word, (option,))
        return None if found is None else following if found[1] is None else found[1]
    if word.startswith(option + "="):
        return word[len(option) + 1 :]
    if len(option) == 2 and word.startswith(option) and len(word) > 2:
        return word[2:]
    return None


# tmux commands that run a command line
_TMUX_RUNS = frozenset(
    {"new", "new-session", "new-window", "neww", "split-window", "splitw", "respawn-pane", "respawnp"}
    | {"respawn-window", "respawnw", "run-shell", "run", "if-shell", "if", "send-keys", "send", "pipe-pane"}
    | {"pipep", "display-popup", "popup", "source-file", "source"}
)


def hyperfine(rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """``hyperfine 'cmd' …`` runs each operand through a shell."""
    for word in rest:
        if isinstance(word, Opaque) or not word.startswith("-"):
            yield Code(word, None, "hyperfine")


def tmux(rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """``tmux new 'cmd'`` runs a command line the policy does not take apart."""
    if any(isinstance(w, Opaque) or w in _TMUX_RUNS for w in rest):
        yield Unknown("tmux runs a command line given in its arguments")


def screen(rest: tuple[Word, ...]) -> Iterator[Code | Unknown]:
    """``screen cmd`` runs a command the policy does not take apart."""
    if any(isinstance(w, Opaque) or not w.startswith("-") or w in {"-X", "-dm"} for w in rest):
        yield Unknown("screen runs a command given in its arguments")
