"""Where the time of a 10k-token Bedrock ConverseStream goes, and why beamfilter reads
the AWS event-stream frames with a decoder of its own instead of botocore's parser.

    .venv/bin/python bench/bedrock_frame_split.py [--rounds 7] [--tokens 10000]

Best of ``rounds`` CPU times over the stream of ``bench_provider_decode.py``'s Bedrock row,
in the same 16 KiB reads:

- the row's two sides (``BedrockChatModel.stream``; boto3's ``converse_stream``), and the
  same model reading its frames through botocore's buffer (as beamfilter did before);
- the frames alone: botocore's ``EventStreamBuffer`` as boto3 runs it, the same with each
  distinct header block parsed once (what beamfilter did while it used botocore's parser),
  and beamfilter's ``_eventstream.EventStreamDecoder``;
- beamfilter's own work after the frames: JSON and ``ConverseStreamAccumulator``.

The ceiling is boto3's time over a floor of what beamfilter must do with botocore's
parser (its buffer with cached headers, plus decoding each payload's JSON and nothing
else): under 5, the goal of 5x cannot be met while botocore parses the frames.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provider_decode_aws_openai import bedrock_sides, converse_stream
from provider_decode_common import best, reads

from beamfilter_core._models._bedrock_wire import ConverseStreamAccumulator
from beamfilter_core._models._eventstream import EventStreamDecoder


class _OnceParsed:
    """botocore's header parser behind a cache of the header blocks already seen."""

    def __init__(self, parser: Any) -> None:
        self.parser, self.known = parser, {}

    def parse(self, data: bytes) -> Any:
        if data not in self.known:
            self.known[data] = self.parser.parse(data)
        return self.known[data]


class BotocoreDecoder:
    """The decoder beamfilter had before: botocore's buffer, header blocks parsed once."""

    def __init__(self) -> None:
        from botocore.eventstream import EventStreamBuffer

        self.buffer = EventStreamBuffer()
        self.buffer._header_parser = _OnceParsed(self.buffer._header_parser)
        self.pending = 0

    def feed(self, data: bytes) -> list[tuple[Any, bytes]]:
        self.buffer.add_data(data)
        return [(m.headers, m.payload) for m in self.buffer]


def with_botocore(run: Any) -> Any:
    """``run`` with BedrockChatModel reading its frames through :class:`BotocoreDecoder`."""
    from beamfilter_core._models import _bedrock

    def swapped() -> None:
        _bedrock.EventStreamDecoder = BotocoreDecoder  # type: ignore[misc,assignment]
        try:
            run()
        finally:
            _bedrock.EventStreamDecoder = EventStreamDecoder  # type: ignore[misc]

    return swapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=10_000)
    args = parser.parse_args(argv)
    from botocore.eventstream import EventStreamBuffer

    decode = json.JSONDecoder().decode

    body = converse_stream(args.tokens)
    messages = [m for part in [body] for m in EventStreamDecoder().feed(part)]

    def botocore_frames(cached: bool) -> None:
        buffer = EventStreamBuffer()
        if cached:
            buffer._header_parser = _OnceParsed(buffer._header_parser)
        for part in reads(body):
            buffer.add_data(part)
            for _ in buffer:
                pass

    def our_frames() -> None:
        decoder = EventStreamDecoder()
        for part in reads(body):
            decoder.feed(part)

    def json_only() -> None:
        for _, payload in messages:
            decode(payload.decode())

    def our_mapping() -> None:
        accumulator = ConverseStreamAccumulator(lambda _: None)
        for headers, payload in messages:
            accumulator.feed(headers[":event-type"], payload)
        accumulator.result(chunks=len(messages))

    ours, sdk = bedrock_sides(args.tokens)
    rows = {
        "beamfilter: BedrockChatModel.stream": ours,
        "boto3: converse_stream, stream iterated": sdk,
        "the same model, frames by botocore's buffer": with_botocore(ours),
        "frames: botocore EventStreamBuffer": lambda: botocore_frames(False),
        "frames: the same, header blocks parsed once": lambda: botocore_frames(True),
        "frames: beamfilter _eventstream": our_frames,
        "beamfilter: JSON + accumulator": our_mapping,
        "JSON alone (each payload decoded)": json_only,
    }
    times = {name: best(args.rounds, run) for name, run in rows.items()}
    print(f"{len(body):,} bytes, {len(messages):,} frames, best of {args.rounds} (CPU ms)")
    for name, seconds in times.items():
        print(f"{name:46s} {seconds * 1000:8.1f}")
    boto3 = times["boto3: converse_stream, stream iterated"]
    buffer = times["frames: the same, header blocks parsed once"]
    floor = buffer + times["JSON alone (each payload decoded)"]
    print(f"botocore's frames (cached headers) / boto3:        {buffer / boto3:6.1%} (a fifth is 20%)")
    print(f"ceiling with botocore's parser: boto3 / (its frames + JSON alone) = {boto3 / floor:.1f}x")
    before = times["the same model, frames by botocore's buffer"]
    print(f"row with botocore's buffer: {boto3 / before:.1f}x")
    print(f"row now: {boto3 / times['beamfilter: BedrockChatModel.stream']:.1f}x")


if __name__ == "__main__":
    main()
