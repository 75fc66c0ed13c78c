"""beamfilter's AWS event-stream frame decoder against botocore's parser, its oracle.

Random frames with every header type, cut anywhere, truncated, with a byte flipped, with
random header blocks and random prelude lengths: the decoder gives botocore's
``EventStreamBuffer``'s messages, or refuses where botocore refuses. Where botocore is lax
(a header running past its block, a total length shorter than its parts, a frame over
16 MiB) the decoder refuses too, and each such attack has its exact error here.
"""

from __future__ import annotations

import itertools
import struct
import zlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.eventstream import EventStreamBuffer
from core.models._mock import Server, response
from core.models._provider_captures import converse_stream, event_frame
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from beamfilter_core import BedrockChatModel, ChatRequest, Message
from beamfilter_core._models._eventstream import MAX_FRAME, MAX_HEADERS, EventStreamDecoder, parse_headers
from beamfilter_core.errors import IncompleteStreamError, ProviderResponseError

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PREFIX = "The event stream sent a broken frame at byte"
# header type -> how a value of it is packed (0 and 1 carry none)
_PACK = {2: ">b", 3: ">h", 4: ">i", 5: ">q", 8: ">q"}


def header(name: bytes, kind: int, value: Any = None) -> bytes:
    """One encoded header: name length, name, type byte, value."""
    head = bytes([len(name)]) + name + bytes([kind])
    if kind in _PACK:
        return head + struct.pack(_PACK[kind], value)
    if kind == 6:
        return head + struct.pack(">H", len(value)) + value
    if kind == 7:
        return head + struct.pack(">H", len(value.encode())) + value.encode()
    if kind == 9:
        return head + value
    return head


def frame(block: bytes, payload: bytes, *, total: int | None = None, length: int | None = None) -> bytes:
    """A frame with both CRCs right, whatever its declared ``total`` and ``length``."""
    declared = 16 + len(block) + len(payload) if total is None else total
    prelude = struct.pack(">II", declared, len(block) if length is None else length)
    message = prelude + struct.pack(">I", zlib.crc32(prelude)) + block + payload
    return message + struct.pack(">I", zlib.crc32(message))


def cut(data: bytes, points: Iterable[int]) -> list[bytes]:
    edges = sorted({0, len(data), *(p % (len(data) + 1) for p in points)})
    return [data[a:b] for a, b in itertools.pairwise(edges)]


def botocore_reads(parts: list[bytes]) -> tuple[list[tuple[dict[str, Any], bytes]], bool]:
    """botocore's messages, and whether it refused the stream (any exception)."""
    buffer = EventStreamBuffer()
    out: list[tuple[dict[str, Any], bytes]] = []
    try:
        for part in parts:
            buffer.add_data(part)
            out += [(m.headers, m.payload) for m in buffer]
    except Exception:  # noqa: BLE001 - any exception of botocore's is a refusal
        return out, True
    return out, False


def our_reads(parts: list[bytes]) -> tuple[list[tuple[dict[str, Any], bytes]], str | None, int]:
    """Our messages, the refusal (if any) and the bytes left pending."""
    decoder = EventStreamDecoder()
    out: list[tuple[dict[str, Any], bytes]] = []
    try:
        for part in parts:
            out += [(dict(h), p) for h, p in decoder.feed(part)]
    except ProviderResponseError as exc:
        return out, str(exc), decoder.pending
    return out, None, decoder.pending


_VALUES: dict[int, st.SearchStrategy[Any]] = {
    0: st.none(),
    1: st.none(),
    2: st.integers(-(2**7), 2**7 - 1),
    3: st.integers(-(2**15), 2**15 - 1),
    4: st.integers(-(2**31), 2**31 - 1),
    5: st.integers(-(2**63), 2**63 - 1),
    6: st.binary(max_size=40),
    7: st.text(max_size=20),
    8: st.integers(-(2**63), 2**63 - 1),
    9: st.binary(min_size=16, max_size=16),
}
headers_st = st.dictionaries(
    st.text(max_size=12).map(str.encode),
    st.integers(0, 9).flatmap(lambda kind: st.tuples(st.just(kind), _VALUES[kind])),
    max_size=5,
)
frames_st = st.lists(st.tuples(headers_st, st.binary(max_size=300)), min_size=1, max_size=6)


