"""Partial matching for the standard ``re`` module.

``re`` cannot tell whether the end of a text could still *become* a match once more
text arrives. :func:`prefix_source` rewrites a pattern into one that matches every
prefix of its matches, so ``(?:prefix)\\Z`` finds the shortest tail of a stream that
must be held back. Constructs the rewrite cannot follow (back references, unknown
opcodes) fall back to "anything may follow", which holds back more but never less.
"""

from __future__ import annotations

import functools
import re
from re import _constants as C  # type: ignore[attr-defined]  # the parser's opcodes
from re import _parser  # type: ignore[attr-defined]  # the stdlib regex parser
from typing import Any

__all__ = [
    "context_width",
    "first_chars",
    "fast_source",
    "first_source",
    "full_source",
    "hold_source",
    "prefix_source",
    "trailing_reach",
]

_CATEGORIES = {
    C.CATEGORY_DIGIT: r"\d",
    C.CATEGORY_NOT_DIGIT: r"\D",
    C.CATEGORY_SPACE: r"\s",
    C.CATEGORY_NOT_SPACE: r"\S",
    C.CATEGORY_WORD: r"\w",
    C.CATEGORY_NOT_WORD: r"\W",
}
_AT = {
    C.AT_BEGINNING: "^",
    C.AT_BEGINNING_STRING: r"\A",
    C.AT_END: "$",
    C.AT_END_STRING: r"\Z",
    C.AT_BOUNDARY: r"\b",
    C.AT_NON_BOUNDARY: r"\B",
}
_FLAG_LETTERS = ((re.IGNORECASE, "i"), (re.MULTILINE, "m"), (re.DOTALL, "s"), (re.ASCII, "a"))
_ANYTHING = r"[\s\S]*"
_SINGLE = (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN)
_NO_SKIP = "(?=)"


class _Unsupported(Exception):
    pass


def _char(code: int) -> str:
    return re.escape(chr(code))


def _flag_letters(flags: int) -> str:
    return "".join(letter for flag, letter in _FLAG_LETTERS if flags & flag)


def _klass(items: Any) -> str:
    out: list[str] = []
    for op, av in items:
        if op is C.NEGATE:
            out.insert(0, "^")
        elif op is C.LITERAL:
            out.append(_char(av))
        elif op is C.RANGE:
            out.append(f"{_char(av[0])}-{_char(av[1])}")
        elif op is C.CATEGORY:
            out.append(_CATEGORIES[av])
        else:
            raise _Unsupported(op)
    return "[" + "".join(out) + "]"


def _repeat(body: str, low: int, high: int) -> str:
    top = "" if high is C.MAXREPEAT or high == C.MAXREPEAT else str(high)
    return f"(?:{body}){{{low},{top}}}"


def _full(seq: Any, asserts: bool = True) -> str:
    return "".join(_full_item(op, av, asserts) for op, av in seq)


def _full_item(op: Any, av: Any, asserts: bool = True) -> str:
    if op is C.LITERAL:
        return _char(av)
    if op is C.NOT_LITERAL:
        return f"[^{_char(av)}]"
    if op is C.ANY:
        return "."
    if op is C.IN:
        return _klass(av)
    if op is C.BRANCH:
        return "(?:" + "|".join(_full(branch, asserts) for branch in av[1]) + ")"
    if op is C.SUBPATTERN:
        _group, add, remove, body = av
        flags = _flag_letters(add) + ("-" + _flag_letters(remove) if _flag_letters(remove) else "")
        return f"(?{flags}:{_full(body, asserts)})"
    if op is C.ATOMIC_GROUP:
        return f"(?>{_full(av)})" if asserts else f"(?:{_full(av, asserts)})"
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, high, body = av
        # Laziness and possessiveness change which match is found: keep them, except in the
        # assertion-free reading, which only has to match at least as much.
        mode = {C.MIN_REPEAT: "?", C.POSSESSIVE_REPEAT: "+"}.get(op, "") if asserts else ""
        return _repeat(_full(body, asserts), low, high) + mode
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT) and not asserts:
        return ""  # what the match consumes, read as widely as possible
    if op is C.AT:
        return _AT[av]
    if op in (C.ASSERT, C.ASSERT_NOT):
        direction, body = av
        kind = ("=" if op is C.ASSERT else "!") if direction == 1 else ("<=" if op is C.ASSERT else "<!")
        return f"(?{kind}{_full(body)})"
    raise _Unsupported(op)


