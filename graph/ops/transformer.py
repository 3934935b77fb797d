"""The float math of transformer encoders: Sub, Div and Pow with
broadcasting; Erf, Sqrt, Sigmoid, Tanh and Gelu element-wise; ReduceMean and ReduceSum;
LayerNormalization.  Together with MatMul (numpy's semantics on the float path), Softmax,
Transpose and Reshape they are a BERT-style encoder's layer, in any of the forms exporters
write: LayerNorm as one op (opset 17) or decomposed (ReduceMean, Sub, Pow, Sqrt, Div), GELU
with Erf, with Tanh, or as the Gelu operator (opset 20).

All run on the CPU.  On the integer graph LayerNormalization of an int8 tensor is an
integer kernel (:func:`layer_norm_int`: the row's sum, an integer square root, one
division per element); GELU, Erf, Tanh and Sigmoid of an int8 tensor are tables of their
256 codes (``Table``); Div and Mul by a positive constant are requantizations; the others
are float islands (their int8 inputs dequantized, their result quantized to its
calibrated scale), as the zoo's Mul and LRN are.  Float kernels compute in float64 and
round once to float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from openvta.isa import WIDE_RANGE

from ..errors import OpError
from ..ir import Attrs, DType, Op, TensorType
from .base import OnnxExample, OpDef, PatternKind, QuantRule, cpu_only, float_attr, int_attr, require_float
from .elementwise import broadcast_shape
from .tensor import checked_axis

__all__ = ["DEFS"]


def _binary_infer(op: Op) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    def infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
        # Pow's exponent may be an integer constant (``x ** 2`` as int64)
        for t in inputs[:1] if op is Op.POW else inputs:
            require_float(t, op)
        return TensorType(broadcast_shape(inputs[0].shape, inputs[1].shape), inputs[0].dtype)
    return infer


def _binary(fn: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):  # IEEE results, as ONNX's
            return fn(inputs[0].astype(np.float64), inputs[1].astype(np.float64)).astype(np.float32)
    return kernel


def _unary_bool(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        return np.asarray(fn(inputs[0]), dtype=np.bool_)
    return kernel


def _unary_infer(op: Op) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    def infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
        require_float(inputs[0], op)
        return TensorType(inputs[0].shape, inputs[0].dtype)
    return infer


def _unary(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return np.asarray(fn(inputs[0].astype(np.float64))).astype(np.float32)
    return kernel


_ERF = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    """The error function of float64 ``x`` (the C library's, value by value).

    >>> erf(np.array([0.0, 1.0, -3.0])).round(6).tolist()
    [0.0, 0.842701, -0.999978]
    """
    return _ERF(x).astype(np.float64)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * x))  # no overflow for large |x|


def _hard_swish(x: np.ndarray) -> np.ndarray:
    """MobileNetV3's ``x · relu6(x + 3) / 6`` (ONNX's HardSwish: ``x · max(0, min(1, x/6 + 1/2))``)."""
    return x * np.clip(x / 6.0 + 0.5, 0.0, 1.0)


def _hard_sigmoid(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's HardSigmoid: ``max(0, min(1, alpha·x + beta))``."""
    alpha, beta = float_attr(attrs, "alpha", 0.2), float_attr(attrs, "beta", 0.5)
    return np.clip(alpha * inputs[0].astype(np.float64) + beta, 0.0, 1.0).astype(np.float32)


def _leaky_relu(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    return np.where(x < 0, np.float32(float_attr(attrs, "alpha", 0.01)) * x, x).astype(np.float32)


def _prelu_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    for t in inputs:
        require_float(t, Op.PRELU)
    if broadcast_shape(inputs[0].shape, inputs[1].shape) != inputs[0].shape:
        raise OpError(f"PRelu slope {inputs[1].shape!r} must broadcast to the data's {inputs[0].shape!r}")
    return TensorType(inputs[0].shape, inputs[0].dtype)


def _prelu(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, slope = inputs
    return np.where(x < 0, slope * x, x).astype(np.float32)


def _is_nan_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(inputs[0], Op.IS_NAN)
    return TensorType(inputs[0].shape, DType.BOOL)


def _gelu_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    require_float(inputs[0], Op.GELU)
    if attrs.get("approximate", "none") not in ("none", "tanh"):
        raise OpError(f"Gelu approximate must be 'none' or 'tanh', not {attrs['approximate']!r}")
    return TensorType(inputs[0].shape, inputs[0].dtype)


def _gelu(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0].astype(np.float64)
    if attrs.get("approximate", "none") == "tanh":
        out = 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    else:
        out = 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))
    return out.astype(np.float32)


