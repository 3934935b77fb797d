"""The float math of transformer encoders (issue [4/5]'s import): Sub, Div and Pow with
broadcasting; Erf, Sqrt, Sigmoid, Tanh and Gelu element-wise; ReduceMean and ReduceSum;
LayerNormalization.  Together with MatMul (numpy's semantics on the float path), Softmax,
Transpose and Reshape they are a BERT-style encoder's layer, in any of the forms exporters
write: LayerNorm as one op (opset 17) or decomposed (ReduceMean, Sub, Pow, Sqrt, Div), GELU
with Erf, with Tanh, or as the Gelu operator (opset 20).

All run on the CPU with float references only: on the integer graph each is a float
island (its int8 inputs dequantized, its result quantized to its calibrated scale), as
the zoo's Mul and LRN are.  Float kernels compute in float64 and round once to float32.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np

from ..errors import OpError
from ..ir import Attrs, Op, TensorType
from .base import OnnxExample, OpDef, PatternKind, cpu_only, float_attr, int_attr, require_float
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
        require_float(data, op)
        axes = _reduce_axes(attrs, data.ndim, op)
        if int_attr(attrs, "keepdims", 1):
            return TensorType(tuple(1 if k in axes else d for k, d in enumerate(data.shape)), data.dtype)
        return TensorType(tuple(d for k, d in enumerate(data.shape) if k not in axes), data.dtype)
    return infer


def _reduce(fn: Callable[..., np.ndarray], op: Op) -> Callable[[Sequence[np.ndarray], Attrs], np.ndarray]:
    def kernel(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
        x = inputs[0].astype(np.float64)
        axes = _reduce_axes(attrs, x.ndim, op)
        return np.asarray(fn(x, axis=axes, keepdims=bool(int_attr(attrs, "keepdims", 1)))).astype(np.float32)
    return kernel


def _layer_norm_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
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
_PAIRS = (OnnxExample(((2, 3, 4), (2, 3, 4))), OnnxExample(((2, 5, 6), (6,))))
DEFS = (
    OpDef(Op.SUB, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.SUB), _binary(np.subtract), None, accel_ok=_CPU,
          examples=_PAIRS + (OnnxExample(((3, 4),), constants={1: 1.0}),)),
    OpDef(Op.DIV, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.DIV), _binary(np.divide), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4), (2, 3, 4)), positive=(1,)),
                    OnnxExample(((2, 4, 8),), constants={1: 2.8284271})),
          ),
    OpDef(Op.POW, PatternKind.BROADCAST, (2, 2), _binary_infer(Op.POW), _binary(np.power), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), constants={1: 2.0}), OnnxExample(((3, 4),), constants={1: 3.0}),
                    OnnxExample(((2, 3), (2, 3)), positive=(0,)))),
    OpDef(Op.ERF, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.ERF), _unary(erf), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 8),)),)),
    OpDef(Op.SQRT, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.SQRT), _unary(np.sqrt), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), positive=(0,)),)),
    OpDef(Op.SIGMOID, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.SIGMOID), _unary(_sigmoid), None,
          accel_ok=_CPU, examples=(OnnxExample(((2, 3, 4),)),)),
    OpDef(Op.TANH, PatternKind.ELEMWISE, (1, 1), _unary_infer(Op.TANH), _unary(np.tanh), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),)),)),
    OpDef(Op.GELU, PatternKind.ELEMWISE, (1, 1), _gelu_infer, _gelu, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 8),), opset=20), OnnxExample(((4, 6),), {"approximate": "tanh"}, opset=20))),
    OpDef(Op.REDUCE_MEAN, PatternKind.REDUCTION, (1, 1), _reduce_infer(Op.REDUCE_MEAN),
          _reduce(np.mean, Op.REDUCE_MEAN), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 8),), {"axes": [-1]}), OnnxExample(((2, 3, 4),), {"axes": [1], "keepdims": 0}),
                    OnnxExample(((2, 3),)))),
    OpDef(Op.REDUCE_SUM, PatternKind.REDUCTION, (1, 1), _reduce_infer(Op.REDUCE_SUM),
          _reduce(np.sum, Op.REDUCE_SUM), None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 5, 8),), constants={1: (1,)}), OnnxExample(((2, 3, 4),), {"keepdims": 0}),
                    OnnxExample(((2, 3, 4),), {"keepdims": 0}, constants={1: (0, -1)}))),
    OpDef(Op.LAYER_NORM, PatternKind.OPAQUE, (2, 3), _layer_norm_infer, _layer_norm, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 5, 8), (8,), (8,)), {"epsilon": 1e-12}, opset=17),
                    OnnxExample(((2, 3, 4), (3, 4)), {"axis": 1}, opset=17))),
)
