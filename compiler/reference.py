"""Golden numpy references for the operator library, in exact integer arithmetic.

Every reference accumulates exactly and wraps the result to int32, which is what the
accelerator's 32-bit accumulators compute: int64 products and sums wrap modulo 2**64,
so their low 32 bits are exact for any integer operands (float64, which BLAS runs, is
used where every partial sum is an integer below 2**53).  The fused operators then
apply docs/WORKLOADS.md's shift, bias and clip (:func:`shift_bias_clip`),
``clip((acc >> shift) + bias, 0, 127)`` cast to int8, with an arithmetic shift of the
int32 accumulator and an int32 (wrapping) bias add.  :func:`conv2d_nchw` is also the
graph level's Conv reference, on float operands too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from openvta.isa import INT8_MAX, INT8_MIN, MAX_SHR_AMOUNT

__all__ = ["conv2d_nchw", "dense", "fused_dense", "fused_layer", "shift_bias_clip"]

_FLOAT64_EXACT = 1 << 53


def _as_int(array: np.ndarray, subject: str, ndim: int, axes: str, kinds: str = "iu") -> np.ndarray:
    array = np.asarray(array)
    if array.dtype.kind not in kinds:
        what = "an integer" if kinds == "iu" else "an integer or float"
        raise TypeError(f"{subject} must be of {what} dtype, not {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"{subject} must be {ndim}-D {axes}, not shape {array.shape!r}")
    return array


def _check_int(value: int, subject: str, low: int, high: int | None = None) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{subject} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{subject} must be {bound}, not {value!r}")


def _pair(value: int | tuple[int, ...], subject: str, count: int, low: int) -> tuple[int, ...]:
    values = tuple(value) if isinstance(value, (tuple, list)) else (value,) * count
    if len(values) != count:
        raise ValueError(f"{subject} must be an integer or {count} integers, not {value!r}")
    for v in values:
        _check_int(v, subject, low)
    return values


def _check_channels(x: np.ndarray, w: np.ndarray, groups: int) -> None:
    _check_int(groups, "groups", 1)
    if x.shape[1] % groups or w.shape[0] % groups:
        raise ValueError(f"groups must divide the data's {x.shape[1]} and the kernel's {w.shape[0]} "
                         f"channels, not {groups!r}")
    if w.shape[1] * groups != x.shape[1]:
        per_group = "" if groups == 1 else f" / {groups} groups"
        raise ValueError(f"kernel input channels must equal the data's {x.shape[1]}{per_group}, "
                         f"not {w.shape[1]!r}")


def _peak(array: np.ndarray) -> int:
    return max(abs(int(array.min(initial=0))), abs(int(array.max(initial=0))))


def conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: int | tuple[int, int] = 1,
                pad: int | tuple[int, int, int, int] = 0, groups: int = 1, pad_value: int = 0) -> np.ndarray:
    """Grouped 2-D convolution (cross-correlation), ``NCHW`` data and ``OIHW`` kernel.

    The one numpy convolution of openvta: the compiler's operators and the graph level's
    Conv reference (integer and float) both run it.

    Parameters
    ----------
    x :
        data ``(N, C, H, W)``, integer or float dtype.
    w :
        kernel ``(O, C / groups, KH, KW)``, integer or float dtype.
    stride :
        one stride, or ``(height, width)``.
    pad :
        one zero padding on every side, or ``(top, left, bottom, right)`` (ONNX's order).
    groups :
        the channel groups: output channel ``o`` reads the data channels of group
        ``o // (O / groups)``.
    pad_value :
        what the padding holds (0; -128 for an int8 activation whose zero point is -128).

    Returns
    -------
    numpy.ndarray
        ``(N, O, OH, OW)`` with ``OH = (H + top + bottom - KH) // stride + 1`` (and OW
        alike): int32 for integer operands, wrapped to 32 bits as the accumulator does;
        float64 when either operand is a float.

    Raises
    ------
    TypeError
        for operands of another dtype, or non-integer parameters.
    ValueError
        for wrong ranks, mismatched channels or groups, or a kernel larger than the
        padded data.

    Examples
    --------
    >>> x = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    >>> conv2d_nchw(x, np.ones((1, 1, 2, 2), np.int8), stride=2)[0, 0]
    array([[10, 18],
           [42, 50]], dtype=int32)
    >>> conv2d_nchw(x, np.ones((1, 1, 2, 2), np.int8), stride=(3, 2), pad=(0, 0, 1, 0))[0, 0]
    array([[10, 18],
           [25, 29]], dtype=int32)
    """
    x = _as_int(x, "data", 4, "(N, C, H, W)", "iuf")
    w = _as_int(w, "kernel", 4, "(O, I, KH, KW)", "iuf")
    strides = _pair(stride, "stride", 2, 1)
    top, left, bottom, right = _pair(pad, "pad", 4, 0)
    _check_channels(x, w, groups)
    kh, kw = w.shape[2:]
    padded_hw = (x.shape[2] + top + bottom, x.shape[3] + left + right)
    if not (1 <= kh <= padded_hw[0] and 1 <= kw <= padded_hw[1]):
        raise ValueError(
            f"kernel size must be between 1x1 and the padded data's "
            f"{padded_hw[0]}x{padded_hw[1]}, not {kh}x{kw}"
        )
    is_float = x.dtype.kind == "f" or w.dtype.kind == "f"
    # float64 is exact for integers while every partial sum stays below 2**53, and runs
    # on BLAS; beyond, int64 wraps modulo 2**64, which keeps the low 32 bits exact.
    exact = is_float or max(_peak(x), abs(pad_value)) * _peak(w) * w.shape[1] * kh * kw < _FLOAT64_EXACT
    dtype: np.dtype[Any] = np.dtype(np.float64 if exact else np.int64)
    xp = np.pad(x.astype(dtype), ((0, 0), (0, 0), (top, bottom), (left, right)), constant_values=pad_value)
    oh, ow = (padded_hw[0] - kh) // strides[0] + 1, (padded_hw[1] - kw) // strides[1] + 1
    span_h, span_w = strides[0] * (oh - 1) + 1, strides[1] * (ow - 1) + 1
    # the windows (N, C, OH, OW, KH, KW): a strided view of the padded data, no copy
    windows = sliding_window_view(sliding_window_view(xp[:, :, :span_h + kh - 1, :span_w + kw - 1], kh, axis=2),
                                  kw, axis=3)
    windows = windows[:, :, ::strides[0], ::strides[1]]
    out_per_group, in_per_group = w.shape[0] // groups, w.shape[1]
    weights = w.astype(dtype)
    if in_per_group == 1 and groups > 1:
        # depthwise: one data channel per group, every group in one product (one product
        # per group would dominate a MobileNet's float run)
        per_group = weights.reshape(groups, out_per_group, kh, kw)
        acc = np.einsum("ngijkl,gokl->nijgo", windows, per_group).reshape(
            windows.shape[0], oh, ow, groups * out_per_group).transpose(0, 3, 1, 2)
    else:
        parts = [np.tensordot(windows[:, g * in_per_group:(g + 1) * in_per_group],
                              weights[g * out_per_group:(g + 1) * out_per_group], axes=([1, 4, 5], [1, 2, 3]))
                 for g in range(groups)]  # each (N, OH, OW, O / groups)
        acc = np.concatenate(parts, axis=3).transpose(0, 3, 1, 2)
    if is_float:
        return acc
    return np.ascontiguousarray(acc).astype(np.int64).astype(np.int32)


def dense(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Fully connected layer ``x @ w.T``: ``(N, I)`` × ``(O, I)`` → int32 ``(N, O)``.

    Raises
    ------
    TypeError
        for non-integer operands.
    ValueError
        for wrong ranks or mismatched input features.

    Examples
    --------
    >>> dense(np.array([[1, 2]]), np.array([[3, 4], [5, 6]]))
    array([[11, 17]], dtype=int32)
    """
    x = _as_int(x, "data", 2, "(N, I)")
    w = _as_int(w, "weight", 2, "(O, I)")
    if w.shape[1] != x.shape[1]:
        raise ValueError(
            f"weight input features must equal the data's {x.shape[1]}, not {w.shape[1]!r}"
        )
    return (x.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)