def _reduce_axes(attrs: Attrs, ndim: int, op: Op) -> tuple[int, ...]:
    axes = attrs.get("axes")
    if axes is None:
        return tuple(range(ndim))
    if not isinstance(axes, tuple) or not all(isinstance(a, int) and -ndim <= a < ndim for a in axes):
        raise OpError(f"{op.value} axes must lie within the {ndim} dimensions, not {axes!r}")
    return tuple(sorted({a % ndim for a in axes if isinstance(a, int)}))


def _reduce_infer(op: Op) -> Callable[[Sequence[TensorType], Attrs], TensorType]:
    def infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
        data = inputs[0]
        # ReduceSum of int8 or int32: the int32 sum (the integer mean is a sum and a requantization)
        dtype = DType.INT32 if op is Op.REDUCE_SUM and data.dtype.is_quantized else data.dtype
        if dtype is not DType.INT32:
            require_float(data, op)
        axes = _reduce_axes(attrs, data.ndim, op)
        if int_attr(attrs, "keepdims", 1):
            return TensorType(tuple(1 if k in axes else d for k, d in enumerate(data.shape)), dtype)
        return TensorType(tuple(d for k, d in enumerate(data.shape) if k not in axes), dtype)
    return infer


def _reduce_sum_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """The int32 sum of an int8 or int32 tensor (wrapping at 32 bits, as int32 adds do)."""
    x = inputs[0].astype(np.int64)
    axes = _reduce_axes(attrs, x.ndim, Op.REDUCE_SUM)
    total = x.sum(axis=axes, keepdims=bool(int_attr(attrs, "keepdims", 1)))
    return np.asarray(total).astype(np.int32)


def _reduce(fn: Callable[..., np.ndarray], op: Op) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = inputs[0].astype(np.float64)
        axes = _reduce_axes(attrs, x.ndim, op)
        return np.asarray(fn(x, axis=axes, keepdims=bool(int_attr(attrs, "keepdims", 1)))).astype(np.float32)
    return kernel


#: The fraction bits of the integer LayerNorm's per-channel gain and offset.
LAYER_NORM_FRACTION = 16
#: The fraction bits of its standard deviation (the square root of the variance's 2**16-fold).
ROOT_FRACTION = 8


def isqrt(values: np.ndarray) -> np.ndarray:
    """``floor(sqrt(v))`` of non-negative int64 values, exactly (a float estimate, corrected).

    >>> isqrt(np.array([0, 1, 15, 16, 2**52 + 1, 2**62])).tolist() == [0, 1, 3, 4, 2**26, 2**31]
    True
    """
    v = np.asarray(values, dtype=np.int64)
    root = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    root = np.where(root * root > v, root - 1, root)
    return np.where((root + 1) * (root + 1) <= v, root + 1, root)


