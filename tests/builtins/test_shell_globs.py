"""Globs that may leave the working directory, under ``allow_commands``: opaque for the shell
rule alone, judged against the roots of the same tool's path rules by the policy."""

from __future__ import annotations

import pathlib

import pytest

from beamfilter_builtins._shell_rule import ShellRule, ShellVerdict
from beamfilter_builtins._shell_words import glob_base
from beamfilter_builtins._tool_policy import Denial, ToolPolicy

_PLAIN = "and allow_commands allows only plain commands (a listed program, literal words and redirections)"


@pytest.mark.parametrize(
    ("glob", "base"),
    [
        ("*", "."),
        ("sub/*.py", "sub"),
        ("/srv/w/*", "/srv/w"),
        ("/srv/w*", "/srv"),
        ("/*", "/"),
        ("~/x/*", "~/x"),
        ("../*", ".."),
        ("a/../b/?", "a/../b"),
        ("*/x", "."),
        ("/srv/*/../x", None),  # .. after a wildcard climbs out of /srv
        (".*", None),  # bash's .* matches ..
        ("/srv/.?", None),
        ("/srv/[.][.]/etc", None),  # a bracket may be read as matching the leading dot: fail closed
        ("/srv/w", None),  # not a glob
    ],
)
def test_where_the_matches_of_a_glob_lie(glob: str, base: str | None) -> None:
    assert glob_base(glob) == base


def test_the_rule_alone_stays_opaque_and_names_the_bases() -> None:
    strict = ShellRule([], frozenset({"ls", "cd", "cat"}), True)
    assert strict.analyse("ls /srv/w/* > out") == ShellVerdict(
        f"the command has a glob (/srv/w/*) that may reach files outside the working directory, {_PLAIN} "
        "(allow_opaque is off)",
        strict.analyse("ls > out").redirects,
        opaque=True,
        globs=("/srv/w",),
    )
    assert strict.analyse("ls * ../x/*").globs == (".", "../x")
    assert strict.analyse("cd /etc && ls *").globs == (".", "/etc/.")  # where a cd may lead too
    assert strict.analyse("cd $D && ls *").globs == ()  # a directory only known at run time
    assert strict.analyse("ls /srv/* $X").globs == ()  # another reason: no glob can lift it
    assert strict.analyse("ls .*").globs == ()
    assert ShellRule([], None, True).analyse("ls /srv/*") == ShellVerdict(None)  # not opaque without an allow-list


def _policy(tmp_path: pathlib.Path, *, deny: list[str] | None = None, paths: bool = True) -> ToolPolicy:
    rules: list[dict[str, object]] = [
        {"tool": "sh", "kind": "shell", "arguments": ["cmd"], "allow_commands": ["ls", "cat", "cd"]}
    ]
    if paths:
        rules.append({"tool": "sh", "kind": "path", "arguments": [], "roots": [str(tmp_path / "work")]})
        if deny is not None:
            rules[-1]["deny_paths"] = deny
    return ToolPolicy(rules)


def test_a_glob_inside_the_tools_roots_passes(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    policy = _policy(tmp_path)
    for command in ("ls *", f"ls {work}/*", f"cat {work}/sub/*.txt", "ls sub/* *", f"cd {work}/sub && ls *"):
        assert policy.check("sh", {"cmd": command}, str(work)) is None, command
    assert policy.check("sh", {"cmd": "ls ../*"}, str(work / "sub")) is None  # .. is still inside work


def test_a_glob_outside_the_roots_stays_opaque(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    policy = _policy(tmp_path)
    reason = "the command has a glob ({}) that may reach files outside the working directory, " + _PLAIN
    for command, glob in [
        ("ls /etc/*", "/etc/*"),
        ("ls ../*", "../*"),
        (f"ls {tmp_path}/w*", f"{tmp_path}/w*"),  # /tmp/.../w* may match a sibling of work
        (f"ls {work}/*/../../x*", f"{work}/*/../../x*"),
        ("ls .*", ".*"),
        ("cd /etc && ls *", "*"),
    ]:
        assert policy.check("sh", {"cmd": command}, str(work)) == Denial(
            "rules[0] shell 'cmd'", reason.format(glob) + " (allow_opaque is off)"
        ), command


def test_a_glob_passes_only_with_path_rules_and_no_deny_globs(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    reason = (
        f"the command has a glob ({work}/*) that may reach files outside the working directory, {_PLAIN} "
        "(allow_opaque is off)"
    )
    # no path rule: the working folder is all the rule knows
    assert _policy(tmp_path, paths=False).check("sh", {"cmd": f"ls {work}/*"}, str(work)) == Denial(
        "rules[0] shell 'cmd'", reason
    )
    # a deny glob (*.pem) may match what the glob matches: not told apart, so still opaque
    assert _policy(tmp_path, deny=["*.pem"]).check("sh", {"cmd": f"cat {work}/*"}, str(work)) == Denial(
        "rules[0] shell 'cmd'", reason
    )


def test_redirections_are_still_checked_when_a_glob_passes(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    denial = _policy(tmp_path).check("sh", {"cmd": "ls * > /etc/x"}, str(work))
    assert denial is not None
    assert denial.rule == "rules[1] path (redirection > in rules[0] shell 'cmd')"
    assert "/etc/x" in denial.reason


def test_a_paused_glob_outside_the_roots_still_pauses(tmp_path: pathlib.Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    policy = ToolPolicy(
        [
            {"tool": "sh", "kind": "shell", "arguments": ["cmd"], "allow_commands": ["ls"], "on_opaque": "pause"},
            {"tool": "sh", "kind": "path", "arguments": [], "roots": [str(work)]},
        ]
    )
    denial = policy.check("sh", {"cmd": "ls /etc/*"}, str(work))
    assert denial is not None
    assert denial.pause
    assert policy.check("sh", {"cmd": f"ls {work}/*"}, str(work)) is None
