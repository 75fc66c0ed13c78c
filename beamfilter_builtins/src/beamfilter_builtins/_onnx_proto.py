"""The few ONNX protobuf messages a feed-forward graph needs, written as bytes.

onnxruntime takes a model as serialized ``ModelProto`` bytes. The ``onnx`` package that
usually writes them costs seconds of import (it loads ``ml_dtypes``) for what is here a
handful of message kinds: nodes with integer, float and integer-list attributes, raw
tensors, and inputs and outputs typed with named dimensions. Field numbers are those of
``onnx/onnx.proto``; scalars are written unpacked, which every protobuf parser accepts.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["FLOAT", "INT64", "Message", "attribute", "graph", "model", "node", "tensor", "value_info"]

#: ``TensorProto.DataType`` codes.
FLOAT, INT64 = 1, 7
_ATTRIBUTE_FLOAT, _ATTRIBUTE_INT, _ATTRIBUTE_INTS = 1, 2, 7
_VARINT, _FIXED32, _BYTES = 0, 5, 2


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # negative int64s as two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# A message is a list of byte chunks, joined once at the end: the weights (tens of
# megabytes) are copied once, not once per level of nesting.
Message = list[bytes | memoryview]


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _int(field: int, value: int) -> Message:
    return [_key(field, _VARINT) + _varint(value)]


def _size(message: Message) -> int:
    return sum(len(chunk) if isinstance(chunk, bytes) else chunk.nbytes for chunk in message)


def _bytes(field: int, value: Message | str) -> Message:
    chunks: Message = [value.encode()] if isinstance(value, str) else value
    return [_key(field, _BYTES) + _varint(_size(chunks)), *chunks]


def _each(field: int, messages: Iterable[Message]) -> Message:
    return [chunk for message in messages for chunk in _bytes(field, message)]


def attribute(name: str, value: int | float | Sequence[int]) -> Message:
    """An ``AttributeProto``: an int, a float or a list of ints."""
    body: Message
    if isinstance(value, float):
        body, kind = [_key(2, _FIXED32) + struct.pack("<f", value)], _ATTRIBUTE_FLOAT
    elif isinstance(value, int):
        body, kind = _int(3, value), _ATTRIBUTE_INT
    else:
        body, kind = [chunk for item in value for chunk in _int(8, item)], _ATTRIBUTE_INTS
    return [*_bytes(1, name), *body, *_int(20, kind)]


def node(op_type: str, inputs: Sequence[str], outputs: Sequence[str], **attributes: Any) -> Message:
    """A ``NodeProto`` of the default domain."""
    return [
        *(chunk for name in inputs for chunk in _bytes(1, name)),
        *(chunk for name in outputs for chunk in _bytes(2, name)),
        *_bytes(4, op_type),
        *_each(5, (attribute(key, value) for key, value in attributes.items())),
    ]


def tensor(name: str, array: Any) -> Message:
    """A ``TensorProto`` holding a float32 or int64 numpy array as little-endian raw data
    (the array is referenced, not copied: keep it unchanged until :func:`model` returns)."""
    import numpy as np

    kind = {"float32": FLOAT, "int64": INT64}[str(array.dtype)]
    data = memoryview(np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).data).cast("B")
    dims = [chunk for size in array.shape for chunk in _int(1, size)]
    return [*dims, *_int(2, kind), *_bytes(8, name), *_bytes(9, [data])]


def value_info(name: str, element_type: int, dims: Sequence[str | int]) -> Message:
    """A ``ValueInfoProto`` of a tensor whose dimensions are sizes or names."""
    shape = _each(1, (_int(1, dim) if isinstance(dim, int) else _bytes(2, dim) for dim in dims))
    tensor_type = [*_int(1, element_type), *_bytes(2, shape)]
    return [*_bytes(1, name), *_bytes(2, _bytes(1, tensor_type))]


def graph(
    name: str,
    nodes: Sequence[Message],
    initializers: Sequence[Message],
    inputs: Sequence[Message],
    outputs: Sequence[Message],
) -> Message:
    """A ``GraphProto``."""
    return [*_each(1, nodes), *_bytes(2, name), *_each(5, initializers), *_each(11, inputs), *_each(12, outputs)]


def model(graph_message: Message, *, opset: int, ir_version: int = 8, producer: str = "beamfilter") -> bytes:
    """A serialized ``ModelProto`` of one graph importing the default operator set ``opset``."""
    opset_import = [*_bytes(1, ""), *_int(2, opset)]
    parts = [*_int(1, ir_version), *_bytes(2, producer), *_bytes(7, graph_message), *_bytes(8, opset_import)]
    return b"".join(parts)
