"""tool_policy's shell analysis, piece by piece: the parser walk, word expansion, the
wrapper tables and the rule's decisions. Unit tests of the private modules; the attack
tables through ``ToolPolicy`` are in ``tests/faults/test_policy_attacks.py``.
"""

from __future__ import annotations

import ipaddress
import re
import socket

import pytest
from _support import errors_in_threads

from beamfilter_builtins._policy_rules import UrlRule
from beamfilter_builtins._shell_programs import (
    Call,
    Code,
    EnvAssignment,
    StdinScript,
    Unknown,
    interpreter_code,
    normalise_path,
    program_name,
    unwrap,
)
from beamfilter_builtins._shell_rule import MAX_DEPTH, ShellRule, ShellVerdict
from beamfilter_builtins._shell_syntax import MAX_LENGTH, Opaque, Redirect, Script, SimpleCommand, parse_script
from beamfilter_builtins._shell_words import MAX_WORDS, ansi_c
from beamfilter_builtins._tool_policy import Denial, ToolPolicy

# -- the walk -----------------------------------------------------------------------------------


def argvs(command: str) -> list[tuple[object, ...]]:
    script = parse_script(command)
    assert script.error is None, script.error
    return [c.argv for c in script.commands]


WALKS = [
    ("ls -la", [("ls", "-la")]),
    ("a; b && c || d & e", [("a",), ("b",), ("c",), ("d",), ("e",)]),
    ("a\nb", [("a",), ("b",)]),
    ("a | b |& c", [("a",), ("b",), ("c",)]),
    ("(a; b)", [("a",), ("b",)]),
    ("{ a; }", [("a",)]),
    ("! a", [("a",)]),
    ("if a; then b; elif c; then d; else e; fi", [("a",), ("b",), ("c",), ("d",), ("e",)]),
    ("while a; do b; done", [("a",), ("b",)]),
    ("until a; do b; done", [("a",), ("b",)]),
    ("for x in $(a); do b; done", [(), ("a",), ("b",)]),  # (): x is assigned each word
    ("for ((i=0; i<$(a); i++)); do b; done", [("a",), ("b",)]),
    ("case $(a) in x) b;; y|z) c;; esac", [("a",), ("b",), ("c",)]),
    ("[[ $(a) == x ]]", [("a",)]),
    ("echo $(( 1 + $(a) ))", [("a",), ("echo", Opaque("$(( 1 + $(a) ))"))]),
    ("f() { a; }", [("a",)]),
    ("function f { a; }", [("a",)]),
    ("echo `a`", [("a",), ("echo", Opaque("`a`"))]),
    ('echo "x $(a) y"', [("a",), ("echo", Opaque('"x $(a) y"'))]),
    ("echo ${x:-$(a)}", [("a",), ("echo", Opaque("${x:-$(a)}"))]),
    ("x=$(a)", [("a",), ()]),
    ("x=$(a) b", [("a",), ("b",)]),
    ("export x=$(a)", [("a",), ("export",)]),
    ("local -r y=1 z", [("local", "-r", "z")]),
    ("unset x", [("unset", "x")]),
    ("b > $(a)", [("a",), ("b",)]),
    ("b <<< $(a)", [("a",), ("b",)]),
    ("cat <<EOF\n$(a)\nEOF", [("a",), ("cat",)]),
    ("cat <<'EOF'\n$(a)\nEOF", [("cat",)]),
    ("{ a; } > f", [(), ("a",)]),
    ("cat <(a) >(b)", [("a",), ("b",), ("cat", Opaque("<(a)"), Opaque(">(b)"))]),
    ("echo # comment; rm -rf /", [("echo",)]),
    ('"r"\\m -rf /', [("rm", "-rf", "/")]),
    ("x'y'\"z\"$'w' v", [("xyzw", "v")]),
    ("a\\\nb", [("ab",)]),
]


@pytest.mark.parametrize(("command", "expected"), WALKS)
def test_every_command_in_the_tree_is_found(command: str, expected: list[tuple[object, ...]]) -> None:
    assert argvs(command) == expected


def test_standard_input_is_tracked() -> None:
    stdin = [(c.argv, c.stdin) for c in parse_script("a | (b; c) | { d; }").commands]
    assert stdin == [(("a",), None), (("b",), "a pipe"), (("c",), "a pipe"), (("d",), "a pipe")]
    assert [c.stdin for c in parse_script("sh <<< x").commands] == ["a here-string"]
    assert [c.stdin for c in parse_script("sh <<E\nx\nE").commands] == ["a here-document"]
    assert [c.stdin for c in parse_script("sh < <(a)").commands] == [None, "a process substitution"]
    assert [c.stdin for c in parse_script("sh < file").commands] == [None]
    assert [(c.argv, c.stdin) for c in parse_script("a > >(b)").commands] == [(("b",), "a pipe"), (("a",), None)]


def test_redirections_assignments_and_functions_are_recorded() -> None:
    script = parse_script("f() { f | f & }; A=1 B=$x g >> out 2>&1 <in >&- 2>/dev/null")
    assert script.functions == frozenset({"f"})
    assert script.commands == (
        SimpleCommand(("f",), function="f"),
        SimpleCommand(("f",), stdin="a pipe", function="f"),
        SimpleCommand(
            ("g",),
            assignments=(("A", "1"), ("B", Opaque("$x"))),
            redirects=(Redirect(">>", "out"), Redirect("<", "in"), Redirect(">", "/dev/null")),
        ),
    )
    assert [r.writes for r in script.commands[2].redirects] == [True, False, True]
    assert parse_script("a[1]=x").commands == (SimpleCommand((), (("a", "x"),)),)
    assert parse_script("x=").commands == (SimpleCommand((), (("x", ""),)),)


