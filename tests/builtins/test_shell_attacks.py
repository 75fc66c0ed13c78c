"""The shell rule attacked by class of effect: the spellings that used to pass, and every
composition of wrappers, quoting, flags and separators around known-destructive commands.

Each row of the tables was allowed before its fix; the exact reason is pinned. The
hypothesis test builds equivalent spellings of destructive commands and asserts that
every one is denied with the reason of the plain command.
"""

from __future__ import annotations

import itertools
import shlex
from pathlib import Path

import pytest
from _shell_attacks import quote_chunk
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from beamfilter_builtins._shell_effects import _tar_archive, is_device, places, working_directories, write_denial
from beamfilter_builtins._shell_rule import ShellRule, _directory, _set_names
from beamfilter_builtins._shell_syntax import Opaque
from beamfilter_builtins._tool_policy import Denial, ToolPolicy

RULE = ShellRule([], None, True)
RM_ROOT = "the command runs rm recursively from / or the home directory"
FIND_ROOT = "the command deletes or runs commands on every file from / or the home directory"
RAW_DEVICE = "the command writes a raw device"
FORK_BOMB = "the command is a fork bomb (a function that calls itself)"


def system(program: str, path: str) -> str:
    return f"the command runs {program} recursively on the system directory {path}"


def device(program: str) -> str:
    return f"{RAW_DEVICE} with {program}"


def kernel(path: str) -> str:
    return f"the command writes {path}, which changes the kernel or a running process"


def vital(path: str) -> str:
    return f"the command writes {path}, which the whole system depends on"


def opaque(text: str) -> str:
    return f"{text} (allow_opaque is off)"


def loads_code(name: str) -> str:
    return f"the command sets {name}, which loads code into the programs it runs"


