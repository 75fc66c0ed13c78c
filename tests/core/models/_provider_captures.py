"""The recorded wire captures of the native providers (``provider_captures/``).

Most are copied from published recordings of the live APIs or from the official docs'
examples; ``provider_captures/README.md`` names the source of each file, and which ones
are hand-written and why. ``.http`` files are a status line, headers, a blank line and the body;
``.events.json`` files hold the events of a binary AWS event stream, framed by
:func:`eventstream_frame` exactly as the service frames them.
"""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path
from typing import Any

PROVIDER_CAPTURES = Path(__file__).parent / "provider_captures"


def load(name: str) -> tuple[int, dict[str, str], bytes]:
    """A ``.http`` capture as (status, headers, body)."""
    raw = (PROVIDER_CAPTURES / name).read_bytes()
    head, _, body = raw.partition(b"\n\n")
    lines = head.decode().splitlines()
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        key, _, value = line.partition(":")
        headers[key.strip().lower()] = value.strip()
    return status, headers, body


def _header(name: str, value: str) -> bytes:
    encoded = value.encode()
    return bytes([len(name)]) + name.encode() + b"\x07" + struct.pack(">H", len(encoded)) + encoded


def eventstream_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream message: prelude, prelude CRC, string headers, payload, CRC."""
    head = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(head) + len(payload) + 4
    prelude = struct.pack(">II", total, len(head))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + head + payload
    return message + struct.pack(">I", zlib.crc32(message))


def event_frame(event_type: str, payload: Any) -> bytes:
    """A ConverseStream event frame (``:message-type`` event)."""
    headers = {":event-type": event_type, ":content-type": "application/json", ":message-type": "event"}
    return eventstream_frame(headers, json.dumps(payload, separators=(",", ":")).encode())


def exception_frame(exception_type: str, message: str) -> bytes:
    """A ConverseStream exception frame (``:message-type`` exception)."""
    headers = {":exception-type": exception_type, ":content-type": "application/json", ":message-type": "exception"}
    return eventstream_frame(headers, json.dumps({"message": message}).encode())


def converse_stream(name: str) -> bytes:
    """The binary body of a ``.events.json`` capture: ``[[event type, payload], ...]``."""
    events = json.loads((PROVIDER_CAPTURES / name).read_text())
    return b"".join(event_frame(kind, payload) for kind, payload in events)