def test_unreadable_commands_are_refused() -> None:
    assert parse_script("echo 'x").error == "the command cannot be parsed (syntax error at line 1, column 5)"
    assert parse_script("a &&").error is not None
    assert parse_script("a" * (MAX_LENGTH + 1)).error == f"the command is longer than {MAX_LENGTH} characters"
    assert parse_script("a" * MAX_LENGTH).error is None
    assert parse_script("") == Script(())


# -- words ----------------------------------------------------------------------------------------

EXPANSIONS = [
    ("echo {a,b}", ("echo", "a", "b")),
    ("echo x{,.bak}", ("echo", "x", "x.bak")),
    ("echo {a,{b,c}}d", ("echo", "ad", "bd", "cd")),
    ("echo {a,b}{1,2}", ("echo", "a1", "a2", "b1", "b2")),
    ("echo {1..3}", ("echo", "1", "2", "3")),
    ("echo {3..1}", ("echo", "3", "2", "1")),
    ("echo {-1..1}", ("echo", "-1", "0", "1")),
    ("echo {01..03}", ("echo", "01", "02", "03")),
    ("echo {1..10..4}", ("echo", "1", "5", "9")),
    ("echo {10..1..4}", ("echo", "10", "6", "2")),
    ("echo {a..c}", ("echo", "a", "b", "c")),
    ("echo {c..a..2}", ("echo", "c", "a")),
    ("echo {a}", ("echo", "{a}")),
    ("echo {}", ("echo", "{}")),
    ("echo {1..a}", ("echo", "{1..a}")),
    ("echo {1..2..x}", ("echo", "{1..2..x}")),
    ("echo {1..2..3..4}", ("echo", "{1..2..3..4}")),
    ("echo {ab..c}", ("echo", "{ab..c}")),
    ("echo {a,b", ("echo", "{a,b")),
    ("echo '{a,b}' \"{a,b}\" \\{a,b}", ("echo", "{a,b}", "{a,b}", "{a,b}")),
    ('echo "a\\"b\\$c\\`d\\\\e\\f"', ("echo", 'a"b$c`d\\e\\f')),
    ('echo $HOME ${HOME}/x "$HOME"', ("echo", "~", "~/x", "~")),
    ("echo ~ ~root", ("echo", "~", "~root")),
    ("echo $'a\\tb'", ("echo", "a\tb")),
    ('echo $"x"', ("echo", "x")),
]


@pytest.mark.parametrize(("command", "expected"), EXPANSIONS)
def test_words_are_expanded_as_bash_would(command: str, expected: tuple[str, ...]) -> None:
    assert argvs(command) == [expected]


def test_brace_expansion_is_capped() -> None:
    assert argvs("echo {1..256}")[0][-1] == "256"
    assert argvs("echo {1..257}") == [("echo", Opaque("{1..257}"))]
    assert len(argvs("echo {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}")[0]) == MAX_WORDS + 1
    assert argvs("echo {a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}x{a,b}") == [
        ("echo", Opaque("{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}{a,b}x{a,b}"))
    ]


