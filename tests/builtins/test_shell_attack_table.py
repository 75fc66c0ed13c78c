"""The shell rule against the attack table (tests/_shell_attacks.py), by class.

Every attack is denied or opaque, with and without ``allow_commands``; what only the
strict rule refuses is opaque there; what no static reading decides is listed for the
sandbox; everyday commands pass both rules. Each member of a program family gets the
same verdict, and random bash-ish text never raises and is decided within the budget.
"""

from __future__ import annotations

import re
import time

import pytest
from _shell_attacks import ALLOWED, ATTACKS, LEGIT, SANDBOX, STRICT_ONLY
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamfilter_builtins._shell_programs import program_name
from beamfilter_builtins._shell_rule import ShellRule, ShellVerdict
from beamfilter_builtins._shell_syntax import MAX_LENGTH, MAX_NESTING, MAX_NODES, parse_script
from beamfilter_builtins._shell_table import PROGRAMS, family

DENY = ShellRule([], None, True)
STRICT = ShellRule([], ALLOWED, True, allow_env=frozenset({"LANG"}))
FORMS = [(name, form) for name, forms in ATTACKS.items() for form in forms]


def test_the_table_has_enough_forms_in_every_class() -> None:
    assert len(FORMS) >= 150
    assert len(ATTACKS) >= 13
    assert all(len(forms) >= 6 for forms in ATTACKS.values())
    assert len(set(FORMS)) == len(FORMS)


@pytest.mark.parametrize(("attack_class", "command"), FORMS)
def test_every_attack_is_refused_by_both_rules(attack_class: str, command: str) -> None:
    for rule in (DENY, STRICT):
        verdict = rule.analyse(command)
        assert verdict.reason is not None, (attack_class, command, rule.allow_commands is not None)


@pytest.mark.parametrize("command", STRICT_ONLY)
def test_more_than_plain_commands_are_opaque_under_an_allow_list(command: str) -> None:
    verdict = STRICT.analyse(command)
    assert verdict.reason is not None, command
    assert verdict.opaque, command


@pytest.mark.parametrize("command", SANDBOX)
def test_what_only_the_sandbox_decides_passes_the_rule(command: str) -> None:
    # the rule cannot know what a script file or a program does: the shell toolset's sandbox confines it
    assert DENY.check(command) is None


@pytest.mark.parametrize("command", LEGIT)
def test_everyday_commands_pass_both_rules(command: str) -> None:
    assert DENY.check(command) is None
    assert STRICT.check(command) is None


def test_a_strict_verdict_explains_itself_exactly() -> None:
    assert STRICT.analyse("ls $HOME") == ShellVerdict(
        "the command has a parameter expansion, and allow_commands allows only plain commands (a listed program, "
        "literal words and redirections) (allow_opaque is off)",
        opaque=True,
    )
    assert STRICT.check("echo id | xargs sh -c") == (
        "the program 'xargs' runs code, changes the shell or hides which program runs; allow_commands allows only "
        "plain commands (allow_opaque is off)"
    )
    assert STRICT.check("git rebase -x 'make test' HEAD~3") == (
        "git rebase -x runs code given in its arguments (allow_opaque is off)"
    )
    assert STRICT.check("ls ../*") == (
        "the command has a glob (../*) that may reach files outside the working directory, and allow_commands "
        "allows only plain commands (a listed program, literal words and redirections) (allow_opaque is off)"
    )


# Templates each member of a family must answer alike: the family name stands for the spelling.
FAMILY_TEMPLATES = [
    "{p} -c 'rm -rf /'",
    "{p} -e 'x'",
    "echo id | {p}",
    "{p} --version",
    "{p} -cf /dev/sda x",
    "{p} --to-command='rm -rf /' -xf a",
    "{p} -i 's/a/b/e' f",
    "{p} 'BEGIN{{system(\"id\")}}'",
    "{p} . -exec rm -rf / ;",
    "{p} -I{{}} sh -c {{}}",
    "{p} rm -rf /",
]
FAMILIES: dict[str, list[str]] = {
    name: [name, *record.spellings] for name, record in PROGRAMS.items() if record.spellings
}
FAMILIES["python"] += ["python3", "python3.11", "/usr/bin/python3.12", "pypy3", "pypy3.10"]
FAMILIES["perl"] = ["perl", "perl5.36.0", "perl5", "/usr/bin/perl5.30"]
FAMILIES["tclsh"] += ["tclsh8.6", "wish8.6"]
FAMILIES["node"] += ["node18", "nodejs20", "/usr/local/bin/node"]
FAMILIES["ruby"] += ["ruby3.1", "ruby2.7"]
FAMILIES["php"] += ["php8.2", "php7"]
FAMILIES["lua"] += ["lua5.4", "luajit-2.1.0"]
FAMILIES["bash"] += ["/bin/bash", "bash5.2"]
FAMILIES["mkfs"] = ["mkfs", "mkfs.ext4", "mke2fs", "/sbin/mkfs.xfs"]


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_every_member_of_a_family_gets_the_same_verdict(name: str) -> None:
    members = FAMILIES[name]
    assert {family(member) for member in members} == {name}
    assert {program_name(member) for member in members} == {name}
    spellings = sorted({name, *members, *(m.rpartition("/")[2] for m in members)}, key=len, reverse=True)
    named = re.compile("(?<![\\w./-])(?:" + "|".join(map(re.escape, spellings)) + ")(?![\\w.-])")
    for template in FAMILY_TEMPLATES:
        verdicts = {}
        for member in members:
            reason = DENY.check(template.format(p=member))
            verdicts[member] = None if reason is None else named.sub("P", reason)
        assert len(set(verdicts.values())) == 1, (template, verdicts)


