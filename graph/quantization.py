"""Quantization arithmetic: scales, weight quantization, requantization parameters.

Activations are int8, symmetric, one scale per tensor: ``scale = range / 127``.
Weights are int8 in [-127, 127], one scale per output channel.  Biases are int32 in the
accumulator's scale (``input scale × weight scale``).  Requantization turns an int32
accumulator into the next tensor's scale with the integer steps of
``openvta.graph.ops.quant.requantize``:

- ``pow2``: every scale is a power of two, so each channel's multiplier
  ``M = s_in · s_w / s_out`` is ``2**-k`` and requantization is a rounding shift by
  ``k`` (VTA's scheme; a negative ``k`` shifts left).
- ``fixed``: ``M ≈ m · 2**-(pre + post)`` with a 15-bit multiplier ``m < 2**15``.  The
  pre-shift makes ``|acc >> pre| ≤ 2**16`` for every accumulator the weights allow
  (``bound = 128 · Σ|w| + |bias|``), so ``x · m`` stays below ``2**31``: no step
  overflows int32.  ``m`` fits the ALU's 16-bit signed immediate when per tensor.  The
  quantize pass adds ``2**(pre-1)`` to the int32 bias, so the pre-shift rounds to
  nearest too.

Examples
--------
>>> fixed_requant(np.array([0.001]), bound=100_000)
Requant(pre_shift=1, multiplier=(16777,), post_shift=(23,))
>>> pow2_requant(np.array([0.25, 2.0]), bound=1000)
Requant(pre_shift=0, multiplier=(1,), post_shift=(2, -1))
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from openvta.compiler.epilogue import IMM_FIELD
from openvta.isa import INT8_MAX, INT32_LIMIT, MAX_SHR_AMOUNT, WIDE_MAX

from .ir import Node, RequantMode

#: ``compile_model``'s ``activations``: every int8 activation symmetric (zero point 0), or the
#: non-negative ones with the zero point -128 (docs/DECISIONS.md, "Zero points on non-negative
#: activations"); the default, asymmetric, first.
ACTIVATIONS = ("asymmetric", "symmetric")

__all__ = ["ACTIVATIONS", "MULTIPLIER_BITS", "X_BITS", "Requant", "choose_scale", "quantize_weights",
           "fixed_requant", "pow2_requant", "requant_params", "pre_shift_for",
           "PRECISIONS", "activation_bits", "int8_sqnr", "parse_budget", "parse_precision", "wide_scale"]

MULTIPLIER_BITS = IMM_FIELD.width - 1  # m < 2**15: a 16-bit signed ALU immediate
X_BITS = INT32_LIMIT.bit_length() - 1 - MULTIPLIER_BITS  # |acc >> pre| <= 2**16, so |x * m| < 2**31
_TINY_RANGE = 1e-30  # a range below it is no range: a normal float32's least is 1.2e-38


@dataclass(frozen=True)
class Requant:
    """Integer requantization parameters (``openvta.graph.ops.quant.requantize``)."""

    pre_shift: int
    multiplier: tuple[int, ...]
    post_shift: tuple[int, ...]


def choose_scale(value_range: float, mode: RequantMode) -> float:
    """The int8 scale covering ``[-value_range, value_range]`` (a power of two for pow2).

    >>> choose_scale(12.7, RequantMode.FIXED), choose_scale(12.7, RequantMode.POW2)
    (0.09999999999999999, 0.125)
    >>> choose_scale(0.0, RequantMode.FIXED) == 1 / 127
    True
    """
    # A value that is zero on every calibration sample is 0 at any scale; like
    # onnxruntime, take a unit range then.  A tiny range is the value's own, however small
    # (activations near 1e-14): a unit range would round every one of them to 0, a silently
    # wrong answer; where its readers' numbers then do not fit int8's (a bias beyond int32
    # in their accumulator's scale), the quantize pass runs them in float on the CPU.
    scale = (float(value_range) if value_range >= _TINY_RANGE else 1.0) / float(INT8_MAX)
    if mode is RequantMode.POW2:
        return 2.0 ** math.ceil(math.log2(scale))
    return scale


def quantize_weights(weight: np.ndarray, axis: int,
                     mode: RequantMode) -> tuple[np.ndarray, np.ndarray]:
    """int8 weights in [-127, 127] and their float64 scales, one per index of ``axis``."""
    moved = np.moveaxis(weight.astype(np.float64), axis, 0)
    peaks = np.abs(moved.reshape(moved.shape[0], -1)).max(axis=1)
    scales = np.array([choose_scale(p, mode) for p in peaks])
    shape = [1] * weight.ndim
    shape[axis] = len(scales)
    q = np.clip(np.rint(weight / scales.reshape(shape)), -INT8_MAX, INT8_MAX).astype(np.int8)
    return q, scales


def pre_shift_for(bound: int) -> int:
    """The smallest pre-shift with ``|acc + 2**(pre-1)| >> pre <= 2**X_BITS`` for ``|acc| <= bound``."""
    pre = max(0, int(bound).bit_length() - X_BITS)
    while bound + ((1 << pre) >> 1) >= 1 << (X_BITS + pre):
        pre += 1
    return pre


def fixed_requant(multipliers: np.ndarray, bound: int) -> Requant:
    """Per-channel 15-bit multipliers with per-tensor shifts (module docstring).

    Raises
    ------
    ValueError
        if a multiplier is too large for the ALU (``M`` of 2**15 or more after the shift).
    """
    multipliers = np.asarray(multipliers, dtype=np.float64)
    pre = pre_shift_for(bound)
    peak = float(multipliers.max())
    if peak <= 0:
        return Requant(pre, (0,) * len(multipliers), (0,))
    total = math.floor(math.log2((2 ** MULTIPLIER_BITS - 1) / peak))
    while round(peak * 2.0 ** total) >= 2 ** MULTIPLIER_BITS:
        total -= 1
    total = min(total, pre + MAX_SHR_AMOUNT)
    if total < pre:
        limit = (2 ** MULTIPLIER_BITS - 1) / 2 ** pre
        raise ValueError(f"requantization multiplier must be below {limit:.3g} after a "
                         f"pre-shift of {pre}, not {peak:.6g}")
    m = tuple(int(v) for v in np.rint(multipliers * 2.0 ** total))
    return Requant(pre, m, (total - pre,))


def pow2_requant(multipliers: np.ndarray, bound: int) -> Requant:
    """One rounding shift per channel for power-of-two multipliers (module docstring).

    Raises
    ------
    ValueError
        if a multiplier is not a power of two, or a left shift could overflow int32.
    """
    exponents = np.log2(np.asarray(multipliers, dtype=np.float64))
    shifts = -np.rint(exponents)
    if not np.allclose(exponents, -shifts, atol=1e-9):
        raise ValueError(f"pow2 multipliers must be powers of two, not {multipliers.tolist()!r}")
    shifts = np.minimum(shifts, MAX_SHR_AMOUNT).astype(np.int64)
    left = int(-shifts.min())
    if left > 0 and bound << left >= INT32_LIMIT:
        raise ValueError(f"a left shift by {left} of accumulators up to {bound} must fit "
                         "int32, and does not")
    return Requant(0, (1,), tuple(int(s) for s in shifts))


def requant_params(mode: RequantMode, multipliers: np.ndarray, bound: int) -> Requant:
    """The requantization of ``mode`` for real ``multipliers`` and accumulators up to ``bound``."""
    if bound >= INT32_LIMIT:
        raise ValueError(f"accumulators up to {bound} must fit int32, and may not")
    if mode is RequantMode.POW2:
        return pow2_requant(multipliers, bound)
    return fixed_requant(multipliers, bound)


#: ``precision`` values: every activation int8; 16 bits where int8 loses (below
#: :data:`MIXED_SQNR_DB`, or ``mixed:<dB>``); every product's input and output 16 bits.
PRECISIONS = ("int8", "mixed", "mixed:<dB>", "auto", "auto:<budget>", "int16")
#: The int8 SQNR below which ``mixed`` makes a product's activation 16 bits.
MIXED_SQNR_DB = 20.0


def parse_precision(precision: object) -> float | None:
    """The SQNR threshold (dB) of a ``precision``: None for ``int8``, infinity for ``int16``.

    >>> parse_precision("mixed"), parse_precision("mixed:25"), parse_precision("int8")
    (20.0, 25.0, None)
    >>> parse_precision("int4")
    Traceback (most recent call last):
    ...
    ValueError: precision must be one of int8, mixed, mixed:<dB>, auto, auto:<budget>, int16, not 'int4'
    """
    if precision == "int8" or parse_budget(precision) is not None:
        return None
    if precision == "int16":
        return math.inf
    if precision == "mixed":
        return MIXED_SQNR_DB
    if isinstance(precision, str) and precision.startswith("mixed:"):
        try:
            threshold = float(precision[len("mixed:"):])
        except ValueError:
            threshold = math.nan
        if math.isfinite(threshold):
            return threshold
    raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, not {precision!r}")


def parse_budget(precision: object) -> float | None:
    """The cycle budget of ``precision="auto"`` (``"auto:<budget>"``: MAC-passes at most that
    many times the all-int8 model's, :mod:`~openvta.graph.sensitivity`), else None.

    >>> parse_budget("auto"), parse_budget("auto:1.5"), parse_budget("mixed")
    (1.25, 1.5, None)
    >>> parse_budget("auto:0.9")
    Traceback (most recent call last):
    ...
    ValueError: precision auto:<budget> needs a budget of at least 1 (the all-int8 model's cycles), not 'auto:0.9'
    """
    from .sensitivity import DEFAULT_BUDGET

    if precision == "auto":
        return DEFAULT_BUDGET
    if not (isinstance(precision, str) and precision.startswith("auto:")):
        return None
    try:
        budget = float(precision[len("auto:"):])
    except ValueError:
        budget = math.nan
    if not budget >= 1.0 or not math.isfinite(budget):
        raise ValueError(f"precision auto:<budget> needs a budget of at least 1 (the all-int8 model's cycles), "
                         f"not {precision!r}")
    return budget


def int8_sqnr(power: float, scale: float) -> float:
    """The signal-to-quantization-noise ratio (dB) of a tensor of mean square ``power`` at
    int8 step ``scale``: rounding noise ``scale**2 / 12`` (the range is the calibrated
    maximum, so nothing clips).  A tensor with outlier channels has a large step for its
    typical values: a low SQNR.

    >>> round(int8_sqnr(1.0, 1 / 127), 1)  # mean square 1 at a step of 1/127
    52.9
    """
    noise = scale * scale / 12.0
    return 10.0 * math.log10(max(power, 1e-30) / noise) if noise > 0 else math.inf


def wide_scale(scale: float, mode: RequantMode) -> float:
    """The step of a wide (16-bit) value whose int8 step is ``scale``: the same range over
    :data:`~openvta.isa.WIDE_MAX` (``scale / 257``), ``scale / 256`` in ``pow2`` mode.

    >>> wide_scale(0.5, RequantMode.POW2), round(wide_scale(127 / 127, RequantMode.FIXED) * WIDE_MAX, 6)
    (0.001953125, 127.0)
    """
    if mode is RequantMode.POW2:
        return scale / 256.0
    return scale * INT8_MAX / WIDE_MAX


def activation_bits(node: Node) -> tuple[int, int]:
    """A Conv's, Gemm's or Add's ``(input, output)`` activation bits (its ``precision``;
    ``(8, 8)`` without one)."""
    return node.precision.bits if node.precision is not None else (8, 8)