@pytest.mark.parametrize(
    ("body", "decoded"),
    [
        ("\\x72m", "rm"),
        ("\\162\\155", "rm"),
        ("\\0162", "\x0e2"),  # three octal digits at most
        ("\\u0072\\U0000006d", "rm"),
        ("\\a\\b\\e\\E\\f\\n\\r\\t\\v\\\\\\'\\\"\\?", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?"),
        ("\\cA\\c[", "\x01\x1b"),
        ("\\q", "\\q"),
        ("\\x", "\\x"),
        ("\\xZ", "\\xZ"),
        ("a\\x00b", "a"),  # NUL ends the string
        ("\\U00110000", "\ufffd"),
        ("end\\", "end\\"),
        ("\\xfff", "\xfff"),
    ],
)
def test_ansi_c_strings_are_decoded(body: str, decoded: str) -> None:
    assert ansi_c(body) == decoded


# -- what runs ------------------------------------------------------------------------------------


def findings(command: str) -> list[object]:
    (simple,) = parse_script(command).commands
    return list(unwrap(simple.argv, simple.stdin))[1:]  # the program itself is always first


UNWRAPS = [
    ("sudo -u root -- ls -l", [Call(("ls", "-l"), None)]),
    ("sudo -uroot -E ls", [Call(("ls",), None)]),
    ("sudo --user=root ls", [Call(("ls",), None)]),
    ("sudo --user root ls", [Call(("ls",), None)]),
    ("sudo -l", []),
    ("sudo -s", [Call(("sh",), None)]),
    ("sudo -s ls -l", [Code("ls -l", None, "sudo -s")]),
    ("sudo --login", [Call(("sh",), None)]),
    ("sudo -Z ls", [Unknown("'sudo' has the option '-Z', so which program it runs is unknown")]),
    ("sudo --frob ls", [Unknown("'sudo' has the option '--frob', so which program it runs is unknown")]),
    ("sudo -u $U ls", [Call(("ls",), None)]),  # who runs it is unknown, what runs is not
    ("sudo -E $X ls", [Unknown("the option $X of 'sudo' is only known at run time")]),
    ("timeout -k 5 10 ls", [Call(("ls",), None)]),
    ("timeout --signal=KILL 10 ls", [Call(("ls",), None)]),
    ("nice -n5 ls", [Call(("ls",), None)]),
    ("nice -5 ls", [Call(("ls",), None)]),
    ("env -i A=1 ls", [EnvAssignment("A", "1"), Call(("ls",), None)]),
    ("env -u X ls", [Call(("ls",), None)]),
    ("env -S 'ls -l' x", [Call(("ls", "-l", "x"), None)]),
    ("env --split-string='ls -l'", [Call(("ls", "-l"), None)]),
    ("env -S 'ls \"x'", [Unknown("env -S 'ls \"x' cannot be split")]),
    ("xargs -I{} -n 1 ls", [Call(("ls", Opaque("<arguments read from standard input>")), None)]),
    ("xargs", [Call(("echo", Opaque("<arguments read from standard input>")), None)]),
    ("watch -n 1 ls -l", [Code("ls -l", None, "watch")]),
    ("watch -x ls -l", [Call(("ls", "-l"), None)]),
    ("watch --exec ls", [Call(("ls",), None)]),
    ("watch -n 1", []),
    ("chroot /x", [Call(("sh", "-i"), None), StdinScript("sh", None)]),
    ("chroot --userspec=a /x ls", [Call(("ls",), None)]),
    ("command -v ls", []),
    ("command -p ls", [Call(("ls",), None)]),
    ("ionice -p 12", []),
    ("su", [Call(("sh",), None)]),
    ("su root", []),
    ("su -c ls root", [Code("ls", None, "su -c")]),
    ("su root -c ls", [Code("ls", None, "su -c")]),
    ("su root --command ls", [Code("ls", None, "su -c")]),
    ("runuser -u eve --command=ls", [Code("ls", None, "runuser --command")]),
    ("flock /l ls", [Call(("ls",), None)]),
    ("busybox ls", [Call(("ls",), None)]),
    ("time -p ls", [Call(("ls",), None)]),
    ("exec -a name ls", [Call(("ls",), None)]),
    ("stdbuf -oL ls", [Call(("ls",), None)]),
    ("strace -f -e trace=open -o log ls", [Call(("ls",), None)]),
    ("bash -c 'ls' name", [Code("ls", None, "bash -c")]),
    ("bash -xc 'ls'", [Code("ls", None, "bash -c")]),
    ("bash -o pipefail -c ls", [Code("ls", None, "bash -c")]),
    ("bash --norc -c ls", [Code("ls", None, "bash -c")]),
    ("bash -c", [Code("", None, "bash -c")]),
    ("bash", [StdinScript("bash", None)]),
    ("bash -s x", [StdinScript("bash", None)]),
    ("bash - x", []),  # "-" ends the options: x is the script
    ("bash -", [StdinScript("bash", None)]),
    ("bash -- /dev/stdin", [StdinScript("bash", None)]),
    ("bash script.sh", []),
    ("bash /dev/stdin", [StdinScript("bash", None)]),
    ("bash $S", [Code(Opaque("$S"), None, "bash $S")]),
    ("python3 x.py", []),
    ("python3", [StdinScript("python", None)]),
    ("python3 -", [StdinScript("python", None)]),
    ("python3 -u -W ignore x.py", []),
    ("python3 -m http.server", []),
    ("python3 -c 'x'", [Unknown("python -c runs code that the policy cannot read")]),
    ("python3 -cx", [Unknown("python -c runs code that the policy cannot read")]),
    ('python3 -c "$X"', [Code(Opaque('"$X"'), None, "python -c")]),
    ("node --eval x", [Unknown("node --eval runs code that the policy cannot read")]),
    ("source x.sh", []),
    ("source", []),
    (". /dev/stdin", [StdinScript(".", None)]),
    ("eval ls -l", [Code("ls -l", None, "eval")]),
    ("eval ls $x", [Code(Opaque("$x"), None, "eval")]),
    ("find . -name x -exec rm {} \\; -print", [Call(("rm", Opaque("{}")), None)]),
    ("find . -exec rm {} ';' -exec ls \\;", [Call(("rm", Opaque("{}")), None), Call(("ls",), None)]),
    ("find . -execdir ls +", [Call(("ls",), None)]),
    ("find . -exec", []),
    ("git -c core.sshCommand=ls fetch", [Code("ls", None, "git -c core.sshCommand")]),
    ("git -c CORE.PAGER=ls log", [Code("ls", None, "git -c CORE.PAGER")]),
    ("git -c filter.x.clean=ls add .", [Code("ls", None, "git -c filter.x.clean")]),
    ("git -c alias.x='!ls' x", [Code("ls", None, "git -c alias.x")]),
    ("git -c alias.x=log x", []),
    ("git -c user.name=x commit", []),
    ("git -C /x --git-dir=/y status", []),
    (
        "git --config-env=core.pager=P log",
        [Unknown("git --config-env=core.pager=P takes a setting from outside the command")],
    ),
    ("git -c $X log", [Unknown("git -c $X takes a setting from outside the command")]),
    ("git $X", [Unknown("git has the argument $X, which is only known at run time")]),
    ("git push --receive-pack=ls", [Code("ls", None, "git push --receive-pack")]),
    ("git clone -u ls url", [Code("ls", None, "git clone -u")]),
    ("git fetch -u", []),
    ("ssh -p 22 -i key host ls -l", [Code("ls -l", None, "ssh")]),
    ("ssh host", []),
    ("ssh -oProxyCommand=ls host", [Code("ls", None, "ssh -o ProxyCommand")]),
    ("ssh -o 'LocalCommand ls' host", [Code("ls", None, "ssh -o LocalCommand")]),
    ("ssh -o Port=2 host", []),
    ("ssh -o $O host", [Unknown("ssh -o $O is only known at run time")]),
    ("rsync -e ls a b", [Code("ls", None, "rsync -e")]),
    ("rsync --rsh=ls a b", [Code("ls", None, "rsync --rsh")]),
    ("tar --checkpoint-action=exec=ls -cf a .", [Code("ls", None, "tar --checkpoint-action")]),
    ("tar -I ls -xf a", [Code("ls", None, "tar -I")]),
    ("alias a='ls -l'", [Code("ls -l", None, "alias")]),
    ("alias $A", [Unknown("the alias $A is only known at run time")]),
    ("alias", []),
    ("trap 'ls' EXIT", [Code("ls", None, "trap")]),
    ("trap -p", []),
    ("awk '{print $1}' f", []),
    (
        "awk -F: -v x=1 '{print | \"sh\"}'",
        [Unknown("the awk program runs commands (system() or a pipe), which the policy does not read")],
    ),
    ("awk -f prog.awk", []),
    ("awk $P", [Unknown("the awk program $P is only known at run time")]),
]


@pytest.mark.parametrize(("command", "expected"), UNWRAPS)
def test_what_a_command_runs(command: str, expected: list[object]) -> None:
    assert findings(command) == expected


def test_wrappers_nest_and_keep_standard_input() -> None:
    (simple,) = parse_script("sudo timeout 5 nice -n 1 sh").commands
    found = list(unwrap(simple.argv, "a pipe"))
    assert found == [
        Call(("sudo", "timeout", "5", "nice", "-n", "1", "sh"), "a pipe"),
        Call(("timeout", "5", "nice", "-n", "1", "sh"), "a pipe"),
        Call(("nice", "-n", "1", "sh"), "a pipe"),
        Call(("sh",), "a pipe"),
        StdinScript("sh", "a pipe"),
    ]
    assert list(unwrap((), None)) == []
    assert list(unwrap((Opaque("$X"), "a"), None)) == [Call((Opaque("$X"), "a"), None)]


def test_program_names_and_paths() -> None:
    assert [program_name(p) for p in ["/usr/bin/python3.12", "py", "pypy3", "mkfs.ext4", "mke2fs", "/bin/rm"]] == [
        "python",
        "python",
        "python",
        "mkfs",
        "mkfs",
        "rm",
    ]
    assert [normalise_path(p) for p in ["//dev/./sda", "/a/../b", "a//b/./c", "", "///"]] == [
        "/dev/sda",
        "/b",
        "a/b/c",
        "",
        "/",
    ]
    assert interpreter_code("perl", ("-e", "x")) == ("-e", "x")
    assert interpreter_code("perl", ("-ex",)) == ("-e", "x")
    assert interpreter_code("perl", ("-e",)) == ("-e", "")
    assert interpreter_code("node", ("--evalx",)) is None
    assert interpreter_code("ruby", ("x.rb",)) is None


# -- the rule ------------------------------------------------------------------------------------


def test_opaque_and_allow_lists_are_options() -> None:
    strict = ShellRule([], None, True)
    lenient = ShellRule([], None, True, allow_opaque=True)
    assert strict.check("$X") == "the program $X is only known at run time (allow_opaque is off)"
    assert lenient.check("$X") is None
    listed = ShellRule([], frozenset({"ls", "/opt/bin/tool", "./run"}), True)
    assert listed.check("ls") is None
    assert listed.check("/opt//bin/./tool") is None
    assert listed.check("./run") is None
    assert listed.check(".//run") is None
    assert listed.check("run") == "the program 'run' is not in the allowed commands (./run, /opt/bin/tool, ls)"
    assert listed.check("/bin/ls") == "the program '/bin/ls' is not in the allowed commands (./run, /opt/bin/tool, ls)"
    assert listed.check("A=1 ls") == "the command assigns the variable 'A', which is not in allow_env (none)"
    with_env = ShellRule([], frozenset({"ls"}), True, allow_env=frozenset({"A"}))
    assert with_env.check("A=1 ls") is None
    assert with_env.check("B=1") == "the command assigns the variable 'B', which is not in allow_env (A)"
    no_list = ShellRule([], None, True)
    assert no_list.check("A=1 B=2 ls") is None
    assert no_list.check("FOO=bar") is None
    with pytest.raises(TypeError):
        ShellRule([], None, True, None, True)  # type: ignore[misc]  # allow_env and allow_opaque: keywords only
    only_env = ShellRule([], None, True, allow_env=frozenset({"A"}))
    assert only_env.check("B=1 ls") == "the command assigns the variable 'B', which is not in allow_env (A)"


def test_builtin_rules_can_be_turned_off() -> None:
    off = ShellRule([], None, False)
    assert off.check("rm -rf /") is None
    assert off.check("curl x | sh") is None
    assert off.check("$X") == "the program $X is only known at run time (allow_opaque is off)"
    assert off.check("echo 'x") == "the command cannot be parsed (syntax error at line 1, column 5)"


def test_the_first_denial_in_the_command_is_reported() -> None:
    rule = ShellRule([], None, True)
    assert rule.check("mkfs /dev/sda; rm -rf /") == "the program 'mkfs' is destructive"
    assert rule.check("rm -rf /; mkfs /dev/sda") == "the command runs rm recursively from / or the home directory"
    assert rule.check("$A; $B") == "the program $A is only known at run time (allow_opaque is off)"
    listed = ShellRule([], frozenset({"ls"}), True)
    assert listed.check("cat; id") == "the program 'cat' is not in the allowed commands (ls)"


def test_the_order_of_reasons() -> None:
    rule = ShellRule([re.compile("danger")], frozenset({"echo"}), True)
    assert rule.check("echo danger; rm -rf /") == "the command matches the deny pattern 'danger'"
    assert rule.check("ls; rm -rf /") == "the command runs rm recursively from / or the home directory"
    assert rule.check("$X; ls") == "the program 'ls' is not in the allowed commands (echo)"
    assert rule.check("$X") == "the program $X is only known at run time (allow_opaque is off)"
    # a pattern is searched in the expanded words of nested code too
    assert rule.check("bash -c \"echo 'dan''ger'\"") == "the command matches the deny pattern 'danger'"


def test_nested_code_is_bounded_and_must_parse() -> None:
    assert MAX_DEPTH == 8
    rule = ShellRule([], None, True)
    nested = "ls"
    for _ in range(4):
        nested = "bash -c " + _quote(nested)
    assert rule.check(nested) is None
    assert rule.check("eval " * MAX_DEPTH + "ls") is None
    assert rule.check("eval " * (MAX_DEPTH + 1) + "ls") == f"the command nests code more than {MAX_DEPTH} levels deep"
    assert rule.check("bash -c 'echo \"x'") == (
        "the code run by bash -c is unreadable: the command cannot be parsed (syntax error at line 1, column 6)"
    )


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


SWEEPING = {
    "rm -rf /": True,
    "rm -rf ~": True,
    "rm -rf ~eve": True,
    "rm -rf ~/": True,
    "rm -rf ~/x/..": True,
    "rm -rf ~/..": True,
    "rm -rf ~/x": False,
    "rm -rf ~/.cache*": False,
    "rm -rf ~/.*": True,
    "rm -rf ~/.[!.]*": True,  # every hidden file of home: a bracket is as wild as a ?
    "rm -rf ~/.[^.]*": True,
    "rm -rf .[!.]*": True,
    "rm -rf ~/.[!.]*rc": False,
    "rm -rf ~/[!.]": False,
    "rm -rf /*": True,
    "rm -rf /b*": True,
    "rm -rf /srv/app/*": False,
    "rm -rf /usr/..": True,
    "rm -rf /srv/app/lib/..": False,
    "rm -rf .": True,
    "rm -rf ./": True,
    "rm -rf ..": True,
    "rm -rf *": True,
    "rm -rf ?*": True,
    "rm -rf *.log": False,
    "rm -rf x/..": True,
    "rm -rf x/../y": False,
    "rm -rf -- /": True,
    "rm -rf -- -x": False,
    "rm -r /": True,
    "rm -R /": True,
    "rm --recursive /": True,
    "rm --force /": False,
    "rm -f /": False,
    "rm / -r": True,
    "rm -- -r /": False,
    "chgrp -R x /": True,
    "find / -name x": False,
    "find / -delete": True,
    "find ~ -exec ls ;": True,
    "find . -delete": False,
    "find -H / -delete": True,
    "find -D tree / -delete": True,
    "find -O3 / -okdir ls ;": True,
    "find -delete": False,
    "find -L": False,  # only options: no start path, no action
    "find -H -D tree": False,
    "find src -name / -delete": False,  # "/" after the first option is not a start path
    "find src \\( -name x \\) -delete": False,
    "find /tmp / -delete": True,
}


@pytest.mark.parametrize(("command", "denied"), SWEEPING.items())
def test_which_targets_sweep_everything(command: str, denied: bool) -> None:
    reason = ShellRule([], None, True).check(command)
    if not denied:
        assert reason is None
    elif command.startswith("find"):
        assert reason == "the command deletes or runs commands on every file from / or the home directory"
    else:
        program = command.split()[0]
        assert reason == f"the command runs {program} recursively from / or the home directory"


def test_devices_and_harmless_redirections() -> None:
    rule = ShellRule([], None, True)
    for command in [
        "echo x > /dev/sda",
        "echo x >> /dev/nvme0n1p1",
        "cat x &>> /dev/mmcblk0",
        "echo > /dev/mapper/root",
    ]:
        assert rule.check(command) == "the command writes a raw device", command
    for command in [
        "cp x.img /dev/sda",
        "cp -f x.img //dev/./sdb",
        "install -m 644 x /dev/nvme0n1",
        "cp a b /dev/sda",
        "cp -t /dev/sda x.img",
        "cp -vt /dev/sda x.img",
        "cp -vt/dev/sda x.img",
        "cp --target-directory=/dev/sda x.img",
        "cp --target-directory /dev/sda x.img",
        "cp -- x.img /dev/sda",
        "cp -t dir /dev/sda",  # refused: with -t a device operand is not told apart from the target
    ]:
        assert rule.check(command) == f"the command writes a raw device with {command.split()[0]}", command
    for command in ["mv x /dev/sda", "mv /dev/sda x", "mv -t /dev/sdb x", "mv --target-directory=/dev/sdb x"]:
        assert rule.check(command) == "the command writes a raw device with mv", command
    for command in [
        "truncate -s0 /dev/sda",
        "truncate --size 0 /dev/nvme0n1",
        "fallocate -l 1G /dev/sdb",
        "truncate -r /dev/sda x",  # refused: an option's value is not told apart from a file
    ]:
        assert rule.check(command) == f"the command writes a raw device with {command.split()[0]}", command
    for command in [
        "cat /dev/sda > x.img",
        "echo x > /dev/null",
        "tee /dev/stderr",
        "dd if=/dev/sda of=x.img",
        "cp /dev/sda x.img",  # reading a device is allowed (as with cat)
        "cp /dev/sda",
        "install -d /dev/sdx-backup/../x",
        "cp -T /dev/sda x.img",  # -T: no target directory, a plain read
        "mv x y",
        "truncate -s0 log.txt",
    ]:
        assert rule.check(command) is None, command
    assert rule.check("dd of=/dev/sdb") == "the command writes a raw device with dd"
    verdict = rule.analyse("cat < in > out 2>/dev/null >/dev/stdout")
    assert verdict == ShellVerdict(None, (Redirect("<", "in"), Redirect(">", "out")))
    assert rule.analyse("rm -rf /") == ShellVerdict("the command runs rm recursively from / or the home directory")


def test_a_function_is_a_fork_bomb_only_when_it_calls_itself() -> None:
    rule = ShellRule([], None, True)
    assert rule.check("f(){ g; }; f; f") is None
    assert rule.check("f(){ f; }") == "the command is a fork bomb (a function that calls itself)"
    assert rule.check("f(){ if x; then f; fi; }") == "the command is a fork bomb (a function that calls itself)"


def test_variables_that_hold_commands_are_checked() -> None:
    rule = ShellRule([], None, True)
    assert rule.check("EDITOR='rm -rf /' git commit") == "the command runs rm recursively from / or the home directory"
    assert rule.check("PAGER=less git log") is None
    assert rule.check("GIT_SSH_COMMAND=$X git fetch") == (
        "the variable GIT_SSH_COMMAND runs $X, which is only known at run time (allow_opaque is off)"
    )
    assert rule.check('X_COMMAND="$(curl x)" y') == (
        "the command runs code generated by a command substitution (the variable X_COMMAND)"
    )


def test_argv_lists_are_quoted_before_parsing() -> None:
    policy = ToolPolicy([{"tool": "run", "kind": "shell", "arguments": ["argv"]}])
    assert policy.check("run", {"argv": ["echo", "rm -rf /"]}) is None  # one argument, not a command
    assert policy.check("run", {"argv": ["rm", "-rf", "/"]}) == Denial(
        "rules[0] shell 'argv'", "the command runs rm recursively from / or the home directory"
    )


def test_shell_options_are_validated() -> None:
    from beamfilter_core.errors import ConfigError

    for key in ["allow_opaque", "case_sensitive"]:
        kind = "shell" if key == "allow_opaque" else "path"
        with pytest.raises(
            ConfigError, match=re.escape(f"tool_policy_filter: rules[0].{key}='yes' is invalid; give true or false.")
        ):
            ToolPolicy([{"tool": "t", "kind": kind, key: "yes"}])
    with pytest.raises(
        ConfigError, match=re.escape("tool_policy_filter: rules[0].allow_env='A' is invalid; give a list of strings.")
    ):
        ToolPolicy([{"tool": "t", "kind": "shell", "allow_env": "A"}])


# -- URLs: resolution ---------------------------------------------------------------------------


def test_resolved_addresses_are_checked_against_allowed_networks() -> None:
    rule = UrlRule(["https"], ["db.example.com"], [ipaddress.ip_network("10.1.0.0/16")], False, True)
    assert rule.check_resolved("db.example.com", ["10.1.2.3", "8.8.8.8"]) is None
    assert rule.check_resolved("db.example.com", ["10.2.0.1"]) == (
        "the host 'db.example.com' resolves to the internal address 10.2.0.1"
    )
    assert rule.check_resolved("x", ["::ffff:127.0.0.1"]) == "the host 'x' resolves to the internal address 127.0.0.1"
    assert rule.check_resolved("x", ["fe80::1%eth0"]) == "the host 'x' resolves to the internal address fe80::1"
    assert rule.check_resolved("x", []) is None
    v6 = UrlRule(["https"], None, [ipaddress.ip_network("::1/128")], False, True)
    assert v6.check_resolved("x", ["::1"]) is None
    assert v6.check_resolved("x", ["127.0.0.1"]) == "the host 'x' resolves to the internal address 127.0.0.1"


def test_resolve_dns_with_hosts_and_allowed_networks() -> None:
    name = socket.gethostname().lower()
    # This machine's own name resolves locally (/etc/hosts) to loopback or a private address.
    addresses = [str(info[4][0]).split("%", 1)[0] for info in socket.getaddrinfo(name, 443, proto=socket.IPPROTO_TCP)]
    if not all(ipaddress.ip_address(a).is_private for a in addresses):
        pytest.skip(f"this machine's name {name!r} resolves to a public address ({addresses})")
    networks = sorted({str(ipaddress.ip_network(a)) for a in addresses})  # exactly those addresses
    rules = {"tool": "fetch", "kind": "url", "hosts": [name], "resolve_dns": True}
    allowed = ToolPolicy([{**rules, "allow_networks": networks}])
    denied = ToolPolicy([rules])
    other = ToolPolicy([{**rules, "hosts": ["example.com"], "allow_networks": networks}])
    assert allowed.check("fetch", {"url": f"http://{name}/"}) is None
    first = ipaddress.ip_address(addresses[0])
    assert denied.check("fetch", {"url": f"http://{name}/"}) == Denial(
        "rules[0] url 'url'", f"the host {name!r} resolves to the internal address {first}"
    )
    assert other.check("fetch", {"url": f"http://{name}.example.org/"}) == Denial(
        "rules[0] url 'url'", f"the host '{name}.example.org' is not in the allowed hosts (example.com)"
    )
    assert denied.check("fetch", {"url": "http://nonexistent.invalid/"}) == Denial(
        "rules[0] url 'url'", "the host 'nonexistent.invalid' is not in the allowed hosts (" + name + ")"
    )


def test_a_name_that_does_not_resolve_is_denied_with_the_resolver_error() -> None:
    # .invalid never resolves (RFC 6761): the lookup fails and the check fails closed
    policy = ToolPolicy([{"tool": "fetch", "kind": "url", "resolve_dns": True}])
    denial = policy.check("fetch", {"url": "https://nonexistent.invalid/"})
    assert denial is not None
    assert denial.rule == "rules[0] url 'url'"
    assert re.fullmatch(r"the host 'nonexistent\.invalid' cannot be resolved \(\[Errno -?\d+\] .+\)", denial.reason)


# -- URLs: address spellings --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "address"),
    [
        ("[::1", None),  # half a bracket is a name, not an address
        ("::1]", None),
        ("[zz]", None),
        ("[::1]", "::1"),
        ("[::]", "::"),
        ("[::2]", "0.0.0.2"),  # IPv4-compatible: every ::a.b.c.d above ::1
        ("[::1%25eth0]", "::1"),  # the zone id is dropped
        ("255.1", "255.0.0.1"),
        ("256.1", None),
        ("127.16777215", "127.255.255.255"),
        ("127.16777216", None),
        ("1.2.65535", "1.2.255.255"),
        ("1.2.65536", None),
        ("0x", "0.0.0.0"),
        ("1.2.3.4.5", None),
        ("", None),
        ("example.com", None),
    ],
)
def test_host_spellings(host: str, address: str | None) -> None:
    from beamfilter_builtins._policy_rules import parse_host_ip

    parsed = parse_host_ip(host)
    assert (None if parsed is None else str(parsed)) == address


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://224.0.0.1/", "the host '224.0.0.1' is the internal address 224.0.0.1"),  # multicast
        ("http://[ff02::1]/", "the host '[ff02::1]' is the internal address ff02::1"),
        ("http://[4000::1]/", "the host '[4000::1]' is the internal address 4000::1"),  # reserved
        ("http://240.0.0.1/", "the host '240.0.0.1' is the internal address 240.0.0.1"),
    ],
)
def test_multicast_and_reserved_addresses_are_internal(url: str, reason: str) -> None:
    policy = ToolPolicy([{"tool": "fetch", "kind": "url"}])
    assert policy.check("fetch", {"url": url}) == Denial(
        "rules[0] url 'url'", reason + " (loopback, private, link-local or reserved)"
    )


