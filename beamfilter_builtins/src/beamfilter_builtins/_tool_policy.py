"""``tool_policy``: declarative allow/deny rules per tool and argument.

Rules check shell commands, file paths and URLs found in a call's arguments (see
:mod:`._policy_rules` for how each value is normalised before deciding). A denied call
is an ordinary ``permission`` tool result explaining the rule; the tool never runs.

``action="pause"`` hands denied calls to a human instead: the filter's gate hook (the
gate scope runs *before* the batch) pauses the run on any denied call. When a human
approves exactly that call at resume, the tool request arrives with
``request.approved`` set and the filter lets it through; a call the human approved with
other arguments is checked again like a model's call, and every other denied call is
denied as usual: the policy fails closed. See docs/approvals.md.
"""

from __future__ import annotations

import difflib
import fnmatch
import ipaddress
import re
import shlex
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import attrs

from beamfilter_core import Decision, Filter, FilterSpec, GateRequest, ToolRequest, ToolResult, options_schema
from beamfilter_core.errors import ConfigError

from ._policy_rules import PathRule, ShellRule, UrlRule
from ._shell_rule import ON_OPAQUE

__all__ = ["DEFAULT_ARGUMENTS", "DEFAULT_DENIAL", "SPEC", "Denial", "ToolPolicy", "tool_policy_filter"]

_WHERE = "tool_policy_filter"
_KINDS = ("allow", "deny", "shell", "path", "url")
_PENDING_MAX = 1024  # bound of the per-tool-name caches (names come from the model)

#: The arguments each kind of rule checks when the rule names none.
DEFAULT_ARGUMENTS: Mapping[str, tuple[str, ...]] = {
    "shell": ("command", "cmd", "script"),
    "path": ("path", "paths", "file", "filename", "file_path", "directory", "src", "dst", "source", "destination"),
    "url": ("url", "urls", "uri", "href", "link"),
}

#: ``{tool}`` the tool's name, ``{rule}`` the rule, ``{reason}`` why it denied.
DEFAULT_DENIAL = (
    "The call to {tool!r} was denied by the tool policy ({rule}): {reason}. "
    "Do not retry it with the same arguments; choose another way or ask the user."
)

_RULE_KEYS: Mapping[str, frozenset[str]] = {
    "allow": frozenset(),
    "deny": frozenset({"reason"}),
    "shell": frozenset({"deny_patterns", "allow_commands", "allow_env", "builtin", "allow_opaque", "on_opaque"}),
    "path": frozenset({"roots", "deny_paths", "base", "case_sensitive"}),
    "url": frozenset({"schemes", "hosts", "allow_networks", "allow_userinfo", "resolve_dns"}),
}


@attrs.frozen
class Denial:
    """Why a call was denied: the rule (``rules[1] shell 'command'``) and the reason."""

    rule: str
    reason: str
    #: The command is opaque and its rule says ``on_opaque = "pause"``: a human decides.
    pause: bool = attrs.field(default=False, kw_only=True)


@attrs.frozen
class _Rule:
    label: str
    tool: str
    kind: str
    arguments: tuple[str, ...]
    check: Callable[[str], str | None] | None
    reason: str | None = None
    shell: ShellRule | None = None
    path: PathRule | None = None

    def applies_to(self, tool: str) -> bool:
        return self.tool == tool or fnmatch.fnmatchcase(tool, self.tool)


def suggest(key: str, known: Sequence[str]) -> str:
    """``" Did you mean 'x'?"`` for the closest known keys, or ``""``."""
    close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
    return " Did you mean " + " or ".join(repr(c) for c in close) + "?" if close else ""


def _strings(where: str, key: str, value: Any) -> list[str]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
        msg = f"{where}.{key}={value!r} is invalid; give a list of strings."
        raise ConfigError(msg)
    return list(value)


def _flag(where: str, key: str, value: Any) -> bool:
    if not isinstance(value, bool):
        msg = f"{where}.{key}={value!r} is invalid; give true or false."
        raise ConfigError(msg)
    return value


def _on_opaque(where: str, value: Any) -> str | None:
    if value is not None and value not in ON_OPAQUE:
        msg = f"{where}.on_opaque={value!r} is invalid; give one of {', '.join(map(repr, ON_OPAQUE))}."
        raise ConfigError(msg)
    return value  # type: ignore[no-any-return]  # None or one of ON_OPAQUE


