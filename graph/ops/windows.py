"""numpy kernels the op references share: pooling windows, rounded means (the convolution
is the compiler's one numpy reference, :func:`openvta.compiler.reference.conv2d_nchw`).

Float kernels compute in float64 and the references cast the result to float32, so they
are at least as accurate as a float32 runtime.  Integer results are exact, wrapped to
int32 as the accelerator's accumulator wraps.
"""

from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

__all__ = ["dilated_spans", "pool_windows", "max_pool", "avg_pool", "round_div"]


def _pad(x: np.ndarray, pads: tuple[int, ...], fill: float) -> np.ndarray:
    rank = len(pads) // 2
    return np.pad(x, ((0, 0), (0, 0)) + tuple(zip(pads[:rank], pads[rank:])), constant_values=fill)


def dilated_spans(kernel: tuple[int, ...], dilations: tuple[int, ...] | None) -> tuple[int, ...]:
    """The input cells a window covers along each axis: ``(k - 1)·d + 1``."""
    return tuple((k - 1) * d + 1 for k, d in zip(kernel, dilations or (1,) * len(kernel)))


def pool_windows(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
                 pads: tuple[int, ...], fill: float, dilations: tuple[int, ...] | None = None) -> np.ndarray:
    """Sliding windows ``(N, C, *out, *kernel)`` over ``x`` (N, C, spatial...) padded with
    ``fill`` (``pads``: every axis's begin, then every axis's end), taps ``dilations`` apart."""
    rank = len(kernel)
    dilations = dilations or (1,) * rank
    axes = tuple(range(2, 2 + rank))
    windows = sliding_window_view(_pad(x, pads, fill), dilated_spans(kernel, dilations), axis=axes)  # type: ignore[call-overload]  # numpy 2.2 stubs: one axis, not a tuple
    return windows[(slice(None), slice(None)) + tuple(slice(None, None, s) for s in strides)
                   + tuple(slice(None, None, d) for d in dilations)]


def _window_axes(rank: int) -> tuple[int, ...]:
    return tuple(range(2 + rank, 2 + 2 * rank))


def max_pool(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
             pads: tuple[int, ...], dilations: tuple[int, ...] | None = None) -> np.ndarray:
    """Maximum over each window; padding never wins (it is the dtype's lowest value)."""
    fill = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    return pool_windows(x, kernel, strides, pads, fill, dilations).max(axis=_window_axes(len(kernel)))


def _counts(shape: tuple[int, ...], kernel: tuple[int, ...], strides: tuple[int, ...],
            pads: tuple[int, ...], include_pad: bool, dilations: tuple[int, ...] | None) -> np.ndarray:
    if include_pad:
        return np.array(np.prod(kernel), dtype=np.int64)
    ones = np.ones((1, 1) + shape[2:], dtype=np.int64)
    return pool_windows(ones, kernel, strides, pads, 0, dilations).sum(axis=_window_axes(len(kernel)))


def avg_pool(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
             pads: tuple[int, ...], include_pad: bool, dilations: tuple[int, ...] | None = None) -> np.ndarray:
    """Mean over each window: float64 for float input, a rounded integer mean otherwise.

    ``include_pad`` divides by the whole window (ONNX ``count_include_pad=1``), otherwise
    by the elements inside the data.  Integer means round half up (:func:`round_div`).
    """
    counts = _counts(x.shape, kernel, strides, pads, include_pad, dilations)
    axes = _window_axes(len(kernel))
    if x.dtype.kind == "f":
        sums = pool_windows(x.astype(np.float64), kernel, strides, pads, 0.0, dilations).sum(axis=axes)
        return sums / counts
    sums = pool_windows(x.astype(np.int64), kernel, strides, pads, 0, dilations).sum(axis=axes)
    return round_div(sums, counts)


def round_div(value: np.ndarray, divisor: np.ndarray | int) -> np.ndarray:
    """``floor(value / divisor + 1/2)`` in exact integer arithmetic (``divisor > 0``).

    Examples
    --------
    >>> round_div(np.array([5, 6, -5, -6, 7]), 4).tolist()
    [1, 2, -1, -1, 2]
    """
    value = np.asarray(value, dtype=np.int64)
    divisor = np.asarray(divisor, dtype=np.int64)
    return np.floor_divide(2 * value + divisor, 2 * divisor)
