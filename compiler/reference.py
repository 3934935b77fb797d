"""Golden numpy references for the operator library, in exact integer arithmetic.

Every reference accumulates in int64 and wraps the result to int32, which is what the
accelerator's 32-bit accumulators compute: int64 products and sums wrap modulo 2**64,
so their low 32 bits are exact for any integer operands.  The fused operators then
apply docs/WORKLOADS.md's requantization,
``clip((acc >> shift) + bias, 0, 127)`` cast to int8, with an arithmetic shift of the
int32 accumulator and an int32 (wrapping) bias add.
"""

from __future__ import annotations

import numpy as np

from openvta.isa.config import MAX_SHR_AMOUNT

__all__ = ["conv2d_nchw", "dense", "fused_dense", "fused_layer", "requantize"]

_INT8 = np.iinfo(np.int8)


def _as_int(array: np.ndarray, subject: str, ndim: int, axes: str) -> np.ndarray:
    array = np.asarray(array)
    if array.dtype.kind not in "iu":
        raise TypeError(f"{subject} must be of an integer dtype, not {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"{subject} must be {ndim}-D {axes}, not shape {array.shape!r}")
    return array


def _check_int(value: int, subject: str, low: int, high: int | None = None) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise TypeError(f"{subject} must be an integer, not {value!r}")
    if value < low or (high is not None and value > high):
        bound = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ValueError(f"{subject} must be {bound}, not {value!r}")


def conv2d_nchw(x: np.ndarray, w: np.ndarray, stride: int = 1, pad: int = 0) -> np.ndarray:
    """2-D convolution (cross-correlation), ``NCHW`` data and ``OIHW`` kernel.

    Parameters
    ----------
    x :
        data ``(N, C, H, W)``, integer dtype.
    w :
        kernel ``(O, C, KH, KW)``, integer dtype.
    stride, pad :
        the same in height and width; padding is zeros.

    Returns
    -------
    numpy.ndarray
        int32 ``(N, O, OH, OW)`` with ``OH = (H + 2*pad - KH) // stride + 1`` (and OW
        alike), wrapped to 32 bits as the accumulator does.

    Raises
    ------
    TypeError
        for non-integer operands or parameters.
    ValueError
        for wrong ranks, mismatched channels, or a kernel larger than the padded data.

    Examples
    --------
    >>> x = np.arange(16, dtype=np.int8).reshape(1, 1, 4, 4)
    >>> conv2d_nchw(x, np.ones((1, 1, 2, 2), np.int8), stride=2)[0, 0]
    array([[10, 18],
           [42, 50]], dtype=int32)
    """
    x = _as_int(x, "data", 4, "(N, C, H, W)")
    w = _as_int(w, "kernel", 4, "(O, I, KH, KW)")
    _check_int(stride, "stride", 1)
    _check_int(pad, "pad", 0)
    if w.shape[1] != x.shape[1]:
        raise ValueError(
            f"kernel input channels must equal the data's {x.shape[1]}, not {w.shape[1]!r}"
        )
    kh, kw = w.shape[2:]
    padded_hw = (x.shape[2] + 2 * pad, x.shape[3] + 2 * pad)
    if not (1 <= kh <= padded_hw[0] and 1 <= kw <= padded_hw[1]):
        raise ValueError(
            f"kernel size must be between 1x1 and the padded data's "
            f"{padded_hw[0]}x{padded_hw[1]}, not {kh}x{kw}"
        )
    oh = (padded_hw[0] - kh) // stride + 1
    ow = (padded_hw[1] - kw) // stride + 1
    xp = np.pad(x.astype(np.int64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    # im2col, one strided slice per kernel tap: (N, C, OH, OW, KH*KW).
    span_h, span_w = stride * (oh - 1) + 1, stride * (ow - 1) + 1
    cols = np.stack(
        [xp[:, :, ky : ky + span_h : stride, kx : kx + span_w : stride]
         for ky in range(kh) for kx in range(kw)],
        axis=-1,
    )
    taps = w.astype(np.int64).reshape(w.shape[0], w.shape[1], kh * kw)
    acc = np.tensordot(cols, taps, axes=([1, 4], [1, 2]))  # (N, OH, OW, O)
    return np.ascontiguousarray(acc.transpose(0, 3, 1, 2)).astype(np.int32)


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


def requantize(
    acc: np.ndarray,
    shift: int,
    bias: np.ndarray | None = None,
    lo: int = 0,
    hi: int = 127,
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
    >>> requantize(np.array([[-512, 300, 40000]]), 8, np.array([1, 2, 3]))
    array([[  0,   3, 127]], dtype=int8)
    """
    acc = np.asarray(acc)
    if acc.dtype.kind not in "iu":
        raise TypeError(f"accumulator must be of an integer dtype, not {acc.dtype}")
    _check_int(shift, "shift", 0, MAX_SHR_AMOUNT)
    _check_int(lo, "lo", int(_INT8.min), int(_INT8.max))
    _check_int(hi, "hi", int(lo), int(_INT8.max))
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
        int8 ``(N, O, OH, OW)``; see :func:`conv2d_nchw` and :func:`requantize`.

    Examples
    --------
    >>> x = np.full((1, 2, 3, 3), 10, np.int8)
    >>> fused_layer(x, np.full((1, 2, 3, 3), 20, np.int8), np.array([-8]), 8, pad=1)[0, 0]
    array([[0, 1, 0],
           [1, 6, 1],
           [0, 1, 0]], dtype=int8)
    """
    return requantize(conv2d_nchw(x, w, stride, pad), shift, bias)


def fused_dense(
    x: np.ndarray, w: np.ndarray, bias: np.ndarray | None, shift: int
) -> np.ndarray:
    """The benchmark dense layer: ``clip((x @ w.T >> shift) + bias, 0, 127)`` as int8.

    Examples
    --------
    >>> fused_dense(np.full((1, 4), 100), np.full((2, 4), 100), None, 8)
    array([[127, 127]], dtype=int8)
    """
    return requantize(dense(x, w), shift, bias)
