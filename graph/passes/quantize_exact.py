"""The quantize pass's rules for ``exact`` mode: a QDQ model's own scales and zero points.

onnxruntime runs a QDQ model's ``DequantizeLinear → Conv/Gemm → QuantizeLinear`` groups
as fused int8 kernels (``QLinearConv``, ``QGemm``): an int32 accumulator of the int8
data (its zero point subtracted) and int8 weights, plus the int32 bias, requantized by
``float32(acc) * (s_x * s_w / s_y)`` in float32, rounded half to even, plus the output
zero point, saturated.  These rules build the same integer graph:

- Conv, Gemm, MatMul: the model's int8 weights and int32 bias recovered exactly from
  the folded constants (refused if ``(q - 0) * scale`` does not give them back); the
  data zero point ``z_x`` folded into the bias as ``- z_x · Σ w`` per channel, which is
  exact wherever the window lies inside the data.  A padded Conv's border windows sum
  fewer weights (the accelerator pads with 0, onnxruntime with ``z_x``): their
  difference is one constant int32 tensor added to the accumulator, so the result stays
  exact.  Then one ``exact`` ``Requantize`` (its scale ``s_x · s_w / s_y`` in float32,
  in that order, as onnxruntime computes it).
- MaxPool and the shape ops: the same op on int8 when the model gives the output the
  input's scale and zero point (max and copies commute with them); a Clip to the int8
  range (a folded QDQ pair with a zero point, ``onnx_qdq``) is no op at all.
- Everything else (Add, Relu, Clip, average pooling, Softmax…): a float island between
  a ``Dequantize`` and a ``Quantize`` with the model's parameters — the QDQ graph's own
  float semantics, computed in float32 (``exact_island``: its raw float result is never
  read, only its int8 version and that dequantized).
"""

from __future__ import annotations

import numpy as np

from openvta.compiler.reference import conv2d_nchw
from openvta.isa import INT8_MAX, INT8_MIN, INT32_LIMIT

from ..errors import PassError
from ..ir import DType, Node, Op, QuantParams, RequantMode
from ..ops.base import QuantRule, float_attr
from ..ops.linear import conv_geometry
from ..registry import REGISTRY
from .quantize_builder import PASS_NAME, Builder, Rule, channel_axis, float_island

__all__ = ["EXACT_RULES", "exact_island", "recover_ints"]


def recover_ints(name: str, real: np.ndarray, quant: QuantParams, axis: int) -> np.ndarray:
    """The integers ``q`` with ``q * scale == real`` in float32 (per channel along ``axis``).

    Raises
    ------
    PassError
        if ``real`` is not exactly such a product (not a dequantized constant).
    """
    scale = np.asarray(quant.scale, dtype=np.float32)
    shape = [1] * real.ndim
    if len(scale) > 1:
        shape[axis] = len(scale)
    scale = scale.reshape(shape)
    q = np.rint(real.astype(np.float64) / scale.astype(np.float64)).astype(np.int64)
    if not np.array_equal((q.astype(np.float32) * scale).astype(np.float32), real):
        raise PassError(PASS_NAME, f"constant {name!r} is not a dequantized integer tensor of its "
                                   "scale; the exact mode needs the model's own int8/int32 values")
    return q


def _model_quant(b: Builder, value: str, what: str) -> QuantParams:
    quant = b.source.types[value].quant
    if quant is None:
        raise PassError(PASS_NAME, f"{what} {value!r} has no scale in the model; the exact mode "
                                   "needs a QDQ model")
    return quant


def _channel_scales(quant: QuantParams, channels: int) -> np.ndarray:
    scale = np.asarray(quant.scale, dtype=np.float32)
    return np.full(channels, scale[0], np.float32) if len(scale) == 1 else scale


def _border_correction(node: Node, w_q: np.ndarray, data_shape: tuple[object, ...],
                       zero_point: int) -> np.ndarray | None:
    """``z_x · (Σ w − Σ w inside the data)`` per output position of a Conv, None if all 0."""
    if node.op is not Op.CONV or zero_point == 0:
        return None
    strides, pads, group = conv_geometry(node.attrs)
    ones = np.ones((1, *[int(str(d)) for d in data_shape[1:]]), np.int64)
    inside = conv2d_nchw(ones, w_q, strides, pads, group)
    total = w_q.reshape(w_q.shape[0], -1).sum(1).reshape(1, -1, 1, 1)
    correction = zero_point * (total - inside.astype(np.int64))
    return correction if np.any(correction) else None


def _accumulator_constants(b: Builder, node: Node, w_q: np.ndarray, w_axis: int,
                           zero_point: int) -> np.ndarray:
    """The int32 bias with the data zero point folded in (module docstring)."""
    channels = w_q.shape[w_axis]
    sums = np.moveaxis(w_q, w_axis, 0).reshape(channels, -1).sum(1)
    if len(node.inputs) > 2:
        bias = b.source.constants[node.inputs[2]]
        bias_q = recover_ints(node.inputs[2], bias, _model_quant(b, node.inputs[2], "bias"), 0)
    else:
        bias_q = np.zeros(channels, np.int64)
    folded = bias_q - zero_point * sums
    if np.abs(folded).max(initial=0) >= INT32_LIMIT:
        raise PassError(PASS_NAME, f"node {node.label}: its bias with the data zero point folded in "
                                   "does not fit int32")
    return folded.astype(np.int32)