@pytest.mark.parametrize("char", ["\x00", "\x01", "\t", "\n", "\r", "\x1f", " ", "\\", "\x7f"])
def test_control_characters_in_urls_are_refused(char: str) -> None:
    policy = ToolPolicy([{"tool": "fetch", "kind": "url"}])
    denial = policy.check("fetch", {"url": f"http://a{char}b.com/"})
    expected = "the URL contains a backslash, whitespace or control character"
    if char == "\x7f":  # DEL is not below 32: the host name check refuses it
        expected = f"the host {'a' + char + 'b.com'!r} is not a valid name"
    assert denial == Denial("rules[0] url 'url'", expected)


def test_verdicts_are_remembered_for_recent_short_commands() -> None:
    from beamfilter_builtins._shell_rule import CACHE_SIZE, CACHED_LENGTH

    rule = ShellRule([], None, True)
    first = rule.analyse("rm -rf /")
    assert rule.analyse("rm -rf /") is first
    for index in range(CACHE_SIZE - 1):
        rule.analyse(f"echo {index}")
    assert rule.analyse("rm -rf /") is first  # CACHE_SIZE verdicts fit; a hit makes it the newest
    for index in range(CACHE_SIZE - 1, 2 * CACHE_SIZE - 2):
        rule.analyse(f"echo {index}")
    assert rule.analyse("rm -rf /") is first  # the oldest of CACHE_SIZE, still there
    for index in range(CACHE_SIZE):
        rule.analyse(f"x{index}")
    assert rule.analyse("rm -rf /") is not first  # evicted: the oldest of CACHE_SIZE + 1
    assert rule.analyse("rm -rf /") == first
    assert (CACHE_SIZE, CACHED_LENGTH) == (256, 4096)
    long = "echo " + "x" * 4092  # 4097 characters
    assert rule.analyse(long) is not rule.analyse(long)
    short = "echo " + "x" * 4091  # 4096 characters
    assert rule.analyse(short) is rule.analyse(short)