# Allowed before, by class of effect; each with the reason it is denied now.
DELETE = [
    ("rm --recur -f /", RM_ROOT),  # GNU takes any unambiguous abbreviation of --recursive
    ("rm --r /", RM_ROOT),
    ("rm -rf /usr", system("rm", "/usr")),
    ("rm -rf /etc/", system("rm", "/etc")),
    ("rm -rf /home", system("rm", "/home")),
    ("rm -rf /home/*", system("rm", "/home/*")),
    ("rm -rf /home/eve", RM_ROOT),  # a home directory, as ~eve is
    ("rm -rf /home//eve/./", RM_ROOT),
    ("rm -rf /home/eve/*", RM_ROOT),
    ("rm -rf /Users/eve/.[!.]*", RM_ROOT),
    ("find /home/eve -delete", FIND_ROOT),
    ("rm -rf /root", system("rm", "/root")),
    ("rm -rf /usr/lib/..", system("rm", "/usr")),
    ("rm -rf /proc/self/root/", system("rm", "/proc/self/root")),  # /proc/self/root is /
    ("cd / && rm -rf usr", system("rm", "/usr")),
    ("cd /; rm -rf *", RM_ROOT),
    ("cd /tmp; cd ..; rm -rf etc", RM_ROOT),  # ../etc is above the starting directory, /tmp/../etc is /etc
    ("pushd / && rm -rf var", system("rm", "/var")),
    ("builtin cd /usr && rm -rf lib", system("rm", "/usr/lib")),
    ("cd && rm -rf .", RM_ROOT),  # cd alone goes home
    ("sudo -D / rm -rf usr", system("rm", "/usr")),
    ("sudo --chdir=/ rm -rf usr", system("rm", "/usr")),
    ("env -C / rm -rf usr", system("rm", "/usr")),
    ("env --chdir / rm -rf etc", system("rm", "/etc")),
    ("wipe -rf /", "the command runs wipe recursively from / or the home directory"),
    ("srm -r ~", "the command runs srm recursively from / or the home directory"),
    ("toybox rm -rf /", RM_ROOT),
    ("find -- / -delete", FIND_ROOT),
    ("cd / && find . -delete", FIND_ROOT),
    ("rsync -a --delete empty/ /", "the command runs rsync --delete recursively from / or the home directory"),
    ("rsync -a --del empty/ ~/", "the command runs rsync --delete recursively from / or the home directory"),
    ("fd . / -X rm -rf", opaque("rm -r runs on <the paths fd finds>, which is only known at run time")),
    ("fd -x rm", opaque("rm runs on <the paths fd finds>, which is only known at run time")),
    ("parallel rm -rf ::: /", opaque("parallel builds the commands it runs from its arguments and input")),
    ('cd "$D" && rm -rf build', opaque("rm -r runs on build in a directory only known at run time")),
    ("cd - && rm -rf x", opaque("rm -r runs on x in a directory only known at run time")),
    ('cd "$D" && find . -delete', opaque("find deletes or runs commands from . in a directory only known at run time")),
    ("find / -name x $ACT", opaque("find has the argument $ACT, which is only known at run time")),
    ("find . $X", opaque("find has the argument $X, which is only known at run time")),
    ("find $X", opaque("find has the argument $X, which is only known at run time")),
    ("find . -exec ls {} \\; $X", opaque("find has the argument $X, which is only known at run time")),
]
PERMISSIONS = [
    ("chmod --rec 000 /", "the command runs chmod recursively from / or the home directory"),
    ("chown --recursive=x eve /", "the command runs chown recursively from / or the home directory"),
    ("chmod -R 777 /etc", system("chmod", "/etc")),
    ("chattr -R +i /", "the command runs chattr recursively from / or the home directory"),
    ("setfacl -R -m u:eve:--- ~", "the command runs setfacl recursively from / or the home directory"),
]
DEVICES = [
    ("dd if=/dev/zero of=/dev/block/8:0", device("dd")),  # /dev/block/MAJ:MIN links to the disk
    ("cat x > /dev/sg0", RAW_DEVICE),
    ("cat x > /dev/root", RAW_DEVICE),
    ("dd of=/dev/vg0/root", device("dd")),  # an LVM volume: /dev/<group>/<volume>
    ("echo x > /dev/mtdblock0", RAW_DEVICE),
    ("cp sda /dev/", device("cp")),  # into /dev: the copy is /dev/sda
    ("cd /dev && cat x > sda", RAW_DEVICE),
    ("cd /dev; dd if=/dev/zero of=sda", device("dd")),
    ("cd /; dd if=/dev/zero of=dev/sda", device("dd")),
    ("env -C /dev dd of=sda", device("dd")),
    ("cd /dev && cp x.img sda", device("cp")),
    ("cd /dev && truncate -s0 sda", device("truncate")),
    ("cd /dev && echo x | tee sda", RAW_DEVICE),
    ("dcfldd if=/dev/zero of=/dev/sda", device("dcfldd")),
    ("dc3dd if=/dev/zero of=/dev/sda", device("dc3dd")),
    ("ddrescue -f /dev/zero /dev/sda", device("ddrescue")),
    ("rsync --write-devices --inplace x.img /dev/sda", device("rsync")),
    ("tar -cf /dev/sda .", device("tar")),
    ("tar cf /dev/sda .", device("tar")),
    ("tar --create --file=/dev/sda .", device("tar")),
    ("tar -c -f/dev/sda .", device("tar")),
    ("find . -fprint /dev/sda", device("find")),
    ("find . -fprintf /dev/sda %p", device("find")),
    ("echo b > /proc/sysrq-trigger", kernel("/proc/sysrq-trigger")),  # b: reboot now
    ("echo x | tee $DEV", opaque("tee writes $DEV, a file only known at run time")),
    ("cp x.img $DEV", opaque("cp writes $DEV, a file only known at run time")),
    ("mv x.img $DEV", opaque("mv writes $DEV, a file only known at run time")),
    ("truncate -s 0 $F", opaque("truncate writes $F, a file only known at run time")),
    ("tar -cf $OUT .", opaque("tar writes $OUT, a file only known at run time")),
    ("cd $D && dd of=sda", opaque("dd writes sda in a directory only known at run time")),
    ('cd "$D" && echo x > sda', opaque("the redirection > sda goes to a file in a directory only known at run time")),
    ("echo x > /srv/work/lin*", opaque("the redirection > /srv/work/lin* goes to a file a glob chooses at run time")),
]
# where the climb of .. lands, and what the kernel and the system cannot lose
WRITES = [
    ("cat x > ~/../../dev/sda", RAW_DEVICE),  # from /root, ~/../.. is /
    ("cat x > ../../../../../../dev/sda", RAW_DEVICE),  # enough .. reach / from anywhere
    ("cp x ../../../../dev/sda", device("cp")),
    ("awk '{print > \"/dev/sda\"}' f", device("awk")),
    ("sed -n 'w /dev/sda' f", device("sed")),
    ("sed 's/x/y/w /dev/sda' f", device("sed")),
    ("echo 1 > /proc/sys/kernel/panic", kernel("/proc/sys/kernel/panic")),
    ("echo x > /proc/self/mem", kernel("/proc/self/mem")),  # patches the running shell
    ("echo 1 | tee /sys/block/sda/device/delete", kernel("/sys/block/sda/device/delete")),
    ("echo /tmp/e.so > /etc/ld.so.preload", vital("/etc/ld.so.preload")),
    ("truncate -s0 /etc/passwd", vital("/etc/passwd")),
    ("cp shadow /etc/", vital("/etc/shadow")),
    ("sed -i s/x/y/ /etc/shadow", vital("/etc/shadow")),
    ("sed -i -e s/x/y/ /etc/sudoers", vital("/etc/sudoers")),
    ("dd if=x.img of=/boot/vmlinuz", vital("/boot/vmlinuz")),
]
# programs that run another program, or read commands
RUNNERS = [
    ("pkexec rm -rf /", RM_ROOT),
    ("run0 -D / rm -rf usr", system("rm", "/usr")),
    ("sg root -c 'rm -rf /'", RM_ROOT),
    ("unshare -r rm -rf /", RM_ROOT),
    ("nsenter -t 1 -m rm -rf /", RM_ROOT),
    ("firejail rm -rf /", RM_ROOT),
    ("fakeroot rm -rf /", RM_ROOT),
    (
        "firejail --noprofile rm -rf /",
        opaque("'firejail' has the option '--noprofile', so which program it runs is unknown"),
    ),
    ("echo 'rm -rf /' | at now", "the command pipes data into the interpreter 'at'"),
    ("batch <<< 'rm -rf /'", "the command pipes data into the interpreter 'batch'"),
    ("echo 'BEGIN{system(\"id\")}' | awk -f /dev/stdin", "the command pipes data into the interpreter 'awk'"),
    (
        "gawk --source='BEGIN{system(\"id\")}'",
        opaque("the awk program runs commands (system() or a pipe), which the policy does not read"),
    ),
    (
        "awk -e 'BEGIN{system(\"id\")}'",
        opaque("the awk program runs commands (system() or a pipe), which the policy does not read"),
    ),
    ("perl -pe 'system(\"id\")' f", opaque("perl -e runs code that the policy cannot read")),
    ("python3 -Bc 'import os'", opaque("python -c runs code that the policy cannot read")),
    ("ruby -ne 'system(1)' f", opaque("ruby -e runs code that the policy cannot read")),
]
# a backslash that starts a line: tree-sitter-bash glued the newline into the word
LINES = [
    ("ls\n\\rm -rf /", RM_ROOT),
    ("ls\n\\r\\m --recur /*", RM_ROOT),  # found by the spelling test below
    ("echo x\n  \\rm -rf /", RM_ROOT),
    ("ls > f\n\\rm -rf /", RM_ROOT),  # the words went into the redirection, unread
    ("A=1\n\\rm -rf ~", RM_ROOT),
    ("if true; then\n\\rm -rf /; fi", RM_ROOT),
    ("ls\n\\dd of=/dev/sda", device("dd")),
]
PROGRAMS = [
    ("mkreiserfs /dev/sda", "the program 'mkreiserfs' is destructive"),
    ("mkexfatfs /dev/sda", "the program 'mkexfatfs' is destructive"),
    ("sg_format --format /dev/sg0", "the program 'sg_format' is destructive"),
    ("lvremove -f vg0", "the program 'lvremove' is destructive"),
    ("kexec -e", "the program 'kexec' is destructive"),
    ("systemctl reboot", "the program 'systemctl reboot' is destructive"),
    ("systemctl --force poweroff", "the program 'systemctl poweroff' is destructive"),
    ("systemctl start reboot.target", "the program 'systemctl reboot.target' is destructive"),
    ("loginctl halt", "the program 'loginctl halt' is destructive"),
    ("nvme format /dev/nvme0n1", "the program 'nvme format' is destructive"),
    ("cryptsetup luksFormat /dev/sda", "the program 'cryptsetup luksFormat' is destructive"),
    ("zpool destroy tank", "the program 'zpool destroy' is destructive"),
    ("mdadm --zero-superblock /dev/sda", "the program 'mdadm --zero-superblock' is destructive"),
    ("hdparm --security-erase x /dev/sda", "the program 'hdparm --security-erase' is destructive"),
    ("badblocks -wsv /dev/sda", "the program 'badblocks -w' is destructive"),
]
FORK_BOMBS = [
    ("a(){ b|b& }; b(){ a|a& }; a", FORK_BOMB),  # two functions that call each other
    ("a(){ b; }; b(){ c; }; c(){ a|a& }; a", FORK_BOMB),
    ("f(){ eval 'f|f&'; }; f", FORK_BOMB),  # the call is in code the function evaluates
    ("f(){ timeout 9 f | f & }; f", FORK_BOMB),
]
VARIABLES = [
    ("read LD_PRELOAD < f; export LD_PRELOAD; ls", loads_code("LD_PRELOAD")),
    ("read -r -a BASH_ENV < f", loads_code("BASH_ENV")),
    ("printf -v LD_PRELOAD /tmp/e.so; export LD_PRELOAD; ls", loads_code("LD_PRELOAD")),
    ("printf -vLD_AUDIT x", loads_code("LD_AUDIT")),
    ("mapfile -t PROMPT_COMMAND < f", loads_code("PROMPT_COMMAND")),
    ("getopts ab PS4", loads_code("PS4")),
    ("for LD_PRELOAD in /tmp/e.so; do ls; done", loads_code("LD_PRELOAD")),
    ("select IFS in a; do :; done", "the command sets IFS, which changes how the shell reads later commands"),
    ("declare -n r=LD_PRELOAD; r=/tmp/e.so", loads_code("LD_PRELOAD")),
    (": ${LD_PRELOAD:=/tmp/e.so}; export LD_PRELOAD; ls", loads_code("LD_PRELOAD")),
    ("CDPATH=/ cd dev && cat x > sda", "the command sets CDPATH, which changes the directory cd goes to"),
    ("for EDITOR in 'rm -rf /'; do git commit; done", RM_ROOT),
    (
        "read EDITOR < f; git commit",
        opaque("the variable EDITOR runs <what read reads>, which is only known at run time"),
    ),
]