def _build_rule(index: int, raw: Any, folder: str | None = None) -> _Rule:
    where = f"{_WHERE}: rules[{index}]"
    if not isinstance(raw, Mapping):
        msg = f"{where} is {raw!r}; give a mapping such as {{'tool': 'shell', 'kind': 'shell'}}."
        raise ConfigError(msg)
    tool = raw.get("tool")
    kind = raw.get("kind")
    if not isinstance(tool, str) or not tool:
        msg = f"{where}.tool={tool!r} is invalid; give a tool name or a glob such as '*'."
        raise ConfigError(msg)
    if kind not in _KINDS:
        msg = f"{where}.kind={kind!r} is invalid; give one of {', '.join(_KINDS)}."
        raise ConfigError(msg)
    unknown = sorted(set(raw) - {"tool", "kind", "arguments"} - _RULE_KEYS[kind])
    if unknown:
        known = sorted({"tool", "kind", "arguments"} | _RULE_KEYS[kind])
        key = unknown[0]
        msg = (
            f"{where}.{key}: unknown key {key!r} for a rule of kind {kind!r}.{suggest(key, known)} "
            f"Known keys: {', '.join(known)}."
        )
        raise ConfigError(msg)
    arguments = tuple(_strings(where, "arguments", raw["arguments"])) if "arguments" in raw else None
    check: Callable[[str], str | None] | None = None
    reason = None
    shell = None
    path = None
    if kind == "deny":
        reason = raw.get("reason", f"the tool {tool!r} is not allowed")
        if not isinstance(reason, str):
            msg = f"{where}.reason={reason!r} is invalid; give a string."
            raise ConfigError(msg)
    elif kind == "shell":
        patterns = []
        for n, text in enumerate(_strings(where, "deny_patterns", raw.get("deny_patterns", []))):
            try:
                patterns.append(re.compile(text))
            except re.error as exc:
                msg = f"{where}.deny_patterns[{n}]={text!r} is not a valid regular expression: {exc}."
                raise ConfigError(msg) from None
        allow = raw.get("allow_commands")
        commands = None if allow is None else frozenset(_strings(where, "allow_commands", allow))
        env = raw.get("allow_env")
        shell = ShellRule(
            patterns,
            commands,
            _flag(where, "builtin", raw.get("builtin", True)),
            allow_env=None if env is None else frozenset(_strings(where, "allow_env", env)),
            allow_opaque=_flag(where, "allow_opaque", raw.get("allow_opaque", False)),
            on_opaque=_on_opaque(where, raw.get("on_opaque")),
        )
        check = shell.check
    elif kind == "path":
        roots = _strings(where, "roots", raw.get("roots", []))
        base = raw.get("base")
        if base is not None and not isinstance(base, str):
            msg = f"{where}.base={base!r} is invalid; give a directory path."
            raise ConfigError(msg)
        path = PathRule(
            roots,
            _strings(where, "deny_paths", raw.get("deny_paths", [])),
            base if base is not None else folder,  # default: the config's folder, when there is one
            _flag(where, "case_sensitive", raw.get("case_sensitive", False)),
            folder=folder,
            current=base is None,  # the default base: a Python tool resolves from the current folder too
        )
        check = path.check
    elif kind == "url":
        networks = []
        for text in _strings(where, "allow_networks", raw.get("allow_networks", [])):
            try:
                networks.append(ipaddress.ip_network(text, strict=False))
            except ValueError:
                msg = f"{where}.allow_networks has {text!r}; give networks such as '10.0.0.0/8' or '127.0.0.1/32'."
                raise ConfigError(msg) from None
        hosts = raw.get("hosts")
        check = UrlRule(
            _strings(where, "schemes", raw.get("schemes", ["http", "https"])),
            None if hosts is None else _strings(where, "hosts", hosts),
            networks,
            _flag(where, "allow_userinfo", raw.get("allow_userinfo", False)),
            _flag(where, "resolve_dns", raw.get("resolve_dns", False)),
        ).check
    if arguments is None:
        arguments = DEFAULT_ARGUMENTS.get(kind, ())
    return _Rule(f"rules[{index}] {kind}", tool, kind, arguments, check, reason, shell, path)


