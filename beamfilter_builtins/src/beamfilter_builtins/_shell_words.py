"""Words as bash expands them before running a command, as far as that is known statically.

Quotes and backslashes removed, ANSI-C strings (``$'\\x72m'``) decoded, brace expansion
(``{rm,-rf,/}``, ``{1..3}``) done, ``$HOME``/``${HOME}`` written as ``~``. A word that
depends on run time (another variable, a command or arithmetic substitution) is
:class:`Opaque`. Globs stay as written; :func:`leaving_glob` says when one may match
outside the working directory.
"""

from __future__ import annotations

import fnmatch
import itertools
import threading

import attrs
import tree_sitter

__all__ = [
    "LOCAL",
    "MAX_WORDS",
    "Opaque",
    "Word",
    "ansi_c",
    "expand",
    "expand_parts",
    "glob_base",
    "leaving_glob",
    "node_text",
]

LOCAL = threading.local()  # per thread: the parser, and the source the nodes being read come from
MAX_WORDS = 256  # brace expansion beyond this is refused: "{a,b}{c,d}..." grows exponentially


@attrs.frozen
class Opaque:
    """A word whose value is only known when the command runs (``$X``, ``$(...)``)."""

    source: str

    def __str__(self) -> str:
        return self.source if len(self.source) <= 60 else self.source[:57] + "..."


Word = str | Opaque


class _OpaqueWord(Exception):
    pass


def node_text(node: tree_sitter.Node) -> str:
    """The source text of ``node``."""
    # from the real source: the parser saw its ASCII shadow (see _ascii_shadow)
    source: bytes = LOCAL.source
    return source[node.start_byte : node.end_byte].decode("utf-8", "replace")  # valid UTF-8: a safety net


_Chars = list[tuple[str, bool]]  # (character, active): only active characters expand braces

_HOME = frozenset({"$HOME", "${HOME}"})


def expand(node: tree_sitter.Node) -> list[Word]:
    """The words ``node`` becomes after brace expansion and quote removal (or one Opaque)."""
    return expand_parts([node])


def expand_parts(nodes: list[tree_sitter.Node]) -> list[Word]:
    """The words adjacent ``nodes`` (one shell word) become."""
    if len(nodes) == 1:  # the common words, without building a character list
        kind = nodes[0].type
        text = node_text(nodes[0])
        if kind == "word" and "\\" not in text and "{" not in text:
            return [text]
        if kind == "raw_string":
            return [text[1:-1]]
    source = "".join(node_text(n) for n in nodes)
    try:
        chars = [c for node in nodes for c in _chars(node)]
    except _OpaqueWord:
        return [Opaque(source)]
    words = _braces(chars, [0])
    if words is None:
        return [Opaque(source)]
    return ["".join(c for c, _ in word) for word in words]


def _chars(node: tree_sitter.Node) -> _Chars:
    kind = node.type
    text = node_text(node)
    if kind == "word":
        return _unquoted(text)
    if kind in {"number", "brace_expression", "extglob_pattern", "regex"}:
        return [(c, True) for c in text]
    if kind == "raw_string":
        return [(c, False) for c in text[1:-1]]
    if kind == "ansi_c_string":
        return [(c, False) for c in ansi_c(text[2:-1])]
    if kind == "concatenation":
        return [c for child in node.children for c in _chars(child)]
    if kind in {"string", "translated_string"}:
        found: _Chars = []
        for child in node.children:
            if child.type == "string_content":
                found.extend((c, False) for c in _double_quoted(node_text(child)))
            elif child.is_named:
                found.extend((c, False) for c, _ in _chars(child))
        return found
    if kind in {"simple_expansion", "expansion"} and text in _HOME:
        return [("~", False)]
    raise _OpaqueWord


def leaving_glob(nodes: list[tree_sitter.Node]) -> str | None:
    """The word of ``nodes`` when it is a glob that may match outside the working directory
    (absolute, from ``~``, or with a part that matches ``..``), else None."""
    texts = [node_text(node) for node in nodes]
    if not any("*" in text or "?" in text or "[" in text for text in texts):
        return None
    if len(nodes) == 1 and nodes[0].type == "word" and "\\" not in texts[0]:
        text = texts[0]  # no quotes, no escapes: every wildcard is active
    else:
        try:
            chars = [c for node in nodes for c in _chars(node)]
        except _OpaqueWord:
            return None
        if not any(active and char in "*?[" for char, active in chars):
            return None
        text = "".join(char for char, _ in chars)
    if text.startswith(("/", "~")) or any(part and fnmatch.fnmatchcase("..", part) for part in text.split("/")):
        return text
    return None