@pytest.mark.parametrize(
    ("command", "reason"), DELETE + PERMISSIONS + DEVICES + WRITES + RUNNERS + LINES + PROGRAMS + FORK_BOMBS + VARIABLES
)
def test_attacks_are_denied_with_the_exact_reason(command: str, reason: str) -> None:
    assert RULE.check(command) == reason


# What the fixes must leave alone.
ORDINARY = [
    "cd build && rm -rf out",
    "cd /tmp/work && rm -rf build && make > log.txt",
    "cd src && rm -rf dist",
    "rm -rf /srv/app/cache",
    "rm -rf /home/eve/project/build",
    "rm -rf /usr/local/lib/python3.12/site-packages/foo",
    "rm -rf --force ./build",  # --force is no abbreviation of --recursive
    "find . -name '*.pyc' -delete",
    'find . -name "$pattern" -delete',
    'find src -newer "$stamp" -exec grep -l TODO {} +',
    "find . -name '*.tmp' -exec rm {} +",
    "fd -e py",
    "echo x > /dev/shm/cache",
    "echo x > /dev/tty1",
    "cat /dev/urandom | head -c 16 > key.bin",
    "cp /dev/sda disk.img",
    "cp -r src/ dst/",
    "tar -czf out.tgz src",
    "tar -xf /dev/st0",  # reading an archive from a device
    "rsync -a --delete src/ backup/",
    "rsync -avt /srv/data/ backup/",
    "systemctl status nginx",
    "systemctl restart reboot-notifier",
    "badblocks -sv /dev/sda",  # read-only test
    'for f in *.txt; do wc -l "$f"; done',
    'while read -r line; do echo "$line"; done < list.txt',
    "read -r -p 'Name: ' name",
    "printf -v stamp '%s' now",
    "f(){ g; }; g(){ ls; }; f",
    "export PATH",
    "dd if=/dev/zero of=disk.img bs=1M count=10",
    "echo x > ../out.txt",
    "cp notes.txt ../backup/",
    "sed -i s/x/y/ notes.txt",
    "sed -n '/warn/p' log.txt",
    "awk '{print > \"out.txt\"}' f",
    "echo 'date' | at now -f job.sh",
    "cat /proc/cpuinfo /sys/class/net/eth0/address",
    "echo x > /proc/self/fd/2",
    "echo '127.0.0.1 x' | sudo tee -a /etc/hosts",
    "perl script.pl",
    "python3 -B script.py",
    "ls \\\n\\rm",  # a line continuation: ls with the argument rm
    'echo "a\n\\b"',
]


