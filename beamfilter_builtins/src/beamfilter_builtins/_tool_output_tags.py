"""The ``<tool_output>`` wrapper's tags found however they are spelt, and escaped.

A model reads ``</tool_out`` + U+200B + ``put>``, the same tag in fullwidth letters, or
with a Cyrillic ``o`` as the closing tag of the wrapper, so the tag is searched in a
*skeleton* of the text: format characters (zero-width spaces and joiners, word joiner,
BOM, bidi controls, every other ``Cf``), combining marks, other controls and invisible
fillers removed; compatibility forms folded (NFKD: fullwidth, small and mathematical
letters); look-alikes of the tag's letters and of ``<``, ``/``, ``>`` mapped to them;
case folded. Each match is escaped in the original text: its ``<`` (or look-alike)
becomes ``&lt;`` and the ``>`` that ends it ``&gt;``.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["LOOKALIKES", "escape_wrapper_tags", "skeleton"]

#: Characters that look like a letter of ``tool_output`` or like ``<``, ``/``, ``>``, ``_``
#: and that NFKD does not fold (Cyrillic, Greek, Armenian, small capitals, arrows, slashes).
LOOKALIKES: dict[str, str] = {
    **dict.fromkeys("\u2039\u02c2\u1438\u3008\u27e8\u3008\u276e\u29fc\u22b0\u227a<", "<"),
    **dict.fromkeys("\u203a\u02c3\u1433\u3009\u27e9\u3009\u276f\u29fd\u22b1\u227b>", ">"),
    **dict.fromkeys("\u2215\u2044\u2571\u29f8\u141f\u3033\u2f03\u4e3f", "/"),
    **dict.fromkeys("\u2017\u02cd\uff3f_", "_"),
    **dict.fromkeys("\u043e\u03bf\u0585\u1d0f\u03c3\u09e6\u0b66\u0c66\u0c02\u0d20\u101d\u0e50\u0ed0\u10ff", "o"),
    **dict.fromkeys("\u03c4\u0442\u1d1b\u019a\u0167", "t"),
    **dict.fromkeys("\u04cf\u01c0\u05c0\u05d5|\u0131\u0269\u03b9\u0456l", "l"),
    **dict.fromkeys("\u03c5\u057d\u1d1c\u028b\u03bc", "u"),
    **dict.fromkeys("\u0440\u03c1\u1d18\u00fe", "p"),
}
# invisible characters outside the Cf category (Hangul fillers, Mongolian, braille blank)
_INVISIBLE = frozenset("\u115f\u1160\u3164\uffa0\u2800\u034f\u17b4\u17b5\u180b\u180c\u180d\u180e\u180f")
_SPACE_CONTROLS = frozenset("\t\n\r\v\f\x1c\x1d\x1e\x1f\x85")
_CACHE_LIMIT = 65_536


class _Table(dict[int, str]):
    """A ``str.translate`` table computed per character on first use."""

    def __missing__(self, code: int) -> str:
        piece = _piece(chr(code))
        if len(self) < _CACHE_LIMIT:
            self[code] = piece
        return piece


def _piece(char: str) -> str:
    if char in _SPACE_CONTROLS:
        return " "
    if char in _INVISIBLE:
        return ""
    category = unicodedata.category(char)
    if category in {"Cf", "Cc", "Mn", "Me", "Cs", "Co", "Cn", "Zl", "Zp"}:
        return "" if category not in {"Zl", "Zp"} else " "
    if category == "Zs":
        return " "
    out = []
    for part in unicodedata.normalize("NFKD", char):
        if unicodedata.category(part) in {"Mn", "Me", "Cf"}:
            continue
        part = LOOKALIKES.get(part, part)
        out.append(part.casefold())
    return "".join(LOOKALIKES.get(p, p) for p in "".join(out))


_TABLE = _Table()
# the wrapper's tag: "<", maybe "/", "tool", maybe "_", "-" or blanks, "output", then a blank,
# "/", ">" or the end of the text ("<tool_outputs>" is another tag)
_SKELETON_TAG = re.compile(r"<\s*/?\s*tool[\s_-]*output(?=[\s/>]|\Z)")


def skeleton(text: str) -> str:
    """``text`` as the tag search sees it (see the module docs)."""
    if text.isascii():
        return text.lower().translate(_ASCII_SPACES)
    return text.translate(_TABLE)


# ASCII text: controls that are not blanks removed, "|" read as "l" (as in non-ASCII text)
_ASCII_SPACES = str.maketrans(
    {chr(c): " " if chr(c) in _SPACE_CONTROLS else "" for c in [*range(32), 127]} | {"|": "l"}
)


def escape_wrapper_tags(text: str) -> str:
    """``text`` with every spelling of ``<tool_output>`` and ``</tool_output>`` escaped."""
    if "<" not in text and text.isascii():
        return text
    folded = skeleton(text)
    matches = list(_SKELETON_TAG.finditer(folded))
    if not matches:
        return text
    owner = _owners(text)  # skeleton position -> index in text
    replaced: dict[int, str] = {}
    for match in matches:
        replaced[owner[match.start()]] = "&lt;"
        end = match.end()
        close = folded.find(">", end)
        if close != -1 and "<" not in folded[end:close]:
            replaced[owner[close]] = "&gt;"
    return "".join(replaced.get(index, char) for index, char in enumerate(text))


def _owners(text: str) -> list[int]:
    pieces = [skeleton(char) for char in text] if text.isascii() else [_TABLE[ord(char)] for char in text]
    return [index for index, piece in enumerate(pieces) for _ in piece]