def test_one_rule_shared_by_threads_decides_the_same() -> None:
    rule = ShellRule([], None, True)
    commands = [f"echo {i}" for i in range(400)] + ["rm -rf /"] * 50

    def work() -> None:
        for command in commands:
            expected = (
                None if command.startswith("echo") else "the command runs rm recursively from / or the home directory"
            )
            assert rule.check(command) == expected

    assert errors_in_threads(work, 4) == []


# -- paths: defaults of the rule itself -----------------------------------------------------------


def test_path_rule_defaults(tmp_path: object) -> None:
    from pathlib import Path

    from beamfilter_builtins._policy_rules import PathRule

    base = Path(str(tmp_path))
    (base / "a").mkdir()
    (base / "b").mkdir()
    insensitive = PathRule([], ["*.PEM"], ".")  # no roots, base ".": relative to the working directory
    assert (
        insensitive.check("key.pem")
        == f"the path {str(Path('key.pem').resolve())!r} matches the denied pattern '*.pem'"
    )
    assert insensitive.check("notes.txt") is None
    two_roots = PathRule([str(base / "a"), str(base / "b")], [], None)
    assert two_roots.resolve("x") is None  # no base: a relative path is not judged from a guessed folder
    sensitive = PathRule([], ["*.PEM"], ".", case_sensitive=True)
    assert sensitive.check("key.pem") is None
    assert (
        sensitive.check("KEY.PEM") == f"the path {str(Path('KEY.PEM').resolve())!r} matches the denied pattern '*.PEM'"
    )


