"""What one program call destroys: the built-in denials of the ``shell`` rule, program by program.

Each check reads a call's expanded arguments (:mod:`._shell_syntax`) and yields its
denials; a denial that starts with ``?`` is *opaque* (it depends on a value only known
at run time). Relative paths are judged from the starting directory and from every
directory a ``cd`` in the same command may have moved to (:func:`working_directories`):
``cd /dev && cat x > sda`` writes ``/dev/sda``.
"""

from __future__ import annotations

import fnmatch
import posixpath
import re
from collections.abc import Iterator, Sequence

from ._shell_programs import normalise_path
from ._shell_syntax import Opaque, Word
from ._shell_table import program

__all__ = ["Directories", "builtin_denials", "is_device", "places", "working_directories", "write_denial"]

#: Directories a command may run in besides the one it starts in (``/dev``, ``sub``, ``~``);
#: None: a directory only known at run time (``cd "$D"``, ``cd -``).
Directories = tuple[str | None, ...]

_SIZER_VALUES = frozenset({"-s", "--size", "-r", "--reference", "-l", "--length", "-o", "--offset"})
# What under /dev is not a disk, memory or port: writing these harms nothing.
_NOT_A_DISK = re.compile(
    r"/dev/(null|zero|full|u?random|stdin|stdout|stderr|tty[^/]*|pts/.+|console|ptmx|kmsg|fd/\d+|shm/.+|mqueue/.+)"
    r"|/dev/(tcp|udp)/.+"  # bash's network redirections: not files (the shell rule does not judge network use)
)
_GLOB = re.compile(r"[*?\[]|[@!+]\(")  # wildcards, and extglob patterns (!(x) is everything but x)
# a name made of wildcards alone (``*``, ``.*``, ``.[!.]*``, ``!(x)``): every entry, or every hidden one
_WILDCARD = re.compile(r"(?:[.*?]|\[[^]/]*\])*\*(?:[.*?]|\[[^]/]*\])*|[@!+*?]\([^)/]*\)")
# the directories of the system itself: removing or re-owning any of them breaks the machine
_SYSTEM = frozenset(
    {"/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib32", "/lib64", "/libx32", "/media", "/mnt", "/opt"}
    | {"/proc", "/root", "/run", "/sbin", "/srv", "/sys", "/usr", "/var", "/var/lib"}
    | {f"/usr/{name}" for name in ("bin", "sbin", "lib", "lib32", "lib64", "libexec", "include", "share", "local")}
)


# what a glob written over the system may also reach (/proc/*, /sys/k*)
_GLOBBED_SYSTEM = frozenset({"/proc/self", "/proc/1", "/sys/kernel", "/sys/block", "/sys/class", "/sys/devices"})


def is_device(path: str) -> bool:
    """Whether writing ``path`` writes a disk, memory or port (anything under /dev but the harmless)."""
    normal = normalise_path(path)
    return (normal == "/dev" or normal.startswith("/dev/")) and _NOT_A_DISK.fullmatch(normal) is None


# files the system needs to start or to let anyone log in, and the one that preloads code into every program
_CRITICAL = frozenset(
    {"/etc/passwd", "/etc/shadow", "/etc/group", "/etc/gshadow", "/etc/sudoers", "/etc/fstab", "/etc/ld.so.preload"}
)
_WRITE_GUARDED = ("dev", "proc", "sys", "boot", "etc")
_PROCESS_FD = re.compile(r"/proc/(self|thread-self)/fd/\d+")  # like /dev/fd/N


def write_denial(path: str, program: str = "") -> str | None:
    """Why writing ``path`` is denied (a device, kernel or process state, a file the system
    needs), or None. ``program`` names what writes it, for the device message."""
    for normal in _anchored(path):
        top = normal.split("/")[1] if normal.startswith("/") and normal.count("/") >= 1 else ""
        if _GLOB.search(top) and any(fnmatch.fnmatchcase(name, top) for name in _WRITE_GUARDED):
            return f"the command writes {normal}, a glob that may name a device or a file the whole system depends on"
        if is_device(normal):
            return "the command writes a raw device" + (f" with {program}" if program else "")
        if normal.startswith(("/proc/", "/sys/")) and _PROCESS_FD.fullmatch(normal) is None:
            return f"the command writes {normal}, which changes the kernel or a running process"
        if normal in _CRITICAL or normal == "/boot" or normal.startswith("/boot/"):
            return f"the command writes {normal}, which the whole system depends on"
    return None


