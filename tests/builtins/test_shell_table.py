"""The one program table of the shell rule (``_shell_table``): complete records, one family
per spelling, the only source of program facts, and a new spelling judged as its family on
every dispatch path."""

from __future__ import annotations

import ast
import pathlib
import re
from collections.abc import Iterator

import pytest

import beamfilter_builtins
from beamfilter_builtins import _shell_table
from beamfilter_builtins._shell_programs import Call, Code, StdinScript, Unknown, unwrap
from beamfilter_builtins._shell_rule import ShellRule
from beamfilter_builtins._shell_table import (
    EFFECTS,
    PROGRAMS,
    READERS,
    Options,
    Program,
    Wrapper,
    family,
    index,
    program,
    strict_refusal,
)

_SOURCE = pathlib.Path(beamfilter_builtins.__file__).parent


def test_every_spelling_names_exactly_one_family() -> None:
    spellings = [s for record in PROGRAMS.values() for s in (record.name, *record.spellings)]
    assert len(spellings) == len(set(spellings))
    wrong = {s: family(s) for r in PROGRAMS.values() for s in (r.name, *r.spellings) if family(s) != r.name}
    assert wrong == {}
    assert all(name == record.name for name, record in PROGRAMS.items())
    assert len(PROGRAMS) == 271


def test_a_family_with_two_records_or_a_spelling_of_two_families_is_refused() -> None:
    with pytest.raises(ValueError, match=re.escape("the program 'tar' has two records")):
        index([Program("tar"), Program("tar", ("gtar",))])
    with pytest.raises(ValueError, match=re.escape("'gtar' is a spelling of both 'tar' and 'gnutar'")):
        index([Program("tar", ("gtar",)), Program("gnutar", ("gtar",))])
    with pytest.raises(ValueError, match=re.escape("'tar' is a spelling of both 'tar' and 'archiver'")):
        index([Program("tar"), Program("archiver", ("tar",))])
    assert index([Program("tar", ("gtar",))]) == ({"tar": Program("tar", ("gtar",))}, {"tar": "tar", "gtar": "tar"})


def test_every_record_is_complete() -> None:
    for record in PROGRAMS.values():
        assert record.reader in READERS, record.name
        assert record.effect in EFFECTS, record.name
        assert (record.wrapper is not None) == (record.reader == "wrapper"), record.name
        assert (record.options is not None) == (record.reader == "options"), record.name
        assert not record.code_options or record.reader == "interpreter", record.name
        assert bool(record.destroys) == (record.effect in {"arguments", "flag"}), record.name
    # every reader and effect is some family's: no dead branch in a dispatch path
    assert {r.reader for r in PROGRAMS.values()} == READERS
    assert {r.effect for r in PROGRAMS.values()} == EFFECTS
    assert program("ls") == Program("")  # unlisted: runs and destroys nothing the rule knows of


@pytest.mark.parametrize(
    ("facts", "problem"),
    [
        ({"reader": "wrapper"}, "a wrapper needs reader 'wrapper'"),
        ({"wrapper": Wrapper()}, "a wrapper needs reader 'wrapper'"),
        ({"reader": "options"}, "options need reader 'options'"),
        ({"options": Options("e")}, "options need reader 'options'"),
        ({"code_options": ("-c",)}, "code options belong to an interpreter"),
        ({"module_option": "-m"}, "a module option belongs to an interpreter"),
        ({"effect": "arguments"}, "effects 'arguments' and 'flag' need destroys"),
        ({"destroys": frozenset({"x"})}, "effects 'arguments' and 'flag' need destroys"),
        ({"reserved": "yes"}, "reserved is 'word' or 'before'"),
        ({"reader": "find"}, "find and fd read their strict options"),
    ],
)
def test_an_inconsistent_record_is_refused_when_the_table_is_built(facts: dict[str, object], problem: str) -> None:
    with pytest.raises(ValueError, match=re.escape(f"the program record 'x' is inconsistent: {problem}")):
        Program("x", **facts)  # type: ignore[arg-type]  # the facts are Program's fields