@pytest.mark.parametrize("command", ORDINARY)
def test_ordinary_commands_still_pass(command: str) -> None:
    assert RULE.check(command) is None


def test_the_path_rule_follows_cd(tmp_path: Path) -> None:
    root = tmp_path / "work"
    (root / "sub").mkdir(parents=True)
    policy = ToolPolicy(
        [{"tool": "shell", "kind": "shell"}, {"tool": "shell", "kind": "path", "roots": [str(root)], "base": str(root)}]
    )
    redirection = "rules[1] path (redirection > in rules[0] shell 'command')"
    assert policy.check("shell", {"command": "cd /etc && echo x > motd"}) == Denial(
        redirection, f"the path resolves to '/etc/motd', outside the allowed roots ({root})"
    )
    assert policy.check("shell", {"command": "cd .. && echo x > out.txt"}) == Denial(
        redirection, f"the path resolves to '{tmp_path / 'out.txt'}', outside the allowed roots ({root})"
    )
    assert policy.check("shell", {"command": "cd sub && echo x > out.txt"}) is None
    assert policy.check("shell", {"command": "echo x > out.txt"}) is None


def test_allow_lists_see_variables_set_without_an_equals_sign() -> None:
    listed = ShellRule([], frozenset({"ls", "read", "wc"}), True, allow_env=frozenset({"line"}))
    assert listed.check("for PATH in /tmp/evil; do ls; done") == (
        "the command assigns the variable 'PATH', which is not in allow_env (line)"
    )
    assert listed.check("read PATH < f; ls") == (
        "the command assigns the variable 'PATH', which is not in allow_env (line)"
    )
    assert listed.check("read -r line < f; wc -l f") is None


