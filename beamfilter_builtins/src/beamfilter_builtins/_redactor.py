"""The redaction engine: whole texts and streams give the same result, at every split.

:class:`Redactor` compiles a list of :class:`SecretRule` into one regular expression.
:meth:`Redactor.redact` rewrites a whole text (``re.sub`` with the rules' checks); the
streaming functions hold back only the shortest tail that more text could still change
(see :mod:`._partial`), so ordinary text flows with no delay, a secret cut into any
number of chunks is caught whole, and the streamed result equals :meth:`redact` of the
whole text. A rule the stream cannot follow exactly is refused when the engine is built.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from re import _compiler as compiler  # type: ignore[attr-defined]  # compiles a parsed look-back
from re import _constants as C  # type: ignore[attr-defined]  # the parser's opcodes
from re import _parser  # type: ignore[attr-defined]  # widths of a pattern
from typing import NamedTuple

from beamfilter_core.errors import ConfigError
from beamfilter_core.secrets import SecretRule

from ._partial import context_width, fast_source, first_chars, first_source, hold_source, trailing_reach

__all__ = ["Redactor", "compile_rule"]

_CACHED_TEXT = 32  # scans of texts up to this length are remembered
_UNBOUNDED = _parser.MAXREPEAT - 1  # what getwidth() reports for unbounded patterns
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)


@functools.lru_cache(maxsize=1024)
def _widths(pattern: re.Pattern[str]) -> tuple[int, int]:
    low, high = _parser.parse(pattern.pattern, pattern.flags).getwidth()
    return int(low), int(high)


class _Rule:
    """A rule checked and compiled: its pattern, widths and how a match is replaced."""

    __slots__ = ("check", "name", "pattern", "reach", "secret", "width")

    def __init__(self, rule: SecretRule, where: str, max_length: int) -> None:
        self.name = rule.name
        self.check = rule.check
        label = f"{where}: pattern {rule.name} {rule.pattern!r}"
        try:
            self.pattern = re.compile(rule.pattern)
        except re.error as exc:
            msg = f"{label} is not a valid regular expression: {exc}."
            raise ConfigError(msg) from None
        except (TypeError, ValueError):
            msg = f"{where}: pattern {rule.name} is {rule.pattern!r}; give a regular expression string."
            raise ConfigError(msg) from None
        low, high = _widths(self.pattern)
        if low == 0:
            msg = f"{label} can match the empty text; make it match 1+ characters."
            raise ConfigError(msg)
        if high >= _UNBOUNDED:
            msg = (
                f"{label} can match text of any length (a '*', '+' or '{{n,}}'), so a stream could never "
                f"tell that a match is complete; bound it, e.g. '{{1,{min(max_length, 256)}}}' instead of '+'."
            )
            raise ConfigError(msg)
        try:
            self.reach = trailing_reach(self.pattern)
        except ValueError as exc:
            msg = f"{label} uses {exc}; a stream cannot hold text back without limit. Bound the lookahead."
            raise ConfigError(msg) from None
        if high + self.reach > max_length:
            msg = (
                f"{label} can match {high} characters (looking {self.reach} further), more than "
                f"max_length={max_length}; raise max_length or bound the pattern."
            )
            raise ConfigError(msg)
        if context_width(self.pattern, cap=max_length + 1) > max_length:
            msg = f"{label} looks back more than max_length={max_length} characters; raise max_length."
            raise ConfigError(msg)
        self.width = high
        self.secret = "secret" in self.pattern.groupindex


def compile_rule(rule: SecretRule, where: str, max_length: int) -> re.Pattern[str]:
    """``rule``'s pattern, checked as the engine checks it (raises ConfigError)."""
    return _Rule(rule, where, max_length).pattern


class _Group(NamedTuple):
    """The rules that can start with one character: their hold and match functions."""

    hold: Callable[[str, int], re.Match[str] | None]
    match: Callable[[str, int], re.Match[str] | None]
    rules: list[_Rule]


class _State(dict[str, "tuple[Sequence[str], _State]"]):
    """A point in a stream: the text before the held tail that look-backs see, the held
    tail, and the steps already taken from here (token -> (emitted, next state))."""

    __slots__ = ("context", "held")

    # Two states are the same point only if they are the same object (not equal contents).
    __eq__ = object.__eq__
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __init__(self, context: str, held: str) -> None:  # dict.__init__ has nothing to do: not called
        self.context = context
        self.held = held

    def __repr__(self) -> str:
        return f"_State({self.context!r}, {self.held!r})"