def test_a_host_that_is_not_valid_idna_is_refused() -> None:
    policy = ToolPolicy([{"tool": "fetch", "kind": "url"}])
    host = "\u00e9" * 64 + ".com"  # a label longer than 63 characters
    assert policy.check("fetch", {"url": f"http://{host}/"}) == Denial(
        "rules[0] url 'url'", f"the host {host!r} is not a valid name"
    )


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        # urlsplit reads the port after the bracket (80) and keeps the rest as the host: the
        # whole of it is checked, up to the last colon only
        ("http://a[::1]:80/", "the host 'a[::1]' is not a valid name"),
        ("http://a[::1]:/", "the host 'a[::1]' is not a valid name"),
        ("https://example.com:/", None),  # an empty port is no port
        ("https://example.com:8443/", None),
    ],
)
def test_the_port_is_cut_at_the_last_colon(url: str, reason: str | None) -> None:
    policy = ToolPolicy([{"tool": "fetch", "kind": "url"}])
    assert policy.check("fetch", {"url": url}) == (None if reason is None else Denial("rules[0] url 'url'", reason))


def test_punctuation_above_space_is_not_a_control_character() -> None:
    policy = ToolPolicy([{"tool": "fetch", "kind": "url"}])
    assert policy.check("fetch", {"url": "https://example.com/a!b"}) is None


