"""The machine's arithmetic, written once: ALU lanes, SHR amounts, integer bounds, rounding.

Every layer that computes what the accelerator computes imports it from here: the
functional simulator runs :func:`alu_lanes`, the compiler's epilogue reference and
requantization stages, the graph level's integer references and quantize pass.

- **Bounds.**  Inputs, weights and outputs are int8 (the low 8 bits of an accumulator,
  docs/ISA.md §3), accumulators int32 with two's-complement wrap-around:
  :data:`INT8_MIN`, :data:`INT8_MAX`, :data:`INT32_MIN`, :data:`INT32_MAX`, and the
  magnitudes :data:`INT8_LIMIT` (``2**7``) and :data:`INT32_LIMIT` (``2**31``).
- **ALU lanes** (docs/ISA.md §3): MIN and MAX signed, ADD and MUL wrapping at 32 bits,
  SHR arithmetic by the signed low :data:`~openvta.isa.config.SHR_AMOUNT_WIDTH` bits of
  B (:func:`shr_amount`), a left shift when negative.
- **The drain unit's two ops** (machine v2): :func:`round_shift_lanes` (RSHR, the ALU's
  three rounding steps in one) and :func:`clip_lanes` (CLIP, MIN then MAX by the halves
  of one word, :func:`clip_word`).
- **Wide values** (mixed precision): a 16-bit value ``v`` in :data:`WIDE_RANGE` is two int8
  bytes, ``v = 256 * high + low`` with ``high = round_shift(v, 8)`` (:func:`wide_high`)
  and ``low`` its low 8 bits read as signed (:func:`wide_low`, what STORE keeps of an
  accumulator), so ``low`` lies in -128..127.  The range stops at ``127 * 257 = 32639``
  so that ``high`` fits int8; :func:`join_wide` is the inverse.
- **Requantization**: :func:`round_shift` (``floor(v / 2**s + 1/2)``, which the ALU runs
  as the three SHR, ADD, SHR steps of :func:`round_shift_steps`) and
  :func:`requantize_int32`, the fixed-point rescaling ``round_shift(wrap32((acc >> pre)
  * m), post)``.

Examples
--------
>>> alu_lanes(AluOp.SHR, np.array([-7, 3]), np.array([1, -2])).tolist()
[-4, 12]
>>> shr_amount(63), shr_amount(32), shr_amount(31)
(-1, -32, 31)
>>> round_shift(np.array([5, 6, -5, -6, 7]), 2).tolist()
[1, 2, -1, -1, 2]
"""

from __future__ import annotations

from collections.abc import Callable
from typing import overload

import numpy as np

from .config import SUPPORTED_WIDTHS, MAX_SHR_AMOUNT, SHR_AMOUNT_WIDTH
from .enums import AluOp

__all__ = [
    "ALU_LANE_OPS", "INT8_LIMIT", "INT8_MAX", "INT8_MIN", "INT8_RANGE", "INT32_LIMIT", "INT32_MAX",
    "INT32_MIN", "MAX_SHR_AMOUNT", "MIN_SHR_AMOUNT", "SHR_AMOUNT_WIDTH", "alu_lanes", "requantize_int32",
    "round_shift", "round_shift_steps", "shr_amount", "wrap_int32", "round_shift_lanes", "clip_lanes", "clip_word",
    "WIDE_BYTE_SHIFT", "WIDE_MAX", "WIDE_MIN", "WIDE_RANGE", "join_wide", "wide_high", "wide_low",
]

_INT8_WIDTH = 1 << SUPPORTED_WIDTHS["LOG_INP_WIDTH"]
_INT32_WIDTH = 1 << SUPPORTED_WIDTHS["LOG_ACC_WIDTH"]