def glob_base(glob: str) -> str | None:
    """The directory every match of ``glob`` lies in (``/srv/w/*.py`` → ``/srv/w``, ``*`` → ``.``),
    or None when a part after the first wildcard may climb out of it (``/srv/*/../x``, ``/srv/.*``:
    bash matches a leading ``.`` only when the pattern starts with one). Quoting is not known
    here: a quoted ``*`` counts as a wildcard, which only moves the base up."""
    parts = glob.split("/")
    first = next((i for i, part in enumerate(parts) if any(c in part for c in "*?[")), None)
    if first is None:
        return None
    climbs = (p for p in parts[first:] if p == ".." or (p[:1] not in {"*", "?"} and fnmatch.fnmatchcase("..", p)))
    if next(climbs, None) is not None:
        return None
    base = "/".join(parts[:first])
    return base or ("/" if glob.startswith("/") else ".")


def _unquoted(text: str) -> _Chars:
    found: _Chars = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text):
            if text[index + 1] != "\n":  # backslash-newline is a line continuation
                found.append((text[index + 1], False))
            index += 2
            continue
        found.append((char, True))
        index += 1
    return found


def _double_quoted(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\" and index + 1 < len(text) and text[index + 1] in '$`"\\\n':
            if text[index + 1] != "\n":
                out.append(text[index + 1])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out)


_SIMPLE_ESCAPES = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}
_HEX = frozenset("0123456789abcdefABCDEF")


def ansi_c(body: str) -> str:
    """Decode the inside of ``$'...'`` as bash does (a NUL ends the string)."""
    out: list[str] = []
    index = 0
    while index < len(body):
        char = body[index]
        index += 1
        if char != "\\" or index >= len(body):
            out.append(char)
            continue
        code = body[index]
        index += 1
        if code in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[code])
        elif code in "01234567":
            digits = code
            while len(digits) < 3 and index < len(body) and body[index] in "01234567":
                digits += body[index]
                index += 1
            out.append(chr(int(digits, 8) & 0xFF))
        elif code in "xuU":
            limit = {"x": 2, "u": 4, "U": 8}[code]
            digits = ""
            while len(digits) < limit and index < len(body) and body[index] in _HEX:
                digits += body[index]
                index += 1
            if not digits:
                out.append("\\" + code)
            else:
                value = int(digits, 16)
                out.append(chr(value) if value <= 0x10FFFF else "\ufffd")
        elif code == "c" and index < len(body):
            out.append(chr(ord(body[index]) & 0x1F))
            index += 1
        else:
            out.append("\\" + code)
    text = "".join(out)
    return text.split("\x00", 1)[0]


def _braces(chars: _Chars, count: list[int]) -> list[_Chars] | None:
    """Bash brace expansion over the active characters; None past :data:`MAX_WORDS`."""
    for start, (char, active) in enumerate(chars):
        if char != "{" or not active:
            continue
        parts = _brace_parts(chars, start)
        if parts is None:
            continue
        end, alternatives = parts
        results: list[_Chars] = []
        for alternative in alternatives:
            expanded = _braces(chars[:start] + alternative + chars[end + 1 :], count)
            if expanded is None:
                return None
            results.extend(expanded)
        return results
    count[0] += 1
    return [chars] if count[0] <= MAX_WORDS else None


def _brace_parts(chars: _Chars, start: int) -> tuple[int, list[_Chars]] | None:
    depth = 0
    commas: list[int] = []
    for index in range(start, len(chars)):
        char, active = chars[index]
        if not active:
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                inner = chars[start + 1 : index]
                if commas:
                    bounds = [start, *commas, index]
                    return index, [chars[a + 1 : b] for a, b in itertools.pairwise(bounds)]
                sequence = _sequence("".join(c for c, _ in inner)) if all(a for _, a in inner) else None
                return None if sequence is None else (index, [[(c, False) for c in item] for item in sequence])
        elif char == "," and depth == 1:
            commas.append(index)
    return None


def _sequence(text: str) -> list[str] | None:
    """``1..5``, ``a..e``, ``01..10..3`` (bash sequence expressions), or None."""
    parts = text.split("..")
    if len(parts) not in {2, 3}:
        return None
    step_text = parts[2] if len(parts) == 3 else "1"
    if not _is_int(step_text):
        return None
    step = abs(int(step_text)) or 1
    first, last = parts[0], parts[1]
    if _is_int(first) and _is_int(last):
        a, b = int(first), int(last)
        if abs(b - a) // step + 1 > MAX_WORDS:
            return [first] * (MAX_WORDS + 1)  # too many: the caller refuses
        width = (
            max(len(first), len(last)) if first.lstrip("-").startswith("0") or last.lstrip("-").startswith("0") else 0
        )
        numbers = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return [str(n).zfill(width) if width else str(n) for n in numbers]
    if len(first) == 1 and len(last) == 1 and first.isascii() and last.isascii() and first.isalpha() and last.isalpha():
        a, b = ord(first), ord(last)
        letters = range(a, b + (1 if b >= a else -1), step if b >= a else -step)
        return [chr(n) for n in letters]
    return None


def _is_int(text: str) -> bool:
    return text.lstrip("-").isdigit() and text.count("-") <= 1 and not text.endswith("-")
