"""The readers of code-carrying options (_shell_options), exactly, and the rule's safety nets."""

from __future__ import annotations

import sys

import pytest

from beamfilter_builtins._shell_options import Code, Unknown, git, long_option, option_code, runs_code, sed, ssh
from beamfilter_builtins._shell_programs import MAX_WRAPPERS, unwrap
from beamfilter_builtins._shell_rule import ShellRule
from beamfilter_builtins._shell_syntax import Opaque, parse_script
from beamfilter_builtins._shell_table import family, strict_refusal

X = Opaque("$X")


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ((), []),
        (("-C", "dir"), []),
        (("status", X), [Unknown("git status has the argument $X, which is only known at run time")]),
        (("submodule", "--quiet", "foreach", "ls"), [Unknown("git submodule runs a command given in its arguments")]),
        (("submodule", "foreach", "--recursive", "rm", "-rf", "/"), [Code("rm -rf /", None, "git submodule foreach")]),
        (("bisect", "run", "sh", "-c", "rm -rf /"), [Code("sh -c 'rm -rf /'", None, "git bisect run")]),
        (("config", "set", "core.pager", "less"), [Code("less", None, "git config core.pager")]),
        (("config", "add", "alias.x", "!rm -rf /"), [Code("rm -rf /", None, "git config alias.x")]),
        (("config", "alias.x", "log --oneline"), []),
        (("config", "core.pager"), []),
        (("config", "user.name", "eve"), []),
        (("-ccore.pager=less", "log"), [Code("less", None, "git -c core.pager")]),
        (("-c", "alias.l=log", "l"), []),
        (
            ("--config-env=core.pager=P", "log"),
            [Unknown("git --config-env=core.pager=P takes a setting from outside the command")],
        ),
        (("rebase", "--exe=make", "HEAD~2"), [Code("make", None, "git rebase --exec")]),
    ],
)
def test_git(words: tuple[str | Opaque, ...], expected: list[object]) -> None:
    assert list(git(words)) == expected


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("host",), []),
        (("host", "ls", "-l"), [Code("ls -l", None, "ssh")]),
        (("host", "ls", X), [Code(X, None, "ssh")]),
        (("--", "host", "id"), [Code("id", None, "ssh")]),
        (("-p", "22", "host"), []),
        (("-p22", "-v", "host"), []),
        (
            ("-F", "cfg", "host"),
            [Unknown("ssh -F reads options (which may run commands) from a file the policy does not read")],
        ),
        (("-o", X, "host"), [Unknown("ssh -o $X is only known at run time")]),
        (("-oProxyCommand=nc %h", "host"), [Code("nc %h", None, "ssh -o ProxyCommand")]),
        ((X, "id"), [Code("id", None, "ssh")]),
    ],
)
def test_ssh(words: tuple[str | Opaque, ...], expected: list[object]) -> None:
    assert list(ssh(words, None)) == expected


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        (("-f", "script.sed", "x"), []),
        (("--file", "script.sed"), []),
        ((X, "f"), [Unknown("the sed script $X is only known at run time")]),
        (("-e", X), [Unknown("the sed script $X is only known at run time")]),
        (
            ("-es/a/b/e",),
            [Unknown("sed 's/a/b/e' runs commands (the e command or flag), which the policy does not read")],
        ),
        (("-n", "-e", "p", "f"), []),
        (("-i.bak", "-l", "80", "--expression", "p", "f"), []),
        (("-nf", "x.sed", "--file=y.sed", "f"), []),
        (
            ("-ne1e id", "f"),
            [Unknown("sed '1e id' runs commands (the e command or flag), which the policy does not read")],
        ),
        (("s/a/b/g", "e"), []),  # a file named e
        (("$!e",), [Unknown("sed '$!e' runs commands (the e command or flag), which the policy does not read")]),
        (
            ("/x/,/y/e date",),
            [Unknown("sed '/x/,/y/e date' runs commands (the e command or flag), which the policy does not read")],
        ),
    ],
)
def test_sed(words: tuple[str | Opaque, ...], expected: list[object]) -> None:
    assert list(sed(words)) == expected


