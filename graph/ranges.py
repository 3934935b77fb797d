"""Calibration methods: the range an activation's int8 scale covers, from its calibration values.

``minmax`` takes the largest magnitude seen; the others read a histogram of the
magnitudes (:data:`BINS` bins from 0 to that largest magnitude, over every sample) and
may clip the few largest values to give the others a finer step:

- ``percentile`` (``percentile:<p>``, default :data:`DEFAULT_PERCENTILE`): the magnitude
  below which ``p`` % of the values lie;
- ``mse``: the clip ``c`` minimizing the expected squared error of int8 at step
  ``c / 127`` — values beyond ``c`` lose ``(|x| - c)²``, values below it the rounding noise
  ``step² / 12``, or ``x²`` where they round to zero;
- ``entropy``: TensorRT's KL-divergence calibration (Migacz, "8-bit Inference with
  TensorRT", 2017): the clip whose 128-level quantized histogram is closest, in
  Kullback–Leibler divergence, to the histogram with the clipped values folded into its
  last bin.

Examples
--------
>>> parse_calibration_method("percentile:99.9"), parse_calibration_method("mse")
(('percentile', 99.9), ('mse', None))
>>> counts = np.zeros(BINS); counts[:100] = 10**5; counts[-1] = 1  # one outlier at 20x the rest
>>> round(clip_range(counts, 20.0, "mse", None), 2), round(clip_range(counts, 20.0, "percentile", 99.99), 2)
(1.02, 0.98)
>>> clip_range(counts, 20.0, "minmax", None)
20.0
"""

from __future__ import annotations

import math

import numpy as np

from openvta.isa import INT8_MAX

__all__ = ["BINS", "CALIBRATION_METHODS", "DEFAULT_PERCENTILE", "clip_range", "parse_calibration_method"]

#: The calibration methods (``compile_model(calibration_method=...)``, ``--calibration-method``).
CALIBRATION_METHODS = ("minmax", "percentile", "percentile:<p>", "mse", "entropy")
#: ``percentile``'s default: the magnitude below which this percentage of the values lie.
DEFAULT_PERCENTILE = 99.99
#: Histogram bins from 0 to the largest magnitude (TensorRT's 2048).
BINS = 2048
_LEVELS = INT8_MAX + 1  # magnitudes 0..127 of an int8 code


def parse_calibration_method(method: object) -> tuple[str, float | None]:
    """``(name, percentile)`` of a calibration method (its parameter only for ``percentile``).

    >>> parse_calibration_method("kl")
    Traceback (most recent call last):
    ...
    ValueError: calibration_method must be one of minmax, percentile, percentile:<p>, mse, entropy, not 'kl'
    >>> parse_calibration_method("percentile:100.5")
    Traceback (most recent call last):
    ...
    ValueError: calibration_method percentile:<p> needs 0 < p <= 100, not 'percentile:100.5'
    """
    if method in ("minmax", "mse", "entropy"):
        return str(method), None
    if method == "percentile":
        return "percentile", DEFAULT_PERCENTILE
    if isinstance(method, str) and method.startswith("percentile:"):
        try:
            value = float(method[len("percentile:"):])
        except ValueError:
            value = math.nan
        if not 0 < value <= 100:
            raise ValueError(f"calibration_method percentile:<p> needs 0 < p <= 100, not {method!r}")
        return "percentile", value
    raise ValueError(f"calibration_method must be one of {', '.join(CALIBRATION_METHODS)}, not {method!r}")


def clip_range(counts: np.ndarray, top: float, method: str, percentile: float | None,
               steps: int = INT8_MAX) -> float:
    """The range (a magnitude, at most ``top``) the method chooses from ``counts``, a
    histogram of :data:`BINS` bins of the magnitudes from 0 to ``top``, for ``steps`` int8
    steps between 0 and the range (255 for a non-negative value at the zero point -128)."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if method == "minmax" or top <= 0 or total <= 0:
        return top
    width = top / len(counts)
    if method == "percentile":
        assert percentile is not None
        cumulative = np.cumsum(counts)
        index = int(np.searchsorted(cumulative, total * percentile / 100.0))
        return min(top, (index + 1) * width)
    if method == "mse":
        return _mse(counts, width, steps)
    return _entropy(counts, width)


def _mse(counts: np.ndarray, width: float, steps: int) -> float:
    centers = (np.arange(len(counts)) + 0.5) * width
    best, chosen = math.inf, len(counts) * width
    for stop in range(_LEVELS // 2, len(counts) + 1, 8):
        clip = stop * width
        step = clip / steps
        inside, beyond = counts[:stop], counts[stop:]
        rounding = np.where(centers[:stop] < step / 2, centers[:stop] ** 2, step * step / 12.0)
        error = float(inside @ rounding) + float(beyond @ (centers[stop:] - clip) ** 2)
        if error < best:
            best, chosen = error, clip
    return chosen


def _entropy(counts: np.ndarray, width: float) -> float:
    best, chosen = math.inf, len(counts) * width
    for stop in range(_LEVELS, len(counts) + 1, 16):
        reference = counts[:stop].copy()
        reference[-1] += counts[stop:].sum()
        merged = np.array_split(counts[:stop], _LEVELS)
        expanded = []
        for chunk in merged:
            used = chunk > 0
            level = chunk.sum() / max(int(used.sum()), 1)
            expanded.append(np.where(used, level, 0.0))
        candidate = np.concatenate(expanded)
        p, q = reference / reference.sum(), candidate / max(candidate.sum(), 1e-300)
        mask = p > 0
        q = np.where(q > 0, q, 1e-12)
        divergence = float(np.sum(p[mask] * np.log(p[mask] / q[mask])))
        if divergence < best:
            best, chosen = divergence, stop * width
    return chosen