def layer_norm_int(q: np.ndarray, gain: np.ndarray, offset: np.ndarray, epsilon: int,
                   root: int = ROOT_FRACTION, out: DType = DType.INT8) -> np.ndarray:
    """The integer LayerNorm of int8 ``q`` over its last axis (``N`` values), in int64::

        d = N·q - sum(q)                             N times each value's deviation, exact
        r = isqrt(sum(d²) · 2**16 // N + epsilon)    N · 2**8 times the standard deviation
        out = clip(floor((d·gain·2**8 + offset·r + r·2**15) / (r·2**16)), -128, 127)

    with ``gain = round(2**16 · scale / s_out)``, ``offset = round(2**16 · bias / s_out)`` per
    channel and ``epsilon = round(2**16 · N² · ε / s_in²)``.  A 16-bit input (int32: a
    residual stream) takes ``root = 0`` and ``epsilon = round(N² · ε / s_in²)`` (its
    deviations are fine already, and ``sum(d²)·2**16`` would pass int64): ``(x - mean) / sqrt(var + ε) · scale +
    bias`` in the output's scale, rounded once.

    Examples
    --------
    >>> q = np.array([[10, 20, 30, 40]], np.int8)
    >>> layer_norm_int(q, np.full(4, 2 ** 16 * 50), np.zeros(4, np.int64), 0).tolist()
    [[-67, -22, 22, 67]]
    """
    x = q.astype(np.int64)
    n = x.shape[-1]
    d = n * x - x.sum(axis=-1, keepdims=True)
    r = np.maximum(isqrt(((d * d).sum(axis=-1, keepdims=True) << (2 * root)) // n + epsilon), 1)
    scaled = r << LAYER_NORM_FRACTION
    values = ((d * gain << root) + offset * r + (scaled >> 1)) // scaled
    if out is DType.INT32:  # a 16-bit output, for a 16-bit residual stream
        return np.clip(values, *WIDE_RANGE).astype(np.int32)
    return np.clip(values, -128, 127).astype(np.int8)


def _layer_norm_params(attrs: Attrs, channels: int) -> tuple[np.ndarray, np.ndarray, int]:
    gain, offset, epsilon = attrs.get("gain"), attrs.get("offset"), attrs.get("epsilon_q", 0)
    for name, value in (("gain", gain), ("offset", offset)):
        if not isinstance(value, tuple) or len(value) != channels or not all(isinstance(v, int) for v in value):
            raise OpError(f"an integer LayerNormalization's {name} must hold {channels} integers, one per channel")
    if not isinstance(epsilon, int) or epsilon < 0:
        raise OpError(f"an integer LayerNormalization's epsilon_q must be a non-negative integer, not {epsilon!r}")
    return np.asarray(gain, dtype=np.int64), np.asarray(offset, dtype=np.int64), epsilon


def _layer_norm_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    gain, offset, epsilon = _layer_norm_params(attrs, inputs[0].shape[-1])
    out = attrs.get("out_dtype", DType.INT8)
    return layer_norm_int(inputs[0], gain, offset, epsilon, ROOT_FRACTION if inputs[0].dtype == np.int8 else 0,
                          out if isinstance(out, DType) else DType.INT8)


def _layer_norm_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.dtype.is_quantized and len(inputs) == 1:  # the integer kernel (int8, or 16-bit in int32)
        if checked_axis(attrs, data.ndim, Op.LAYER_NORM, -1) != data.ndim - 1:
            raise OpError("an integer LayerNormalization normalizes the last axis only")
        _layer_norm_params(attrs, int(data.shape[-1]))
        out = attrs.get("out_dtype", DType.INT8)
        if out not in (DType.INT8, DType.INT32):
            raise OpError(f"an integer LayerNormalization's out_dtype must be int8 or int32, not {out!r}")
        return TensorType(data.shape, out)
    for t in inputs:
        require_float(t, Op.LAYER_NORM)
    axis = checked_axis(attrs, data.ndim, Op.LAYER_NORM, -1)
    normalized = data.shape[axis:]
    for which, t in zip(("Scale", "B"), inputs[1:]):
        try:
            shape = broadcast_shape(normalized, t.shape)
        except OpError:
            shape = None
        if shape != normalized:
            raise OpError(f"LayerNormalization {which} must broadcast to the normalized shape {normalized!r}, "
                          f"not {t.shape!r}")
    return TensorType(data.shape, data.dtype)


def _layer_norm(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's LayerNormalization: ``(x - mean) / sqrt(var + epsilon) · scale + bias`` over the
    axes from ``axis`` on (its Y output)."""
    x = inputs[0].astype(np.float64)
    axes = tuple(range(checked_axis(attrs, x.ndim, Op.LAYER_NORM, -1), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axes, keepdims=True)
    out = (x - mean) / np.sqrt(var + float_attr(attrs, "epsilon", 1e-5)) * inputs[1].astype(np.float64)
    if len(inputs) > 2:
        out = out + inputs[2].astype(np.float64)
    return out.astype(np.float32)


_CPU = cpu_only("runs on the CPU (a float island between the accelerator's int8 regions)")
_REDUCE = cpu_only("a reduction across a tensor's positions runs on the CPU (the ALU adds lanes, not across "
                   "them; on int8: the int32 sum)")
_PAIRS = (OnnxExample(((2, 3, 4), (2, 3, 4))), OnnxExample(((2, 5, 6), (6,))))
DEFS = (
    OpDef(Op.SUB, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.SUB), _binary(np.subtract), None, accel_ok=_CPU,
          examples=_PAIRS + (OnnxExample(((3, 4),), constants={1: 1.0}),)),
    OpDef(Op.DIV, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.DIV), _binary(np.divide), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4), (2, 3, 4)), positive=(1,)),
                    OnnxExample(((2, 4, 8),), constants={1: 2.8284271})), quantize=QuantRule.SCALE_BY
          ),
    OpDef(Op.POW, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.POW), _binary(np.power), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), constants={1: 2.0}), OnnxExample(((3, 4),), constants={1: 3.0}),
                    OnnxExample(((2, 3), (2, 3)), positive=(0,)))),
    OpDef(Op.ERF, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.ERF), _unary(erf), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 8),)),), quantize=QuantRule.TABLE),
    OpDef(Op.SQRT, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.SQRT), _unary(np.sqrt), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), positive=(0,)),)),
    OpDef(Op.SIGMOID, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.SIGMOID), _unary(_sigmoid), None,
          accel_ok=_CPU, examples=(OnnxExample(((2, 3, 4),)),), quantize=QuantRule.TABLE),
    OpDef(Op.HARD_SWISH, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.HARD_SWISH), _unary(_hard_swish), None,
          accel_ok=_CPU, examples=(OnnxExample(((2, 3, 4, 4),), opset=14),), quantize=QuantRule.TABLE),
    OpDef(Op.HARD_SIGMOID, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.HARD_SIGMOID), _hard_sigmoid, None,
          accel_ok=_CPU, examples=(OnnxExample(((2, 3, 4, 4),)), OnnxExample(((3, 5),), {"alpha": 0.5, "beta": 0.1})),
          quantize=QuantRule.TABLE),
    OpDef(Op.LEAKY_RELU, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.LEAKY_RELU), _leaky_relu, None,
          accel_ok=_CPU, examples=(OnnxExample(((2, 3, 4, 4),)), OnnxExample(((3, 5),), {"alpha": 0.2})),
          quantize=QuantRule.TABLE),
    OpDef(Op.PRELU, PatternKind.BROADCAST, (2, 2), _prelu_infer, _prelu, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4, 4), (3, 1, 1))), OnnxExample(((2, 5),), constants={1: 0.25})),
          quantize=QuantRule.PRELU),
    OpDef(Op.IS_NAN, PatternKind.ELEMWISE, (1, 1), _is_nan_infer, _unary_bool(np.isnan), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3),)),)),
    OpDef(Op.TANH, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.TANH), _unary(np.tanh), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),)),), quantize=QuantRule.TABLE),
    OpDef(Op.GELU, PatternKind.ELEMWISE, (1, 1), _gelu_infer, _gelu, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 8),), opset=20), OnnxExample(((4, 6),), {"approximate": "tanh"}, opset=20)),
          quantize=QuantRule.TABLE),
    OpDef(Op.REDUCE_MEAN, PatternKind.REDUCTION, (1, 1), _reduce_infer(Op.REDUCE_MEAN),
          _reduce(np.mean, Op.REDUCE_MEAN), None, accel_ok=_REDUCE,
          examples=(OnnxExample(((2, 3, 8),), {"axes": [-1]}), OnnxExample(((2, 3, 4),), {"axes": [1], "keepdims": 0}),
                    OnnxExample(((2, 3),))), quantize=QuantRule.REDUCE),
    OpDef(Op.REDUCE_SUM, PatternKind.REDUCTION, (1, 1), _reduce_infer(Op.REDUCE_SUM),
          _reduce(np.sum, Op.REDUCE_SUM), _reduce_sum_int, accel_ok=_REDUCE,
          examples=(OnnxExample(((2, 5, 8),), constants={1: (1,)}), OnnxExample(((2, 3, 4),), {"keepdims": 0}),
                    OnnxExample(((2, 3, 4),), {"keepdims": 0}, constants={1: (0, -1)})), quantize=QuantRule.REDUCE),
    OpDef(Op.LAYER_NORM, PatternKind.OPAQUE, (1, 3), _layer_norm_infer, _layer_norm, _layer_norm_int,
          accel_ok=cpu_only("runs on the CPU: a row's mean and variance, a square root and a division per "
                            "value, which the ALU has not (on int8: the integer kernel)"),
          examples=(OnnxExample(((2, 5, 8), (8,), (8,)), {"epsilon": 1e-12}, opset=17),
                    OnnxExample(((2, 3, 4), (3, 4)), {"axis": 1}, opset=17)), quantize=QuantRule.LAYER_NORM),
)