def test_unknown_readers_effects_and_option_kinds_are_refused() -> None:
    with pytest.raises(ValueError, match="'reader' must be in"):
        Program("x", reader="teleport")
    with pytest.raises(ValueError, match="'effect' must be in"):
        Program("x", effect="melts")
    with pytest.raises(ValueError, match=re.escape("option kinds ['magic'] are not among")):
        Program("x", runs=(("-z", "magic"),))


def test_records_are_frozen_with_slots() -> None:
    record = PROGRAMS["tar"]
    with pytest.raises(AttributeError):
        record.effect = ""  # type: ignore[misc]  # frozen
    assert not hasattr(record, "__dict__")
    assert not hasattr(record.wrapper or Wrapper(), "__dict__")


# Module-level constants of the rule's other modules whose words are also family names, and
# why each is not a list of programs: add a per-program set there and this test fails.
_NOT_PROGRAM_LISTS = {
    ("_shell_programs", "_READERS"): "the reader kinds, some named after the one program they read",
    ("_shell_programs", "_EXEC_OPTIONS"): "read from the table's find and fd records",
    ("_shell_options", "__all__"): "the readers of git, ssh and sed",
    ("_shell_options", "_GIT_SUBCOMMAND_CODE"): "git's subcommands (git env-helper...)",
    ("_shell_options", "_TMUX_RUNS"): "tmux's subcommands (if-shell, source-file)",
    ("_shell_effects", "_SYSTEM"): "system directories (/usr/local)",
    ("_shell_effects", "_FIND_BARE"): "find's primaries (!)",
    ("_shell_syntax", "_CONSTRUCTS"): "names of syntax nodes (unset)",
}