def _looks_back(op: Any, av: Any) -> bool:
    return (op is C.AT and av in (C.AT_BOUNDARY, C.AT_NON_BOUNDARY)) or (op in (C.ASSERT, C.ASSERT_NOT) and av[0] == -1)


def _prefix(seq: Any, caseless: bool = False, at_start: bool = False) -> str:
    # Prefixes of a sequence a1 a2 ... an: a prefix of a1, or all of a1 then a prefix of the rest.
    items = list(seq)
    known = ""
    if at_start:
        # At the start of a match, which is a character already in the text, \b and
        # lookbehinds see only known text: keep them, so "the" does not hold its "e".
        while items and _looks_back(*items[0]):
            known += _full_item(*items.pop(0))
    items = [(op, av) for op, av in items if op not in (C.AT, C.ASSERT, C.ASSERT_NOT)]  # unknowable yet: drop
    out = ""
    for index in range(len(items) - 1, -1, -1):
        op, av = items[index]
        head = _prefix_item(op, av, caseless, at_start and index == 0)
        if not out:
            out = head
            continue
        whole = _full_item(op, av)
        if not caseless and _run_stops_before(op, av, items[index + 1 :]):
            whole += "+"  # the run cannot share a character with what follows: never give one back
        out = f"(?:{head}|{whole}{out})"
    return f"{known}(?:{out})" if known else out


def _chars_of(op: Any, av: Any, limit: int = 512) -> set[str] | None:
    """The characters one single-character item matches, when they are few and plain."""
    if op is C.LITERAL:
        return {chr(av)}
    if op is not C.IN:
        return None
    chars: set[str] = set()
    for item_op, item_av in av:
        if item_op is C.LITERAL:
            chars.add(chr(item_av))
        elif item_op is C.RANGE and item_av[1] - item_av[0] < limit:
            chars.update(chr(code) for code in range(item_av[0], item_av[1] + 1))
        else:
            return None
    return chars


def _run_stops_before(op: Any, av: Any, rest: Any) -> bool:
    """True for ``c{m,n}`` whose characters can never start what follows it."""
    if op is not C.MAX_REPEAT or len(av[2]) != 1:
        return False
    chars = _chars_of(*av[2][0])
    if chars is None or not rest:
        return False
    # No try: _prefix has already written every item of ``rest`` with _prefix_item and
    # _full_item, which refuse all that _first refuses; prefix_source catches the rest.
    sources, _nullable = _first(rest)
    if not sources:
        return False
    following = re.compile("|".join(sources), re.DOTALL)  # the widest reading of "." is the safe one
    return not any(following.fullmatch(c) for c in chars)


def _prefix_item(op: Any, av: Any, caseless: bool = False, at_start: bool = False) -> str:
    # A prefix expression is always the last thing before the end of the text, so a run
    # of single characters in it can be possessive: giving characters back cannot help.
    if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
        return f"(?:{_full_item(op, av)})?+"
    if op is C.BRANCH:
        return "(?:" + "|".join(_prefix(branch, caseless, at_start) for branch in av[1]) + ")"
    if op is C.SUBPATTERN:
        _group, add, remove, body = av
        flags = _flag_letters(add) + ("-" + _flag_letters(remove) if _flag_letters(remove) else "")
        return f"(?{flags}:{_prefix(body, caseless or bool(add & re.IGNORECASE), at_start)})"
    if op is C.ATOMIC_GROUP:
        return f"(?:{_prefix(av, caseless, at_start)})"
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        _low, high, body = av
        if high == 0:
            return ""
        if len(body) == 1 and body[0][0] in _SINGLE:
            # Prefixes of c{m,n} for one character c: c{0,n} (no nested choice to backtrack into).
            return _repeat(_full(body), 0, high) + "+"
        top = high if high is C.MAXREPEAT or high == C.MAXREPEAT else high - 1
        return _repeat(_full(body), 0, top) + f"(?:{_prefix(body, caseless)})"
    raise _Unsupported(op)