def test_five_part_hosts_are_names() -> None:
    from beamfilter_builtins._policy_rules import parse_host_ip

    assert parse_host_ip("1.2.3.4.0") is None


def test_options_of_find_before_its_start_paths() -> None:
    rule = ShellRule([], None, True)
    assert rule.check("find -D / src -delete") is None  # "/" is the value of -D, not a start path
    assert rule.check("find -L -P / -delete") == (
        "the command deletes or runs commands on every file from / or the home directory"
    )


def test_non_ascii_text_keeps_its_real_characters() -> None:
    script = parse_script('cat /home/é/naïve.txt | grep "héllo wörld" > /tmp/ü')
    assert script.error is None
    assert [c.argv for c in script.commands] == [(), ("cat", "/home/é/naïve.txt"), ("grep", "héllo wörld")]
    assert script.commands[0].redirects[0].target == "/tmp/ü"
    braces = parse_script("echo {é,ü}{a,b}")
    assert braces.commands[0].argv == ("echo", "éa", "éb", "üa", "üb")


class _Spy:
    def __init__(self, inner: object) -> None:
        self.inner = inner
        self.seen: list[bytes] = []

    def parse(self, source: bytes) -> object:
        self.seen.append(source)
        return self.inner.parse(source)  # type: ignore[attr-defined]


