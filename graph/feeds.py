"""Checking what users hand in: input arrays for ``run``/``reference`` and calibration data.

An input is given as an array (for a single-input model) or a mapping of input name →
array.  Arrays of any floating dtype are accepted and converted to float32; their shape
must match the input's, any size in the symbolic batch dimension.  Every mismatch is a
one-line ``ValueError`` naming the input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Union

import numpy as np

from .ir import DType, Graph, TensorType

__all__ = ["Feed", "as_feeds", "calibration_batches", "shape_text"]

Feed = Union[np.ndarray, Mapping[str, np.ndarray]]


def shape_text(t: TensorType) -> str:
    """``(N, 1, 8, 8)``"""
    return "(" + ", ".join(str(d) for d in t.shape) + ")"


def _check(name: str, t: TensorType, value: object) -> np.ndarray:
    array = np.asarray(value)
    index = t.dtype is DType.INT64
    if index and array.dtype.kind not in "iu":
        raise ValueError(f"input {name!r} must hold integers (int64: token ids, a mask), not {array.dtype}")
    if not index and array.dtype.kind != "f":
        raise ValueError(f"input {name!r} must hold floating-point values, not {array.dtype}")
    if array.ndim != t.ndim or any(isinstance(d, int) and d != n for d, n in zip(t.shape, array.shape)):
        raise ValueError(f"input {name!r} must have shape {shape_text(t)}, not {array.shape!r}")
    if index and array.dtype == np.uint64 and array.size and array.max() > np.iinfo(np.int64).max:
        raise ValueError(f"input {name!r} holds values outside int64 (largest {array.max()})")
    return np.ascontiguousarray(array, dtype=np.int64 if index else np.float32)


def as_feeds(graph: Graph, x: Feed, what: str = "input") -> dict[str, np.ndarray]:
    """``x`` as checked float32 arrays by input name (module docstring)."""
    names = graph.inputs
    if not isinstance(x, Mapping):
        if len(names) != 1:
            raise ValueError(f"{what} must be a mapping of input name to array for a model with "
                             f"{len(names)} inputs ({', '.join(names)}), not an array")
        x = {names[0]: x}
    unknown = [k for k in x if k not in names]
    if unknown:
        raise ValueError(f"{what} names must be the model's inputs ({', '.join(names)}), "
                         f"not {unknown[0]!r}")
    missing = [k for k in names if k not in x]
    if missing:
        raise ValueError(f"{what} must give every model input; {missing[0]!r} is missing")
    feeds = {name: _check(name, graph.types[name], x[name]) for name in names}
    batches = {a.shape[0] for name, a in feeds.items() if isinstance(graph.types[name].shape[0], str)}
    if len(batches) > 1:
        raise ValueError(f"{what} arrays must share one batch size, not {sorted(batches)!r}")
    return feeds


def calibration_batches(graph: Graph, calibration: Feed | Iterable[Mapping[str, np.ndarray]]
                        ) -> list[dict[str, np.ndarray]]:
    """Calibration data as a list of checked feeds.

    ``calibration`` is an array (a batch of samples of a single-input model), a mapping
    (one feed) or an iterable of mappings (several feeds).
    """
    if isinstance(calibration, (np.ndarray, Mapping)):
        batches = [as_feeds(graph, calibration, "calibration")]
    elif isinstance(calibration, Iterable) and not isinstance(calibration, (str, bytes)):
        batches = []
        for item in calibration:
            if not isinstance(item, Mapping):
                raise ValueError("calibration must be an array or an iterable of mappings of "
                                 f"input name to array, not an iterable of {type(item).__name__}")
            batches.append(as_feeds(graph, item, "calibration"))
    else:
        raise ValueError("calibration must be an array or an iterable of mappings of input "
                         f"name to array, not {type(calibration).__name__}")
    if not batches or all(a.size == 0 for b in batches for a in b.values()):
        raise ValueError("calibration must hold at least one sample, not none")
    return batches