def _anchored(path: str) -> list[str]:
    """``path`` normalised, and, when its ``..`` climb above where it starts (``../../dev/sda``,
    ``~/../../dev/sda``), the absolute path it reaches from a directory near ``/``."""
    normal = normalise_path(path)
    rest = normalise_path(path.partition("/")[2] or ".") if path.startswith("~") else normal
    if rest != ".." and not rest.startswith("../"):
        return [normal]
    while rest.startswith("../"):
        rest = rest[3:]
    return [normal, "/" + rest.removeprefix("..")]


#: More ``cd`` targets than this and a relative path is in a directory only known at run time
#: (the places a path may name grow with every pair of targets: ``cd a; cd b`` is also ``a/b``).
MAX_DIRECTORIES = 8
MAX_PLACES = 24  # places those targets may lead to, past which a relative path is in an unknown directory


def working_directories(targets: Sequence[Word]) -> Directories:
    """Where the ``cd``s of a command (``targets``, in any order, some in loops) may lead."""
    found: dict[str | None, None] = {}  # ordered, and a set
    relative: dict[str, None] = {}
    if len(set(map(str, targets))) > MAX_DIRECTORIES:
        return (None,)
    for target in targets:
        if isinstance(target, Opaque) or target == "-":
            found[None] = None
        elif target.startswith(("/", "~")):
            found[normalise_path(target)] = None
        else:
            relative[target] = None
    for _ in range(2):  # cd a; cd b: b may be entered from a (two rounds cover any order)
        for base in [".", *found]:
            for target in relative:
                place = None if base is None else normalise_path(posixpath.join(base, target))
                if place != ".":
                    found.setdefault(place)
            if len(found) > MAX_PLACES:  # every relative path would be checked from each: too many
                return (None,)
    return tuple(found)


def places(path: str, cwds: Directories) -> list[str | None]:
    """Every path ``path`` may name: as written, and from each directory of ``cwds`` (None: unknown)."""
    if not cwds or path.startswith(("/", "~")):
        return [path]
    return [path, *(None if cwd is None else posixpath.join(cwd, path) for cwd in cwds)]


def builtin_denials(name: str, args: tuple[Word, ...], cwds: Directories) -> Iterator[str]:
    """The built-in denials of one program call; a leading ``?`` marks an opaque finding."""
    record = program(name)
    effect = record.effect
    if effect == "destructive":
        yield f"the program {name!r} is destructive"
    elif effect == "arguments":
        hit = next((a for a in args if isinstance(a, str) and a in record.destroys), None)
        if hit is not None:
            yield f"the program '{name} {hit}' is destructive"
    elif effect == "flag":  # badblocks -w
        hit = next((a for a in args if isinstance(a, str) and a[:1] == "-" and record.destroys & set(a)), None)
        if hit is not None:
            yield f"the program '{name} -{min(record.destroys & set(hit))}' is destructive"
    elif effect == "recursive":
        yield from _recursive_change(name, args, cwds)
    elif effect == "find":
        yield from _find(args, cwds)
    elif effect == "dd":
        for arg in args:
            if isinstance(arg, Opaque):
                yield f"?{name} has the operand {arg}, which is only known at run time"
            elif arg.startswith("of="):
                yield from _written(name, arg[3:], cwds)
    elif effect == "tee":
        for arg in args:
            if isinstance(arg, Opaque) or not arg.startswith("-"):
                yield from _written(name, arg, cwds, named=False)
    elif effect == "size":
        previous: Word = ""
        for arg in args:
            # a static value is checked too (truncate -r /dev/sda x: not told apart from a file)
            static = isinstance(arg, str) and not arg.startswith("-")
            if static or (isinstance(arg, Opaque) and previous not in _SIZER_VALUES):
                yield from _written(name, arg, cwds)
            previous = arg
    elif effect in {"copy", "move", "sync", "rescue"}:
        yield from _copy(name, effect, args, cwds)
    elif effect == "sed":
        yield from _sed(args, cwds)
    elif effect == "awk":  # print > "/dev/sda"
        for arg in args:
            for path in _AWK_FILE.findall(arg) if isinstance(arg, str) else ():
                yield from _written(name, path, cwds)
    elif effect == "tar":
        archive = _tar_archive(args)
        if archive is not None:
            yield from _written(name, archive, cwds)