def _weights(b: Builder, node: Node, w_axis: int) -> tuple[np.ndarray, QuantParams]:
    quant = _model_quant(b, node.inputs[1], "weight")
    if quant.axis is not None and quant.axis != w_axis:
        raise PassError(PASS_NAME, f"node {node.label}: weight scales must be per output channel "
                                   f"(axis {w_axis}), not along axis {quant.axis}")
    w_q = recover_ints(node.inputs[1], b.source.constants[node.inputs[1]], quant, w_axis)
    if w_q.min(initial=0) < INT8_MIN or w_q.max(initial=0) > INT8_MAX:
        raise PassError(PASS_NAME, f"node {node.label}: weights must be int8")
    return w_q, quant


def _linear(b: Builder, node: Node) -> bool:
    bias_ok = len(node.inputs) < 3 or node.inputs[2] in b.source.constants
    if node.inputs[1] not in b.source.constants or node.inputs[0] in b.source.constants \
            or not bias_ok or any(float_attr(node.attrs, k, 1.0) != 1.0
                                  for k in ("alpha", "beta")):
        return False
    w_axis, out_axis = channel_axis(node)
    out = node.outputs[0]
    out_axis %= len(b.source.types[out].shape)
    data_q, out_q = _model_quant(b, node.inputs[0], "value"), _model_quant(b, out, "value")
    w_q, w_quant = _weights(b, node, w_axis)
    channels = w_q.shape[w_axis]
    acc_scales = _channel_scales(w_quant, channels) * np.float32(data_q.scale[0])
    inputs = (b.as_int8(node.inputs[0]),
              b.constant(f"{node.name}.weight.q", w_q.astype(np.int8),
                         QuantParams(tuple(_channel_scales(w_quant, channels)), axis=w_axis)),
              b.constant(f"{node.name}.bias.q",
                         _accumulator_constants(b, node, w_q, w_axis, data_q.zero_point),
                         QuantParams(tuple(acc_scales), axis=0)))
    acc_quant = QuantParams(tuple(acc_scales), axis=out_axis)
    acc = b.emit(node.name, node.op, inputs, b.name(f"{out}.acc"), dict(node.attrs), acc_quant)
    border = _border_correction(node, w_q, b.source.types[node.inputs[0]].shape,
                                data_q.zero_point)
    if border is not None:
        const = b.constant(f"{node.name}.border", border.astype(np.int32), acc_quant)
        acc = b.emit(f"{node.name}.border", Op.ADD, (acc, const), b.name(f"{out}.acc"), {},
                     acc_quant)
    scales = (acc_scales / np.float32(out_q.scale[0])).astype(np.float32)
    attrs = {"mode": RequantMode.EXACT, "scale": tuple(float(s) for s in scales),
             "zero_point": out_q.zero_point, "axis": out_axis, "out_dtype": DType.INT8}
    b.int8[out] = b.emit(f"{node.name}.requantize", Op.REQUANTIZE, (acc,), b.name(f"{out}.q"),
                         attrs, QuantParams((out_q.scale[0],), out_q.zero_point))
    return True


def _same_op(b: Builder, node: Node) -> bool:
    data, out = node.inputs[0], node.outputs[0]
    if data in b.source.constants or b.source.types[data].quant != b.source.types[out].quant:
        return False
    quant = _model_quant(b, data, "value")
    b.int8[out] = b.emit(node.name, node.op, (b.as_int8(data),), b.name(f"{out}.q"),
                         dict(node.attrs), quant)
    return True


def _clip(b: Builder, node: Node) -> bool:
    """A Clip at or beyond its input's int8 range (a folded QDQ pair's): the int8 value itself."""
    data, out = node.inputs[0], node.outputs[0]
    quant = b.source.types[data].quant
    if data in b.source.constants or quant is None or b.source.types[out].quant != quant:
        return False
    low = float_attr(node.attrs, "min", -np.inf)
    high = float_attr(node.attrs, "max", np.inf)
    if low / quant.scale[0] + quant.zero_point > INT8_MIN + 0.5 or \
            high / quant.scale[0] + quant.zero_point < INT8_MAX - 0.5:
        return False  # it clamps inside the int8 range: a float island
    b.int8[out] = b.as_int8(data)
    return True


def _on_grid(b: Builder, value: str) -> str:
    """The float version of ``value`` that the QDQ model reads: its int8 grid, dequantized."""
    if value in b.source.constants or b.source.types[value].quant is None \
            or value not in b.source.inputs:
        return b.as_real(value)  # a node's result: already made from its int8 version
    if value not in b.dequantized:
        b.dequantized[value] = b.dequantize(value, b.as_int8(value), b.name(f"{value}.dq"))
    return b.dequantized[value]


def exact_island(b: Builder, node: Node) -> bool:
    """``node`` in float32 on dequantized inputs, its result quantized with the model's scale.

    The QDQ model rounds every activation to its int8 grid, so the float version of the
    output that later readers see is the dequantized int8 one, never the raw result.
    """
    out = node.outputs[0]
    if b.source.types[out].dtype is not DType.FLOAT32 or b.source.types[out].quant is None:
        return float_island(b, node)
    inputs = tuple(_on_grid(b, v) for v in node.inputs)
    b.real[out] = b.emit(node.name, node.op, inputs, b.name(f"{out}.float"), dict(node.attrs))
    b.as_int8(out)
    del b.real[out]  # as_real dequantizes the int8 version when a reader needs it
    return True


#: The rewrite of each quantization rule that has one in exact mode (the others: float islands).
EXACT_BY_RULE: dict[QuantRule, Rule] = {
    QuantRule.CLIP: _clip, QuantRule.PRODUCT: _linear, QuantRule.MATMUL: _linear, QuantRule.MOVE: _same_op,
    QuantRule.PICK: _same_op,
}
EXACT_RULES: dict[Op, Rule] = {op: EXACT_BY_RULE[d.quantize] for op, d in REGISTRY.items()
                               if d.quantize in EXACT_BY_RULE}