def test_working_directories_and_places() -> None:
    assert working_directories([]) == ()
    assert working_directories(["/dev", "/dev/", "//dev"]) == ("/dev",)
    assert working_directories(["~"]) == ("~",)
    assert working_directories([Opaque("$D"), "-"]) == (None,)
    assert working_directories(["/", "usr"]) == ("/", "usr", "/usr", "usr/usr", "/usr/usr")
    assert working_directories(["a", "b"]) == ("a", "b", "a/a", "a/b", "b/a", "b/b")
    assert working_directories([".."]) == ("..", "../..")
    assert places("sda", ()) == ["sda"]
    assert places("/x", ("/dev",)) == ["/x"]
    assert places("~/x", ("/dev",)) == ["~/x"]
    assert places("sda", ("/dev", None, "sub")) == ["sda", "/dev/sda", None, "sub/sda"]


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/dev/sda", True),
        ("/dev/block/8:0", True),
        ("/dev/vg0/root", True),
        ("/dev", True),
        ("/dev/", True),
        ("//dev/./sda", True),
        ("/dev/shm/../sda", True),
        ("/dev/null", False),
        ("/dev/zero", False),
        ("/dev/full", False),
        ("/dev/random", False),
        ("/dev/urandom", False),
        ("/dev/stdout", False),
        ("/dev/stderr", False),
        ("/dev/stdin", False),
        ("/dev/tty", False),
        ("/dev/ttyS0", False),
        ("/dev/pts/3", False),
        ("/dev/console", False),
        ("/dev/ptmx", False),
        ("/dev/kmsg", False),
        ("/dev/fd/2", False),
        ("/dev/fd/x", True),
        ("/dev/shm/x", False),
        ("/dev/shm", True),
        ("/dev/mqueue/q", False),
        ("/dev/tcp/example.com/80", False),
        ("/dev/udp/10.0.0.1/53", False),
        ("/device", False),
        ("dev/sda", False),
        ("/tmp/dev/sda", False),
    ],
)
def test_what_is_a_device(path: str, expected: bool) -> None:
    assert is_device(path) is expected


