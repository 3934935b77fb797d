"""Pass: canonicalize a float graph — the target-free rewrites before quantization.

Whatever machine runs the model, these leave the same float graph: Identity and Dropout
removed (inference-time no-ops); constants folded (a node whose inputs are all constants
becomes a constant); a BatchNormalization folded into the Conv before it, and a Mul or Add
of a per-channel constant after a Conv or a BatchNormalization likewise (how some exporters
write a BatchNormalization); GELU and LayerNorm as exporters decompose them fused back into
one node each (``canonicalize_idioms``).  What the accelerator needs on top of this (the
forms its kernels take) is :func:`~openvta.graph.passes.legalize.legalize`'s.

Each rewrite is one function of the graph, listed in :data:`STEPS` and run in that order by
:func:`canonicalize`; the graph pipeline runs each as its own step, verified after it.  A
step types the values it makes, and most leave those they replace: the pipeline drops what
nobody reads once, after the last legalization, so that the fresh names later rewrites
choose (``conv.weight_1``) do not change with where a drop happens.

Preconditions: a float graph (no integer-graph ops) with types.
Postconditions: the same function (up to float rounding of folded constants); no Identity
or Dropout except one that copies a graph input or constant to an output; no node whose
inputs are all constants; no BatchNormalization right after a Conv that feeds only it
(all parameters constant).

Examples
--------
>>> import numpy as np
>>> from openvta.graph.ir import DType, Graph, Node, Op, TensorType
>>> t = TensorType((2, 3), DType.FLOAT32)
>>> g = Graph("g", ("x",), ("y",), (Node("d", Op.DROPOUT, ("x",), ("a",)), Node("r", Op.RELU, ("a",), ("y",))),
...           {}, {"x": t, "a": t, "y": t})
>>> [(n.op.value, n.inputs) for n in canonicalize(g).nodes]
[('Relu', ('x',))]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from ..errors import OpError, PassError
from ..ir import Attrs, DType, Graph, Node, Op, TensorType
from ..ops.base import float_attr
from ..registry import QUANT_OPS, op_def
from ..rewrite import add_constant, prune, rename_values
from .canonicalize_idioms import fuse_gelu, fuse_layer_norm
from .infer_shapes import infer_shapes

__all__ = ["canonicalize", "check_float", "drop_identities", "fold_constants", "fold_batch_norms", "fold_hard_sigmoids",
           "fold_channel_affines", "batch_norm_affine", "STEPS"]

_PASS = "canonicalize"


def check_float(graph: Graph) -> Graph:
    """``graph`` itself if it is a float graph (the precondition of every step here).

    Raises
    ------
    PassError
        naming the first node of an integer graph.
    """
    for node in graph.nodes:
        if node.op in QUANT_OPS or any(v not in graph.constants and graph.types[v].dtype.is_quantized
                                          and graph.types[v].quant is not None for v in node.inputs):
            raise PassError(_PASS, f"node {node.label} belongs to a quantized graph; canonicalize "
                                   "runs on the float graph")
    return graph


def drop_identities(graph: Graph) -> Graph:
    """``graph`` without Identity and Dropout nodes, their readers reading the source; one
    that copies a graph input, a constant or an output to an output stays."""
    producers, outputs = graph.producers(), set(graph.outputs)
    mapping: dict[str, str] = {}
    kept: list[Node] = []
    for node in graph.nodes:
        if node.op not in (Op.IDENTITY, Op.DROPOUT):
            kept.append(node)
            continue
        src, dst = rename_values((node,), mapping)[0].inputs[0], node.outputs[0]
        if dst not in outputs:
            mapping[dst] = src
        elif src in producers and src not in outputs:
            mapping[src] = dst  # the producer writes the graph output's name directly
        else:
            kept.append(node)  # copies a graph input, constant or output: keep the copy
    return graph.replace(nodes=rename_values(tuple(kept), mapping))


def fold_constants(graph: Graph) -> Graph:
    """``graph`` with every node whose inputs are all constants computed (by its registry
    kernel) into a constant of the same name.

    Raises
    ------
    PassError
        for a node whose kernel refuses its constant inputs.
    """
    constants, types = dict(graph.constants), dict(graph.types)
    kept: list[Node] = []
    for node in graph.nodes:
        if not node.inputs or not all(v in constants for v in node.inputs):
            kept.append(node)
            continue
        try:
            kernel = op_def(node.op).kernel(DType.of(constants[node.inputs[0]].dtype))
            value = kernel([constants[v] for v in node.inputs], node.attrs)
        except OpError as exc:
            raise PassError(_PASS, f"node {node.label} cannot be folded: {exc}") from None
        constants[node.outputs[0]] = value
        types[node.outputs[0]] = TensorType(value.shape, DType.of(value.dtype))
    return graph.replace(nodes=tuple(kept), constants=constants, types=types)


def batch_norm_affine(bn: Node, constants: Mapping[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """A BatchNormalization's ``(gain, shift)``: ``y = gain·x + shift`` per channel."""
    scale, beta, mean, var = (constants[v].astype(np.float64) for v in bn.inputs[1:])
    gain = scale / np.sqrt(var + float_attr(bn.attrs, "epsilon", 1e-5))
    return gain, beta - mean * gain