def test_the_parser_only_ever_sees_ascii(monkeypatch: pytest.MonkeyPatch) -> None:
    # tree-sitter-bash's scanner corrupts memory on some non-ASCII input ("{" followed by a
    # character outside the BMP killed the process with SIGSEGV): it is given an ASCII shadow
    import beamfilter_builtins._shell_syntax as syntax

    spy = _Spy(syntax._parser())
    monkeypatch.setattr(syntax, "_parser", lambda: spy)
    script = parse_script("echo {\U000932e3a} ünïcode {rm,-rf,/é}")
    assert spy.seen
    assert all(source.isascii() for source in spy.seen)
    assert script.commands[0].argv[1] == "{\U000932e3a}"


_FUZZ_NON_ASCII = """
import random
from beamfilter_builtins._shell_syntax import parse_script
rnd = random.Random(7)
pool = [chr(c) for c in range(0, 0x250)] + list("{}$()'\\"`;|&<> \\n")
def high():
    return chr(rnd.choice([rnd.randint(0x80, 0xD7FF), rnd.randint(0xE000, 0x10FFFF)]))
for _ in range(20000):
    parse_script("".join(rnd.choice(pool) if rnd.random() < 0.6 else high() for _ in range(rnd.randint(1, 80))))
print("parsed", flush=True)
"""


def test_random_non_ascii_text_never_crashes_the_process() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _FUZZ_NON_ASCII], capture_output=True, text=True, timeout=300, check=False
    )
    assert (done.returncode, done.stdout) == (0, "parsed\n"), done.stderr[-2000:]