def _parse(pattern: re.Pattern[str]) -> Any:
    return _parse_source(pattern.pattern, pattern.flags)


@functools.lru_cache(maxsize=1024)
def _parse_source(source: str, flags: int) -> Any:
    # Parsing is the slow part of building a redactor; the same rules are built often.
    return _parser.parse(source, flags)


def _scoped(flags: int, body: str) -> str:
    letters = _flag_letters(flags)
    if flags & re.ASCII:
        # re's search skips ahead to a possible first character with a set read under the
        # whole pattern's flags, not the group's: (?a:\W) would skip "é". An empty
        # lookahead first turns that skip off.
        body = _NO_SKIP + body
    return f"(?{letters}:{body})" if letters else f"(?:{body})"


@functools.lru_cache(maxsize=1024)
def full_source(pattern: re.Pattern[str]) -> str:
    """``pattern`` as a non-capturing group that keeps its flags, to join with others.

    Raises ValueError for back references (group numbers would shift when joined).
    """
    parsed = _parse(pattern)
    try:
        body = _full(parsed)
    except (_Unsupported, KeyError) as exc:
        msg = f"the pattern {pattern.pattern!r} uses a construct that cannot be joined with others ({exc})"
        raise ValueError(msg) from None
    return _scoped(parsed.state.flags, body)


@functools.lru_cache(maxsize=1024)
def fast_source(pattern: re.Pattern[str]) -> str:
    """:func:`full_source`, written so the regex engine can skip it by its first character.

    The engine tries the alternatives of a joined pattern one by one at every position,
    but skips at once one whose first item is a plain character that does not match.
    A leading ``\\b`` hides that character, so ``\\bsk-`` is written ``sk-(?<!\\wsk-)``: the
    same matches (the word starts with a word character, so the boundary means "no word
    character before it").
    """
    whole = full_source(pattern)  # raises ValueError for what cannot be joined
    parsed = _parse(pattern)
    try:
        return _scoped(parsed.state.flags, _fast(list(parsed)))
    except (_Unsupported, KeyError):  # pragma: no cover - full_source already accepted it
        return whole


def _fast(items: list[Any]) -> str:
    """A sequence whose look-back before its first character is checked after that character."""
    if not items:
        return ""
    op, av = items[0]
    if len(items) > 1 and items[1][0] is C.LITERAL:
        char = _char(items[1][1])
        if op is C.AT and av == C.AT_BOUNDARY and re.fullmatch(r"\w", chr(items[1][1])):
            # \b before a word character: no word character before it
            return f"{char}(?<!\\w{char})" + _full(items[2:])
        if op in (C.ASSERT, C.ASSERT_NOT) and av[0] == -1:
            kind = "<=" if op is C.ASSERT else "<!"
            return f"{char}(?{kind}{_full(av[1])}{char})" + _full(items[2:])
    if op is C.BRANCH:
        return "(?:" + "|".join(_fast(list(branch)) for branch in av[1]) + ")" + _full(items[1:])
    if op is C.SUBPATTERN:
        _group, add, remove, body = av
        flags = _flag_letters(add) + ("-" + _flag_letters(remove) if _flag_letters(remove) else "")
        return f"(?{flags}:{_fast(list(body))})" + _full(items[1:])
    return _full(items)


