"""Element-wise and broadcast ops: Relu, Clip, Add, BatchNormalization, Identity, Dropout,
and Softmax (opaque: it reduces along an axis, and runs on float data only).

On the integer graph Relu keeps its dtype, Clip saturates to int8 (its bounds are int8
values), and Add adds int32 tensors with 32-bit wrap-around, as the accelerator's ALU.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from openvta.isa import INT8_MAX, INT8_MIN, INT8_RANGE, INT32_MAX, INT32_MIN

from ..errors import OpError
from ..ir import Attrs, Dim, DType, Node, Op, TensorType
from .base import (OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, float_attr, int_attr,
                   require_float, same_type, wrap_int32)

if TYPE_CHECKING:
    from openvta.isa import Config

    from ..ir import Graph

__all__ = ["DEFS", "broadcast_shape", "on_alu"]

def broadcast_shape(a: tuple[Dim, ...], b: tuple[Dim, ...]) -> tuple[Dim, ...]:
    """numpy's multidirectional broadcast of two shapes (a symbolic dim broadcasts with 1).

    Examples
    --------
    >>> broadcast_shape(("N", 4, 1), (4, 3))
    ('N', 4, 3)
    """
    out: list[Dim] = []
    for i in range(1, max(len(a), len(b)) + 1):
        x = a[-i] if i <= len(a) else 1
        y = b[-i] if i <= len(b) else 1
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise OpError(f"shapes {a!r} and {b!r} must broadcast, not clash at {x!r} and {y!r}")
    return tuple(reversed(out))


def on_alu(what: str):  # noqa: ANN202 - a predicate factory
    def predicate(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
        dtype = graph.types[node.inputs[0]].dtype
        if not dtype.is_integer:
            return False, f"not quantized ({dtype.value} data)"
        return True, what
    return predicate


def _relu(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.maximum(inputs[0], np.zeros((), inputs[0].dtype))


def _clip_bounds(attrs: Attrs, integer: bool, wide: bool = False) -> tuple[float, float]:
    """The bounds; an integer Clip's within int8 (its result is int8), or, ``wide``, within
    int32 for an int32 input whose bounds pass int8 (its result stays int32)."""
    if not integer:
        return float_attr(attrs, "min", -np.inf), float_attr(attrs, "max", np.inf)
    lo, hi = int_attr(attrs, "min", INT8_MIN), int_attr(attrs, "max", INT8_MAX)
    if INT8_MIN <= lo <= hi <= INT8_MAX or (wide and INT32_MIN <= lo <= hi <= INT32_MAX):
        return lo, hi
    raise OpError(f"integer Clip bounds must lie within int8 in order (int32 for an int32 input), "
                  f"not ({lo}, {hi})")


def _clip_dtype(data: DType, attrs: Attrs) -> DType:
    lo, hi = _clip_bounds(attrs, True, data is DType.INT32)
    return DType.INT8 if INT8_MIN <= lo <= hi <= INT8_MAX else DType.INT32


def _clip_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0].dtype
    if not data.is_integer:
        _clip_bounds(attrs, False)
        return TensorType(inputs[0].shape, DType.FLOAT32)
    return TensorType(inputs[0].shape, _clip_dtype(data, attrs))


def _clip_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    lo, hi = _clip_bounds(attrs, False)
    return np.minimum(np.maximum(inputs[0], np.float32(lo)), np.float32(hi))


def _clip_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    dtype = _clip_dtype(DType.of(inputs[0].dtype), attrs)
    lo, hi = _clip_bounds(attrs, True, dtype is DType.INT32)
    return np.clip(inputs[0], lo, hi).astype(dtype.numpy)


def _add_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    a, b = inputs
    if a.dtype is not b.dtype or a.dtype not in (DType.FLOAT32, DType.INT32):
        raise OpError(f"Add operands must be both float32 or both int32, not {a.dtype.value} "
                      f"and {b.dtype.value}")
    return TensorType(broadcast_shape(a.shape, b.shape), a.dtype)


def _add_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return (inputs[0] + inputs[1]).astype(np.float32)


def _add_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return wrap_int32(inputs[0].astype(np.int64) + inputs[1].astype(np.int64))


def _add_accel(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
    a, b = (graph.types[name] for name in node.inputs)
    if not a.dtype.is_integer:
        return False, f"not quantized ({a.dtype.value} data)"
    if a.shape != b.shape or any(name in graph.constants for name in node.inputs):
        return False, "only an add of two same-shaped tensors runs on the ALU"
    return True, "element-wise add on the ALU (ADD)"


def _batch_norm_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    for t in inputs:
        require_float(t, Op.BATCH_NORM)
    if data.ndim < 2:
        raise OpError(f"BatchNormalization data must have a channel axis, not shape {data.shape!r}")
    for which, t in zip(("scale", "B", "mean", "var"), inputs[1:]):
        if t.shape != (data.shape[1],):
            raise OpError(f"BatchNormalization {which} must have shape ({data.shape[1]},), "
                          f"not {t.shape!r}")
    return same_type(inputs, attrs)


def _batch_norm_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x, scale, bias, mean, var = (a.astype(np.float64) for a in inputs)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    gain = scale / np.sqrt(var + float_attr(attrs, "epsilon", 1e-5))
    out = (x - mean.reshape(shape)) * gain.reshape(shape) + bias.reshape(shape)
    return out.astype(np.float32)


def _identity(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return inputs[0].copy()


#: The integer Softmax's exp table: ``round(2**EXP_BITS * exp(-d * scale))`` for d = 0, 1, …
EXP_BITS = 15
#: The fraction bits of the integer Softmax's output multiplier.
SOFTMAX_FRACTION = 16
#: The longest exp table (an int32 input's table runs until its entries round to 0).
SOFTMAX_TABLE_MAX = 1 << 16


def _softmax_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    axis = int_attr(attrs, "axis", -1)
    if not -inputs[0].ndim <= axis < inputs[0].ndim:
        raise OpError(f"Softmax axis must lie within the {inputs[0].ndim} dimensions, not {axis}")
    if inputs[0].dtype in (DType.INT8, DType.INT32):
        _softmax_params(attrs)
        return TensorType(inputs[0].shape, DType.INT8)
    require_float(inputs[0], Op.SOFTMAX)
    return same_type(inputs, attrs)


def _softmax_params(attrs: Attrs) -> tuple[np.ndarray, int]:
    table, multiplier = attrs.get("exp_table"), attrs.get("multiplier")
    if not isinstance(table, tuple) or not 0 < len(table) <= SOFTMAX_TABLE_MAX or not all(
            isinstance(v, int) and 0 <= v <= 1 << EXP_BITS for v in table) or table[0] == 0:
        raise OpError(f"an integer Softmax's exp_table must hold 1 to {SOFTMAX_TABLE_MAX} integers in "
                      f"0..2**{EXP_BITS}, the first positive")
    if not isinstance(multiplier, int) or not 0 < multiplier < 1 << 40:
        raise OpError(f"an integer Softmax's multiplier must be a positive integer below 2**40, not {multiplier!r}")
    return np.asarray(table, dtype=np.int64), multiplier


def softmax_int(q: np.ndarray, exp_table: np.ndarray, multiplier: int, axis: int) -> np.ndarray:
    """The integer Softmax of int8 or int32 ``q`` along ``axis``: ``e = exp_table[max(q) - q]``
    (0 past the table's end), then ``clip(round_half_up(e * multiplier / (sum(e) * 2**16)),
    -128, 127)`` in int64 — ``exp_table[d] = round(2**15 * exp(-d * s_in))`` and
    ``multiplier = round(2**16 / s_out)``, so the result is ``softmax(q * s_in) / s_out`` to
    rounding.  An int32 input (scores plus a mask) has a table that runs until its entries
    round to 0, so a masked position, however far below the row's maximum, weighs 0.

    Examples
    --------
    >>> table = np.rint(2 ** 15 * np.exp(-np.arange(256) * 0.1)).astype(np.int64)
    >>> softmax_int(np.array([[0, 0], [10, 0]], np.int8), table, 2 ** 16 * 127, 1).tolist()
    [[64, 64], [93, 34]]
    >>> softmax_int(np.array([[10, 0, -2 ** 30]], np.int32), table, 2 ** 16 * 127, 1).tolist()
    [[93, 34, 0]]
    """
    x = q.astype(np.int64)
    d = x.max(axis=axis, keepdims=True) - x
    inside = d < len(exp_table)
    e = np.where(inside, exp_table[np.where(inside, d, 0)], 0)
    total = e.sum(axis=axis, keepdims=True) << SOFTMAX_FRACTION
    out = (e * multiplier + (total >> 1)) // total
    return np.clip(out, *INT8_RANGE).astype(np.int8)


def _softmax_int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    table, multiplier = _softmax_params(attrs)
    return softmax_int(inputs[0], table, multiplier, int_attr(attrs, "axis", -1))


def _softmax_float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0].astype(np.float64)
    axis = int_attr(attrs, "axis", -1)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(np.float32)


_CLIP_EXAMPLES = (OnnxExample(((2, 3, 4),), constants={1: -0.5, 2: 0.75}),
                  OnnxExample(((5, 4),), constants={2: 0.1}))
DEFS = (
    OpDef(Op.RELU, PatternKind.ELEMWISE, (1, 1), same_type, _relu, _relu,
          accel_ok=on_alu("ReLU on the ALU (MAX 0)"), scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((2, 3, 4, 5),)),), quantize=QuantRule.SAME),
    OpDef(Op.CLIP, PatternKind.ELEMWISE, (1, 1), _clip_infer, _clip_float, _clip_int,
          accel_ok=on_alu("clip on the ALU (MIN, MAX)"), scale_rule=ScaleRule.PRESERVE,
          examples=_CLIP_EXAMPLES, quantize=QuantRule.CLIP),
    OpDef(Op.ADD, PatternKind.BROADCAST, (2, 2), _add_infer, _add_float, _add_int,
          accel_ok=_add_accel, examples=(
              OnnxExample(((2, 3, 4, 4), (2, 3, 4, 4))),
              OnnxExample(((2, 3, 4, 4), (3, 1, 1))),
              OnnxExample(((4, 5), (5,)), constants={1: (0.5, -1.0, 2.0, 0.0, 3.5)}),
          ), quantize=QuantRule.ADD),
    OpDef(Op.BATCH_NORM, PatternKind.BROADCAST, (5, 5), _batch_norm_infer, _batch_norm_float,
          None, examples=(OnnxExample(((2, 3, 4, 4), (3,), (3,), (3,), (3,)),
                                      {"epsilon": 1e-3}, positive=(4,)),)),
    OpDef(Op.IDENTITY, PatternKind.ELEMWISE, (1, 1), same_type, _identity, _identity,
          scale_rule=ScaleRule.PRESERVE, examples=(OnnxExample(((3, 4),)),), quantize=QuantRule.MOVE),
    OpDef(Op.DROPOUT, PatternKind.ELEMWISE, (1, 1), same_type, _identity, _identity,
          scale_rule=ScaleRule.PRESERVE, examples=(OnnxExample(((3, 4),), {"seed": 0}),), quantize=QuantRule.MOVE),
    OpDef(Op.SOFTMAX, PatternKind.OPAQUE, (1, 1), _softmax_infer, _softmax_float, _softmax_int,
          accel_ok=cpu_only("runs on the CPU: a row's max, an exp table and a division by the row's sum, "
                            "which the ALU has not (on int8: the integer kernel)"),
          examples=(OnnxExample(((3, 10),)), OnnxExample(((2, 3, 4),), {"axis": 1})), quantize=QuantRule.SOFTMAX),
)