def encode(frames: list[tuple[dict[bytes, tuple[int, Any]], bytes]]) -> bytes:
    return b"".join(frame(b"".join(header(n, k, v) for n, (k, v) in hs.items()), p) for hs, p in frames)


@SETTINGS
@given(frames_st, st.lists(st.integers(0, 10_000), max_size=8))
def test_valid_frames_cut_anywhere_decode_as_botocore_decodes_them(frames: Any, points: list[int]) -> None:
    data = encode(frames)
    parts = cut(data, points)
    theirs, refused = botocore_reads(parts)
    ours, error, pending = our_reads(parts)
    assert (ours, error, pending) == (theirs, None, 0)
    assert not refused
    assert len(ours) == len(frames)


@SETTINGS
@given(frames_st, st.integers(0, 10**9), st.integers(1, 255), st.lists(st.integers(0, 10_000), max_size=4))
def test_a_flipped_byte_anywhere_is_refused_by_both_after_the_same_messages(
    frames: Any, where: int, mask: int, points: list[int]
) -> None:
    data = bytearray(encode(frames))
    data[where % len(data)] ^= mask
    parts = cut(bytes(data), points)
    theirs, refused = botocore_reads(parts)
    ours, error, _ = our_reads(parts)
    assert refused
    assert error is not None
    assert error.startswith(PREFIX)
    assert "checksum does not match" in error
    assert ours == theirs


@SETTINGS
@given(frames_st, st.integers(0, 10**9))
def test_a_truncated_stream_gives_the_whole_frames_and_keeps_the_rest_pending(frames: Any, at: int) -> None:
    data = encode(frames)
    end = at % (len(data) + 1)
    theirs, refused = botocore_reads([data[:end]])
    ours, error, pending = our_reads([data[:end]])
    assert (ours, error, refused) == (theirs, None, False)
    assert pending == end - sum(len(encode([f])) for f in frames[: len(ours)])


@SETTINGS
@given(st.binary(max_size=60), st.binary(max_size=20))
def test_random_header_blocks_are_read_as_botocore_reads_them_or_refused(block: bytes, payload: bytes) -> None:
    theirs, refused = botocore_reads([frame(block, payload)])
    ours, error, _ = our_reads([frame(block, payload)])
    if refused:
        assert error is not None  # botocore refuses: so do we
    if error is None:
        assert ours == theirs
    else:  # a header block botocore reads past its end, or refuses: ours names the header fault
        assert error.startswith(f"{PREFIX} 0: ")
        assert "header" in error


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.integers(0, 2**32 - 1), st.binary(max_size=40))
def test_declared_lengths_are_checked_from_the_prelude_alone(total: int, length: int, rest: bytes) -> None:
    prelude = struct.pack(">II", total, length)
    data = prelude + struct.pack(">I", zlib.crc32(prelude)) + rest
    _, refused = botocore_reads([data])
    ours, error, pending = our_reads([data])
    bad = length > MAX_HEADERS or total < length + 16 or total > MAX_FRAME
    if length > MAX_HEADERS or total - length - 16 > 24 * 1024 * 1024:
        assert refused  # the bounds botocore has
    if bad:
        assert error is not None
        assert error.startswith(f"{PREFIX} 0: ")
    elif total > len(data):
        assert (ours, error, pending) == ([], None, len(data))  # a frame still arriving


# -- each attack, its exact error ---------------------------------------------------------

