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

In ``exact`` mode (a QDQ model's own parameters) the rules of ``quantize_exact`` apply.

Preconditions: a calibrated float graph (every float activation has a scale).
Postconditions: a verified integer graph computing the same function within
quantization error; its inputs and outputs are the float graph's, float32.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import OpError, PassError
from ..ir import (Attrs, DType, Graph, Node, Op, QuantParams, RequantMode, TensorType)
from ..passes.infer_shapes import infer_node, infer_shapes
from ..quantization import pre_shift_for, quantize_weights, requant_params
from ..rewrite import fresh

__all__ = ["quantize"]

_PASS = "quantize"
_INT8_BOUND = 128


class _Builder:
    """The integer graph under construction (local to one run of the pass)."""

    def __init__(self, graph: Graph, mode: RequantMode) -> None:
        self.source, self.mode = graph, mode
        self.nodes: list[Node] = []
        self.types = {name: graph.types[name] for name in graph.inputs}
        self.constants: dict[str, np.ndarray] = {}
        self.used = graph.names() - {n.name for n in graph.nodes}  # value names
        self.node_names: set[str] = set()
        self.int8: dict[str, str] = {}
        self.real: dict[str, str] = {name: name for name in graph.inputs}
        self.dequantized: dict[str, str] = {}  # exact mode: graph inputs on their int8 grid

    def name(self, base: str) -> str:
        chosen = fresh(base, self.used)
        self.used.add(chosen)
        return chosen

    def constant(self, base: str, array: np.ndarray, quant: QuantParams | None = None) -> str:
        name = self.name(base)
        self.constants[name] = array
        self.types[name] = TensorType(array.shape, DType.of(array.dtype), quant)
        return name

    def emit(self, name: str, op: Op, inputs: tuple[str, ...], out: str,
             attrs: dict[str, object] | None = None, quant: QuantParams | None = None) -> str:
        node_name = fresh(name, self.node_names)
        self.node_names.add(node_name)
        node = Node(node_name, op, inputs, (out,), Attrs(attrs or {}))
        try:
            self.types[out] = infer_node(node, self.types).with_quant(quant)
        except OpError as exc:
            raise PassError(_PASS, f"node {node.label}: {exc}") from None
        self.nodes.append(node)
        return out

    def scale(self, value: str) -> float:
        quant = self.source.types[value].quant
        if quant is None:
            raise PassError(_PASS, f"value {value!r} has no calibrated scale; run calibrate first")
        return quant.scale[0]

    def zero_point(self, value: str) -> int:
        """The int8 zero point of ``value`` (0 unless a QDQ model gave one)."""
        quant = self.source.types[value].quant
        return quant.zero_point if quant is not None else 0

    def as_int8(self, value: str) -> str:
        """The int8 version of float value ``value`` (quantized on first use)."""
        if value not in self.int8:
            if value in self.source.constants:
                raise PassError(_PASS, f"constant {value!r} used as an activation cannot be "
                                       "quantized; simplify folds such nodes")
            scale, zero_point = self.scale(value), self.zero_point(value)
            attrs: dict[str, object] = {"scale": scale}
            if zero_point:
                attrs["zero_point"] = zero_point
            out = self.name(f"{value}.q")
            self.int8[value] = self.emit(f"{value}.quantize", Op.QUANTIZE, (self.real[value],),
                                         out, attrs, QuantParams((scale,), zero_point))
        return self.int8[value]

    def as_real(self, value: str) -> str:
        """The float version of ``value``, named ``value`` (dequantized on first use)."""
        if value in self.source.constants:
            if value not in self.constants:
                self.constants[value] = np.asarray(self.source.constants[value])
                self.types[value] = self.source.types[value]
            return value
        if value not in self.real:
            self.real[value] = self.dequantize(value, self.int8[value], value)
        return self.real[value]

    def dequantize(self, value: str, q: str, out: str) -> str:
        """Emit ``out = Dequantize(q)`` with ``q``'s scale and zero point."""
        quant = self.types[q].quant
        if quant is None:
            raise PassError(_PASS, f"int8 value {q!r} has no scale")
        attrs: dict[str, object] = {"scale": quant.scale}
        if quant.zero_point:
            attrs["zero_point"] = quant.zero_point
        return self.emit(f"{value}.dequantize", Op.DEQUANTIZE, (q,), out, attrs)

    def requantize(self, base: str, value: str, src: str, multipliers: np.ndarray, bound: int,
                   out_dtype: DType, out_scale: float, axis: int = 1) -> str:
        """Requantize ``src`` (node ``base``.requantize) into ``value``.q or ``value``.r."""
        try:
            params = requant_params(self.mode, multipliers, bound)
        except ValueError as exc:
            raise PassError(_PASS, f"node {base!r}: {exc}") from None
        attrs = {"mode": self.mode, "pre_shift": params.pre_shift, "multiplier": params.multiplier,
                 "post_shift": params.post_shift, "axis": axis, "out_dtype": out_dtype}
        out = self.name(f"{value}.q" if out_dtype is DType.INT8 else f"{value}.r")
        return self.emit(f"{base}.requantize", Op.REQUANTIZE, (src,), out, attrs,
                         QuantParams((out_scale,)))


Rule = Callable[[_Builder, Node], bool]


def _float_island(b: _Builder, node: Node) -> bool:
    inputs = tuple(b.as_real(v) for v in node.inputs)
    out = node.outputs[0]
    b.emit(node.name, node.op, inputs, out, dict(node.attrs))
    b.real[out] = out
    return True


def _same_op(b: _Builder, node: Node) -> bool:
    if node.inputs[0] in b.source.constants:
        return False
    out = node.outputs[0]
    b.int8[out] = b.emit(node.name, node.op, (b.as_int8(node.inputs[0]),), b.name(f"{out}.q"),
                         dict(node.attrs), QuantParams((b.scale(node.inputs[0]),)))
    return True


def _clip(b: _Builder, node: Node) -> bool:
    if node.inputs[0] in b.source.constants:
        return False
    scale = b.scale(node.inputs[0])
    attrs: dict[str, object] = {}
    for key, limit in (("min", -128), ("max", 127)):
        if key in node.attrs:
            bound = float(node.attrs[key]) / scale  # type: ignore[arg-type]
            attrs[key] = int(np.clip(np.rint(bound), -128, 127)) if np.isfinite(bound) else limit
    out = node.outputs[0]
    b.int8[out] = b.emit(node.name, Op.CLIP, (b.as_int8(node.inputs[0]),), b.name(f"{out}.q"),
                         attrs, QuantParams((scale,)))
    return True


def _channel_axis(node: Node) -> tuple[int, int]:
    """(output-channel axis of the weights, channel axis of the output)."""
    if node.op is Op.CONV:
        return 0, 1
    if node.op is Op.GEMM:
        return (0 if node.attrs.get("transB", 0) else 1), 1
    return 1, -1


def _linear(b: _Builder, node: Node) -> bool:
    weight = b.source.constants.get(node.inputs[1])
    bias = b.source.constants.get(node.inputs[2]) if len(node.inputs) > 2 else None
    w_axis, out_axis = _channel_axis(node)
    channels = weight.shape[w_axis] if weight is not None else 0
    if weight is None or node.inputs[0] in b.source.constants \
            or (len(node.inputs) > 2 and (bias is None or bias.shape != (channels,))) \
            or any(float(node.attrs.get(k, 1.0)) != 1.0 for k in ("alpha", "beta")):  # type: ignore[arg-type]
        return False  # not constant weights and bias in canonical form: a float island
    out = node.outputs[0]
    out_axis %= len(b.source.types[out].shape)
    data_scale, out_scale = b.scale(node.inputs[0]), b.scale(out)
    w_q, w_scales = quantize_weights(weight, w_axis, b.mode)
    acc_scales = data_scale * w_scales
    bias_q = np.zeros(channels, np.int64) if bias is None else \
        np.rint(bias.astype(np.float64) / acc_scales).astype(np.int64)
    weight_sums = np.abs(np.moveaxis(w_q.astype(np.int64), w_axis, 0).reshape(channels, -1)).sum(1)
    bound = int((_INT8_BOUND * weight_sums + np.abs(bias_q)).max())
    if b.mode is RequantMode.FIXED and bound < 2 ** 31:
        bias_q = bias_q + ((1 << pre_shift_for(bound)) >> 1)  # the pre-shift rounds to nearest
    if np.abs(bias_q).max() >= 2 ** 31:
        raise PassError(_PASS, f"node {node.label}: its bias does not fit int32 in the "
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


def _add(b: _Builder, node: Node) -> bool:
    out = node.outputs[0]
    out_scale = b.scale(out)
    operands = []
    for index, value in enumerate(node.inputs):
        if value in b.source.constants:
            q = np.rint(b.source.constants[value].astype(np.float64) / out_scale)
            if np.abs(q).max(initial=0) >= 2 ** 31:
                raise PassError(_PASS, f"node {node.label}: constant {value!r} does not fit "
                                       "int32 in the output's scale")
            operands.append(b.constant(f"{value}.q32", q.astype(np.int32), QuantParams((out_scale,))))
        else:
            src = b.as_int8(value)
            operands.append(b.requantize(f"{node.name}.in{index}", value, src,
                                         np.array([b.scale(value) / out_scale]), _INT8_BOUND,
                                         DType.INT32, out_scale))
    total = b.emit(node.name, Op.ADD, tuple(operands), b.name(f"{out}.sum"), {},
                   QuantParams((out_scale,)))
    b.int8[out] = b.emit(f"{node.name}.saturate", Op.CLIP, (total,), b.name(f"{out}.q"),
                         {"min": -128, "max": 127}, QuantParams((out_scale,)))
    return True


_RULES: dict[Op, Rule] = {
    Op.CONV: _linear, Op.GEMM: _linear, Op.MATMUL: _linear, Op.ADD: _add, Op.CLIP: _clip,
    Op.RELU: _same_op, Op.MAX_POOL: _same_op, Op.AVERAGE_POOL: _same_op,
    Op.GLOBAL_AVERAGE_POOL: _same_op, Op.FLATTEN: _same_op, Op.RESHAPE: _same_op,
    Op.IDENTITY: _same_op, Op.DROPOUT: _same_op,
}


def quantize(graph: Graph, mode: RequantMode) -> Graph:
    """The integer graph of calibrated ``graph`` (module docstring)."""
    from .quantize_exact import EXACT_RULES, exact_island  # they build on _Builder

    rules = EXACT_RULES if mode is RequantMode.EXACT else _RULES
    island = exact_island if mode is RequantMode.EXACT else _float_island
    b = _Builder(graph, mode)
    for node in graph.nodes:
        if node.op in (Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE):
            raise PassError(_PASS, f"node {node.label} is already an integer-graph op")
        rule = rules.get(node.op)
        if rule is None or not rule(b, node):
            island(b, node)
    for name in graph.outputs:
        b.as_real(name)
    result = Graph(graph.name, graph.inputs, graph.outputs, tuple(b.nodes), b.constants, b.types)
    return infer_shapes(result)