def _written(name: str, target: Word, cwds: Directories, named: bool = True) -> Iterator[str]:
    """A file ``name`` writes: denied if :func:`write_denial` says so, opaque if it may be
    such a file; ``named``: the device message names the program."""
    if isinstance(target, Opaque):
        yield f"?{name} writes {target}, a file only known at run time"
        return
    for place in places(target, cwds):
        if place is None:
            yield f"?{name} writes {target} in a directory only known at run time"
            return
        denial = write_denial(place, name if named else "")
        if denial is not None:
            yield denial
            return


def _copy(name: str, effect: str, args: tuple[Word, ...], cwds: Directories) -> Iterator[str]:
    """cp, install and mv write their target (the last operand, ``-t DIR``, ``-tDIR``,
    ``--target-directory=DIR`` or an abbreviation), mv also its sources (moving a device
    node away is no read); only the source of a plain copy is read (cp /dev/sda x.img). With
    ``-t`` a device operand is not told apart from the target: it is refused. rsync and
    ddrescue write their last operand (rsync's -t keeps times); rsync --delete empties it."""
    operands: list[Word] = []
    targeted = options_done = deletes = False
    for arg in args:
        if isinstance(arg, str) and not options_done and arg.startswith("-") and arg != "-":
            if arg == "--":
                options_done = True
                continue
            long = arg.startswith("--")
            option, _, value = arg.partition("=")
            deletes = deletes or option.startswith("--del")
            if effect in {"copy", "move"}:
                targeted = targeted or ("target-directory".startswith(option[2:]) if long else "t" in arg[1:])
                if not long:  # a value joined to its option: -vt/dev/sda
                    value = arg[arg.find("/") :] if "/" in arg else ""
            if value and any(place is not None and write_denial(place) for place in places(value, cwds)):
                yield f"the command writes a raw device with {name}"
                return
            continue
        operands.append(arg)
    if effect == "move":  # moving a system directory away breaks the machine as removing it does
        for source in operands[:-1] if not targeted else operands:
            if isinstance(source, str) and any(
                p is not None and (_sweeping(p, cwd=False) or _system_directory(p)) for p in places(source, cwds)
            ):
                yield f"the command moves {normalise_path(source)}, which the system or a home depends on"
                return
    written = operands if targeted or effect == "move" else operands[1:] if effect != "sync" else operands[-1:]
    if len(operands) > 1 and isinstance(operands[-1], str) and not targeted:  # cp sda /dev/: the copy is /dev/sda
        written += [posixpath.join(operands[-1], posixpath.basename(s)) for s in operands[:-1] if isinstance(s, str)]
    for word in written:
        yield from _written(name, word, cwds)
    if deletes and effect == "sync" and written:
        for denial in _recursive_change("rsync --delete", ("-r", written[-1]), cwds):
            yield denial
            return


_AWK_FILE = re.compile(r'"(/[^"]*)"')
_SED_WRITE = re.compile(r"(?<![\w\\])w\s*(/\S+)")  # the w command and the w flag of s: w /dev/sda


def _sed(args: tuple[Word, ...], cwds: Directories) -> Iterator[str]:
    """sed writes the files of its ``w`` commands, and with ``-i`` the files it edits."""
    in_place = False
    scripted = False  # -e or -f gave the script: every operand is a file
    operands: list[str] = []
    for arg in args:
        if not isinstance(arg, str):
            continue
        for path in _SED_WRITE.findall(arg):
            yield from _written("sed", path, cwds)
        if arg.startswith("--"):
            in_place = in_place or arg.startswith("--in-place")
            scripted = scripted or arg.startswith(("--expression", "--file"))
        elif arg.startswith("-") and len(arg) > 1:
            in_place = in_place or "i" in arg
            scripted = scripted or "e" in arg or "f" in arg
        else:
            operands.append(arg)
    if in_place:
        for path in operands if scripted else operands[1:]:
            yield from _written("sed", path, cwds)