START = event_frame("messageStart", {"role": "assistant"})
GOOD = event_frame("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "hi"}})


def refusal(data: bytes) -> str:
    decoder = EventStreamDecoder()
    with pytest.raises(ProviderResponseError) as caught:
        decoder.feed(data)
    return str(caught.value)


def test_a_bad_prelude_checksum_names_the_frame_and_both_sums() -> None:
    damaged = GOOD[:8] + struct.pack(">I", zlib.crc32(GOOD[:8]) ^ 0xFF) + GOOD[12:]
    crc = zlib.crc32(GOOD[:8])
    assert refusal(GOOD + damaged) == (
        f"{PREFIX} {len(GOOD)}: the prelude checksum does not match "
        f"(expected 0x{crc ^ 0xFF:08x}, computed 0x{crc:08x})."
    )


def test_a_bad_message_checksum_names_both_sums() -> None:
    damaged = GOOD[:20] + bytes([GOOD[20] ^ 4]) + GOOD[21:]
    computed = zlib.crc32(damaged[:-4])
    expected = int.from_bytes(GOOD[-4:], "big")
    assert refusal(damaged) == (
        f"{PREFIX} 0: the message checksum does not match (expected 0x{expected:08x}, computed 0x{computed:08x})."
    )


def test_a_total_length_shorter_than_its_headers_is_refused() -> None:
    assert refusal(frame(b"", b"", total=50, length=100)) == (
        f"{PREFIX} 0: its total length 50 is less than its 100 bytes of headers plus 16."
    )
    assert refusal(frame(b"", b"", total=15, length=0)) == (
        f"{PREFIX} 0: its total length 15 is less than its 0 bytes of headers plus 16."
    )


def test_a_header_block_over_128_kib_is_refused() -> None:
    assert refusal(frame(b"", b"", total=MAX_HEADERS + 17, length=MAX_HEADERS + 1)) == (
        f"{PREFIX} 0: it declares 131073 bytes of headers, over the 131072 allowed."
    )


def test_a_frame_over_16_mib_is_refused_from_its_prelude_before_its_body_is_read() -> None:
    decoder = EventStreamDecoder()
    huge = frame(b"", b"", total=MAX_FRAME + 1)
    with pytest.raises(ProviderResponseError) as caught:
        decoder.feed(huge[:12])  # 12 bytes in: nothing is buffered waiting for 16 MiB
    assert str(caught.value) == f"{PREFIX} 0: it declares 16777217 bytes, over the 16777216 a frame may have."
    assert len(EventStreamDecoder().feed(frame(b"", b"x" * (MAX_FRAME - 16)))) == 1  # exactly 16 MiB is read


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (header(b"a", 12), "header 'a' has the unknown value type 12 (known: 0 to 9)"),
        (header(b"a", 0) + header(b"a", 1), "the header 'a' appears twice"),
        (b"\x02\xff\xfe\x00", "the header name b'\\xff\\xfe' is not UTF-8"),
        (b"\x01s\x07\x00\x02a\xff", "the string value of header 's' is not UTF-8"),
        (b"\x05ab", "a header name runs past the 3-byte header block"),
        (b"\x01a", "a header name runs past the 2-byte header block"),
        (header(b"n", 4, 7)[:-1], "the value of header 'n' runs past the 6-byte header block"),
        (header(b"u", 9, b"0" * 16)[:-1], "the value of header 'u' runs past the 18-byte header block"),
        (header(b"s", 7, "abc")[:-1], "the value of header 's' runs past the 7-byte header block"),
        (b"\x01s\x07\x00", "the value of header 's' runs past the 4-byte header block"),
    ],
)
def test_malformed_headers_are_refused_by_name(block: bytes, problem: str) -> None:
    assert refusal(GOOD + frame(block, b"{}")) == f"{PREFIX} {len(GOOD)}: {problem}."
    with pytest.raises(ProviderResponseError):
        parse_headers(block)


def test_header_values_of_every_type_and_read_only_shared_mappings() -> None:
    block = b"".join(
        [
            header(b"t", 0),
            header(b"f", 1),
            header(b"i8", 2, -3),
            header(b"i16", 3, -300),
            header(b"i32", 4, 70_000),
            header(b"i64", 5, -(2**40)),
            header(b"raw", 6, b"\x00\x01"),
            header(b"s", 7, "✓ ok"),
            header(b"ts", 8, 1_700_000_000_000),
            header(b"id", 9, bytes(range(16))),
        ]
    )
    decoder = EventStreamDecoder()
    (first, one), (second, two) = decoder.feed(frame(block, b"1") + frame(block, b"2"))
    assert dict(first) == {
        "t": True,
        "f": False,
        "i8": -3,
        "i16": -300,
        "i32": 70_000,
        "i64": -(2**40),
        "raw": b"\x00\x01",
        "s": "✓ ok",
        "ts": 1_700_000_000_000,
        "id": bytes(range(16)),
    }
    assert (first is second, one, two) == (True, b"1", b"2")  # one parse for a repeated block
    with pytest.raises(TypeError):
        first["t"] = False  # type: ignore[index]


