"""Conv, Gemm and MatMul: the out-element-wise-fusable anchors of accelerator kernels.

Attributes are the normalized ones the ONNX frontend writes: Conv ``kernel_shape``,
``strides`` (2), ``pads`` (4: top, left, bottom, right), ``group``; Gemm ``alpha``,
``beta``, ``transA``, ``transB``.  On integer inputs every op takes int8 data and
weights (and an int32 bias) and yields the int32 accumulator, wrapped to 32 bits; an
integer Conv's ``pad_value`` (default 0) is what its padding holds: -128 for data whose
zero point is -128.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from openvta.compiler.reference import conv2d_nchw

from ..accel import accelerator_refusal
from ..errors import OpError
from ..ir import Attrs, Dim, DType, Node, Op, TensorType
from .elementwise import broadcast_shape
from .base import (OnnxExample, OpDef, PatternKind, QuantRule, float_attr, int_attr, ints_attr,
                   require_rank, wrap_int32)

if TYPE_CHECKING:
    from openvta.isa import Config

    from ..ir import Graph

__all__ = ["DEFS", "conv_geometry"]


def _out_dtype(data: TensorType, weight: TensorType, bias: TensorType | None, op: Op) -> DType:
    if data.dtype is DType.FLOAT32:
        if weight.dtype is not DType.FLOAT32 or (bias is not None and bias.dtype is not DType.FLOAT32):
            raise OpError(f"{op.value} operands must all be float32 with float32 data")
        return DType.FLOAT32
    if data.dtype is not DType.INT8 or weight.dtype is not DType.INT8 \
            or (bias is not None and bias.dtype is not DType.INT32):
        found = ", ".join(t.dtype.value for t in (data, weight, bias) if t is not None)
        raise OpError(f"integer {op.value} operands must be int8, int8 and an int32 bias, "
                      f"not {found}")
    return DType.INT32


def _static(dims: Sequence[object], what: str) -> tuple[int, ...]:
    if not all(isinstance(d, int) for d in dims):
        raise OpError(f"{what} must have a static shape, not {tuple(dims)!r}")
    return tuple(d for d in dims if isinstance(d, int))


def conv_geometry(attrs: Attrs) -> tuple[tuple[int, int], tuple[int, int, int, int], int]:
    strides, pads = ints_attr(attrs, "strides", 2, (1, 1)), ints_attr(attrs, "pads", 4, (0, 0, 0, 0))
    return (strides[0], strides[1]), (pads[0], pads[1], pads[2], pads[3]), int_attr(attrs, "group", 1)


def _conv_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data, weight = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    require_rank(data, 4, "Conv data")
    require_rank(weight, 4, "Conv weight")
    strides, pads, group = conv_geometry(attrs)
    channels, height, width = _static(data.shape[1:], "Conv data")
    out_ch, in_per_group, kh, kw = _static(weight.shape, "Conv weight")
    if group < 1 or in_per_group * group != channels or out_ch % group:
        raise OpError(f"Conv weight {weight.shape} with group {group} must match "
                      f"{channels} data channels")
    if bias is not None and bias.shape != (out_ch,):
        raise OpError(f"Conv bias must have shape ({out_ch},), not {bias.shape!r}")
    oh = (height + pads[0] + pads[2] - kh) // strides[0] + 1
    ow = (width + pads[1] + pads[3] - kw) // strides[1] + 1
    if oh < 1 or ow < 1 or min(strides) < 1 or min(pads) < 0:
        raise OpError(f"Conv kernel {kh}x{kw} must fit the padded {height}x{width} data")
    return TensorType((data.shape[0], out_ch, oh, ow), _out_dtype(data, weight, bias, Op.CONV))


def _conv_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    strides, pads, group = conv_geometry(attrs)
    out = conv2d_nchw(inputs[0], inputs[1], strides, pads, group)
    if len(inputs) > 2:
        out = out + inputs[2].astype(np.float64).reshape(1, -1, 1, 1)
    return out.astype(np.float32)


def _conv_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    strides, pads, group = conv_geometry(attrs)
    # (int8 data whose zero point is -128 is padded with -128, the code of 0.0)
    out = conv2d_nchw(inputs[0], inputs[1], strides, pads, group, int_attr(attrs, "pad_value", 0)).astype(np.int64)
    if len(inputs) > 2:
        out = out + inputs[2].astype(np.int64).reshape(1, -1, 1, 1)
    return wrap_int32(out)


def _on_accelerator(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
    return accelerator_refusal(node, graph, cfg)


def _conv_macs(inputs: Sequence[TensorType], output: TensorType, attrs: Attrs) -> int:
    weight = inputs[1].concrete()
    return math.prod(output.concrete()) * math.prod(weight[1:])


def _gemm_dims(inputs: Sequence[TensorType], attrs: Attrs) -> tuple[Dim, int, int]:
    a, b = inputs[0], inputs[1]
    require_rank(a, 2, "Gemm A")
    require_rank(b, 2, "Gemm B")
    m, k = a.shape[::-1] if int_attr(attrs, "transA", 0) else a.shape
    kb, n = _static(b.shape[::-1] if int_attr(attrs, "transB", 0) else b.shape, "Gemm B")
    if not isinstance(k, int) or k != kb:
        raise OpError(f"Gemm inner dimensions must agree, not {k!r} and {kb!r}")
    return m, k, n


def _gemm_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    m, _, n = _gemm_dims(inputs, attrs)
    if len(inputs) > 2:
        c = inputs[2].concrete()
        if len(c) > 2 or any(d not in (1, want) for d, want in zip(c[::-1], (n, m))):
            raise OpError(f"Gemm C of shape {inputs[2].shape!r} must broadcast to ({m}, {n})")
    dtype = _out_dtype(inputs[0], inputs[1], inputs[2] if len(inputs) > 2 else None, Op.GEMM)
    return TensorType((m, n), dtype)


def _gemm_operands(inputs: Sequence[np.ndarray], attrs: Attrs) -> tuple[np.ndarray, np.ndarray]:
    a, b = inputs[0].astype(np.float64), inputs[1].astype(np.float64)
    return (a.T if int_attr(attrs, "transA", 0) else a), (b.T if int_attr(attrs, "transB", 0) else b)


def _gemm_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    a, b = _gemm_operands(inputs, attrs)
    out = float_attr(attrs, "alpha", 1.0) * (a @ b)
    if len(inputs) > 2:
        out = out + float_attr(attrs, "beta", 1.0) * inputs[2].astype(np.float64)
    return out.astype(np.float32)


def _gemm_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    if float_attr(attrs, "alpha", 1.0) != 1.0 or float_attr(attrs, "beta", 1.0) != 1.0:
        raise OpError("integer Gemm must have alpha = beta = 1")
    a, b = _gemm_operands(inputs, attrs)
    out = (a @ b).astype(np.int64)
    if len(inputs) > 2:
        out = out + inputs[2].astype(np.int64)
    return wrap_int32(out)


def _gemm_macs(inputs: Sequence[TensorType], output: TensorType, attrs: Attrs) -> int:
    _, k, _ = _gemm_dims(inputs, attrs)
    return math.prod(output.concrete()) * k


def _matmul_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """numpy's ``matmul``: 1-D operands promoted and dropped again, batch dimensions
    broadcast (the accelerator's dense takes a 2-D constant second operand, as a Gemm)."""
    a, b = inputs
    if a.ndim < 1 or b.ndim < 1:
        raise OpError(f"MatMul operands must have at least one dimension, not {a.shape!r} and {b.shape!r}")
    k = b.shape[-2] if b.ndim > 1 else b.shape[0]
    if a.shape[-1] != k:
        raise OpError(f"MatMul inner dimensions must agree, not {a.shape[-1]!r} and {k!r}")
    batch = broadcast_shape(a.shape[:-2], b.shape[:-2])
    shape = batch + a.shape[-2:-1] + b.shape[-1:] * (b.ndim > 1)
    return TensorType(shape, _out_dtype(a, b, None, Op.MATMUL))


def _matmul_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return (inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)).astype(np.float32)