class ToolPolicy:
    """Compiled rules; :meth:`check` decides one call. Also usable on its own (e.g. redirects).

    ``folder`` is the config file's folder: relative ``roots`` and ``base`` are taken from
    it, and it is where a tool that does not say otherwise resolves a relative path. Without
    it (and without a rule's ``base``), a relative path of such a tool is opaque (denied).
    """

    __slots__ = ("_path_rules", "default", "folder", "rules")

    def __init__(
        self, rules: Sequence[Mapping[str, Any]], default: str = "allow", *, folder: str | None = None
    ) -> None:
        if isinstance(rules, str | Mapping) or not isinstance(rules, Sequence):
            msg = f"{_WHERE}(rules={rules!r}) is invalid; give a list of rule mappings."
            raise ConfigError(msg)
        self.folder = folder
        self.rules = tuple(_build_rule(i, raw, folder) for i, raw in enumerate(rules))
        if default not in ("allow", "deny"):
            msg = f"{_WHERE}(default={default!r}) is invalid; give one of 'allow', 'deny'."
            raise ConfigError(msg)
        self.default = default
        self._path_rules: dict[str, tuple[_Rule, ...]] = {}

    def check(self, tool: str, arguments: Mapping[str, Any], workdir: str | None = None) -> Denial | None:
        """The first denial for a call of ``tool`` with ``arguments``, or None when allowed.

        ``workdir`` is where the tool resolves a relative path (:attr:`Tool.workdir`: an MCP
        server's folder; ``""`` when unknown); None: the rule's ``base`` or the config's folder.
        """
        matched = False
        for rule in self.rules:
            if not rule.applies_to(tool):
                continue
            matched = True
            if rule.kind == "allow":
                continue
            if rule.kind == "deny":
                return Denial(rule.label, rule.reason or "")
            check = rule.check
            assert check is not None  # set for shell, path and url rules
            for argument in rule.arguments:
                if argument not in arguments:
                    continue
                value = arguments[argument]
                values = [value] if isinstance(value, str) else value if isinstance(value, list | tuple) else None
                label = f"{rule.label} {argument!r}"
                if values is None or not all(isinstance(v, str) for v in values):
                    return Denial(label, f"the argument {argument!r} is not text ({type(value).__name__})")
                if rule.shell is not None:
                    command = value if isinstance(value, str) else shlex.join(values)  # an argv list
                    denial = self._check_shell(tool, rule.shell, label, command, workdir)
                    if denial is not None:
                        return denial
                    continue
                for text in values:
                    reason = check(text) if rule.path is None else rule.path.check(text, workdir)
                    if reason is not None:
                        return Denial(label, reason)
        if not matched and self.default == "deny":
            return Denial("default", f"no rule allows the tool {tool!r}")
        return None

    def _check_shell(
        self, tool: str, shell: ShellRule, label: str, command: str, workdir: str | None = None
    ) -> Denial | None:
        verdict = shell.analyse(command)
        if verdict.reason is None and not verdict.redirects:
            return None  # the common case: nothing for the path rules to judge
        paths = self._path_rules.get(tool)
        if paths is None:  # per tool name, once: the rules never change (bounded: names come from the model)
            paths = tuple(r for r in self.rules if r.kind == "path" and r.applies_to(tool))
            if len(self._path_rules) < _PENDING_MAX:
                self._path_rules[tool] = paths
        if verdict.reason is not None and not (verdict.globs and _globs_held(paths, verdict.globs, workdir)):
            return Denial(label, verdict.reason, pause=verdict.opaque and shell.on_opaque == "pause")
        if not verdict.redirects:
            return None
        for redirect in verdict.redirects:
            target = str(redirect.target)
            for rule in paths:
                assert rule.path is not None  # set for path rules
                reason = rule.path.check(target, workdir)
                if reason is not None:
                    return Denial(f"{rule.label} (redirection {redirect.operator} in {label})", reason)
            if not paths and redirect.writes and shell.allow_commands is not None:
                return Denial(
                    label,
                    f"the command writes to {target!r} with {redirect.operator}, and no path rule covers the tool "
                    f"{tool!r} (add a rule with kind 'path' and its roots)",
                )
        return None

    def check_url(self, url: str, tool: str = "*") -> Denial | None:
        """Check ``url`` against the URL rules that apply to ``tool`` (``"*"``: every URL rule).

        Call this from a fetching tool on every redirect hop: a static policy sees only
        the URL in the arguments, never where the server redirects to.
        """
        for rule in self.rules:
            if rule.kind == "url" and (tool == "*" or rule.applies_to(tool)) and rule.check is not None:
                reason = rule.check(url)
                if reason is not None:
                    return Denial(rule.label, reason)
        return None


_STRINGS = {"type": "array", "items": {"type": "string"}}