def _tar_archive(args: tuple[Word, ...]) -> Word | None:
    """The archive tar writes (``-cf X``, ``cf X``, ``--file=X`` with a writing mode), or None."""
    archive: Word | None = None
    writes = False
    for index, arg in enumerate(args):
        if isinstance(arg, Opaque):
            continue
        option, equals, value = arg.partition("=")
        if arg.startswith("--"):
            writes = writes or option in {"--create", "--append", "--update", "--catenate", "--concatenate", "--delete"}
            if "--file".startswith(option) and len(option) > 3:
                archive = value if equals else (args[index + 1] if index + 1 < len(args) else None)
        elif arg.startswith("-") or index == 0:  # the first word may hold options without a dash (tar cf x)
            letters = arg.lstrip("-")
            writes = writes or any(letter in letters for letter in "cruA")
            if "f" in letters:
                rest = letters[letters.index("f") + 1 :]
                archive = rest if rest and arg.startswith("-") else (args[index + 1] if index + 1 < len(args) else None)
    return archive if writes else None


def _is_recursive_option(arg: str) -> bool:
    if arg.startswith("--"):  # GNU takes any unambiguous abbreviation: --recur
        option = arg[2:].partition("=")[0]
        return bool(option) and "recursive".startswith(option)
    return "r" in arg or "R" in arg


def _recursive_change(name: str, args: tuple[Word, ...], cwds: Directories) -> Iterator[str]:
    recursive = False
    maybe_recursive = False  # rm "$OPT" /: the option may be -r
    operands: list[Word] = []
    options = True
    for arg in args:
        if isinstance(arg, Opaque):
            maybe_recursive = maybe_recursive or options
            operands.append(arg)
        elif options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            recursive = recursive or _is_recursive_option(arg)
        else:
            operands.append(arg)
    for target in operands:
        if isinstance(target, Opaque):
            # unquoted, $X may split into "-rf /"; quoted, it is one word: harmful only with -r
            if recursive or not _one_word(target):
                yield f"?{name}{' -r' if recursive else ''} runs on {target}, which is only known at run time"
            continue
        for place in places(target, cwds):
            if place is None:
                if recursive:
                    yield f"?{name} -r runs on {target} in a directory only known at run time"
            elif _sweeping(place) or _system_directory(place):
                if recursive:
                    yield (
                        f"the command runs {name} recursively from / or the home directory"
                        if _sweeping(place)
                        else f"the command runs {name} recursively on the system directory {normalise_path(place)}"
                    )
                elif maybe_recursive:
                    yield f"?{name} runs on {target} with options only known at run time"


def _one_word(word: Opaque) -> bool:
    # "$x" (never a lone quote), or the paths find -exec puts in {} (they start with the start path)
    return word.source == "{}" or (word.source.startswith('"') and word.source.endswith('"'))


_HOME_PATH = re.compile(r"/(?:home|Users)/[^/*?\[]+(/.*)?")


def _sweeping(target: str, cwd: bool = True) -> bool:
    """Whether ``target`` is ``/``, a home directory or (with ``cwd``) the current directory
    as a whole (after ``//``, ``.`` and ``..`` are resolved), or a glob over one (``/**``)."""
    home = _HOME_PATH.fullmatch(normalise_path(target)) if target.startswith("/") else None
    if home is not None:  # /home/eve is a home directory as much as ~eve
        target = "~" + (home.group(1) or "")
    root = target.startswith("/")
    if not cwd and not root and not target.startswith("~"):
        return False
    rest = target.partition("/")[2] if target.startswith("~") else target
    stack: list[str] = []
    for part in rest.split("/"):
        if part in {"", "."}:
            continue
        if _GLOB.search(part):
            # any glob directly under / is a disaster (/b*); under home or . only a bare wildcard
            return not stack and (root or _WILDCARD.fullmatch(part) is not None)
        if part == "..":
            if not stack:
                return True  # above the starting directory
            stack.pop()
        else:
            stack.append(part)
    return not stack