def _matmul_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return wrap_int32((inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)).astype(np.int64))


def _matmul_macs(inputs: Sequence[TensorType], output: TensorType, attrs: Attrs) -> int:
    b = inputs[1].concrete()
    return math.prod(output.concrete()) * int(b[-2] if len(b) > 1 else b[0])


DEFS = (
    OpDef(Op.CONV, PatternKind.OUT_ELEMWISE_FUSABLE, (2, 3), _conv_infer, _conv_float, _conv_int,
          accel_ok=_on_accelerator, macs=_conv_macs, examples=(
              OnnxExample(((1, 3, 7, 7), (4, 3, 3, 3), (4,)), {"pads": [1, 1, 1, 1]}),
              OnnxExample(((2, 2, 6, 5), (3, 2, 1, 2)), {"strides": [2, 1], "pads": [0, 1, 0, 0]}),
              OnnxExample(((1, 4, 5, 5), (4, 1, 3, 3)), {"group": 4, "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 6, 6), (2, 2, 3, 3)), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
              OnnxExample(((1, 2, 5, 5), (3, 2, 2, 2)), {"auto_pad": "SAME_LOWER"}),
          ), quantize=QuantRule.PRODUCT),
    OpDef(Op.GEMM, PatternKind.OUT_ELEMWISE_FUSABLE, (2, 3), _gemm_infer, _gemm_float, _gemm_int,
          accel_ok=_on_accelerator, macs=_gemm_macs, examples=(
              OnnxExample(((3, 5), (4, 5), (4,)), {"transB": 1}),
              OnnxExample(((5, 3), (5, 4)), {"transA": 1, "alpha": 0.5}),
              OnnxExample(((3, 5), (5, 4), (1, 4)), {"beta": 2.0}),
          ), quantize=QuantRule.PRODUCT),
    OpDef(Op.MATMUL, PatternKind.OUT_ELEMWISE_FUSABLE, (2, 2), _matmul_infer, _matmul_float,
          _matmul_int, accel_ok=_on_accelerator, macs=_matmul_macs, examples=(
              OnnxExample(((3, 5), (5, 4))),
              OnnxExample(((2, 3, 5), (5, 4))),
              OnnxExample(((2, 3, 4, 5), (2, 3, 5, 6))),
              OnnxExample(((4, 5), (5,))),
          ), quantize=QuantRule.MATMUL),
)
