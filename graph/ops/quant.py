"""The integer graph's own ops: Quantize, Dequantize, Requantize, WideByte and JoinWide.

- ``Quantize`` (attributes ``scale``, ``zero_point`` default 0, ``bits`` default 8):
  float32 → int8, ``clip(rint(x / scale) + zero_point, -128, 127)`` with ``x / scale`` in
  float32 and ties to even, as ONNX ``QuantizeLinear``; with ``bits=16`` a *wide* value,
  int32 clipped to :data:`~openvta.isa.WIDE_RANGE` (mixed precision, docs/DECISIONS.md);
  with ``bits=32`` int32 saturated at ±2**30 (:data:`SATURATED_RANGE`: a Softmax's masked
  scores, where a mask of -3.4e38 saturates and the sum of two operands cannot overflow).
- ``Dequantize`` (``scale``, per tensor or per channel along ``axis``, ``zero_point``):
  int → float32, ``(q - zero_point) * scale`` in float32, as ``DequantizeLinear``.
- ``Requantize`` (``pre_shift``, ``multiplier``, ``post_shift``, ``axis``, ``out_dtype``,
  ``mode``): one integer rescaling, exactly what the accelerator's ALU computes on int32::

      x = acc >> pre_shift                  SHR (arithmetic, rounds toward -inf)
      y = x * multiplier[c]                 MUL (per channel c along axis, or one value)
      z = round_shift(y, post_shift[c])     SHR post-1, ADD 1, SHR 1 (round half up)
      out = clip(z, -128, 127) for int8     MIN, MAX, then the low 8 bits

  with three optional integers for an input or output whose zero point is not 0
  (docs/DECISIONS.md, "Zero points on non-negative activations"): ``offset``, added to the
  input first (ADD; ``-zero_point`` of an int8 input: ``q - zp``), ``product_offset``, added
  to ``y`` (ADD: a constant of the output's codes times ``2**post_shift``), and
  ``zero_point``, added to ``z`` before the clip (ADD).

  ``pow2`` (VTA's scheme) is the special case ``pre_shift = 0``, ``multiplier = 1``;
  ``fixed`` uses a 15-bit multiplier and per-tensor shifts chosen so that no step
  overflows int32 (``openvta.graph.quantization`` derives them).

  ``exact`` (attributes ``scale``, float32 values per channel, and ``zero_point``) is
  onnxruntime's QLinearConv/QGemm requantization (MLAS ``MlasRequantizeOutput``)::

      v = float32(acc) * scale[c]           float32, round to nearest even
      out = rint(clip(v, -128 - zp, 127 - zp)) + zp    ties to even

  A float multiply the integer ALU cannot reproduce: such nodes run on the CPU.

- ``WideByte`` (``part``: ``"high"`` or ``"low"``): int32 → int8, one byte of the wide
  value ``clip(x, WIDE_RANGE)`` (:func:`~openvta.isa.wide_high`,
  :func:`~openvta.isa.wide_low`).  In an accelerator kernel it is the ALU's ``MIN, MAX``
  (and ``ADD 128, SHR 8`` for the high byte) before STORE keeps the low 8 bits; on the
  CPU it splits a wide input into the two int8 operands of two products.
- ``Table`` (``table``: 256 integers, ``out_dtype`` int8 or int32, ``of``: the op it
  computes): int8 → ``table[x + 128]``.  An element-wise function of an int8 value (GELU,
  Erf, Tanh, Sigmoid) is exactly a table of its 256 codes, each the float function of
  the code's value quantized to the output's scale (int32: a wide output), computed once
  by the quantize pass; run on the CPU (the ALU has no gather).
- ``JoinWide`` (high, low): int8, int8 → int32, ``256 * high + low``
  (:func:`~openvta.isa.join_wide`): a wide result from the two bytes the accelerator
  stored, on the CPU.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openvta.isa import (INT8_MAX, INT8_MIN, INT8_RANGE, INT32_MAX, INT32_MIN, MAX_SHR_AMOUNT, WIDE_RANGE, Config,
                        join_wide, requantize_int32, wide_high, wide_low)

from ..errors import OpError
from ..ir import Attrs, DType, Graph, Node, Op, RequantMode, TensorType
from .base import OpDef, PatternKind, cpu_only, float_attr, int_attr, ints_attr, wrap_int32
from .elementwise import on_alu

__all__ = ["DEFS", "SATURATED_RANGE", "TABLE_SIZE", "requantize", "requantize_exact", "quantize", "dequantize"]


#: The range of ``Quantize(bits=32)``: int32 saturated so that the sum of two stays in int32.
SATURATED_RANGE = (-(1 << 30), 1 << 30)
#: Quantize's ``bits``: int8, a wide value held in int32, or a saturated int32.
QUANTIZE_BITS = {8: (DType.INT8, INT8_RANGE), 16: (DType.INT32, WIDE_RANGE), 32: (DType.INT32, SATURATED_RANGE)}


def quantize(x: np.ndarray, scale: float, zero_point: int = 0, bits: int = 8) -> np.ndarray:
    """float → int8: ``clip(rint(x / scale) + zero_point, -128, 127)`` computed in float32
    (``bits=16``: int32 clipped to the wide range; ``bits=32``: saturated at ±2**30, so a
    value past float32's range over ``scale`` is the bound, as any value past it)."""
    dtype, bounds = QUANTIZE_BITS[bits]
    with np.errstate(over="ignore"):  # (an overflow to ±inf is then clipped to the bound)
        q = np.rint(np.asarray(x, dtype=np.float32) / np.float32(scale)) + np.float32(zero_point)
    return np.clip(q, *bounds).astype(dtype.numpy)


def dequantize(q: np.ndarray, scale: Sequence[float], axis: int | None,
               zero_point: int = 0) -> np.ndarray:
    """int → float32: ``(q - zero_point) * scale`` in float32 (per channel along ``axis``)."""
    values = np.asarray(scale, dtype=np.float32)
    if len(values) > 1:
        shape = [1] * q.ndim
        shape[axis if axis is not None else 1] = len(values)
        values = values.reshape(shape)
    else:
        values = values.reshape(())
    shifted = q.astype(np.int32) - np.int32(zero_point)
    return (shifted.astype(np.float32) * values).astype(np.float32)


def _per_channel(values: tuple[int, ...], axis: int, ndim: int) -> np.ndarray:
    array = np.asarray(values, dtype=np.int64)
    if len(values) == 1:
        return array.reshape(())
    shape = [1] * ndim
    shape[axis] = len(values)
    return array.reshape(shape)


def requantize(acc: np.ndarray, pre_shift: int, multiplier: tuple[int, ...],
               post_shift: tuple[int, ...], axis: int, out_dtype: DType, offset: int = 0,
               zero_point: int = 0, product_offset: int = 0) -> np.ndarray:
    """The integer rescaling of the module docstring (:func:`openvta.isa.arith.requantize_int32`)
    of ``acc + offset``, plus ``zero_point``, then the int8 clip.

    Examples
    --------
    >>> acc = np.array([[100, -100, 37]], dtype=np.int32)
    >>> requantize(acc, 2, (20000,), (15,), 1, DType.INT8).tolist()  # x 20000 / 2**17
    [[15, -15, 5]]
    >>> requantize(acc, 2, (20000,), (15,), 1, DType.INT8, offset=128, zero_point=-128).tolist()
    [[-93, -124, -103]]
    """
    if offset:
        acc = wrap_int32(acc.astype(np.int64) + offset)
    z = requantize_int32(acc, pre_shift, _per_channel(multiplier, axis, acc.ndim),
                         _per_channel(post_shift, axis, acc.ndim), product_offset)
    if zero_point:
        z = z + zero_point
    if out_dtype is DType.INT8:
        return np.clip(z, *INT8_RANGE).astype(np.int8)
    return z.astype(np.int32)


def requantize_exact(acc: np.ndarray, scale: Sequence[float], zero_point: int,
                     axis: int) -> np.ndarray:
    """onnxruntime's int32 → int8 requantization (module docstring), per channel along ``axis``.

    Examples
    --------
    >>> acc = np.array([[5, 15, -25, 2000]], dtype=np.int32)
    >>> requantize_exact(acc, (0.1,), -3, 1).tolist()  # 0.5, 1.5, -2.5: ties to even; 200 saturates
    [[-3, -1, -5, 127]]
    """
    values = np.asarray(scale, dtype=np.float32)
    if len(values) > 1:
        shape = [1] * acc.ndim
        shape[axis] = len(values)
        values = values.reshape(shape)
    product = acc.astype(np.float32) * values
    low, high = np.float32(INT8_MIN - zero_point), np.float32(INT8_MAX - zero_point)
    return (np.rint(np.clip(product, low, high)) + zero_point).astype(np.int8)


def _zero_point(attrs: Attrs) -> int:
    zero_point = int_attr(attrs, "zero_point", 0)
    if not INT8_MIN <= zero_point <= INT8_MAX:
        raise OpError(f"zero_point must be an int8 value, not {zero_point!r}")
    return zero_point


def _quantize_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if inputs[0].dtype is not DType.FLOAT32:
        raise OpError(f"Quantize input must be float32, not {inputs[0].dtype.value}")
    if float_attr(attrs, "scale") <= 0:
        raise OpError(f"Quantize scale must be positive, not {attrs['scale']!r}")
    _zero_point(attrs)
    return TensorType(inputs[0].shape, QUANTIZE_BITS[_bits(attrs)][0])


def _bits(attrs: Attrs) -> int:
    bits = int_attr(attrs, "bits", 8)
    if bits not in QUANTIZE_BITS:
        raise OpError(f"Quantize bits must be one of {', '.join(map(str, QUANTIZE_BITS))}, not {bits!r}")
    return bits


def _quantize(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return quantize(inputs[0], float_attr(attrs, "scale"), _zero_point(attrs), _bits(attrs))


WIDE_PARTS = {"high": wide_high, "low": wide_low}


def _wide_part(attrs: Attrs) -> str:
    part = attrs.get("part")
    if part not in WIDE_PARTS:
        raise OpError(f"WideByte part must be one of {', '.join(WIDE_PARTS)}, not {part!r}")
    return str(part)


def _wide_byte_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if inputs[0].dtype is not DType.INT32:
        raise OpError(f"WideByte input must be int32, not {inputs[0].dtype.value}")
    _wide_part(attrs)
    return TensorType(inputs[0].shape, DType.INT8)


def _wide_byte(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return WIDE_PARTS[_wide_part(attrs)](inputs[0])


TABLE_SIZE = 1 << 8  # every int8 code


def _table_values(attrs: Attrs) -> tuple[np.ndarray, DType]:
    table, out = attrs.get("table"), attrs.get("out_dtype")
    if out not in (DType.INT8, DType.INT32):
        raise OpError(f"Table out_dtype must be int8 or int32, not {out!r}")
    if not isinstance(table, tuple) or len(table) != TABLE_SIZE or not all(isinstance(v, int) for v in table):
        raise OpError(f"Table table must hold {TABLE_SIZE} integers, one per int8 code")
    values = np.asarray(table, dtype=np.int64)
    limits = INT8_RANGE if out is DType.INT8 else WIDE_RANGE
    if values.min() < limits[0] or values.max() > limits[1]:
        raise OpError(f"Table values must lie within {limits[0]}..{limits[1]} for {out.value}")
    return values.astype(out.numpy), out


def _table_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if inputs[0].dtype is not DType.INT8:
        raise OpError(f"Table input must be int8, not {inputs[0].dtype.value}")
    return TensorType(inputs[0].shape, _table_values(attrs)[1])


def _table(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    values, _ = _table_values(attrs)
    return values[inputs[0].astype(np.int64) - INT8_MIN]


def _join_wide_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    high, low = inputs
    if high.dtype is not DType.INT8 or low.dtype is not DType.INT8 or high.shape != low.shape:
        raise OpError(f"JoinWide operands must be two int8 tensors of one shape, not "
                      f"{high.dtype.value}{list(high.shape)} and {low.dtype.value}{list(low.shape)}")
    return TensorType(high.shape, DType.INT32)


def _join_wide(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return join_wide(inputs[0], inputs[1])


def _scales(attrs: Attrs) -> tuple[float, ...]:
    value = attrs.get("scale")
    if not isinstance(value, tuple) or not value or not all(isinstance(v, float) and v > 0
                                                              for v in value):
        raise OpError(f"attribute 'scale' must be a tuple of positive floats, not {value!r}")
    return value


def _channel_count(t: TensorType, count: int, axis: int, what: str) -> None:
    if count != 1 and not (0 <= axis < t.ndim and t.shape[axis] == count):
        raise OpError(f"{what} must hold 1 value or one per channel of axis {axis} of "
                      f"{t.shape!r}, not {count}")


def _dequantize_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    if not inputs[0].dtype.is_integer:
        raise OpError(f"Dequantize input must be an integer tensor, not {inputs[0].dtype.value}")
    _channel_count(inputs[0], len(_scales(attrs)), int_attr(attrs, "axis", 1), "Dequantize scale")
    _zero_point(attrs)
    return TensorType(inputs[0].shape, DType.FLOAT32)


def _dequantize(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return dequantize(inputs[0], _scales(attrs), int_attr(attrs, "axis", 1), _zero_point(attrs))


def _requant_attrs(attrs: Attrs) -> tuple[int, tuple[int, ...], tuple[int, ...], int, DType, int, int, int]:
    out = attrs.get("out_dtype")
    if out not in (DType.INT8, DType.INT32):
        raise OpError(f"Requantize out_dtype must be int8 or int32, not {out!r}")
    pre = int_attr(attrs, "pre_shift")
    post = ints_attr(attrs, "post_shift")
    if not 0 <= pre <= MAX_SHR_AMOUNT or not all(-MAX_SHR_AMOUNT <= s <= MAX_SHR_AMOUNT for s in post):
        raise OpError(f"Requantize shifts must lie within the ALU's {-MAX_SHR_AMOUNT}..{MAX_SHR_AMOUNT}, "
                      f"not {pre}, {post}")
    offset, zero_point = int_attr(attrs, "offset", 0), int_attr(attrs, "zero_point", 0)
    product_offset = int_attr(attrs, "product_offset", 0)
    if not INT32_MIN <= offset <= INT32_MAX or not INT32_MIN <= product_offset <= INT32_MAX \
            or not INT8_MIN <= zero_point <= INT8_MAX:
        raise OpError(f"Requantize offset and product_offset must be int32 and zero_point int8 values, not "
                      f"{offset}, {product_offset}, {zero_point}")
    return pre, ints_attr(attrs, "multiplier"), post, int_attr(attrs, "axis", 1), out, offset, zero_point, \
        product_offset


def _requantize_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.dtype not in (DType.INT8, DType.INT32):
        raise OpError(f"Requantize input must be int8 or int32, not {data.dtype.value}")
    if attrs.get("mode") is RequantMode.EXACT:
        if attrs.get("out_dtype") is not DType.INT8:
            raise OpError(f"exact Requantize out_dtype must be int8, not {attrs.get('out_dtype')!r}")
        _channel_count(data, len(_scales(attrs)), int_attr(attrs, "axis", 1), "Requantize scale")
        _zero_point(attrs)
        return TensorType(data.shape, DType.INT8)
    _, multiplier, post, axis, out, *_ = _requant_attrs(attrs)
    _channel_count(data, len(multiplier), axis, "Requantize multiplier")
    _channel_count(data, len(post), axis, "Requantize post_shift")
    return TensorType(data.shape, out)


def _requantize(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    if attrs.get("mode") is RequantMode.EXACT:
        return requantize_exact(inputs[0], _scales(attrs), _zero_point(attrs),
                                int_attr(attrs, "axis", 1))
    return requantize(inputs[0], *_requant_attrs(attrs))


def _requantize_on_alu(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
    if node.attrs.get("mode") is RequantMode.EXACT:
        return False, ("exact requantization multiplies by a float32 scale and rounds to "
                       "even, which the integer ALU cannot reproduce")
    return _ALU_REQUANT(node, graph, cfg)


_ALU_REQUANT = on_alu("requantization on the ALU (SHR, MUL, ADD, MIN, MAX)")
_ALU_WIDE_BYTE = on_alu("one byte of a wide result on the ALU (MIN, MAX, ADD, SHR) before STORE")


DEFS = (
    OpDef(Op.QUANTIZE, PatternKind.ELEMWISE, (1, 1), _quantize_infer, _quantize, None,
          accel_ok=cpu_only("float data is quantized on the CPU")),
    OpDef(Op.DEQUANTIZE, PatternKind.ELEMWISE, (1, 1), _dequantize_infer, None, _dequantize,
          accel_ok=cpu_only("float results are made on the CPU")),
    OpDef(Op.REQUANTIZE, PatternKind.ELEMWISE, (1, 1), _requantize_infer, None, _requantize,
          accel_ok=_requantize_on_alu),
    OpDef(Op.WIDE_BYTE, PatternKind.ELEMWISE, (1, 1), _wide_byte_infer, None, _wide_byte,
          accel_ok=_ALU_WIDE_BYTE),
    OpDef(Op.TABLE, PatternKind.ELEMWISE, (1, 1), _table_infer, None, _table,
          accel_ok=cpu_only("a table of its 256 int8 codes, on the CPU (the ALU has no gather)")),
    OpDef(Op.JOIN_WIDE, PatternKind.BROADCAST, (2, 2), _join_wide_infer, None, _join_wide,
          accel_ok=cpu_only("a wide result is joined from its two bytes on the CPU")),
)