def _look_back_probes(patterns: Sequence[re.Pattern[str]]) -> tuple[re.Pattern[str], ...] | None:
    """One-character patterns that decide everything the rules' look-backs see of the
    character before a position (``\\b``, ``^``, one-character lookbehinds), or None when
    some look-back is wider or scoped by inline flags (the context is then kept as is)."""
    probes: dict[tuple[str, int], re.Pattern[str]] = {}
    for pattern in patterns:
        parsed = _parser.parse(pattern.pattern, pattern.flags)
        flags = parsed.state.flags & (re.ASCII | re.IGNORECASE)
        stack = list(parsed)
        while stack:
            op, av = stack.pop()
            if op is C.AT:
                if av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY):
                    probes.setdefault((r"\w", flags), re.compile(r"\w", flags))
                elif av == C.AT_BEGINNING and parsed.state.flags & re.MULTILINE:
                    probes.setdefault(("\n", 0), re.compile("\n"))
            elif op in (C.ASSERT, C.ASSERT_NOT):
                direction, body = av
                if direction == -1:
                    if body.getwidth() != (1, 1) or any(item[0] not in _SINGLE for item in body):
                        return None
                    probe = compiler.compile(body, parsed.state.flags)
                    probes.setdefault((repr(list(body)), flags), probe)
                else:
                    stack.extend(body)
            elif op is C.SUBPATTERN:
                if av[1] or av[2]:  # inline flags change how a look-back inside reads
                    return None
                stack.extend(av[3])
            elif op is C.BRANCH:
                for branch in av[1]:
                    stack.extend(branch)
            elif op is C.ATOMIC_GROUP:
                stack.extend(av)
            elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
                stack.extend(av[2])
    return tuple(probes.values())


