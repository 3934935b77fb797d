"""Pass: quantize — rewrite a calibrated float graph into the integer graph.

Every float value ``v`` of the input graph may have two versions in the output: the
float one, which keeps the name ``v`` (graph inputs, outputs, float islands), and the
int8 one, ``v.q``, with the calibrated scale.  Each one is made when first needed: a
``Quantize`` node makes ``v.q`` from ``v``, a ``Dequantize`` node ``v`` from ``v.q``.
So graph inputs are quantized once, graph outputs dequantized under their own names,
and an op without an integer reference (BatchNormalization not folded, Softmax) runs as
a float island between a Dequantize and, if an integer op reads its result, a Quantize.

Per op, by table (see ``_RULES``):

- Conv, Gemm, MatMul with constant weights: int8 data × int8 weights (per output
  channel) + int32 bias → int32 accumulator ``v.acc``, then ``Requantize`` to ``v.q``.
- Add: each operand requantized to int32 in the output scale (a constant operand is
  quantized to int32 directly), an int32 Add, a saturating Clip to int8.
- Relu, Clip (bounds in the input's scale), pooling and shape ops: the same op on int8.

In ``exact`` mode (a QDQ model's own parameters) the rules of ``quantize_exact`` apply;
both build on ``quantize_builder``.

Preconditions: a calibrated float graph (every float activation has a scale).
Postconditions: a verified integer graph computing the same function within
quantization error; its inputs and outputs are the float graph's, float32.
"""

from __future__ import annotations

import numpy as np

from openvta.isa import INT8_LIMIT, INT8_MAX, INT8_MIN, INT32_LIMIT

from ..errors import PassError
from ..ir import DType, Graph, Node, Op, QuantParams, RequantMode
from ..ops.base import float_attr
from ..quantization import pre_shift_for, quantize_weights
from .infer_shapes import infer_shapes
from .quantize_builder import PASS_NAME, Builder, Rule, channel_axis, float_island
from .quantize_exact import EXACT_RULES, exact_island

__all__ = ["quantize"]

def _same_op(b: Builder, node: Node) -> bool:
    if node.inputs[0] in b.source.constants:
        return False
    out = node.outputs[0]
    b.int8[out] = b.emit(node.name, node.op, (b.as_int8(node.inputs[0]),), b.name(f"{out}.q"),
                         dict(node.attrs), QuantParams((b.scale(node.inputs[0]),)))
    return True


def _clip(b: Builder, node: Node) -> bool:
    if node.inputs[0] in b.source.constants:
        return False
    scale = b.scale(node.inputs[0])
    attrs: dict[str, object] = {}
    for key, limit in (("min", INT8_MIN), ("max", INT8_MAX)):
        if key in node.attrs:
            bound = float_attr(node.attrs, key) / scale
            attrs[key] = int(np.clip(np.rint(bound), INT8_MIN, INT8_MAX)) if np.isfinite(bound) else limit
    out = node.outputs[0]
    b.int8[out] = b.emit(node.name, Op.CLIP, (b.as_int8(node.inputs[0]),), b.name(f"{out}.q"),
                         attrs, QuantParams((scale,)))
    return True


def _linear(b: Builder, node: Node) -> bool:
    weight = b.source.constants.get(node.inputs[1])
    bias = b.source.constants.get(node.inputs[2]) if len(node.inputs) > 2 else None
    w_axis, out_axis = channel_axis(node)
    channels = weight.shape[w_axis] if weight is not None else 0
    # (a MatMul the accelerator can take is a Gemm by now, simplify's canonical form: any
    # other, an N-D activation's with a symbolic batch or two activations', is a float island)
    if weight is None or node.op is Op.MATMUL or node.inputs[0] in b.source.constants \
            or (len(node.inputs) > 2 and (bias is None or bias.shape != (channels,))) \
            or any(float_attr(node.attrs, k, 1.0) != 1.0 for k in ("alpha", "beta")):
        return False  # not constant weights and bias in canonical form: a float island
    out = node.outputs[0]
    out_axis %= len(b.source.types[out].shape)
    data_scale, out_scale = b.scale(node.inputs[0]), b.scale(out)
    w_q, w_scales = quantize_weights(weight, w_axis, b.mode)
    acc_scales = data_scale * w_scales
    bias_q = np.zeros(channels, np.int64) if bias is None else \
        np.rint(bias.astype(np.float64) / acc_scales).astype(np.int64)
    weight_sums = np.abs(np.moveaxis(w_q.astype(np.int64), w_axis, 0).reshape(channels, -1)).sum(1)
    bound = int((INT8_LIMIT * weight_sums + np.abs(bias_q)).max())
    if b.mode is RequantMode.FIXED and bound < INT32_LIMIT:
        bias_q = bias_q + ((1 << pre_shift_for(bound)) >> 1)  # the pre-shift rounds to nearest
    if np.abs(bias_q).max() >= INT32_LIMIT:
        raise PassError(PASS_NAME, f"node {node.label}: its bias does not fit int32 in the "
                                   "accumulator's scale")
    inputs = (b.as_int8(node.inputs[0]),
              b.constant(f"{node.name}.weight.q", w_q, QuantParams(tuple(w_scales), axis=w_axis)),
              b.constant(f"{node.name}.bias.q", bias_q.astype(np.int32),
                         QuantParams(tuple(acc_scales), axis=0)))
    acc = b.emit(node.name, node.op, inputs, b.name(f"{out}.acc"), dict(node.attrs),
                 QuantParams(tuple(acc_scales), axis=out_axis))
    b.int8[out] = b.requantize(node.name, out, acc, acc_scales / out_scale, bound, DType.INT8,
                               out_scale, out_axis)
    return True