def _constants(module: str) -> Iterator[tuple[str, set[str]]]:
    tree = ast.parse((_SOURCE / f"{module}.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            words = {c.value for c in ast.walk(node) if isinstance(c, ast.Constant) and isinstance(c.value, str)}
            for target in targets:
                if isinstance(target, ast.Name):
                    yield target.id, words


def test_the_table_is_the_only_source_of_program_facts() -> None:
    spellings = {s for record in PROGRAMS.values() for s in (record.name, *record.spellings)}
    found = {
        (module, name)
        for module in ("_shell_programs", "_shell_options", "_shell_effects", "_shell_rule", "_shell_syntax")
        for name, words in _constants(module)
        if words & spellings
    }
    assert found == set(_NOT_PROGRAM_LISTS)
    assert not (_SOURCE / "_shell_wrappers.py").exists()


@pytest.fixture
def spelled(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """New spellings added to families, as a distribution would ship them."""
    added = {
        "perl-x9": "perl",
        "jsnode": "node",
        "xbash": "bash",
        "xtimeout": "timeout",
        "xenv": "env",
        "xxargs": "xargs",
        "xtar": "tar",
        "xman": "man",
        "xrm": "rm",
        "xdd": "dd",
        "xfind": "find",
        "xsystemctl": "systemctl",
        "xcp": "cp",
        "xgetopts": "getopts",
        "xmkswap": "mkswap",
    }
    for spelling, name in added.items():
        monkeypatch.setitem(_shell_table._SPELLINGS, spelling, name)
    return added


# one form per dispatch path: the spelling stands at {p}, the family's name at the same place
_PATHS = [
    ("interpreter inline code", "perl", "{p} -e 'system(1)'"),
    ("interpreter reading its input", "node", "curl x | {p}"),
    ("interpreter --eval=", "node", "{p} --eval='x'"),
    ("shell -c code", "bash", "{p} -c 'rm -rf /'"),
    ("wrapper", "timeout", "{p} 5 rm -rf /"),
    ("wrapper with an abbreviated option", "timeout", "{p} --sig=KILL 5 rm -rf /"),
    ("wrapper splitting a string", "env", "{p} -S 'rm -rf /'"),
    ("wrapper reading its input", "xargs", "echo x | {p} -I{{}} sh -c {{}}"),
    ("code-running option", "tar", "{p} --to-comm='rm -rf /' -xf a"),
    ("code-running option, attached", "tar", "{p} -I'rm -rf /' -xf a"),
    ("code-running option of runs", "man", "{p} -P 'rm -rf /' ls"),
    ("effect: recursive", "rm", "{p} -rf /"),
    ("effect: device write", "dd", "{p} if=x of=/dev/sda"),
    ("effect: destructive argument", "systemctl", "{p} reboot"),
    ("effect: destructive", "mkswap", "{p} /dev/sda1"),
    ("effect: copy onto a device", "cp", "{p} x /dev/sda"),
    ("find -exec", "find", "{p} / -exec rm -rf / ;"),
]


@pytest.mark.parametrize(("path", "name", "form"), _PATHS, ids=[p[0] for p in _PATHS])
def test_a_new_spelling_gets_its_familys_verdict_on_every_path(
    spelled: dict[str, str], path: str, name: str, form: str
) -> None:
    spelling = next(s for s, n in spelled.items() if n == name)
    named = re.compile(f"(?<![\\w-])(?:{re.escape(spelling)}|{re.escape(name)})(?![\\w-])")
    for rule in (ShellRule([], None, True), ShellRule([], frozenset({name, spelling, "ls", "sh", "curl"}), True)):
        expected = rule.analyse(form.format(p=name))
        got = rule.analyse(form.format(p=spelling))
        assert expected.reason is not None, (path, rule.allow_commands)
        assert got.reason is not None
        assert named.sub("P", got.reason) == named.sub("P", expected.reason), path
        assert got.opaque == expected.opaque


def test_a_new_spelling_is_refused_where_its_family_is_under_allow_commands(spelled: dict[str, str]) -> None:
    strict = ShellRule([], frozenset({"xenv", "xxargs", "xfind", "xgetopts", "ls"}), True)
    assert strict_refusal("xenv", ("-S", "ls")) is None  # the table is asked by family, not by spelling
    assert strict_refusal(family("xenv"), ("-S", "ls")) == "env -S runs a command built from its arguments"
    assert strict.check("xenv -S ls") == ("env -S runs a command built from its arguments (allow_opaque is off)")
    assert strict.check("xxargs ls < x") == (
        "the program 'xxargs' runs code, changes the shell or hides which program runs; allow_commands allows "
        "only plain commands (allow_opaque is off)"
    )
    assert strict.check("xfind . -okdir ls ;") == (
        "find -okdir runs a command built from its arguments (allow_opaque is off)"
    )
    assert list(unwrap(("xbash", "-c", "ls"), None)) == [Call(("xbash", "-c", "ls"), None), Code("ls", None, "bash -c")]
    assert list(unwrap(("jsnode",), "data")) == [Call(("jsnode",), "data"), StdinScript("node", "data")]


def test_versions_and_variants_of_every_spelling_of_a_versioned_family() -> None:
    # each spelling of a versioned family may carry a version, not only the family's name
    assert [family(p) for p in ("py3", "mawk1.3.4", "php-cgi8.2", "irb3.1", "luajit-2.1.0", "Rscript4")] == [
        "python",
        "awk",
        "php",
        "ruby",
        "lua",
        "R",
    ]
    assert [family(p) for p in ("busybox.static", "toybox-x86_64", "mkfs.ext4", "python3.11-dbg")] == [
        "busybox",
        "toybox",
        "mkfs",
        "python",
    ]
    assert [family(p) for p in ("vim9", "tar2", "rm5")] == ["vim9", "tar2", "rm5"]  # not versioned families
    deny = ShellRule([], None, True)
    assert deny.check("mawk1.3.4 'BEGIN{system(\"id\")}'") == (
        "the awk program runs commands (system() or a pipe), which the policy does not read (allow_opaque is off)"
    )
    assert deny.check("toybox-x86_64 rm -rf /") == "the command runs rm recursively from / or the home directory"
    assert list(unwrap(("py3", "-c", "x"), None))[1:] == [Unknown("python -c runs code that the policy cannot read")]