# -- equivalent spellings ------------------------------------------------------------------------

# A destructive command as words (each may be re-quoted) and the reason its plain form gets.
DESTRUCTIVE = [
    (("rm", "-rf", "/"), RM_ROOT),
    (("rm", "-fr", "~/"), RM_ROOT),
    (("rm", "-r", "-f", "/."), RM_ROOT),
    (("rm", "--recursive", "--force", "//"), RM_ROOT),
    (("rm", "-R", "--no-preserve-root", "/bin/.."), RM_ROOT),
    (("rm", "--recur", "/*"), RM_ROOT),
    (("rm", "-rf", "/usr"), system("rm", "/usr")),
    (("chmod", "-R", "000", "/"), "the command runs chmod recursively from / or the home directory"),
    (("chown", "--recursive", "eve", "/etc"), system("chown", "/etc")),
    (("dd", "if=/dev/zero", "of=/dev/sda"), device("dd")),
    (("cp", "x.img", "/dev/nvme0n1"), device("cp")),
    (("truncate", "-s0", "/dev/sda"), device("truncate")),
    (("mkfs.ext4", "/dev/sdb"), "the program 'mkfs' is destructive"),
    (("shred", "-n1", "/dev/sda"), "the program 'shred' is destructive"),
    (("wipefs", "-a", "/dev/sda"), "the program 'wipefs' is destructive"),
    (("find", "/", "-delete"), FIND_ROOT),
]
WRAPPERS = [
    "",
    "sudo ",
    "sudo -u root -- ",
    "timeout 5 ",
    "timeout -s KILL 5 ",
    "nice -n 5 ",
    "nice -5 ",
    "nohup ",
    "env ",
    "env -i A=1 ",
    "command ",
    "exec ",
    "time ",
    "stdbuf -o0 ",
    "setsid ",
    "ionice -c3 ",
    "taskset 1 ",
    "strace -f ",
    "busybox ",
    "toybox ",
    "sudo timeout 5 nice ",
]


@st.composite
def _word(draw: st.DrawFn, word: str) -> str:
    if word.startswith("~"):  # a quoted ~ is no home directory to bash: only the rest is re-quoted
        return "~" + (draw(_word(word[1:])) if word[1:] else "")
    if "*" in word:  # a quoted * is no glob
        return word
    cuts = sorted(draw(st.sets(st.integers(1, max(1, len(word) - 1)), max_size=3))) if len(word) > 1 else []
    bounds = [0, *cuts, len(word)]
    return "".join(quote_chunk(word[a:b], draw(st.integers(0, 5))) for a, b in itertools.pairwise(bounds))


def _nest(line: str, shape: int) -> str:
    quoted = shlex.quote(line)
    return [
        line,
        f"bash -c {quoted}",
        f"sh -c {shlex.quote('bash -c ' + quoted)}",  # quoting inside quoting
        f"eval {quoted}",
        f"( {line} )",
        f"{{ {line}; }}",
        f"echo $( {line} )",
        f"echo `{line}`" if "`" not in line else f"echo $({line})",  # backticks nest only when escaped
        f"cat <( {line} )",
        f"ls; {line}",
        f"true && {line}",
        f"false || {line}",
        f"ls\n{line}",
        f"ls & {line}",
        f"if true; then {line}; fi",
        f"for i in 1; do {line}; done",
        f"g() {{ {line}; }}",  # a function body, even one never called
        f"x=$( {line} )",
        f"watch {quoted}",
        f"su -c {quoted} root",
    ][shape]


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str]:
    words, reason = draw(st.sampled_from(DESTRUCTIVE))
    line = " ".join(draw(_word(w)) for w in words)
    line = draw(st.sampled_from(WRAPPERS)) + line
    line = _nest(line, draw(st.integers(0, 19)))
    if draw(st.booleans()):
        line = _nest(line, draw(st.integers(0, 19)))
    return line, reason


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spellings())
@example(("sudo -- r'm' -r\\f /", RM_ROOT))
@example(("echo $(echo `rm -rf /`)", RM_ROOT))
@example(("ls\n\\r\\m --recur /*", RM_ROOT))
@example(("bash -c 'timeout 5 $'\\''\\x72m'\\'' --recur /'", RM_ROOT))
def test_every_spelling_of_a_destructive_command_is_denied_as_the_plain_one(spelled: tuple[str, str]) -> None:
    command, reason = spelled
    verdict = RULE.analyse(command)
    if verdict.opaque and "in bounded time" in str(verdict.reason):
        return  # deep quoting grows past the size budget: refused as unreadable, not read
    assert verdict.reason == reason, command


