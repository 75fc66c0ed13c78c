"""The checks behind ``tool_policy``: shell commands, file paths and URLs.

Each check returns ``None`` (allowed) or a short reason naming the rule that denied.
They decide on a *normalised* form of the value: shell commands as bash parses and
expands them (:mod:`._shell_rule`), paths after ``..`` and symlinks are resolved, hosts after every IPv4 spelling
``inet_aton`` accepts (decimal, octal, hex, short forms) and IPv6-mapped IPv4 are
turned into one address. Anything that cannot be normalised is denied (fail closed).
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import re
import socket
from collections.abc import Iterable, Sequence
from urllib.parse import unquote, urlsplit

from ._shell_rule import ShellRule, ShellVerdict

__all__ = ["PathRule", "ShellRule", "ShellVerdict", "UrlRule", "parse_host_ip"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# -- paths ----------------------------------------------------------------------------------


class PathRule:
    """File paths must resolve inside one of ``roots``; ``deny`` globs exclude some.

    A relative path is judged from the folder in which the tool resolves it: the tool's
    own (``workdir`` of :meth:`check`, an MCP server's folder), else ``base``. When neither
    is known, or the tool says its folder is unknown (``""``: a remote server), a relative
    path is opaque and denied: judging it from a guessed folder could allow a file outside
    the roots. ``~`` is expanded (tools usually do), then ``..`` and symlinks are resolved
    with :func:`os.path.realpath`, so a link inside a root that points outside is denied.
    ``deny`` globs match the resolved path or its last part, ignoring case unless
    ``case_sensitive`` (``KEY.PEM`` is the same key on a case-insensitive filesystem).
    Relative ``roots`` and ``base`` are taken from ``folder`` (a config file's folder;
    default the current one). With ``current``, a tool that does not say where it resolves
    relative paths is also judged from the current folder when that is another one: a
    Python tool opens a relative path from there, whatever folder the config is in.
    """

    __slots__ = ("base", "case_sensitive", "current", "deny", "roots")

    def __init__(
        self,
        roots: Sequence[str],
        deny: Sequence[str],
        base: str | None,
        case_sensitive: bool = False,
        *,
        folder: str | None = None,
        current: bool = False,
    ) -> None:
        self.current = current
        self.roots = tuple(_absolute(r, folder) for r in roots)
        self.case_sensitive = case_sensitive
        self.deny = tuple(deny if case_sensitive else (d.lower() for d in deny))
        self.base = _absolute(base, folder) if base else None

    def resolve(self, path: str, workdir: str | None = None) -> str | None:
        """The absolute, symlink-free form of ``path`` (what the policy decides on), or None
        for a relative path whose folder is not known."""
        expanded = os.path.expanduser(path)
        if not os.path.isabs(expanded):
            folder = self.base if workdir is None else workdir
            if not folder:
                return None
            expanded = os.path.join(folder, expanded)
        return os.path.realpath(expanded)

    def check(self, path: str, workdir: str | None = None) -> str | None:
        """Why ``path`` is denied, or None. ``workdir``: where the tool resolves a relative
        path (``""``: in a folder not known here; None: the tool does not say)."""
        if not path:
            return "the path is empty"
        if "\x00" in path:
            return "the path contains a NUL byte"
        resolved = self.resolve(path, workdir)
        here = self._from_current(path) if resolved is not None and workdir is None else None
        if here is not None and here != resolved:  # judged where it lands from both folders: each must pass
            reason = self._judge(here)
            if reason is not None:
                return reason
        if resolved is None:
            if workdir == "":
                return (
                    f"the relative path {path!r} is resolved by the tool in a folder not known here "
                    "(a remote server); give an absolute path"
                )
            return (
                f"the relative path {path!r} cannot be judged: the folder the tool resolves it in is not known "
                "(give the rule a base, or an absolute path)"
            )
        return self._judge(resolved)

    def _from_current(self, path: str) -> str | None:
        """Where the relative ``path`` lands from the current folder, when :attr:`current` asks
        for it and that folder is not the base (from the base it lands where it resolves)."""
        if not self.current:
            return None
        expanded = os.path.expanduser(path)
        cwd = os.getcwd()
        if os.path.isabs(expanded) or cwd == self.base:
            return None
        return os.path.realpath(os.path.join(cwd, expanded))

    def _judge(self, resolved: str) -> str | None:
        if self.roots and not any(_inside(resolved, root) for root in self.roots):
            roots = ", ".join(self.roots)
            return f"the path resolves to {resolved!r}, outside the allowed roots ({roots})"
        compared = resolved if self.case_sensitive else resolved.lower()
        name = os.path.basename(compared)
        for pattern in self.deny:
            if fnmatch.fnmatchcase(compared, pattern) or fnmatch.fnmatchcase(name, pattern):
                return f"the path {resolved!r} matches the denied pattern {pattern!r}"
        return None


def _absolute(path: str, folder: str | None) -> str:
    """``path`` (``~`` expanded) from ``folder`` when relative, symlinks resolved."""
    expanded = os.path.expanduser(path)
    if folder is not None and not os.path.isabs(expanded):
        expanded = os.path.join(folder, expanded)
    return os.path.realpath(expanded)


def _inside(path: str, root: str) -> bool:
    try:
        return os.path.commonpath([path, root]) == root
    except ValueError:  # different drives on Windows
        return False


# -- URLs -----------------------------------------------------------------------------------

# Names of this machine and of cloud metadata services (which answer on link-local addresses).
_BLOCKED_NAMES = frozenset(
    {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback", "metadata", "instance-data"}
    | {"metadata.google.internal", "metadata.goog", "instance-data.ec2.internal", "metadata.tencentyun.com"}
)
# Suffixes that only resolve inside a private network or this machine.
_BLOCKED_SUFFIXES = (".localhost", ".internal", ".local", ".localdomain", ".home.arpa", ".svc", ".cluster.local")
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
    if len(parts) > 4 or not all(_IPV4_PART.fullmatch(p) for p in parts):  # split gives 1 part at least
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
        if "\\" in url or any(ord(c) <= 32 for c in url):  # backslash, space, controls
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
        if not host.isascii():
            try:
                host = host.encode("idna").decode("ascii")
            except UnicodeError:
                return f"the host {host!r} is not a valid name"
        address = parse_host_ip(host)
        if address is not None:
            return self._check_address(address, host)
        if not re.fullmatch(r"[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]*[a-z0-9_])?)*", host):
            return f"the host {host!r} is not a valid name"
        listed = self.hosts is not None and any(_host_matches(host, allowed) for allowed in self.hosts)
        if host in _BLOCKED_NAMES or host.endswith(_BLOCKED_SUFFIXES):
            return f"the host {host!r} names this machine or a cloud metadata service"
        if "." not in host and not listed:
            return f"the host {host!r} has no dot: resolved with the local search domains, it names an internal host"
        if self.hosts is not None and not listed:
            return f"the host {host!r} is not in the allowed hosts ({', '.join(self.hosts)})"
        if self.resolve_dns:
            return self._check_dns(host, port)
        return None

    def _check_address(self, address: IPAddress, host: str) -> str | None:
        if _allowed_network(address, self.allow_networks):
            return None
        if _internal(address):
            return f"the host {host!r} is the internal address {address} (loopback, private, link-local or reserved)"
        if self.hosts is not None and not any(_host_matches(str(address), allowed) for allowed in self.hosts):
            return f"the address {address} is not in the allowed hosts ({', '.join(self.hosts)})"
        return None

    def _check_dns(self, host: str, port: int | None) -> str | None:
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except OSError as exc:
            return f"the host {host!r} cannot be resolved ({exc})"
        return self.check_resolved(host, [str(info[4][0]) for info in infos])

    def check_resolved(self, host: str, addresses: Iterable[str]) -> str | None:
        """Why ``host`` is denied given the ``addresses`` it resolved to, or None.

        An internal address denies unless it is in ``allow_networks``; ``hosts`` was
        already checked on the name, so a public address is not checked against it.
        """
        for text in addresses:
            address = _unwrap(ipaddress.ip_address(text.partition("%")[0]))
            if _internal(address) and not _allowed_network(address, self.allow_networks):
                return f"the host {host!r} resolves to the internal address {address}"
        return None


def _allowed_network(address: IPAddress, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    return any(address.version == n.version and address in n for n in networks)


def _host_matches(host: str, allowed: str) -> bool:
    if allowed.startswith("*."):
        return host.endswith(allowed[1:])
    return host == allowed