def _scaled_inputs(node: Node, gain: np.ndarray, shift: np.ndarray, constants: dict[str, np.ndarray],
                   used: set[str]) -> tuple[str, ...]:
    """``node``'s inputs (a Conv, or a BatchNormalization) with a per-channel affine folded
    in as new constants: its weight or scale (input 1) times ``gain`` along the channels,
    its bias (input 2, zero if none) as ``bias·gain + shift``; the rest as they were."""
    weight = constants[node.inputs[1]].astype(np.float64)
    bias = constants[node.inputs[2]].astype(np.float64) if len(node.inputs) > 2 else np.zeros(weight.shape[0])
    names = [add_constant(f"{node.name}.{role}", value, constants, used)
             for role, value in (("weight", weight * gain.reshape((-1,) + (1,) * (weight.ndim - 1))),
                                 ("bias", bias * gain + shift))]
    return (node.inputs[0], *names, *node.inputs[3:])


def _batch_norm_source(graph: Graph, bn: Node) -> Node | None:
    """The Conv ``bn`` can be folded into, if any."""
    conv = graph.producers().get(bn.inputs[0])
    if conv is None or conv.op is not Op.CONV or bn.inputs[0] in graph.outputs:
        return None
    if [n.name for n in graph.consumers()[bn.inputs[0]]] != [bn.name]:
        return None
    if not all(v in graph.constants for v in conv.inputs[1:] + bn.inputs[1:]):
        return None
    return conv


def fold_batch_norms(graph: Graph) -> Graph:
    """``graph`` with each BatchNormalization folded into the Conv before it, when the Conv's
    output feeds only it and every parameter of both is constant (the Conv takes the
    BatchNormalization's output name)."""
    constants, used = dict(graph.constants), graph.names()
    replaced: dict[str, Node] = {}
    removed: set[str] = set()
    for bn in (n for n in graph.nodes if n.op is Op.BATCH_NORM):
        conv = _batch_norm_source(graph, bn)
        if conv is None:
            continue
        inputs = _scaled_inputs(conv, *batch_norm_affine(bn, constants), constants, used)
        replaced[conv.name] = replace(conv, inputs=inputs, outputs=bn.outputs)
        removed.add(bn.name)
    nodes = tuple(replaced.get(n.name, n) for n in graph.nodes if n.name not in removed)
    types = dict(graph.types)
    types.update({k: TensorType(v.shape, DType.FLOAT32) for k, v in constants.items() if k not in graph.constants})
    return graph.replace(nodes=nodes, constants=constants, types=types)


def _channel_vector(value: np.ndarray, channels: int) -> np.ndarray | None:
    """``value`` as one number per output channel of an NCHW tensor, if it broadcasts so
    (a scalar, ``(C, 1, 1)``, ``(1, C, 1, 1)``); else None."""
    if value.size == 1:
        return np.full(channels, float(value.reshape(())), np.float64)
    shape = tuple(value.shape)
    if shape in ((channels, 1, 1), (1, channels, 1, 1)):
        return value.reshape(channels).astype(np.float64)
    return None


def _channel_affine(graph: Graph) -> tuple[Node, Node, np.ndarray] | None:
    """The first Mul or Add of a per-channel constant ``fold_channel_affines`` can fold: the
    node, the Conv or BatchNormalization before it and the constant per channel."""
    constants, producers, consumers = graph.constants, graph.producers(), graph.consumers()
    for node in graph.nodes:
        if node.op not in (Op.MUL, Op.ADD) or len(node.inputs) != 2:
            continue
        for data, other in (node.inputs, node.inputs[::-1]):
            conv = producers.get(data)
            if other not in constants or conv is None or conv.op not in (Op.CONV, Op.BATCH_NORM) \
                    or data in graph.outputs or [n.name for n in consumers[data]] != [node.name] \
                    or not all(v in constants for v in conv.inputs[1:]) or graph.types[data].ndim != 4 \
                    or graph.types[node.outputs[0]].shape != graph.types[data].shape:
                continue
            vector = _channel_vector(constants[other], constants[conv.inputs[1]].shape[0])
            if vector is not None:
                return node, conv, vector
    return None