def shift_bias_clip(
    acc: np.ndarray,
    shift: int,
    bias: np.ndarray | None = None,
    lo: int = 0,
    hi: int = INT8_MAX,
) -> np.ndarray:
    """``clip((acc >> shift) + bias, lo, hi)`` cast to int8.

    Parameters
    ----------
    acc :
        int32 accumulators with channels on axis 1 (``(N, O, ...)``); other integer
        dtypes are wrapped to int32 first.
    shift :
        arithmetic right shift, 0 to 31.
    bias :
        ``(O,)`` per-channel bias added after the shift with int32 wrap-around, or None.
    lo, hi :
        the clip bounds, within int8.

    Raises
    ------
    TypeError
        for non-integer operands or parameters.
    ValueError
        for a shift outside 0–31, bounds outside int8 or ``lo > hi``, or a bias whose
        length is not the channel count.

    Examples
    --------
    >>> shift_bias_clip(np.array([[-512, 300, 40000]]), 8, np.array([1, 2, 3]))
    array([[  0,   3, 127]], dtype=int8)
    """
    acc = np.asarray(acc)
    if acc.dtype.kind not in "iu":
        raise TypeError(f"accumulator must be of an integer dtype, not {acc.dtype}")
    _check_int(shift, "shift", 0, MAX_SHR_AMOUNT)
    _check_int(lo, "lo", INT8_MIN, INT8_MAX)
    _check_int(hi, "hi", int(lo), INT8_MAX)
    out = acc.astype(np.int32) >> np.int32(shift)
    if bias is not None:
        bias = _as_int(bias, "bias", 1, "(O,)")
        channels = acc.shape[1] if acc.ndim >= 2 else None
        if bias.shape[0] != channels:
            raise ValueError(
                f"bias must have one value per channel (axis 1 of accumulator shape "
                f"{acc.shape!r}), not shape {bias.shape!r}"
            )
        per_channel = bias.astype(np.int64).reshape((1, -1) + (1,) * (acc.ndim - 2))
        out = (out.astype(np.int64) + per_channel).astype(np.int32)
    return np.clip(out, lo, hi).astype(np.int8)