def _system_directory(target: str) -> bool:
    """Whether ``target`` is a directory of the system (``/usr``, ``/etc``, ``/home/*``), or in /proc or /sys
    (``/proc/self/root`` is ``/``), or a glob that matches one (``/[u]sr``, ``/e?c``, ``/u*/lib``)."""
    if not target.startswith("/"):
        return False
    if _GLOB.search(target) and not _WILDCARD.fullmatch(target.rpartition("/")[2]):
        pattern = normalise_path(target).rstrip("/") or "/"
        # every system directory is one or two levels deep: a deeper glob names none of them
        return pattern.count("/") <= 2 and any(fnmatch.fnmatchcase(d, pattern) for d in _SYSTEM | _GLOBBED_SYSTEM)
    head, _, last = normalise_path(target).rpartition("/")
    if _WILDCARD.fullmatch(last):  # /usr/*, /home/*: everything in a system directory
        return (head or "/") in _SYSTEM
    normal = normalise_path(target)
    return normal in _SYSTEM or normal.startswith(("/proc/", "/sys/"))


_FIND_ACTIONS = frozenset({"-delete", "-exec", "-execdir", "-ok", "-okdir"})
_FIND_WRITES = frozenset({"-fprint", "-fprint0", "-fprintf", "-fls"})
# find primaries without a value: an opaque word after one of these is in the place of a primary
_FIND_BARE = frozenset(
    {"-delete", "-print", "-print0", "-ls", "-prune", "-quit", "-true", "-false", "-o", "-a", "-or", "-and", "-not"}
    | {"!", "(", ")", ",", "-depth", "-xdev", "-mount", "-follow", "-daystart", "-empty", "-nouser", "-nogroup"}
    | {"-readable", "-writable", "-executable", "-noleaf", "-ignore_readdir_race", "-noignore_readdir_race"}
    | {"-nowarn", "-warn", "-help", "-version", "-d"}
)


def _find(args: tuple[Word, ...], cwds: Directories) -> Iterator[str]:
    index = 0
    while index < len(args) and str(args[index]).startswith(("-H", "-L", "-P", "-O", "-D")):
        index += 2 if args[index] == "-D" else 1
    if index < len(args) and args[index] == "--":
        index += 1
    starts: list[Word] = []
    for arg in args[index:]:
        if isinstance(arg, str) and arg.startswith(("-", "(", "!", ",")) and arg != "-":
            break
        starts.append(arg)
    acts = any(a in _FIND_ACTIONS for a in args if isinstance(a, str))
    for start in starts:
        if not acts and isinstance(start, Opaque) and not _one_word(start):  # unquoted $X may hold "/ -delete"
            yield f"?find has the argument {start}, which is only known at run time"
            return
    expression = args[index + len(starts) :]
    values = 0  # words still to come that are the values of the last primary (-name X)
    skipping = False  # inside -exec ... ; (its words are checked as a command)
    for position, arg in enumerate(expression):
        if skipping:
            skipping = arg not in {";", "+", "\\;"}
        elif values:
            values -= 1
        elif isinstance(arg, Opaque):  # in the place of a primary: $X may be -delete or -exec ...
            yield f"?find has the argument {arg}, which is only known at run time"
            return
        elif arg in {"-exec", "-execdir", "-ok", "-okdir"}:
            skipping = True
        elif arg in _FIND_WRITES:
            if position + 1 < len(expression):
                yield from _written("find", expression[position + 1], cwds)
            values = 2 if arg == "-fprintf" else 1
        elif arg.startswith("-") and arg not in _FIND_BARE:
            values = 1
    if not acts:
        return
    for start in starts or ["."]:
        if isinstance(start, Opaque):
            yield f"?find deletes or runs commands from {start}, which is only known at run time"
            continue
        for place in places(start, cwds):
            if place is None:
                yield f"?find deletes or runs commands from {start} in a directory only known at run time"
            elif _sweeping(place, cwd=False):  # find . -name '*.pyc' -delete is everyday work
                yield "the command deletes or runs commands on every file from / or the home directory"
