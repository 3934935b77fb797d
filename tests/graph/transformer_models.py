"""A BERT-style encoder layer built with the ``onnx`` package, in the forms exporters write:
LayerNormalization as one op or decomposed (ReduceMean, Sub, Pow, Sqrt, Div), GELU with
Erf, with Tanh or as the Gelu operator; attention heads by Reshape and Transpose, scores
scaled by a Div, Softmax."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def encoder_layer(seq: int = 16, hidden: int = 32, heads: int = 4, ffn: int = 64, seed: int = 0,
                  gelu: str = "erf", layernorm: str = "op", opset: int = 17, masked: bool = False) -> onnx.ModelProto:
    """One encoder layer on ``x`` ``(1, seq, hidden)`` with seeded weights: ``gelu`` is
    ``"erf"``, ``"tanh"`` or ``"op"`` (opset 20); ``layernorm`` ``"op"`` or ``"decomposed"``;
    with ``masked``, a second input ``mask_add`` ``(1, 1, 1, seq)`` is added to the scores."""
    rng = np.random.default_rng(seed)
    d = hidden // heads

    def weight(*shape: int) -> np.ndarray:
        return (rng.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32)

    def vector(size: int, low: float = 0.0) -> np.ndarray:
        values = rng.uniform(0.5, 1.5, size) if low else rng.standard_normal(size) * 0.1
        return values.astype(np.float32)

    def scalar(value: float) -> np.ndarray:
        return np.array(value, np.float32)

    inits = {"wq": weight(hidden, hidden), "wk": weight(hidden, hidden), "wv": weight(hidden, hidden),
             "wo": weight(hidden, hidden), "w1": weight(hidden, ffn), "w2": weight(ffn, hidden),
             "bq": vector(hidden), "b1": vector(ffn), "g1": vector(hidden, 0.5), "be1": vector(hidden),
             "g2": vector(hidden, 0.5), "be2": vector(hidden),
             "heads_shape": np.array([1, seq, heads, d], np.int64), "flat_shape": np.array([1, seq, hidden], np.int64),
             "scale": scalar(np.sqrt(d)), "half": scalar(0.5), "one": scalar(1.0), "rsqrt2": scalar(1 / np.sqrt(2)),
             "two": scalar(2.0), "eps": scalar(1e-12), "c": scalar(0.044715), "kgelu": scalar(np.sqrt(2 / np.pi)),
             "three": scalar(3.0)}
    nodes: list[onnx.NodeProto] = []

    def n(op: str, ins: list[str], out: str, **kw: Any) -> str:
        nodes.append(helper.make_node(op, ins, [out], name=out, **kw))
        return out

    def layer_norm(x: str, g: str, b: str, tag: str) -> str:
        if layernorm == "op":
            return n("LayerNormalization", [x, g, b], tag, axis=-1, epsilon=1e-12)
        mean = n("ReduceMean", [x], f"{tag}.mean", axes=[-1])
        c = n("Sub", [x, mean], f"{tag}.c")
        var = n("ReduceMean", [n("Pow", [c, "two"], f"{tag}.sq")], f"{tag}.var", axes=[-1])
        std = n("Sqrt", [n("Add", [var, "eps"], f"{tag}.ve")], f"{tag}.std")
        return n("Add", [n("Mul", [n("Div", [c, std], f"{tag}.norm"), g], f"{tag}.g"), b], tag)

    def heads_of(x: str, tag: str, perm: list[int]) -> str:
        return n("Transpose", [n("Reshape", [x, "heads_shape"], f"{tag}r")], f"{tag}h", perm=perm)

    q = n("Add", [n("MatMul", ["x", "wq"], "q0"), "bq"], "q")
    qh = heads_of(q, "q", [0, 2, 1, 3])
    kh = heads_of(n("MatMul", ["x", "wk"], "k"), "k", [0, 2, 3, 1])
    vh = heads_of(n("MatMul", ["x", "wv"], "v"), "v", [0, 2, 1, 3])
    scores = n("Div", [n("MatMul", [qh, kh], "qk"), "scale"], "scores")
    if masked:
        scores = n("Add", [scores, "mask_add"], "masked")
    probs = n("Softmax", [scores], "probs", axis=-1)
    merged = n("Transpose", [n("MatMul", [probs, vh], "ctxh")], "ctxt", perm=[0, 2, 1, 3])
    ctx = n("Reshape", [merged, "flat_shape"], "ctx")
    h1 = layer_norm(n("Add", [n("MatMul", [ctx, "wo"], "attn"), "x"], "res1"), "g1", "be1", "ln1")
    f = n("Add", [n("MatMul", [h1, "w1"], "f0"), "b1"], "f1")
    if gelu == "erf":
        erf = n("Erf", [n("Mul", [f, "rsqrt2"], "fs")], "erf")
        g = n("Mul", [n("Mul", [f, n("Add", [erf, "one"], "e1")], "fe"), "half"], "gelu")
    elif gelu == "tanh":
        cube = n("Mul", [n("Pow", [f, "three"], "f3"), "c"], "cf3")
        tanh = n("Tanh", [n("Mul", [n("Add", [f, cube], "fi"), "kgelu"], "kin")], "th")
        g = n("Mul", [n("Mul", [f, n("Add", [tanh, "one"], "t1")], "ft"), "half"], "gelu")
    else:
        g = n("Gelu", [f], "gelu")
    out = layer_norm(n("Add", [n("MatMul", [g, "w2"], "f2"), h1], "res2"), "g2", "be2", "y")
    used = {i for node in nodes for i in node.input}
    sources = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, hidden])]
    if masked:
        sources.append(helper.make_tensor_value_info("mask_add", TensorProto.FLOAT, [1, 1, 1, seq]))
    graph = helper.make_graph(nodes, "encoder", sources, [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items() if k in used])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8  # onnxruntime reads IR versions up to 10
    return model


def sentence_encoder(seq: int = 16, hidden: int = 32, vocabulary: int = 50, seed: int = 1) -> onnx.ModelProto:
    """A sentence encoder as sentence-transformers exports one: int64 ``input_ids`` and
    ``attention_mask`` ``(1, seq)``; word embeddings by Gather plus position embeddings, a
    LayerNorm, one :func:`encoder_layer` whose scores get ``(1 - mask) · -10000``
    (Unsqueeze, Cast, Sub, Mul), then the mean of the token embeddings under the mask
    (Unsqueeze, Expand, Cast, Mul, ReduceSum, Clip, Div). Outputs: the sentence embedding
    ``sentence``, the token embeddings ``tokens`` and the ids back (``ids``, int64)."""
    rng = np.random.default_rng(seed)
    layer = encoder_layer(seq=seq, hidden=hidden, seed=seed, masked=True)
    inits: dict[str, np.ndarray] = {
        "words": rng.standard_normal((vocabulary, hidden)).astype(np.float32),
        "positions": (rng.standard_normal((1, seq, hidden)) * 0.1).astype(np.float32),
        "eg": rng.uniform(0.5, 1.5, hidden).astype(np.float32), "eb": np.zeros(hidden, np.float32),
        "axes12": np.array([1, 2], np.int64), "axis2": np.array([2], np.int64), "axis1": np.array([1], np.int64),
        "big": np.array(-10000.0, np.float32), "one_f": np.array(1.0, np.float32),
        "tiny": np.array(1e-9, np.float32), "expanded": np.array([1, seq, hidden], np.int64)}
    nodes = [
        helper.make_node("Gather", ["words", "input_ids"], ["w"]),
        helper.make_node("Add", ["w", "positions"], ["wp"]),
        helper.make_node("LayerNormalization", ["wp", "eg", "eb"], ["x"], axis=-1, epsilon=1e-12),
        helper.make_node("Unsqueeze", ["attention_mask", "axes12"], ["m4"]),
        helper.make_node("Cast", ["m4"], ["m4f"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["one_f", "m4f"], ["inv"]),
        helper.make_node("Mul", ["inv", "big"], ["mask_add"]),
        *layer.graph.node,
        helper.make_node("Identity", [layer.graph.output[0].name], ["tokens"]),
        helper.make_node("Unsqueeze", ["attention_mask", "axis2"], ["m3"]),
        helper.make_node("Expand", ["m3", "expanded"], ["m3e"]),
        helper.make_node("Cast", ["m3e"], ["m3f"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["tokens", "m3f"], ["masked_tokens"]),
        helper.make_node("ReduceSum", ["masked_tokens", "axis1"], ["summed"], keepdims=0),
        helper.make_node("ReduceSum", ["m3f", "axis1"], ["count"], keepdims=0),
        helper.make_node("Clip", ["count", "tiny"], ["count_c"]),
        helper.make_node("Div", ["summed", "count_c"], ["sentence"]),
        helper.make_node("Identity", ["input_ids"], ["ids"]),
    ]
    ints = [helper.make_tensor_value_info(name, TensorProto.INT64, [1, seq])
            for name in ("input_ids", "attention_mask")]
    outs = [helper.make_tensor_value_info("sentence", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("tokens", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("ids", TensorProto.INT64, None)]
    graph = helper.make_graph(nodes, "sentence_encoder", ints, outs,
                              [*layer.graph.initializer, *(numpy_helper.from_array(v, k) for k, v in inits.items())])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
