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

__all__ = ["Feed", "as_feeds", "calibration_batches", "shape_text", "split_batch"]

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


def calibration_batches(graph: Graph, calibration: Feed | Iterable[Mapping[str, np.ndarray]],
                        notes: list[str] | None = None) -> list[dict[str, np.ndarray]]:
    """Calibration data as a list of checked feeds.

    ``calibration`` is an array (a batch of samples of a single-input model), a mapping
    (one feed) or an iterable of mappings (several feeds).  A feed of several times the
    model's fixed batch is split into runs of that batch (:func:`split_batch`), and
    ``notes`` (if given) gets one line saying so.
    """
    split = [0, 0]  # feeds split, runs they became

    def parts(feed: Feed) -> list[dict[str, np.ndarray]]:
        runs = split_batch(graph, feed)
        if len(runs) > 1:
            split[0], split[1] = split[0] + 1, split[1] + len(runs)
        return [as_feeds(graph, run, "calibration") for run in runs]

    if isinstance(calibration, (np.ndarray, Mapping)):
        batches = parts(calibration)
    elif isinstance(calibration, Iterable) and not isinstance(calibration, (str, bytes)):
        batches = []
        for item in calibration:
            if not isinstance(item, Mapping):
                raise ValueError("calibration must be an array or an iterable of mappings of "
                                 f"input name to array, not an iterable of {type(item).__name__}")
            batches += parts(item)
    else:
        raise ValueError("calibration must be an array or an iterable of mappings of input "
                         f"name to array, not {type(calibration).__name__}")
    if not batches or all(a.size == 0 for b in batches for a in b.values()):
        raise ValueError("calibration must hold at least one sample, not none")
    if split[0] and notes is not None:
        batch = next(iter(batches[0].values())).shape[0]
        feeds = "a batch" if split[0] == 1 else f"{split[0]} batches"
        notes.append(f"calibration: {feeds} of samples split into {split[1]} runs of the model's fixed batch "
                     f"of {batch}")
    return batches


def split_batch(graph: Graph, feed: Feed) -> list[Feed]:
    """``feed`` as runs of the model's batch: a feed whose arrays hold ``k`` times the fixed
    batch ``b`` of every input (``k > 1``; each array's other dimensions the input's) is
    ``k`` feeds of ``b`` samples each, in order (eight images for a batch-1 export); any
    other feed is itself (``as_feeds`` checks it).

    >>> from openvta.graph.ir import TensorType
    >>> g = Graph("m", ("x",), ("x",), (), {}, {"x": TensorType((1, 3), DType.FLOAT32)})
    >>> [part["x"].shape for part in split_batch(g, np.zeros((4, 3), np.float32))]
    [(1, 3), (1, 3), (1, 3), (1, 3)]
    """
    arrays = dict(feed) if isinstance(feed, Mapping) else (
        {graph.inputs[0]: feed} if len(graph.inputs) == 1 else None)
    if arrays is None or set(arrays) != set(graph.inputs):
        return [feed]
    counts = set()
    for name, value in arrays.items():
        t, shape = graph.types[name], np.shape(value)
        batch = t.shape[0] if t.ndim else None
        if not isinstance(batch, int) or batch < 1 or len(shape) != t.ndim or shape[0] % batch \
                or any(isinstance(d, int) and d != n for d, n in zip(t.shape[1:], shape[1:])):
            return [feed]
        counts.add((shape[0] // batch, batch))
    if len(counts) != 1:
        return [feed]
    ((runs, batch),) = counts
    if runs <= 1:
        return [feed]
    return [{name: np.asarray(value)[k * batch:(k + 1) * batch] for name, value in arrays.items()}
            for k in range(runs)]