@functools.lru_cache(maxsize=1024)
def prefix_source(pattern: re.Pattern[str]) -> str:
    """A pattern matching every prefix of every match of ``pattern`` (the empty text too)."""
    parsed = _parse(pattern)
    try:
        body = _prefix(parsed, bool(parsed.state.flags & re.IGNORECASE), at_start=True)
    except (_Unsupported, KeyError):
        body = _ANYTHING
    return _scoped(parsed.state.flags, body)


def _first(seq: Any) -> tuple[list[str], bool]:
    """The sources of the characters a match of ``seq`` can start with, and whether it can be empty."""
    found: list[str] = []
    for op, av in seq:
        chars, nullable = _first_item(op, av)
        found.extend(chars)
        if not nullable:
            return found, False
    return found, True


def _first_item(op: Any, av: Any) -> tuple[list[str], bool]:
    if op in (C.LITERAL, C.NOT_LITERAL, C.ANY, C.IN):
        return [_full_item(op, av)], False
    if op in (C.AT, C.ASSERT, C.ASSERT_NOT):
        return [], True
    if op is C.BRANCH:
        found: list[str] = []
        nullable = False
        for branch in av[1]:
            chars, empty = _first(branch)
            found.extend(chars)
            nullable = nullable or empty
        return found, nullable
    if op is C.SUBPATTERN:
        _group, add, remove, body = av
        chars, nullable = _first(body)
        flags = _flag_letters(add) + ("-" + _flag_letters(remove) if _flag_letters(remove) else "")
        return ([f"(?{flags}:{c})" for c in chars] if flags else chars), nullable
    if op is C.ATOMIC_GROUP:
        return _first(av)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        low, high, body = av
        if high == 0:
            return [], True
        chars, nullable = _first(body)
        return chars, nullable or low == 0
    raise _Unsupported(op)


@functools.lru_cache(maxsize=1024)
def first_source(pattern: re.Pattern[str]) -> str:
    """A pattern matching one character that a match of ``pattern`` can start with.

    Falls back to any character when the pattern is too unusual to analyse.
    """
    parsed = _parse(pattern)
    try:
        chars, _nullable = _first(parsed)
    except (_Unsupported, KeyError):
        chars = []
    body = "|".join(dict.fromkeys(chars)) if chars else r"[\s\S]"
    return _scoped(parsed.state.flags, body)


@functools.lru_cache(maxsize=1024)
def first_chars(pattern: re.Pattern[str], limit: int = 256) -> frozenset[str] | None:
    """The characters a match can start with, when they are few (None otherwise)."""
    try:
        compiled = re.compile(first_source(pattern))
    except re.error:
        return None
    # Probe the lead pattern against a small alphabet only when it is a plain class.
    parsed = _parser.parse(compiled.pattern, compiled.flags)
    chars: set[str] = set()
    stack = list(parsed)
    while stack:
        op, av = stack.pop()
        if op is C.LITERAL:
            chars.add(chr(av))
        elif op is C.IN:
            for item_op, item_av in av:
                if item_op is C.LITERAL:
                    chars.add(chr(item_av))
                elif item_op is C.RANGE and item_av[1] - item_av[0] < limit:
                    chars.update(chr(code) for code in range(item_av[0], item_av[1] + 1))
                else:
                    return None
        elif op is C.BRANCH:
            for branch in av[1]:
                stack.extend(branch)
        elif op is C.SUBPATTERN:
            stack.extend(av[3])
        elif op is not C.ASSERT or av[1]:  # an empty lookahead is the _NO_SKIP of an ASCII pattern
            return None
        if len(chars) > limit:
            return None
    if compiled.flags & re.IGNORECASE or "(?i" in compiled.pattern:
        # Case-insensitive matching also pairs letters like 's' with U+017F (long s) and 'k' with the
        # Kelvin sign: ask the regex itself about every cased character.
        chars.update(c for c in _cased() if compiled.fullmatch(c))
    return frozenset(chars)


@functools.cache
def _cased() -> tuple[str, ...]:
    """Every character of the Basic Multilingual Plane that has another case."""
    return tuple(c for c in map(chr, range(0x10000)) if c.lower() != c.upper() or c.casefold() != c)