def test_more_distinct_header_blocks_than_remembered_still_decode() -> None:
    data = b"".join(frame(header(f"h{n}".encode(), 4, n), b"") for n in range(40))
    decoded = EventStreamDecoder().feed(data)
    assert [dict(h) for h, _ in decoded] == [{f"h{n}": n} for n in range(40)]


def test_a_bytearray_or_memoryview_read_is_taken_as_bytes() -> None:
    decoder = EventStreamDecoder()
    assert decoder.feed(bytearray(GOOD[:30])) == []
    ((headers, payload),) = decoder.feed(memoryview(GOOD[30:]))
    text = b'{"contentBlockIndex":0,"delta":{"text":"hi"}}'
    assert (headers[":event-type"], payload, decoder.pending) == ("contentBlockDelta", text, 0)


# -- through the model: typed errors, retried as a broken stream --------------------------

REQUEST = ChatRequest((Message.user("hi"),))


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_BEARER_TOKEN_BEDROCK", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")


async def stream(body: bytes) -> tuple[BaseException, int]:
    server = Server([lambda _: response(200, body, headers={"content-type": "application/vnd.amazon.eventstream"})])
    model = BedrockChatModel("m", region="us-east-1", max_retries=1, transport=httpx.MockTransport(server.handle))
    async with model:
        with pytest.raises(ProviderResponseError) as caught:
            await model.stream(REQUEST, lambda _: None)
    return caught.value, len(server.requests)


@pytest.mark.anyio
@pytest.mark.usefixtures("aws", "waits")
async def test_through_the_model_a_forged_length_is_a_typed_error_after_one_retry() -> None:
    error, calls = await stream(START + frame(b"", b"", total=MAX_FRAME * 2))
    assert (type(error), str(error), calls) == (
        ProviderResponseError,
        f"{PREFIX} {len(START)}: it declares 33554432 bytes, over the 16777216 a frame may have.",
        2,
    )


@pytest.mark.anyio
@pytest.mark.usefixtures("aws", "waits")
async def test_through_the_model_a_stream_cut_mid_frame_is_incomplete() -> None:
    body = converse_stream("bedrock_converse_stream_text.events.json")
    error, calls = await stream(body[:-10])
    frames = EventStreamDecoder()
    frames.feed(body[:-10])
    assert (type(error), calls) == (IncompleteStreamError, 1)  # text reached the caller: not retried
    assert str(error) == f"The event stream ended inside a frame ({frames.pending} bytes of it received)."


@pytest.mark.anyio
@pytest.mark.usefixtures("aws", "waits")
async def test_through_the_model_a_length_promising_more_than_is_sent_is_incomplete() -> None:
    lying = frame(b"", b"{}", total=4096)  # says 4 KiB, sends 18 bytes, then the stream ends
    error, calls = await stream(START + lying)
    assert (type(error), str(error), calls) == (
        IncompleteStreamError,
        f"The event stream ended inside a frame ({len(lying)} bytes of it received).",
        2,
    )


def test_headers_are_a_mapping() -> None:
    ((headers, _),) = EventStreamDecoder().feed(GOOD)
    assert isinstance(headers, Mapping)


def test_a_large_frame_in_small_reads_is_joined_once_not_at_every_read() -> None:
    big = frame(header(b":event-type", 7, "chunk"), b"z" * (4 * 1024 * 1024))
    decoder = EventStreamDecoder()
    reads = [big[n : n + 1024] for n in range(0, len(big), 1024)]
    for part in reads[:-1]:
        assert decoder.feed(part) == []
    assert (len(decoder._parts), decoder.pending) == (len(reads) - 1, len(big) - len(reads[-1]))
    ((headers, payload),) = decoder.feed(reads[-1])
    assert (dict(headers), len(payload), decoder.pending, decoder._parts) == ({":event-type": "chunk"}, 4 << 20, 0, [])
