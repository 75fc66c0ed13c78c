"""The AWS event-stream framing of Bedrock's ConverseStream: bytes in, messages out.

A frame is a 12-byte prelude (total length and headers length, big-endian uint32s, then the
CRC32 of those 8 bytes), the headers, the payload, and the CRC32 of everything before it.
Each header is a 1-byte name length, the UTF-8 name, a 1-byte type and the value: 0 true,
1 false, 2/3/4/5 int8/16/32/64, 6 bytes and 7 UTF-8 string (2-byte length first),
8 a timestamp (int64 milliseconds), 9 a 16-byte UUID.

This decoder is beamfilter's own, not botocore's ``EventStreamBuffer``: botocore's parser
re-slices its whole buffer after every message and parses every header block in Python
calls; it is about 40 % of boto3's ConverseStream decoding, and with it a streamed call of
beamfilter's measured 3.5-3.7x boto3, short of the 5x goal (bench/RESULTS.md). The checks
are botocore's (both CRCs, the 128 KiB header bound), made in the same order, and
botocore's parser is the oracle of a differential test
(tests/core/models/test_bedrock_eventstream.py). Where botocore is lax it is stricter: a
header that runs past its block, a total length shorter than prelude + headers + CRC, or a
frame over 16 MiB (the event-stream limit of AWS's own C runtime) is refused.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any
from zlib import crc32

from ..errors import ProviderResponseError

__all__ = ["MAX_FRAME", "MAX_HEADERS", "EventStreamDecoder"]

#: The largest frame accepted: AWS's event-stream limit of a whole message (16 MiB).
MAX_FRAME = 16 * 1024 * 1024
#: The largest header block accepted (botocore's and AWS's limit, 128 KiB).
MAX_HEADERS = 128 * 1024
_PRELUDE = 12
_OVERHEAD = 16  # the prelude and the message CRC around the headers and payload
_prelude = struct.Struct(">III").unpack_from
_uint32 = struct.Struct(">I").unpack_from
_uint16 = struct.Struct(">H").unpack_from
# header type -> (struct format, size) of the fixed-size values; 8 is a timestamp
_FIXED: dict[int, struct.Struct] = {2: struct.Struct(">b"), 3: struct.Struct(">h"), 4: struct.Struct(">i")}
_FIXED |= {5: struct.Struct(">q"), 8: struct.Struct(">q")}
_KNOWN_BLOCKS = 32  # a stream repeats a handful of header blocks; each is parsed once


def _broken(offset: int, problem: str) -> ProviderResponseError:
    msg = f"The event stream sent a broken frame at byte {offset}: {problem}."
    return ProviderResponseError(msg)


def parse_headers(block: bytes, offset: int = 0) -> dict[str, Any]:
    """One frame's header block as a dict; a header that does not fit its block, a name
    that is not UTF-8, an unknown type or a repeated name is a ProviderResponseError."""
    headers: dict[str, Any] = {}
    size = len(block)
    pos = 0
    while pos < size:
        end = pos + 1 + block[pos]
        if end >= size:  # the name, and at least the type byte after it
            raise _broken(offset, f"a header name runs past the {size}-byte header block")
        try:
            name = block[pos + 1 : end].decode()
        except UnicodeDecodeError:
            raise _broken(offset, f"the header name {block[pos + 1 : end]!r} is not UTF-8") from None
        kind = block[end]
        pos = end + 1
        value: Any
        if kind == 0 or kind == 1:
            value = kind == 0
        elif kind in _FIXED:
            unpack = _FIXED[kind]
            if pos + unpack.size > size:
                raise _broken(offset, f"the value of header {name!r} runs past the {size}-byte header block")
            value = unpack.unpack_from(block, pos)[0]
            pos += unpack.size
        elif kind == 9:
            value = block[pos : pos + 16]
            pos += 16
        elif kind == 6 or kind == 7:
            length = _uint16(block, pos)[0] if pos + 2 <= size else size
            value = block[pos + 2 : pos + 2 + length]
            pos += 2 + length
            if kind == 7 and pos <= size:
                try:
                    value = value.decode()
                except UnicodeDecodeError:
                    raise _broken(offset, f"the string value of header {name!r} is not UTF-8") from None
        else:
            raise _broken(offset, f"header {name!r} has the unknown value type {kind} (known: 0 to 9)")
        if pos > size:
            raise _broken(offset, f"the value of header {name!r} runs past the {size}-byte header block")
        if name in headers:
            raise _broken(offset, f"the header {name!r} appears twice")
        headers[name] = value
    return headers


class EventStreamDecoder:
    """AWS event-stream frames in, ``(headers, payload)`` messages out.

    :meth:`feed` takes the bytes as they arrive, cut anywhere, and returns the messages
    they complete. A damaged or oversized frame is a ProviderResponseError naming the byte
    where it starts and what is wrong; the decoder is not to be fed after one. The header
    mappings are read-only and shared between the frames that repeat a header block.
    """

    __slots__ = ("_known", "_need", "_parts", "fed", "used")

    def __init__(self) -> None:
        self._parts: list[bytes] = []  # the reads not yet decoded
        self._need = _PRELUDE  # bytes they must hold before a frame can be read
        self._known: dict[bytes, Mapping[str, Any]] = {}
        self.fed = 0
        self.used = 0

    def feed(self, data: bytes) -> list[tuple[Mapping[str, Any], bytes]]:
        """The messages completed by ``data``."""
        self.fed += len(data)
        self._parts.append(bytes(data))
        if self.fed - self.used < self._need:
            return []  # a frame still arriving: its reads are joined once, when it is whole
        parts = self._parts
        buffer = parts[0] if len(parts) == 1 else b"".join(parts)
        known = self._known
        out: list[tuple[Mapping[str, Any], bytes]] = []
        pos, end, need = 0, len(buffer), _PRELUDE
        while end - pos >= _PRELUDE:
            total, length, checksum = _prelude(buffer, pos)
            # the prelude first, as soon as it is here: its lengths are not trusted before
            computed = crc32(buffer[pos : pos + 8])
            if computed != checksum:
                got = f"expected 0x{checksum:08x}, computed 0x{computed:08x}"
                raise _broken(self.used + pos, f"the prelude checksum does not match ({got})")
            if length > MAX_HEADERS:
                raise _broken(self.used + pos, f"it declares {length} bytes of headers, over the {MAX_HEADERS} allowed")
            if total < length + _OVERHEAD:
                problem = f"its total length {total} is less than its {length} bytes of headers plus {_OVERHEAD}"
                raise _broken(self.used + pos, problem)
            if total > MAX_FRAME:
                raise _broken(self.used + pos, f"it declares {total} bytes, over the {MAX_FRAME} a frame may have")
            if end - pos < total:
                need = total
                break
            stop = pos + total - 4
            computed = crc32(buffer[pos:stop])
            if computed != _uint32(buffer, stop)[0]:
                got = f"expected 0x{_uint32(buffer, stop)[0]:08x}, computed 0x{computed:08x}"
                raise _broken(self.used + pos, f"the message checksum does not match ({got})")
            block = buffer[pos + _PRELUDE : pos + _PRELUDE + length]
            headers = known.get(block)
            if headers is None:
                headers = MappingProxyType(parse_headers(block, self.used + pos))
                if len(known) < _KNOWN_BLOCKS:
                    known[block] = headers
            out.append((headers, buffer[pos + _PRELUDE + length : stop]))
            pos += total
        self._parts = [buffer[pos:]] if pos < end else []
        self._need = need
        self.used += pos
        return out

    @property
    def pending(self) -> int:
        """Bytes received that do not yet make a whole frame."""
        return self.fed - self.used