def _matmul(b: Builder, node: Node) -> bool:
    """A product of two activations per head (``(H, M, K)`` by ``(H, K, N)``, static: what
    simplify makes of attention's): int8 × int8 → int32 in the scale ``s_a·s_b``, then
    ``Requantize`` to the output's scale.  Any other MatMul is a float island."""
    if any(v in b.source.constants for v in node.inputs):
        return _linear(b, node)
    a, w = (b.source.types[v] for v in node.inputs)
    if a.ndim != 3 or w.ndim != 3 or not all(isinstance(d, int) for d in (*a.shape, *w.shape)):
        return False
    out = node.outputs[0]
    acc_scale, out_scale = b.scale(node.inputs[0]) * b.scale(node.inputs[1]), b.scale(out)
    bound = INT8_LIMIT * INT8_LIMIT * int(a.shape[-1])
    acc = b.emit(node.name, Op.MATMUL, (b.as_int8(node.inputs[0]), b.as_int8(node.inputs[1])),
                 b.name(f"{out}.acc"), {}, QuantParams((acc_scale,)))
    b.int8[out] = b.requantize(node.name, out, acc, np.array([acc_scale / out_scale]), bound, DType.INT8,
                               out_scale, axis=-1)
    return True


def _add(b: Builder, node: Node) -> bool:
    if any(v not in b.source.constants and v not in b.int8 for v in node.inputs):
        return False  # an operand made in float (a float island's result): the sum stays float
    out = node.outputs[0]
    out_scale = b.scale(out)
    operands = []
    for index, value in enumerate(node.inputs):
        if value in b.source.constants:
            q = np.rint(b.source.constants[value].astype(np.float64) / out_scale)
            if np.abs(q).max(initial=0) >= INT32_LIMIT:
                raise PassError(PASS_NAME, f"node {node.label}: constant {value!r} does not fit "
                                           "int32 in the output's scale")
            operands.append(b.constant(f"{value}.q32", q.astype(np.int32), QuantParams((out_scale,))))
        else:
            src = b.as_int8(value)
            operands.append(b.requantize(f"{node.name}.in{index}", value, src,
                                         np.array([b.scale(value) / out_scale]), INT8_LIMIT,
                                         DType.INT32, out_scale))
    total = b.emit(node.name, Op.ADD, tuple(operands), b.name(f"{out}.sum"), {},
                   QuantParams((out_scale,)))
    b.int8[out] = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.q"),
                         {"min": INT8_MIN, "max": INT8_MAX}, QuantParams((out_scale,)))
    return True


_RULES: dict[Op, Rule] = {
    Op.CONV: _linear, Op.GEMM: _linear, Op.MATMUL: _matmul, Op.ADD: _add, Op.CLIP: _clip,
    Op.RELU: _same_op, Op.MAX_POOL: _same_op, Op.AVERAGE_POOL: _same_op,
    Op.GLOBAL_AVERAGE_POOL: _same_op, Op.FLATTEN: _same_op, Op.RESHAPE: _same_op,
    Op.IDENTITY: _same_op, Op.DROPOUT: _same_op, Op.IM2COL: _same_op,
}


def quantize(graph: Graph, mode: RequantMode) -> Graph:
    """The integer graph of calibrated ``graph`` (module docstring)."""
    rules = EXACT_RULES if mode is RequantMode.EXACT else _RULES
    island = exact_island if mode is RequantMode.EXACT else float_island
    b = Builder(graph, mode)
    for node in graph.nodes:
        if node.op in (Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE):
            raise PassError(PASS_NAME, f"node {node.label} is already an integer-graph op")
        if any(graph.types[v].dtype is DType.INT64 for v in node.inputs if v not in graph.constants):
            float_island(b, node)  # reads an index tensor (token ids, a mask): never quantized
            continue
        rule = rules.get(node.op)
        if rule is None or not rule(b, node):
            island(b, node)
    for name in graph.outputs:
        b.as_real(name)
    result = Graph(graph.name, graph.inputs, graph.outputs, tuple(b.nodes), b.constants, b.types,
                   notes=graph.notes)
    return infer_shapes(result)