OPTIONS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "rules": {
            "type": "array",
            "x-parsed-by": "ToolPolicy",
            "items": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string", "minLength": 1},
                    "kind": {"enum": list(_KINDS)},
                    "arguments": _STRINGS,
                    "reason": {"type": "string"},
                    "deny_patterns": _STRINGS,
                    "allow_commands": _STRINGS,
                    "allow_env": _STRINGS,
                    "builtin": {"type": "boolean"},
                    "allow_opaque": {"type": "boolean"},
                    "on_opaque": {"enum": list(ON_OPAQUE)},
                    "case_sensitive": {"type": "boolean"},
                    "roots": {**_STRINGS, "x-path": True},
                    "deny_paths": _STRINGS,
                    "base": {"type": "string", "x-path": True},
                    "schemes": _STRINGS,
                    "hosts": _STRINGS,
                    "allow_networks": _STRINGS,
                    "allow_userinfo": {"type": "boolean"},
                    "resolve_dns": {"type": "boolean"},
                },
                "required": ["tool", "kind"],
                "additionalProperties": False,
            },
        },
        "default": {"enum": ["allow", "deny"]},
        "action": {"enum": ["deny", "pause"]},
        "message": {"type": "string"},
        "name": {"type": "string", "minLength": 1},
    },
    "additionalProperties": False,
}


def _globs_held(paths: tuple[_Rule, ...], globs: tuple[str, ...], workdir: str | None) -> bool:
    """Whether the directories ``globs`` match in are held by the tool's path rules: there
    are some, none has deny globs (they may match what a glob matches), and each passes them."""
    rules = [r.path for r in paths if r.path is not None and not r.path.deny]
    return len(rules) == len(paths) > 0 and all(p.check(g, workdir) is None for g in globs for p in rules)


@options_schema(OPTIONS)
def tool_policy_filter(
    rules: Sequence[Mapping[str, Any]] = (),
    *,
    default: str = "allow",
    action: str = "deny",
    message: str = DEFAULT_DENIAL,
    name: str = "tool_policy",
    build: Any = None,
) -> Filter:
    """Deny tool calls whose arguments break a rule; the model reads why.

    Args:
        rules: Rule mappings, checked in order (every matching rule must pass). Each has
            ``tool`` (a name or glob), ``kind`` (``allow``, ``deny``, ``shell``, ``path``,
            ``url``), optional ``arguments`` (the argument names to check; defaults in
            :data:`DEFAULT_ARGUMENTS`) and the kind's options: shell ``deny_patterns``,
            ``allow_commands``, ``allow_env``, ``builtin``, ``on_opaque``; path ``roots``,
            ``deny_paths``, ``base``, ``case_sensitive``; url
            ``schemes``, ``hosts``, ``allow_networks``, ``allow_userinfo``, ``resolve_dns``;
            deny ``reason``.
        default: ``"allow"`` or ``"deny"`` for tools no rule names.
        action: ``"deny"`` (a ``permission`` tool result) or ``"pause"`` (a human
            decides each denied call; see the module docs).
        message: The denial text (``{tool}``, ``{rule}``, ``{reason}``).
        name: The filter's name.
        build: Set when built from a config: relative ``roots`` and ``base`` are taken from
            the config file's folder, which is also the default ``base``.

    Returns:
        A tool-scope filter (and a gate one with ``action="pause"``); ``extras``:
        ``policy`` (the :class:`ToolPolicy`).
    """
    policy = ToolPolicy(rules, default, folder=getattr(build, "config_dir", None))
    mode = action
    pausing = mode == "pause" or any(r.shell is not None and r.shell.on_opaque == "pause" for r in policy.rules)

    def text(tool: str, denial: Denial) -> str:
        return message.format(tool=tool, rule=denial.rule, reason=denial.reason)

    async def around_gate(
        request: GateRequest, state: dict[str, Any], call_next: Callable[[GateRequest], Awaitable[Decision]]
    ) -> Decision:
        call = request.call
        denial = policy.check(call.name, call.arguments, request.tool.workdir)
        if denial is None or not (mode == "pause" or denial.pause):
            return await call_next(request)  # denied (or not) by the tool hook
        return Decision.pause(text(call.name, denial), arguments=call.arguments)  # as this layer saw it

    async def around_tool(
        request: ToolRequest, state: dict[str, Any], call_next: Callable[[ToolRequest], Awaitable[ToolResult]]
    ) -> ToolResult:
        tool = request.tool.name
        denial = policy.check(tool, request.arguments, request.tool.workdir)
        if denial is None:
            return await call_next(request)
        if request.approved and (mode == "pause" or denial.pause):
            return await call_next(request)  # a human approved exactly this paused call
        return ToolResult.failure("permission", text(tool, denial))

    return Filter(
        name, around_tool=around_tool, around_gate=around_gate if pausing else None, extras={"policy": policy}
    )


SPEC = FilterSpec(
    "tool_policy",
    tool_policy_filter,
    OPTIONS,
    "Declarative allow/deny rules for shell commands, file paths and URLs in tool arguments; or pause for a human.",
    ("tool", "gate"),
)
