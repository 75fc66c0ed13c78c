"""The checks behind ``tool_policy``: shell commands, file paths and URLs.

Each check returns ``None`` (allowed) or a short reason naming the rule that denied.
They decide on a *normalised* form of the value: shell words after quote removal,
paths after ``..`` and symlinks are resolved, hosts after every IPv4 spelling
``inet_aton`` accepts (decimal, octal, hex, short forms) and IPv6-mapped IPv4 are
turned into one address. Anything that cannot be normalised is denied (fail closed).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import shlex
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit

__all__ = ["PathRule", "ShellRule", "UrlRule", "parse_host_ip"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# -- shell ----------------------------------------------------------------------------------

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "ash", "busybox"})
_INTERPRETERS = _SHELLS | frozenset({"python", "python3", "perl", "ruby", "node", "php", "lua"})
_DOWNLOADER = re.compile(r"\b(curl|wget|fetch|aria2c|nc|ncat|socat)\b")
# Words that run the rest of the line as a command.
_WRAPPERS = frozenset(
    {"sudo", "doas", "env", "nohup", "time", "command", "exec", "nice", "ionice", "xargs", "timeout", "busybox"}
)
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*")
_OPERATORS = frozenset({";", "&&", "||", "|", "&", "|&", ";;", "(", ")", "\n"})
_DESTRUCTIVE = frozenset({"mkfs", "shutdown", "reboot", "halt", "poweroff", "init", "fdisk", "wipefs", "shred"})
_ROOTS = frozenset({"/", "/*", "/.", "/..", "~", "~/", "~/*", "$HOME", "${HOME}", "$HOME/", "$HOME/*", "*", "."})


def _command_name(word: str) -> str:
    name = os.path.basename(word)
    # python3.12, mkfs.ext4: the family decides
    for family in ("python", "mkfs"):
        if name.startswith(family):
            return family if family == "mkfs" else "python"
    return name


class _Command:
    """One simple command: its words and whether a pipe feeds it."""

    __slots__ = ("argv", "piped")

    def __init__(self, piped: bool) -> None:
        self.argv: list[str] = []
        self.piped = piped


def _split(command: str) -> list[_Command] | str:
    """The simple commands of ``command`` (quotes removed), or why it cannot be parsed."""
    lexer = shlex.shlex(command.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        words = list(lexer)
    except ValueError as exc:
        return f"the command cannot be parsed ({exc})"
    commands = [_Command(False)]
    for word in words:
        if word in _OPERATORS or set(word) <= set(";&|()"):
            commands.append(_Command(word in {"|", "|&"}))
        else:  # redirections stay in their command: "> /dev/sda" is checked on the raw text
            commands[-1].argv.append(word)
    return [c for c in commands if c.argv]


def _program(argv: list[str]) -> list[str]:
    """``argv`` without leading ``VAR=value`` assignments."""
    index = 0
    while index < len(argv) and _ASSIGNMENT.fullmatch(argv[index]):
        index += 1
    return argv[index:]


def _candidates(argv: list[str]) -> list[list[str]]:
    """Every command ``argv`` may run: itself and, after a wrapper (sudo, env, xargs, ...),
    each suffix starting at a non-option word. Over-approximating fails closed: wrapper
    options with values (``sudo -u root``) cannot hide the real command."""
    program = _program(argv)
    if not program:
        return []
    if _command_name(program[0]) not in _WRAPPERS:
        return [program]
    found = [program]
    found.extend(_program(program[i:]) for i in range(1, len(program)) if not program[i].startswith("-"))
    return [c for c in found if c]


class ShellRule:
    """Built-in denials for dangerous shell commands, user deny patterns and an allow-list.

    Args:
        deny: Regular expressions searched in the raw command *and* in its normalised
            form (quotes removed, whitespace collapsed).
        allow_commands: When given, every simple command's program (basename, after
            ``sudo``/``env``-like wrappers) must be in this list, and command
            substitution (``$(...)``, backticks, ``<(...)``) is denied.
        builtin: Apply the built-in denials (recursive delete of ``/`` or home,
            piping into a shell, ``eval``, ``mkfs``, ``dd`` to a device, fork bombs, ...).
    """

    __slots__ = ("allow_commands", "builtin", "deny")

    def __init__(self, deny: Sequence[re.Pattern[str]], allow_commands: frozenset[str] | None, builtin: bool) -> None:
        self.deny = tuple(deny)
        self.allow_commands = allow_commands
        self.builtin = builtin

    def check(self, command: str) -> str | None:
        """Why ``command`` is denied, or None."""
        if "\x00" in command:
            return "the command contains a NUL byte"
        parsed = _split(command)
        if isinstance(parsed, str):
            return parsed
        normalised = " ".join(" ".join(item.argv) for item in parsed)
        for pattern in self.deny:
            if pattern.search(command) or pattern.search(normalised):
                return f"the command matches the deny pattern {pattern.pattern!r}"
        substitution = "$(" in command or "`" in command or "<(" in command or ">(" in command
        if self.allow_commands is not None:
            if substitution:
                return "command substitution ($(...), backticks, <(...)) is not allowed with an allow-list"
            for item in parsed:
                program = _program(item.argv)
                name = _command_name(program[0]) if program else ""
                if program and name not in self.allow_commands:
                    allowed = ", ".join(sorted(self.allow_commands))
                    return f"the program {name!r} is not in the allowed commands ({allowed})"
        if self.builtin:
            return self._builtin(command, parsed, substitution)
        return None

    def _builtin(self, command: str, parsed: list[_Command], substitution: bool) -> str | None:
        if re.search(r":\s*\(\s*\)\s*\{[^}]*:\s*\|\s*:", command):
            return "the command is a fork bomb"
        if substitution and _DOWNLOADER.search(command):
            return "the command runs downloaded content through command substitution"
        for item in parsed:
            for program in _candidates(item.argv):
                denied = _dangerous(program, item.piped, substitution)
                if denied is not None:
                    return denied
        if re.search(r">\s*/dev/(sd|hd|nvme|xvd|vd|disk|mmcblk)", command):
            return "the command writes a raw device"
        return None


def _dangerous(program: list[str], piped: bool, substitution: bool) -> str | None:
    name = _command_name(program[0])
    args = program[1:]
    if piped and name in _INTERPRETERS:
        script = [w for w in args if not w.startswith("-")]
        if not script:
            return f"the command pipes data into the interpreter {name!r}"
    if name == "eval":
        return "the command uses eval"
    if name in _SHELLS and "-c" in args and substitution:
        return f"the command runs generated code with {name} -c"
    if name in _DESTRUCTIVE:
        return f"the program {name!r} is destructive"
    targets = [a for a in args if not a.startswith("-")]
    if name in {"rm", "chmod", "chown"} and _recursive(args) and any(_is_root(a) for a in targets):
        return f"the command runs {name} recursively from / or the home directory"
    if name == "find" and targets and _is_root(targets[0]) and ("-delete" in args or "-exec" in args):
        return "the command deletes or runs commands on every file from / or the home directory"
    if name == "dd" and any(a.startswith("of=/dev/") for a in args):
        return "the command writes a raw device with dd"
    return None


def _recursive(args: Iterable[str]) -> bool:
    for arg in args:
        if arg in {"--recursive", "-R"} or (arg.startswith("-") and not arg.startswith("--") and "r" in arg.lower()):
            return True
    return False


def _is_root(word: str) -> bool:
    if word in _ROOTS:
        return True
    if word.startswith("/"):
        normal = os.path.normpath(word.replace("/*", "/"))
        return normal in {"/", "//"} or re.fullmatch(r"/+\*?", word) is not None
    return False


# -- paths ----------------------------------------------------------------------------------


class PathRule:
    """File paths must resolve inside one of ``roots``; ``deny`` globs exclude some.

    Relative paths are taken from ``base`` (default: the first root). ``~`` is expanded
    (tools usually do), then ``..`` and symlinks are resolved with
    :func:`os.path.realpath`, so a link inside a root that points outside is denied.
    """

    __slots__ = ("base", "deny", "roots")

    def __init__(self, roots: Sequence[str], deny: Sequence[str], base: str | None) -> None:
        self.roots = tuple(os.path.realpath(os.path.expanduser(r)) for r in roots)
        self.deny = tuple(deny)
        self.base = os.path.realpath(os.path.expanduser(base)) if base else (self.roots[0] if self.roots else None)

    def resolve(self, path: str) -> str:
        """The absolute, symlink-free form of ``path`` (what the policy decides on)."""
        expanded = os.path.expanduser(path)
        if not os.path.isabs(expanded) and self.base is not None:
            expanded = os.path.join(self.base, expanded)
        return os.path.realpath(expanded)

    def check(self, path: str) -> str | None:
        """Why ``path`` is denied, or None."""
        if not path:
            return "the path is empty"
        if "\x00" in path:
            return "the path contains a NUL byte"
        resolved = self.resolve(path)
        if self.roots and not any(_inside(resolved, root) for root in self.roots):
            roots = ", ".join(self.roots)
            return f"the path resolves to {resolved!r}, outside the allowed roots ({roots})"
        for pattern in self.deny:
            if fnmatch.fnmatchcase(resolved, pattern) or fnmatch.fnmatchcase(os.path.basename(resolved), pattern):
                return f"the path {resolved!r} matches the denied pattern {pattern!r}"
        return None


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False


# -- URLs -----------------------------------------------------------------------------------

_BLOCKED_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "metadata.google.internal")
_IPV4_PART = re.compile(r"0[xX][0-9a-fA-F]*|0[0-7]*|[1-9][0-9]*")


def parse_host_ip(host: str) -> IPAddress | None:
    """The IP address a URL host denotes, in any spelling a resolver accepts; None for names.

    Handles dotted decimal, ``inet_aton`` forms (``2130706433``, ``0x7f.1``, ``0177.0.0.1``,
    ``127.1``), bracketed IPv6 (with a zone id) and IPv4-mapped/compatible IPv6.
    """
    if host.startswith("[") and host.endswith("]"):
        try:
            address: IPAddress = ipaddress.IPv6Address(host[1:-1].split("%", 1)[0])
        except ValueError:
            return None
        return _unwrap(address)
    parts = host.split(".")
    if not 1 <= len(parts) <= 4 or not all(_IPV4_PART.fullmatch(p) for p in parts):
        return None
    values = [_ipv4_part(p) for p in parts]
    *head, last = values
    if any(v > 255 for v in head) or last >= 256 ** (5 - len(values)):
        return None
    number = 0
    for value in head:
        number = number * 256 + value
    number = (number << (8 * (5 - len(values)))) | last
    return ipaddress.IPv4Address(number)


def _ipv4_part(part: str) -> int:
    if part[:2] in {"0x", "0X"}:
        return int(part[2:] or "0", 16)
    return int(part, 8) if part.startswith("0") else int(part)


def _unwrap(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        packed = address.packed
        if packed[:12] == bytes(12) and int(address) > 1:  # IPv4-compatible ::a.b.c.d (not :: or ::1)
            return ipaddress.IPv4Address(packed[12:])
        if address.sixtofour is not None:
            return address.sixtofour
        if packed[:12] == bytes.fromhex("0064ff9b0000000000000000"):  # NAT64 64:ff9b::/96
            return ipaddress.IPv4Address(packed[12:])
    return address


def _internal(address: IPAddress) -> bool:
    return (
        address.is_private
        or address.is_loopback
        or address.is_link_local
        or address.is_reserved
        or address.is_multicast
        or address.is_unspecified
        or (isinstance(address, ipaddress.IPv4Address) and address in _SHARED)
    )


_SHARED = ipaddress.IPv4Network("100.64.0.0/10")  # carrier-grade NAT, not in is_private on 3.11


class UrlRule:
    """URLs: allowed schemes, allowed hosts, and no internal addresses unless allowed.

    Args:
        schemes: Allowed schemes (lower case).
        hosts: Allowed host names; ``*.example.com`` matches sub-domains (not the apex).
            ``None`` allows any public host.
        allow_networks: Networks (CIDR) that are allowed although internal.
        allow_userinfo: Allow ``user:password@`` in URLs (off: a classic trick to make
            ``https://trusted.com@evil.example`` look trusted).
        resolve_dns: Also resolve host names and deny when any address is internal
            (the check then blocks on DNS; off by default).
    """

    __slots__ = ("allow_networks", "allow_userinfo", "hosts", "resolve_dns", "schemes")

    def __init__(
        self,
        schemes: Sequence[str],
        hosts: Sequence[str] | None,
        allow_networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
        allow_userinfo: bool,
        resolve_dns: bool,
    ) -> None:
        self.schemes = frozenset(s.lower() for s in schemes)
        self.hosts = None if hosts is None else tuple(h.lower().rstrip(".") for h in hosts)
        self.allow_networks = tuple(allow_networks)
        self.allow_userinfo = allow_userinfo
        self.resolve_dns = resolve_dns

    def check(self, url: str) -> str | None:
        """Why ``url`` is denied, or None."""
        if any(c in url for c in "\\\x00\t\r\n ") or any(ord(c) < 32 for c in url):
            return "the URL contains a backslash, whitespace or control character"
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            return f"the URL cannot be parsed ({exc})"
        scheme = parts.scheme.lower()
        if scheme not in self.schemes:
            return f"the scheme {scheme or '(none)'!r} is not allowed (allowed: {', '.join(sorted(self.schemes))})"
        netloc = parts.netloc
        if "@" in netloc and not self.allow_userinfo:
            return "the URL has user information before '@' (user:password@host)"
        raw_host = netloc.rpartition("@")[2]
        if raw_host.startswith("["):
            host = raw_host[: raw_host.find("]") + 1]
        else:
            host = raw_host.rsplit(":", 1)[0] if port is not None or raw_host.endswith(":") else raw_host
        host = unquote(host).lower().rstrip(".")
        if not host:
            return "the URL has no host"
        if any(ord(c) > 127 for c in host):
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                return f"the host {host!r} is not a valid name"
        address = parse_host_ip(host)
        if address is not None:
            return self._check_address(address, host)
        if not re.fullmatch(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*", host):
            return f"the host {host!r} is not a valid name"
        if host in _BLOCKED_NAMES or host.endswith(".localhost"):
            return f"the host {host!r} names this machine or a cloud metadata service"
        if self.hosts is not None and not any(_host_matches(host, allowed) for allowed in self.hosts):
            return f"the host {host!r} is not in the allowed hosts ({', '.join(self.hosts)})"
        if self.resolve_dns:
            return self._check_dns(host, port)
        return None

    def _check_address(self, address: IPAddress, host: str) -> str | None:
        if any(address.version == n.version and address in n for n in self.allow_networks):
            return None
        if _internal(address):
            return f"the host {host!r} is the internal address {address} (loopback, private, link-local or reserved)"
        if self.hosts is not None and not any(_host_matches(str(address), allowed) for allowed in self.hosts):
            return f"the address {address} is not in the allowed hosts ({', '.join(self.hosts)})"
        return None

    def _check_dns(self, host: str, port: int | None) -> str | None:
        try:
            infos = socket.getaddrinfo(host, port or 443, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            return f"the host {host!r} cannot be resolved ({exc})"
        for info in infos:
            address = _unwrap(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
            denied = self._check_address(address, host)
            if denied is not None and _internal(address):
                return f"the host {host!r} resolves to the internal address {address}"
        return None


def _host_matches(host: str, allowed: str) -> bool:
    if allowed.startswith("*."):
        return host.endswith(allowed[1:])
    return host == allowed