def fold_channel_affines(graph: Graph) -> Graph:
    """``graph`` with a Mul or Add of a per-channel constant right after a Conv or a
    BatchNormalization (whose output feeds only it) folded into its weights and bias, or its
    scale and shift — how some exporters write a BatchNormalization's (Inception v2,
    DenseNet-121: one CPU island instead of three where no Conv precedes); repeated, so a
    Mul then an Add both fold.  Each fold drops what nobody reads."""
    while (found := _channel_affine(graph)) is not None:
        node, conv, vector = found
        constants, used = dict(graph.constants), graph.names()
        gain, shift = (vector, np.zeros_like(vector)) if node.op is Op.MUL else (np.ones_like(vector), vector)
        inputs = _scaled_inputs(conv, gain, shift, constants, used)
        types = dict(graph.types)
        types.update({k: TensorType(constants[k].shape, DType.FLOAT32) for k in inputs[1:3]})
        nodes = tuple(replace(conv, inputs=inputs, outputs=node.outputs) if n.name == conv.name
                      else n for n in graph.nodes if n.name != node.name)
        graph = prune(graph.replace(nodes=nodes, constants=constants, types=types))
    return graph


def fold_hard_sigmoids(graph: Graph) -> Graph:
    """``graph`` with a HardSigmoid right after a Conv (constant weights; its output read by
    the HardSigmoid only) as the Clip to ``[0, 1]`` of the Conv scaled by ``alpha`` and shifted
    by ``beta`` — ``clip(α·(W∗x + b) + β, 0, 1) = clip((αW)∗x + (αb + β), 0, 1)`` — so the
    accelerator's conv2d computes it with its clip (a squeeze-and-excitation gate's, PP-LCNet's
    and MobileNetV3's); exact in float."""
    constants, producers, consumers = graph.constants, graph.producers(), graph.consumers()
    swaps: dict[str, Node] = {}
    new_constants = dict(constants)
    used = graph.names()
    for node in graph.nodes:
        conv = producers.get(node.inputs[0]) if node.op is Op.HARD_SIGMOID else None
        if conv is None or conv.op is not Op.CONV or node.inputs[0] in graph.outputs \
                or [n.name for n in consumers[node.inputs[0]]] != [node.name] \
                or not all(v in constants for v in conv.inputs[1:]) or conv.name in swaps:
            continue
        channels = constants[conv.inputs[1]].shape[0]
        alpha, beta = float_attr(node.attrs, "alpha", 0.2), float_attr(node.attrs, "beta", 0.5)
        inputs = _scaled_inputs(conv, np.full(channels, alpha), np.full(channels, beta), new_constants, used)
        swaps[conv.name] = replace(conv, inputs=inputs)
        swaps[node.name] = Node(node.name, Op.CLIP, node.inputs, node.outputs, Attrs({"min": 0.0, "max": 1.0}))
    if not swaps:
        return graph
    types = dict(graph.types)
    types.update({k: TensorType(v.shape, DType.FLOAT32) for k, v in new_constants.items() if k not in constants})
    nodes = tuple(swaps.get(n.name, n) for n in graph.nodes)
    return prune(graph.replace(nodes=nodes, constants=new_constants, types=types))


#: The target-free rewrites, in the order :func:`canonicalize` and the pipeline run them.
STEPS: tuple[Callable[[Graph], Graph], ...] = (
    drop_identities,  # Identity, Dropout: no-ops at inference
    fold_constants,  # all-constant nodes → constants
    fold_batch_norms,  # Conv + BatchNormalization → Conv
    fold_channel_affines,  # Conv or BatchNormalization + Mul/Add of a per-channel constant → one node
    fold_hard_sigmoids,  # Conv + HardSigmoid → the Conv scaled and shifted + Clip(0, 1)
    fuse_gelu,  # x·(1 + erf(x/√2))·0.5, its tanh form → Gelu
    fuse_layer_norm,  # ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div, Mul, Add → LayerNorm
)


def canonicalize(graph: Graph) -> Graph:
    """The canonical float graph (see the module docstring): :data:`STEPS` in order, then
    what nobody reads dropped and every type inferred.

    Raises
    ------
    PassError
        for an integer graph, or a constant node whose kernel refuses its inputs.
    """
    graph = check_float(graph)
    for step in STEPS:
        graph = step(graph)
    return infer_shapes(prune(graph))