#: The magnitude bound of an int8 value: ``-INT8_LIMIT <= v < INT8_LIMIT`` (``2**7``).
INT8_LIMIT = 1 << (_INT8_WIDTH - 1)
#: The smallest and largest int8 values, -128 and 127.
INT8_MIN, INT8_MAX = -INT8_LIMIT, INT8_LIMIT - 1
#: ``(INT8_MIN, INT8_MAX)``: the clip to int8.
INT8_RANGE = (INT8_MIN, INT8_MAX)
#: The magnitude bound of an int32 accumulator: ``-INT32_LIMIT <= v < INT32_LIMIT`` (``2**31``).
INT32_LIMIT = 1 << (_INT32_WIDTH - 1)
#: The smallest and largest int32 values.
INT32_MIN, INT32_MAX = -INT32_LIMIT, INT32_LIMIT - 1
#: A wide value's two bytes: ``v = 2**WIDE_BYTE_SHIFT * high + low`` (module docstring).
WIDE_BYTE_SHIFT = _INT8_WIDTH
#: The range of a wide (16-bit) value: ``high = round_shift(v, 8)`` must fit int8, so the
#: top is ``127 * 257 = 32639``; the bottom is int16's.
WIDE_MIN, WIDE_MAX = -(INT8_LIMIT << WIDE_BYTE_SHIFT), INT8_MAX * ((1 << WIDE_BYTE_SHIFT) + 1)
#: ``(WIDE_MIN, WIDE_MAX)``: the clip to a wide value.
WIDE_RANGE = (WIDE_MIN, WIDE_MAX)
#: The most negative SHR amount (a left shift by 32, which leaves 0 in 32 bits).
MIN_SHR_AMOUNT = -(1 << (SHR_AMOUNT_WIDTH - 1))

_SHR_MASK = (1 << SHR_AMOUNT_WIDTH) - 1
_SHR_SIGN = 1 << (SHR_AMOUNT_WIDTH - 1)


@overload
def shr_amount(b: int) -> int: ...


@overload
def shr_amount(b: np.ndarray) -> np.ndarray: ...


def shr_amount(b: int | np.ndarray) -> int | np.ndarray:
    """The shift SHR reads from ``b``: its low ``SHR_AMOUNT_WIDTH`` bits as a signed value.

    Examples
    --------
    >>> shr_amount(np.array([0, 31, 32, 63, 64 + 3, -1])).tolist()
    [0, 31, -32, -1, 3, -1]
    """
    return ((b & _SHR_MASK) ^ _SHR_SIGN) - _SHR_SIGN