_LOOKS_BACK = (C.AT_BEGINNING, C.AT_BEGINNING_STRING, C.AT_BOUNDARY, C.AT_NON_BOUNDARY)


@functools.lru_cache(maxsize=1024)
def context_width(pattern: re.Pattern[str], cap: int = 256) -> int:
    """How many characters before a match the pattern looks at (``\\b``, ``^``, lookbehinds).

    0 for patterns that never look back; at most ``cap``.
    """
    width = 0
    stack = list(_parse(pattern))
    while stack:
        op, av = stack.pop()
        if op is C.AT and av in _LOOKS_BACK:
            width = max(width, 1)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            direction, body = av
            if direction == -1:
                width = max(width, min(cap, int(body.getwidth()[1])))
            stack.extend(body)
        elif op is C.BRANCH:
            for branch in av[1]:
                stack.extend(branch)
        elif op is C.SUBPATTERN:
            stack.extend(av[3])
        elif op is C.ATOMIC_GROUP:
            stack.extend(av)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
            stack.extend(av[2])
    return width


# How far past its own position an assertion looks: ``$`` also looks past a final newline.
_AHEAD = {
    C.AT_END: 2,
    C.AT_END_STRING: 1,
    C.AT_BOUNDARY: 1,
    C.AT_NON_BOUNDARY: 1,
}


def _reach(seq: Any, state: Any) -> int:
    # An assertion followed by at least k more matched characters looks k fewer past the end.
    items = list(seq)
    best = 0
    for index, (op, av) in enumerate(items):
        ahead = _item_reach(op, av, state)
        if ahead:
            after = int(_parser.SubPattern(state, items[index + 1 :]).getwidth()[0])
            best = max(best, ahead - after)
    return best


def _item_reach(op: Any, av: Any, state: Any) -> int:
    if op is C.AT:
        return _AHEAD.get(av, 0)
    if op in (C.ASSERT, C.ASSERT_NOT):
        direction, body = av
        if direction == -1:
            return _reach(body, state)
        high = int(body.getwidth()[1])
        if high >= C.MAXREPEAT - 1:
            msg = "a lookahead of unbounded length (it may look at any amount of text after the match)"
            raise ValueError(msg)
        return high + _reach(body, state)
    if op is C.BRANCH:
        return max(_reach(branch, state) for branch in av[1])
    if op is C.SUBPATTERN:
        return _reach(av[3], state)
    if op is C.ATOMIC_GROUP:
        return _reach(av, state)
    if op in (C.MAX_REPEAT, C.MIN_REPEAT, C.POSSESSIVE_REPEAT):
        return _reach(av[2], state)
    return 0


@functools.lru_cache(maxsize=1024)
def trailing_reach(pattern: re.Pattern[str]) -> int:
    """How many characters after the end of a match the pattern may look at.

    ``\\b``, ``$`` and lookaheads at the end of a pattern decide on text that is not part
    of the match; a stream must hold a match until that text has arrived.
    Raises ValueError for a lookahead of unbounded length.
    """
    parsed = _parse(pattern)
    return _reach(parsed, parsed.state)


@functools.lru_cache(maxsize=1024)
def hold_source(pattern: re.Pattern[str], reach: int) -> str:
    """A pattern for every tail of a stream that a later character could still change.

    That is every prefix of a match, and, when the pattern looks ``reach`` characters
    past its matches, a whole match (read without its assertions) followed by up to
    ``reach`` characters.
    """
    prefixes = prefix_source(pattern)
    if not reach:
        return prefixes
    parsed = _parse(pattern)
    try:
        body = _full(parsed, asserts=False)
    except (_Unsupported, KeyError):
        return prefixes  # already "anything may follow"
    return f"(?:{prefixes}|{_scoped(parsed.state.flags, body)}[\\s\\S]{{1,{reach}}})"