def test_family_names() -> None:
    assert [family(p) for p in ["perl5.36.0", "tclsh8.6", "gtar", "bsdtar", "nodejs", "gawk", "mkfs.ext4"]] == [
        "perl",
        "tclsh",
        "tar",
        "tar",
        "node",
        "awk",
        "mkfs",
    ]
    assert [family(p) for p in ["ls", "git", "bash-completion", "node-gyp", "python-config"]] == [
        "ls",
        "git",
        "bash-completion",
        "node-gyp",
        "python",
    ]


def test_limits_are_opaque_with_a_reason() -> None:
    long = "echo " + "a" * MAX_LENGTH
    assert DENY.analyse(long) == ShellVerdict(f"the command is longer than {MAX_LENGTH} characters", opaque=True)
    deep = "echo " + "$(" * (MAX_NESTING + 5) + "ls" + ")" * (MAX_NESTING + 5)
    assert DENY.analyse(deep) == ShellVerdict(f"the command nests more than {MAX_NESTING} levels deep", opaque=True)
    wide = "echo " + "a " * (MAX_NODES + 1)
    assert DENY.check(wide) == (
        f"the command has {MAX_NODES + 5} words, operators and syntax nodes, more than the {MAX_NODES} the policy "
        "reads in bounded time; split it into smaller commands"
    )
    dense = "|".join(["a"] * 1000)
    assert DENY.check(dense) == (
        "the command has 3996 words, operators and syntax nodes, more than the 3000 the policy reads in bounded "
        "time; split it into smaller commands"
    )
    assert parse_script("ls", [5]).error == (  # "ls" is 12 nodes to tree-sitter-bash
        f"the command has {MAX_NODES - 5 + 12} words, operators and syntax nodes, more than the {MAX_NODES} the "
        "policy reads in bounded time; split it into smaller commands"
    )
    pausing = ShellRule([], frozenset({"ls"}), True, on_opaque="pause")
    assert pausing.analyse("ls $X") == ShellVerdict(
        "the argument $X of 'ls' is only known at run time (on_opaque is 'pause': a human decides)", opaque=True
    )


def test_a_cd_chain_is_decided_at_once() -> None:
    for length in (4, 5, 50, 150):
        command = " && ".join(f"cd d{i}" for i in range(length)) + " && echo x > f"
        started = time.perf_counter()
        verdict = DENY.analyse(command)
        assert time.perf_counter() - started < 0.5
        if length <= 4:  # 4 relative targets lead to 20 places: each is checked
            assert verdict.reason is None
        elif length < 100:  # more: a relative path is in a directory only known at run time
            assert verdict.reason == (
                "the redirection > f goes to a file in a directory only known at run time (allow_opaque is off)"
            )
        else:
            assert verdict.reason is not None
            assert "in bounded time" in verdict.reason


_WORDS = st.sampled_from(
    [
        *("ls", "rm", "-rf", "/", "cd", "x", "$X", "$(", ")", "`", "'", '"', "{", "}", "(", ")", ";", "|", "&&", "||"),
        *("&", "<<EOF\n", "\nEOF\n", ">", ">>", "<", "2>&1", "[[", "]]", "!", "time", "coproc", "eval", "--", "*"),
        *("~", "\\", "for", "in", "do", "done", "if", "then", "fi", "case", "esac", "$((", "))", "${", "<(", "\n"),
        *("=", "a[", "]"),
    ]
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_WORDS, max_size=60).map(" ".join))
def test_random_bash_never_raises_and_is_decided_within_the_budget(command: str) -> None:
    for rule in (DENY, STRICT):
        started = time.perf_counter()
        verdict = rule._analyse(command)
        assert time.perf_counter() - started < 0.2  # generous: a loaded machine; the bench measures the real cost
        assert verdict.reason is None or isinstance(verdict.reason, str)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_random_text_never_raises(command: str) -> None:
    assert isinstance(DENY.analyse(command), ShellVerdict)
    assert isinstance(STRICT.analyse(command), ShellVerdict)