# -- the helpers, exactly ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/dev/sda", RAW_DEVICE),
        ("../../dev/sda", RAW_DEVICE),
        ("..", None),
        ("../x", None),
        ("~/../../dev/sda", RAW_DEVICE),
        ("~eve/../../dev/sda", RAW_DEVICE),
        ("~/dev/sda", None),
        ("dev/sda", None),
        ("/proc/1/mem", kernel("/proc/1/mem")),
        ("/proc/self/fd/1", None),
        ("/proc/thread-self/fd/2", None),
        ("/proc/self/fd/x", kernel("/proc/self/fd/x")),
        ("/proc", None),
        ("/sys/power/state", kernel("/sys/power/state")),
        ("/etc/shadow", vital("/etc/shadow")),
        ("//etc/./passwd", vital("/etc/passwd")),
        ("/etc/hosts", None),
        ("/boot", vital("/boot")),
        ("/boot/grub/grub.cfg", vital("/boot/grub/grub.cfg")),
        ("/bootstrap.sh", None),
    ],
)
def test_what_a_write_may_not_reach(path: str, reason: str | None) -> None:
    assert write_denial(path) == reason
    if reason == RAW_DEVICE:
        assert write_denial(path, "cp") == device("cp")


@pytest.mark.parametrize(
    ("command", "names"),
    [
        ("read a b", ["a", "b"]),
        ("read -r -p 'Name: ' x", ["x"]),
        ("read -rp prompt x", ["x"]),
        ("read -a arr", ["arr"]),
        ("read -aarr", ["arr"]),
        ("read -t 5 -n 1 key", ["key"]),
        ("read -d , -u 3 f", ["f"]),
        ("printf -v out %s x", ["out"]),
        ("printf -vout %s x", ["out"]),
        ("printf %s x", []),
        ("mapfile -t -n 5 lines", ["lines"]),
        ("readarray -C cb -c 1 rows", ["rows"]),
        ("getopts ab opt", ["opt"]),
        ("getopts ab", []),
    ],
)
def test_the_variables_builtins_set(command: str, names: list[str]) -> None:
    program, *args = shlex.split(command)
    assert _set_names(program, tuple(args)) == names


@pytest.mark.parametrize(
    ("command", "archive"),
    [
        ("tar -cf out.tar src", "out.tar"),
        ("tar cf out.tar src", "out.tar"),
        ("tar -czfout.tgz src", "out.tgz"),
        ("tar -c -f out.tar src", "out.tar"),
        ("tar --create --file=out.tar src", "out.tar"),
        ("tar --create --file out.tar src", "out.tar"),
        ("tar -r -f out.tar x", "out.tar"),
        ("tar -uf out.tar x", "out.tar"),
        ("tar -Af out.tar x.tar", "out.tar"),
        ("tar --append --file=out.tar x", "out.tar"),
        ("tar -xf in.tar", None),
        ("tar -tf in.tar", None),
        ("tar xf in.tar", None),
        ("tar --extract --file=in.tar", None),
        ("tar -cf", None),
    ],
)
def test_the_archive_tar_writes(command: str, archive: str | None) -> None:
    assert _tar_archive(tuple(shlex.split(command)[1:])) == archive


def test_where_cd_and_pushd_go() -> None:
    assert _directory(()) == "~"
    assert _directory(("-P",)) == "~"
    assert _directory(("-L", "/x")) == "/x"
    assert _directory(("-",)) == "-"
    assert _directory(("+1",)) == Opaque("+1")
    assert _directory((Opaque("$D"),)) == Opaque("$D")