def _shr(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # shr_amount lies in [-32, 31]: both shifts are within int64's 0..63 without a clip
    s = shr_amount(b)
    if s.min() >= 0:  # the common case, a right shift on every lane
        return a >> s
    right = a >> np.maximum(s, 0)
    left = a << np.maximum(-s, 0)
    return np.where(s >= 0, right, left)


#: Lane function of each ALU opcode, on int64 operands holding int32 values (the result's
#: low 32 bits are the ALU's).
ALU_LANE_OPS: dict[AluOp, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    AluOp.MIN: np.minimum,
    AluOp.MAX: np.maximum,
    AluOp.ADD: np.add,
    AluOp.SHR: _shr,
    AluOp.MUL: np.multiply,
}


def alu_lanes(op: AluOp, a: np.ndarray, b: np.ndarray | np.integer | int) -> np.ndarray:
    """``op`` on int32 lanes as the ALU computes it (docs/ISA.md §3), with 32-bit wrap-around.

    Parameters
    ----------
    op :
        the ALU opcode.
    a, b :
        the operands, integers holding int32 values; ``b`` broadcasts against ``a``.

    Returns
    -------
    numpy.ndarray
        int32.

    Examples
    --------
    >>> alu_lanes(AluOp.MUL, np.array([2**30]), 4).tolist()
    [0]
    >>> alu_lanes(AluOp.SHR, np.array([-1000]), -32).tolist()
    [0]
    """
    result = ALU_LANE_OPS[AluOp(op)](np.asarray(a, np.int64), np.asarray(b, np.int64))
    return result.astype(np.int32)


def round_shift_lanes(a: np.ndarray, b: np.ndarray | np.integer | int) -> np.ndarray:
    """The drain unit's RSHR: ``round_shift`` by ``s = shr_amount(b)`` exactly as the ALU's
    ``SHR s-1, ADD 1, SHR 1`` computes it (each step wrapped to int32) for ``s >= 1``, and
    ``SHR s`` for ``s <= 0``.  int32.

    >>> round_shift_lanes(np.array([5, 6, -5, 2**31 - 1]), np.array([2, 2, 2, 1])).tolist()
    [1, 2, -1, -1073741824]
    """
    a = np.asarray(a, np.int64)
    s = shr_amount(np.asarray(b, np.int64))
    if s.min() >= 1:  # the common case: a right shift by s - 1 stays within int32, the
        # increment wraps (only 2**31 - 1 + 1 does), then the arithmetic shift by 1
        return ((a >> (s - 1)) + 1).astype(np.int32) >> 1
    first = alu_lanes(AluOp.SHR, a, np.where(s >= 1, s - 1, s))
    rounded = alu_lanes(AluOp.SHR, alu_lanes(AluOp.ADD, first, 1), 1)
    return np.where(s >= 1, rounded, first).astype(np.int32)


def clip_lanes(a: np.ndarray, b: np.ndarray | np.integer | int) -> np.ndarray:
    """The drain unit's CLIP: MIN by the high 16 bits of ``b`` then MAX by its low 16 bits,
    both signed (:func:`clip_word` packs them).  int32.

    >>> clip_lanes(np.array([-300, 5, 300]), clip_word(-128, 127)).tolist()
    [-128, 5, 127]
    """
    b = np.asarray(b, np.int64) & 0xFFFF_FFFF
    high = (((b >> 16) ^ 0x8000) - 0x8000).astype(np.int32)  # 16-bit bounds: int32 holds them
    low = (((b & 0xFFFF) ^ 0x8000) - 0x8000).astype(np.int32)
    a = np.asarray(a)
    if a.dtype != np.int32:
        a = np.minimum(np.maximum(a.astype(np.int64), INT32_MIN), INT32_MAX)  # as the int64 clip did
    return np.maximum(np.minimum(a.astype(np.int32, copy=False), high), low)


def clip_word(low: int, high: int) -> int:
    """The int32 operand word of a CLIP to ``[low, high]`` (16-bit signed bounds)."""
    for name, value in (("low", low), ("high", high)):
        if not -(1 << 15) <= value < 1 << 15:
            raise ValueError(f"a clip's {name} bound must be a 16-bit signed integer, not {value!r}")
    return int(np.int32(np.uint32(((high & 0xFFFF) << 16) | (low & 0xFFFF))))


def wrap_int32(values: np.ndarray) -> np.ndarray:
    """Integers to int32 with two's-complement wrap-around, as the accumulator does.

    Examples
    --------
    >>> wrap_int32(np.array([2**31, -2**31 - 1])).tolist()
    [-2147483648, 2147483647]
    """
    return np.asarray(values).astype(np.int64).astype(np.int32)


def round_shift(value: np.ndarray, shift: np.ndarray | int) -> np.ndarray:
    """A rounding arithmetic right shift: ``floor(value / 2**shift + 1/2)``.

    For ``shift >= 1`` this is ``((value >> (shift - 1)) + 1) >> 1``, which the
    accelerator's ALU runs as SHR, ADD 1, SHR 1 on int32 without ever overflowing (the
    intermediate is at most half the input, :func:`round_shift_steps`); it equals VTA's
    "add half, shift right" ``(value + 2**(shift-1)) >> shift`` wherever that does not
    overflow.  ``shift == 0`` is the identity and a negative shift is a left shift (the
    ALU's SHR by a negative amount).  ``value`` is int64 holding int32 values; ``shift``
    broadcasts against it.

    Returns
    -------
    numpy.ndarray
        int64 (a left shift is not wrapped).

    Examples
    --------
    >>> round_shift(np.array([3, -3]), np.array([0, -2])).tolist()
    [3, -12]
    """
    value = np.asarray(value, dtype=np.int64)
    shift = np.broadcast_to(np.asarray(shift, dtype=np.int64), value.shape)
    right = np.maximum(shift - 1, 0)
    rounded = ((value >> right) + 1) >> 1
    return np.where(shift >= 1, rounded, value << np.maximum(-shift, 0))


def round_shift_steps(shift: int) -> tuple[int, int, int]:
    """The ALU's ``SHR a, ADD r, SHR b`` that compute :func:`round_shift` by ``shift``: ``(a, r, b)``.

    ``(shift - 1, 1, 1)`` for ``shift >= 1``, ``(0, 0, 0)`` for 0 and ``(shift, 0, 0)``
    (a left shift) below.

    Examples
    --------
    >>> round_shift_steps(15), round_shift_steps(0), round_shift_steps(-2)
    ((14, 1, 1), (0, 0, 0), (-2, 0, 0))
    """
    if shift >= 1:
        return shift - 1, 1, 1
    return shift, 0, 0


def requantize_int32(acc: np.ndarray, pre_shift: int, multiplier: np.ndarray | int,
                     post_shift: np.ndarray | int, product_offset: int = 0) -> np.ndarray:
    """The fixed-point rescaling ``round_shift(wrap32((acc >> pre_shift) * multiplier), post_shift)``.

    Every step wrapped to int32 as the ALU's SHR, MUL and rounding steps compute it;
    ``multiplier`` and ``post_shift`` broadcast against ``acc`` (per channel, or one value).
    ``product_offset`` is added to the product before the rounding shift (an ALU ADD: a
    constant in the output's units times ``2**post_shift``).

    Returns
    -------
    numpy.ndarray
        int64 holding int32 values (not clipped).

    Examples
    --------
    >>> requantize_int32(np.array([100, -100, 37]), 2, 20000, 15).tolist()  # x 20000 / 2**17
    [15, -15, 5]
    """
    x = np.asarray(acc).astype(np.int64) >> pre_shift
    y = wrap_int32(x * np.asarray(multiplier, dtype=np.int64)).astype(np.int64)
    if product_offset:
        y = wrap_int32(y + product_offset).astype(np.int64)
    return wrap_int32(round_shift(y, np.asarray(post_shift, dtype=np.int64))).astype(np.int64)



def wide_high(value: np.ndarray) -> np.ndarray:
    """The high byte of wide values: ``round_shift(clip(v, WIDE_RANGE), 8)``, int8.

    Examples
    --------
    >>> wide_high(np.array([32639, 32767, -32768, 127, 128, -129])).tolist()
    [127, 127, -128, 0, 1, -1]
    """
    clipped = np.clip(np.asarray(value, dtype=np.int64), *WIDE_RANGE)
    return round_shift(clipped, WIDE_BYTE_SHIFT).astype(np.int8)


def wide_low(value: np.ndarray) -> np.ndarray:
    """The low byte of wide values: the low 8 bits of ``clip(v, WIDE_RANGE)`` as int8, so
    that ``join_wide(wide_high(v), wide_low(v)) == clip(v, WIDE_RANGE)``.

    Examples
    --------
    >>> wide_low(np.array([32639, 127, 128, -129])).tolist()
    [127, 127, -128, 127]
    """
    return np.clip(np.asarray(value, dtype=np.int64), *WIDE_RANGE).astype(np.int8)


def join_wide(high: np.ndarray, low: np.ndarray) -> np.ndarray:
    """The wide values of their two int8 bytes: ``256 * high + low``, int32.

    Examples
    --------
    >>> join_wide(np.array([127, -128, 1]), np.array([127, 0, -128])).tolist()
    [32639, -32768, 128]
    """
    return (np.asarray(high, dtype=np.int32) << WIDE_BYTE_SHIFT) + np.asarray(low, dtype=np.int32)
