"""Ops the classic CNNs of the ONNX model zoo add: Mul (broadcast), LRN, Concat and Transpose,
Unsqueeze, Squeeze and Pad of activations;
and the integer graph's Im2Col, which packs a few-channel convolution's kernel windows
into channels so that the accelerator runs it as a 1×1 convolution.

All four run on the CPU.  They have float references only, so on the integer graph each
runs as a float island (its int8 inputs dequantized, its result quantized to its
calibrated scale: ``passes/quantize.py``).  Mul with a per-channel constant is how some
exporters write a BatchNormalization (DenseNet-121, Inception v2); Concat joins Inception's
and SqueezeNet's branches and DenseNet's features; Transpose with Reshape is ShuffleNet's
channel shuffle; LRN is AlexNet's, ZFNet's and Inception v1's local response normalization.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from ..errors import OpError
from ..ir import Attrs, Dim, DType, Op, TensorType
from .base import (OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, float_attr, int_attr, ints_attr,
                   require_float)
from .elementwise import broadcast_shape

__all__ = ["DEFS", "checked_axis"]


def _mul_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    shape = broadcast_shape(inputs[0].shape, inputs[1].shape)
    if all(t.dtype is DType.INT8 for t in inputs):  # the integer graph's product of two activations
        return TensorType(shape, DType.INT32)
    for t in inputs:
        require_float(t, Op.MUL)
    return TensorType(shape, inputs[0].dtype)


def _mul(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return (inputs[0] * inputs[1]).astype(np.float32)


def _mul_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """int8 × int8 → int32 (at most 128², exact): a gate times the activation it scales."""
    return inputs[0].astype(np.int32) * inputs[1].astype(np.int32)


def _lrn_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(inputs[0], Op.LRN)
    if inputs[0].ndim < 3:
        raise OpError(f"LRN data must have a channel axis and a spatial one, not shape {inputs[0].shape!r}")
    if int_attr(attrs, "size") < 1:
        raise OpError(f"LRN size must be positive, not {attrs['size']!r}")
    return TensorType(inputs[0].shape, inputs[0].dtype)


def _lrn(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's LRN: ``x / (bias + alpha/size · Σ x²)^beta`` over ``size`` neighbouring channels."""
    x = inputs[0].astype(np.float64)
    size = int_attr(attrs, "size")
    alpha, beta, bias = (float_attr(attrs, k, d) for k, d in (("alpha", 1e-4), ("beta", 0.75), ("bias", 1.0)))
    squares = np.pad(x * x, [(0, 0), ((size - 1) // 2, size - 1 - (size - 1) // 2)] + [(0, 0)] * (x.ndim - 2))
    window = sum(squares[:, k:k + x.shape[1]] for k in range(size))
    return (x / (bias + alpha / size * window) ** beta).astype(np.float32)


def checked_axis(attrs: Attrs, ndim: int, op: Op, default: int | None = None) -> int:
    """The ``axis`` attribute, within ``ndim`` dimensions, made non-negative."""
    axis = int_attr(attrs, "axis", default)
    if not -ndim <= axis < ndim:
        raise OpError(f"{op.value} axis must lie within the {ndim} dimensions, not {axis}")
    return axis % ndim


def _concat_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    first = inputs[0]
    for t in inputs:
        if not (t.dtype is DType.INT8 and first.dtype is DType.INT8):  # (the integer graph's: int8 codes)
            require_float(t, Op.CONCAT)
        if t.ndim != first.ndim:
            raise OpError(f"Concat inputs must have one rank, not {first.shape!r} and {t.shape!r}")
    axis = checked_axis(attrs, first.ndim, Op.CONCAT)
    for t in inputs:
        if any(a != b for k, (a, b) in enumerate(zip(t.shape, first.shape)) if k != axis):
            raise OpError(f"Concat inputs must agree but on axis {axis}, not {first.shape!r} and {t.shape!r}")
    sizes = [t.shape[axis] for t in inputs]
    if not all(isinstance(s, int) for s in sizes):
        raise OpError(f"Concat along the symbolic batch (axis {axis}) is not supported")
    total: Dim = sum(s for s in sizes if isinstance(s, int))
    return TensorType(first.shape[:axis] + (total,) + first.shape[axis + 1:], first.dtype)


def _concat(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.concatenate(inputs, axis=checked_axis(attrs, inputs[0].ndim, Op.CONCAT)).astype(np.float32)


def _concat_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.concatenate(inputs, axis=checked_axis(attrs, inputs[0].ndim, Op.CONCAT))


def _perm(attrs: Attrs, ndim: int) -> tuple[int, ...]:
    perm = ints_attr(attrs, "perm", default=tuple(reversed(range(ndim))))
    if sorted(perm) != list(range(ndim)):
        raise OpError(f"Transpose perm must be a permutation of the {ndim} axes, not {perm!r}")
    return perm


def _transpose_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if not inputs[0].dtype.is_quantized:  # an integer transpose moves its codes: exact
        require_float(inputs[0], Op.TRANSPOSE)
    perm = _perm(attrs, inputs[0].ndim)
    if perm[0] != 0 and isinstance(inputs[0].shape[0], str):
        raise OpError(f"Transpose {perm!r} moves the symbolic batch: not supported")
    return TensorType(tuple(inputs[0].shape[p] for p in perm), inputs[0].dtype)


def _transpose(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(inputs[0], _perm(attrs, inputs[0].ndim)))


def _axes(attrs: Attrs, ndim: int, op: Op) -> tuple[int, ...]:
    axes = ints_attr(attrs, "axes")
    if len(set(a % ndim for a in axes if -ndim <= a < ndim)) != len(axes):
        raise OpError(f"{op.value} axes must be distinct and within the {ndim} dimensions, not {axes!r}")
    return tuple(sorted(a % ndim for a in axes))


def _unsqueeze_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    axes = _axes(attrs, data.ndim + len(ints_attr(attrs, "axes")), Op.UNSQUEEZE)
    shape = list(data.shape)
    for axis in axes:
        shape.insert(axis, 1)
    return TensorType(tuple(shape), data.dtype)


def _unsqueeze(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    return np.expand_dims(x, _axes(attrs, x.ndim + len(ints_attr(attrs, "axes")), Op.UNSQUEEZE)).copy()


def _squeeze_axes(attrs: Attrs, shape: tuple[Dim, ...]) -> tuple[int, ...]:
    if "axes" not in attrs:
        return tuple(k for k, d in enumerate(shape) if d == 1)
    axes = _axes(attrs, len(shape), Op.SQUEEZE)
    if any(shape[a] != 1 for a in axes):
        raise OpError(f"Squeeze axes {axes!r} must be dimensions of size 1 in {shape!r}")
    return axes


def _squeeze_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    axes = _squeeze_axes(attrs, data.shape)
    return TensorType(tuple(d for k, d in enumerate(data.shape) if k not in axes), data.dtype)


def _squeeze(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.squeeze(inputs[0], _squeeze_axes(attrs, inputs[0].shape)).copy()


_PAD_MODES: dict[str, Literal["constant", "reflect", "edge", "wrap"]] = {
    "constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pad_widths(attrs: Attrs, ndim: int) -> list[tuple[int, int]]:
    pads = ints_attr(attrs, "pads")
    if len(pads) != 2 * ndim or min(pads, default=0) < 0:
        raise OpError(f"Pad pads must be {2 * ndim} non-negative sizes (begins, then ends), not {pads!r}")
    return [(pads[k], pads[k + ndim]) for k in range(ndim)]


def _pad_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(inputs[0], Op.PAD)
    data = inputs[0]
    mode = attrs.get("mode", "constant")
    if mode not in _PAD_MODES:
        raise OpError(f"Pad mode must be one of {', '.join(_PAD_MODES)}, not {mode!r}")
    widths = _pad_widths(attrs, data.ndim)
    if isinstance(data.shape[0], str) and widths[0] != (0, 0):
        raise OpError("Pad of the symbolic batch is not supported")
    return TensorType(tuple(d if isinstance(d, str) else d + a + b for d, (a, b) in zip(data.shape, widths)),
                      data.dtype)


def _pad(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    mode = _PAD_MODES[str(attrs.get("mode", "constant"))]
    widths = _pad_widths(attrs, x.ndim)
    if mode == "constant":
        return np.pad(x, widths, constant_values=float_attr(attrs, "value", 0.0)).astype(np.float32)
    return np.pad(x, widths, mode=mode).astype(np.float32)


def _im2col_geometry(attrs: Attrs) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    kh, kw = ints_attr(attrs, "kernel_shape", 2)
    sh, sw = ints_attr(attrs, "strides", 2)
    top, left, bottom, right = ints_attr(attrs, "pads", 4)
    return (kh, kw), (sh, sw), (top, left, bottom, right)


def _im2col_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.ndim != 4:
        raise OpError(f"Im2Col data must be 4-D NCHW, not {data.shape!r}")
    (kh, kw), (sh, sw), (top, left, bottom, right) = _im2col_geometry(attrs)
    n, c, h, w = data.shape
    assert isinstance(c, int) and isinstance(h, int) and isinstance(w, int)  # only the batch is symbolic
    oh, ow = (h + top + bottom - kh) // sh + 1, (w + left + right - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise OpError(f"Im2Col kernel {(kh, kw)} is larger than the padded data {data.shape!r}")
    return TensorType((n, c * kh * kw, oh, ow), data.dtype)


def im2col(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    """``(N, C·KH·KW, OH, OW)``: channel ``c·KH·KW + ky·KW + kx`` of output pixel ``(oy, ox)``
    is the (zero-padded) input ``x[c, oy·SH + ky − top, ox·SW + kx − left]`` — the order
    of a weight ``(O, C, KH, KW)`` reshaped to ``(O, C·KH·KW, 1, 1)``."""
    (kh, kw), (sh, sw), (top, left, bottom, right) = _im2col_geometry(attrs)
    padded = np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)])
    n, c = x.shape[:2]
    oh = (padded.shape[2] - kh) // sh + 1
    ow = (padded.shape[3] - kw) // sw + 1
    cols = np.empty((n, c, kh, kw, oh, ow), x.dtype)
    for ky in range(kh):
        for kx in range(kw):
            cols[:, :, ky, kx] = padded[:, :, ky:ky + sh * (oh - 1) + 1:sh, kx:kx + sw * (ow - 1) + 1:sw]
    return cols.reshape(n, c * kh * kw, oh, ow)


def _im2col(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return im2col(inputs[0], attrs)


_CPU = cpu_only("runs on the CPU (a float island between the accelerator's int8 regions)")
DEFS = (
    OpDef(Op.MUL, PatternKind.BROADCAST, (2, 2), _mul_infer, _mul, _mul_int, accel_ok=_CPU, examples=(
        OnnxExample(((2, 3, 4, 4), (3, 1, 1))),
        OnnxExample(((2, 3, 4), (2, 3, 4))),
        OnnxExample(((4, 5),), constants={1: (0.5, -1.0, 2.0, 0.0, 3.5)}),
    ), quantize=QuantRule.SCALE_BY),
    OpDef(Op.LRN, PatternKind.OPAQUE, (1, 1), _lrn_infer, _lrn, None, accel_ok=_CPU, examples=(
        OnnxExample(((2, 7, 3, 3),), {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
        OnnxExample(((1, 6, 4, 4),), {"size": 3, "alpha": 2e-5, "beta": 0.5, "bias": 2.0}),
    )),
    OpDef(Op.CONCAT, PatternKind.INJECTIVE, (1, 1 << 16), _concat_infer, _concat, _concat_int, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4, 4), (2, 5, 4, 4)), {"axis": 1}),
                    OnnxExample(((2, 3), (2, 3), (2, 1)), {"axis": -1})), quantize=QuantRule.CONCAT),
    OpDef(Op.TRANSPOSE, PatternKind.INJECTIVE, (1, 1), _transpose_infer, _transpose, _transpose,
          accel_ok=cpu_only("a transpose runs on the CPU between accelerator regions"),
          scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((2, 3, 4, 5, 6),), {"perm": [0, 2, 1, 3, 4]}),
                    OnnxExample(((3, 4),))), quantize=QuantRule.MOVE),
    OpDef(Op.UNSQUEEZE, PatternKind.INJECTIVE, (1, 1), _unsqueeze_infer, _unsqueeze, _unsqueeze, accel_ok=_CPU,
          scale_rule=ScaleRule.PRESERVE, quantize=QuantRule.MOVE,
          examples=(OnnxExample(((3, 4),), constants={1: (0, 3)}), OnnxExample(((2, 3, 4),), constants={1: (-1,)}))),
    OpDef(Op.SQUEEZE, PatternKind.INJECTIVE, (1, 1), _squeeze_infer, _squeeze, _squeeze, accel_ok=_CPU,
          scale_rule=ScaleRule.PRESERVE, quantize=QuantRule.MOVE,
          examples=(OnnxExample(((3, 1, 4, 1),), constants={1: (1,)}), OnnxExample(((1, 3, 1, 4),)))),
    OpDef(Op.PAD, PatternKind.INJECTIVE, (1, 1), _pad_infer, _pad, None, accel_ok=_CPU,
          examples=(OnnxExample(((1, 2, 3, 3),), constants={1: (0, 0, 1, 2, 0, 0, 2, 1), 2: 0.5}),
                    OnnxExample(((1, 2, 4, 4),), {"mode": "reflect"}, constants={1: (0, 0, 1, 1, 0, 0, 1, 1)}),
                    OnnxExample(((2, 3),), {"mode": "edge"}, constants={1: (0, 2, 0, 1)}))),
    OpDef(Op.IM2COL, PatternKind.INJECTIVE, (1, 1), _im2col_infer, _im2col, _im2col, scale_rule=ScaleRule.PRESERVE,
          accel_ok=cpu_only("the kernel windows packed into channels on the host, for the accelerator's "
                            "1x1 convolution after it"), quantize=QuantRule.SAME),
)