def test_long_options_and_short_values() -> None:
    assert long_option("--to-comm=x", ("--to-command",)) == ("--to-command", "x")
    assert long_option("--to-command", ("--to-command",)) == ("--to-command", None)
    assert long_option("--to", ("--to-command",)) == ("--to-command", None)  # ambiguous to tar: read as the worst
    assert long_option("--t", ("--to-command",)) is None  # too short to be read as an abbreviation
    assert long_option("-I", ("--to-command",)) is None
    assert list(option_code(("-xvf", "a", "-I", "gzip"), "I", (), "tar", values="f")) == [Code("gzip", None, "tar -I")]
    assert list(option_code(("-xfI", "a"), "I", (), "tar", values="f")) == []  # -f takes the rest: an archive named I
    assert list(option_code((X, "--checkpoint-action=sleep"), "", ("--checkpoint-action",), "tar")) == []


def test_programs_whose_options_carry_code() -> None:
    assert list(runs_code("socat", ("-", "TCP:host:1"))) == []
    assert list(runs_code("socat", (X, "exec:id"))) == [Unknown("socat 'exec:id' runs a command")]
    assert list(runs_code("man", (X, "-P", "less"))) == [Code("less", None, "man -P")]
    assert list(runs_code("man", ("--pager=cat", "ls"))) == [Code("cat", None, "man --pager")]
    assert list(runs_code("mapfile", ("-Cid",))) == [Code("id", None, "mapfile -C")]
    assert list(runs_code("strace", ("-o", "out", "ls"))) == []
    assert list(runs_code("strace", ("-o", "!id", "ls"))) == [Code("id", None, "strace -o")]
    assert list(runs_code("gdb", ("-ex", "run"))) == [
        Unknown("gdb -ex runs code in its own language, which the policy does not read")
    ]


def test_the_table_and_strict_refusals() -> None:
    assert family("/usr/bin/perl5.36.0") == "perl"
    assert strict_refusal("env", ("-i", "A=1", "-S", "x")) is None  # -S after the command is its argument
    assert strict_refusal("env", ("--split-str=ls",)) == "env --split-str runs a command built from its arguments"
    assert strict_refusal("find", (".", "-name", "x", "-okdir", "rm", ";")) == (
        "find -okdir runs a command built from its arguments"
    )
    assert strict_refusal("ls", ("-exec",)) is None


def test_too_many_wrappers_are_opaque() -> None:
    findings = list(unwrap(("nohup",) * (MAX_WRAPPERS + 2) + ("ls",), None))
    assert findings[-1] == Unknown(f"more than {MAX_WRAPPERS} programs run each other in one command")
    assert ShellRule([], None, True).check("nohup " * (MAX_WRAPPERS + 2) + "bash -c 'rm -rf /'") == (
        f"more than {MAX_WRAPPERS} programs run each other in one command (allow_opaque is off)"
    )


def test_parser_corners() -> None:
    assert parse_script("a=(1 2) b=3").error is None  # variable_assignments
    assert parse_script("echo {a,b}" * 3).constructs == ("a brace expansion",)
    assert parse_script("echo " + "{1..200}" * 1).error is None
    assert parse_script("echo " + " ".join(["{1..250}"] * 4)).error == (
        "the command has 1028 words, operators and syntax nodes, more than the 800 the policy reads in bounded "
        "time; split it into smaller commands"
    )
    assert parse_script("echo '{a' {b,c}").error is None
    assert parse_script("select x in a; do ls; done").error is None


def test_the_safety_nets_turn_a_recursion_error_into_an_opaque_verdict() -> None:
    rule = ShellRule([], None, True)
    command = "bash -c 'bash -c \"{ ( ls; ); }\"'"
    depth = 0
    frame = sys._getframe()
    while frame is not None:
        depth += 1
        frame = frame.f_back  # type: ignore[assignment]
    limit = sys.getrecursionlimit()
    reasons = set()
    try:
        for extra in range(10, 120, 2):
            sys.setrecursionlimit(depth + extra)
            try:
                verdict = rule._analyse(command)
            except RecursionError:  # pragma: no cover - outside the rule (this test's own calls)
                continue
            reasons.add((verdict.reason, verdict.opaque))
    finally:
        sys.setrecursionlimit(limit)
    assert ("the command nests too deeply for the policy to read", True) in reasons
    assert (None, False) in reasons