def fused_layer(
    x: np.ndarray,
    w: np.ndarray,
    bias: np.ndarray | None,
    shift: int,
    stride: int = 1,
    pad: int = 0,
) -> np.ndarray:
    """A docs/WORKLOADS.md benchmark layer: ``clip((conv2d(x, w) >> shift) + bias, 0, 127)``.

    Returns
    -------
    numpy.ndarray
        int8 ``(N, O, OH, OW)``; see :func:`conv2d_nchw` and :func:`shift_bias_clip`.

    Examples
    --------
    >>> x = np.full((1, 2, 3, 3), 10, np.int8)
    >>> fused_layer(x, np.full((1, 2, 3, 3), 20, np.int8), np.array([-8]), 8, pad=1)[0, 0]
    array([[0, 1, 0],
           [1, 6, 1],
           [0, 1, 0]], dtype=int8)
    """
    return shift_bias_clip(conv2d_nchw(x, w, stride, pad), shift, bias)


def fused_dense(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int
) -> np.ndarray:
    """The benchmark dense layer: ``clip((x @ w.T >> shift) + bias, 0, 127)`` as int8.

    Examples
    --------
    >>> fused_dense(np.full((1, 4), 100), np.full((2, 4), 100), None, 8)
    array([[127, 127]], dtype=int8)
    """
    return shift_bias_clip(dense(x, w), shift, bias)