class Redactor:
    """Redaction by a set of rules; ``step``/``flush`` (or the ``*_in_context`` pair) stream it."""

    __slots__ = (
        "cache_size",
        "classes",
        "context",
        "first",
        "full",
        "groups",
        "hold",
        "lead",
        "limit",
        "min_width",
        "plain",
        "probes",
        "remembered",
        "replacement",
        "representatives",
        "rules",
        "search",
        "starting",
        "states",
        "step",
    )

    def __init__(
        self,
        rules: Sequence[SecretRule],
        *,
        replacement: str = "[REDACTED]",
        max_length: int = 16_384,
        cache_size: int = 8192,
        where: str = "redact_filter",
    ) -> None:
        if not rules:
            msg = f"{where} has no rules to redact with; keep the default rules or give patterns."
            raise ConfigError(msg)
        compiled = [_Rule(rule, where, max_length) for rule in rules]
        self.rules = compiled
        # Rules that replace the whole match need no work per match: the common case.
        self.plain = all(rule.check is None and not rule.secret for rule in compiled)
        patterns = [rule.pattern for rule in compiled]
        try:
            # An empty group closes each rule: ``lastindex`` names the rule that matched,
            # while the rule's first character stays first (the engine skips on it).
            full = "|".join(f"{fast_source(rule.pattern)}()" for rule in compiled)
        except ValueError as exc:
            msg = f"{where}: {exc}; rewrite it without back references."
            raise ConfigError(msg) from None
        self.full = re.compile(full)
        self.search = self.full.search
        # Every match, and every tail that could still become one, starts with a lead char.
        chars = [first_chars(p) for p in patterns]
        self.first: frozenset[str] | None = None if None in chars else frozenset().union(*chars)  # type: ignore[arg-type]
        if self.first is not None:  # a plain character class is the fastest to search for
            lead = "[" + "".join(re.escape(c) for c in sorted(self.first)) + "]"
        else:
            lead = "|".join(first_source(p) for p in patterns)
        self.lead = re.compile(lead).search
        # The leftmost tail that more text could still change, found in one search.
        # (Rules with known first characters use the per-character groups instead.)
        self.hold: Callable[[str, int], re.Match[str] | None]
        if self.first is None:
            holds = "|".join(hold_source(rule.pattern, rule.reach) for rule in compiled)
            self.hold = re.compile(f"(?=(?:{lead}))(?:{holds})\\Z").search
        self.limit = max(rule.width + rule.reach for rule in compiled)
        self.replacement = replacement
        # Per lead character, only the rules that can start with it (built on first use):
        # a token is then checked against a handful of rules, not all of them.
        self.starting: dict[str, tuple[int, ...]] = {}
        if self.first is not None:
            for c in self.first:
                self.starting[c] = tuple(i for i, found in enumerate(chars) if found is not None and c in found)
        self.groups: dict[tuple[int, ...], _Group] = {}
        self.min_width = min(_widths(p)[0] for p in patterns)
        # Characters before the held tail that \b, ^ and lookbehinds need to see (0: none).
        self.context = max(context_width(p, max_length) for p in patterns)
        # One character of context is kept as the first character seen of its class (all
        # letters look alike to "\b" and "(?<![A-Za-z0-9])"), so few states recur.
        self.probes = _look_back_probes(patterns) if self.context == 1 else None
        self.classes: dict[str, str] = {}
        self.representatives: dict[tuple[bool, ...], str] = {}
        # Streams repeat a small vocabulary of tokens from a few states (what is held and
        # the look-back context): each state remembers the step each short token took from
        # it, so most tokens cost one dict lookup. Bounded by cache_size steps and states.
        self.cache_size = cache_size
        self.states: dict[tuple[str, str], _State] = {}
        self.remembered = 0
        self.step = self._make_step()

    # -- one match -------------------------------------------------------------------

    def _replace(self, m: re.Match[str], rules: Sequence[_Rule] | None = None) -> str | None:
        """What a match becomes (the replacement, or the match with its ``secret`` part
        replaced), or None when the rule's check keeps it."""
        rule = (rules or self.rules)[m.lastindex - 1]  # type: ignore[operator]  # every rule ends with its group
        if rule.check is None and not rule.secret:
            return self.replacement
        # The rule alone matches exactly what its alternative matched here.
        own = rule.pattern.match(m.string, m.start())
        assert own is not None  # same pattern, same text, same position
        start, end = own.span("secret") if rule.secret else own.span()
        if start < 0:  # an optional secret group that did not take part: hide the whole match
            start, end = own.span()
        if rule.check is not None and not rule.check(m.string[start:end]):
            return None
        return m.string[m.start() : start] + self.replacement + m.string[end : m.end()]

    def redact(self, text: str) -> str:
        """``text`` with every match replaced: the reference the stream is held to.

        Like ``re.sub``, except that a match a rule's check keeps is left as it is and the
        search goes on from its next character (another rule may match inside it).
        """
        if self.plain:
            replacement = self.replacement
            return self.full.sub(lambda _: replacement, text)
        return self._sub(text, 0)

    def _sub(self, text: str, pos: int) -> str:
        """:meth:`redact` of ``text[pos:]``, with ``text[:pos]`` seen as what came before."""
        out: list[str] = []
        search = self.search
        start = pos
        while (m := search(text, start)) is not None:
            piece = self.replacement if self.plain else self._replace(m)
            if piece is None:
                start = m.start() + 1
                continue
            out.append(text[pos : m.start()])
            out.append(piece)
            pos = start = m.end()
        out.append(text[pos:])
        return "".join(out)

    # -- streaming -------------------------------------------------------------------

    def _hold_start(self, text: str, start: int) -> int:
        """The leftmost position from ``start`` whose tail more text could still change."""
        end = len(text)
        m = self.hold(text, max(start, end - self.limit))
        return end if m is None else m.start()

    def _group(self, char: str) -> _Group:
        indexes = self.starting[char]
        group = self.groups.get(indexes)
        if group is None:
            rules = [self.rules[i] for i in indexes]
            holds = "|".join(hold_source(rule.pattern, rule.reach) for rule in rules)
            full = "|".join(f"{fast_source(rule.pattern)}()" for rule in rules)
            group = self.groups[indexes] = _Group(re.compile(f"(?:{holds})\\Z").match, re.compile(full).match, rules)
        return group

    def scan(self, text: str, base: int = 0) -> tuple[Sequence[str], str]:
        """Split ``text[base:]`` into what can be emitted (secrets replaced) and the held tail.

        ``text[:base]`` is context already emitted, seen only by ``\\b``, ``^`` and lookbehinds.
        """
        m = self.lead(text, base)
        if m is None:  # the common case: nothing here can start a secret
            return (text[base:],), ""
        if self.first is None:
            return self._scan_all(text, base, m.start())
        # Position by position from the first lead character: a tail more text could
        # change is held; else a match there is final (like re.sub, leftmost first).
        out: list[str] = []
        pos = base
        end = len(text)
        lead, group_of, groups, limit = self.lead, self._group, self.groups, self.limit
        starting = self.starting
        while m is not None:
            at = m.start()
            group = groups.get(starting[text[at]]) or group_of(text[at])
            if end - at <= limit and group.hold(text, at):
                if at > pos:
                    out.append(text[pos:at])
                return out, text[at:]
            found = group.match(text, at)
            piece = None if found is None else self._replace(found, group.rules)
            if found is not None and piece is not None:
                if at > pos:
                    out.append(text[pos:at])
                out.append(piece)
                pos = found.end()
                m = lead(text, pos)
            else:
                m = lead(text, at + 1)
        if pos < end:
            out.append(text[pos:])
        return out, ""

    def _scan_all(self, text: str, base: int, start: int) -> tuple[Sequence[str], str]:
        """:meth:`scan` for rules whose first characters are unknown: one search for all."""
        out: list[str] = []
        pos = base
        search, plain, replacement = self.search, self.plain, self.replacement
        while True:
            held = self._hold_start(text, start)
            m = search(text, start)
            if m is None or m.start() >= held:
                if held > pos:
                    out.append(text[pos:held])
                return out, text[held:]
            piece = replacement if plain else self._replace(m)
            if piece is None:  # kept by its rule's check: look again from the next character
                start = m.start() + 1
                continue
            if m.start() > pos:
                out.append(text[pos : m.start()])
            out.append(piece)
            pos = start = m.end()

    def start(self) -> _State:
        """The state a stream starts in (``TokenTransform``'s ``init``)."""
        return self._state("", "")

    def _state(self, context: str, held: str) -> _State:
        """The one state object for ``(context, held)``, so its remembered steps are shared."""
        if not self.cache_size or len(held) > _CACHED_TEXT:
            return _State(context, held)
        states = self.states
        state = states.get((context, held))
        if state is None:
            if len(states) >= self.cache_size:
                self._forget()
            state = states[context, held] = _State(context, held)
        return state

    def _forget(self) -> None:
        """Drop every remembered step (the bound is reached; the stream adapts to new tokens)."""
        for state in list(self.states.values()):
            state.clear()
        self.states.clear()
        self.remembered = 0

    def _make_step(self) -> Callable[[str, _State], tuple[Sequence[str], _State]]:
        """The per-token function: one dictionary lookup for a step taken before."""
        scan = self.scan
        width = self.context
        first = self.first
        states = self.states
        cache_size = self.cache_size
        # Classes only matter for sharing remembered steps: with no cache, keep the character.
        klass = self._klass if self.probes is not None and cache_size else None
        next_state = self._state

        def miss(token: str, state: _State) -> tuple[Sequence[str], _State]:
            if not token:  # an empty delta: nothing to emit, nothing learnt
                return (), state
            context, held = state.context, state.held
            body = held + token if held else token
            if not held and first is not None and first.isdisjoint(token):  # no lead character at all
                out: tuple[str, ...] = (token,)
                rest = ""
            else:
                emitted, rest = scan(context + body, len(context))
                out = tuple(emitted)
            after = ""
            if width:
                # The characters before the new held tail, for the look-backs of the next scan.
                text = context + body
                cut = len(text) - len(rest)
                after = text[max(0, cut - width) : cut]
                if klass is not None and after:
                    after = klass(after)
            result = (out, next_state(after, rest))
            if cache_size and len(body) <= _CACHED_TEXT and states.get((context, held)) is state:
                if self.remembered >= cache_size:
                    self._forget()
                else:
                    state[token] = result
                    self.remembered += 1
            return result

        def step(token: str, state: _State) -> tuple[Sequence[str], _State]:
            return state.get(token) or miss(token, state)

        return step

    def _klass(self, char: str) -> str:
        """The first character seen that every look-back of the rules treats like ``char``."""
        found = self.classes.get(char)
        if found is None:
            probes = self.probes
            assert probes is not None  # only called when the rules' look-backs are known
            signature = tuple(probe.fullmatch(char) is not None for probe in probes)
            found = self.representatives.setdefault(signature, char)
            if len(self.classes) < 4096:
                self.classes[char] = found
        return found

    def flush(self, state: _State) -> list[str]:
        """The end of a stream: the held tail, redacted."""
        context, held = state.context, state.held
        return [self._sub(context + held, len(context))] if held else []
