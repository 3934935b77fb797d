"""What an evaluation measures on each sample, for the int8 model and the float model.

* ``"top1"``, ``"top5"``: 1 where the sample's label is among the ``k`` highest scores of
  the model's first output (flattened per sample), else 0; ties go to the lower class
  index, as ``argmax``'s do.  Needs labels.
* ``"cosine"``: the cosine similarity of the int8 model's outputs to the float model's
  (``CompiledModel.float_reference``), every output flattened and joined per sample, in
  float64; 1 where both are zero, 0 where one is.  The float model is the reference: it
  has no value of its own.
* a function ``metric(outputs, label) -> float``: called once per sample with that
  sample's outputs (output name → array, the batch axis removed) and its label (None
  for unlabelled samples), for each model.  On the command line ``module:function``
  (the current folder is on the import path).  To run on other processes it must be
  picklable: a module-level function, or an instance of a module-level class.

Every metric's score is the mean of its per-sample values.

>>> top_k(np.array([[0.1, 0.7, 0.2], [0.5, 0.5, 0.0]]), np.array([2, 1]), 1)
[0.0, 0.0]
>>> top_k(np.array([[0.1, 0.7, 0.2], [0.5, 0.5, 0.0]]), np.array([2, 1]), 2)
[1.0, 1.0]
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Union

import numpy as np

__all__ = ["BUILTIN_METRICS", "Metric", "MetricFunction", "against_float", "cosine", "metric_name",
           "needs_labels", "resolve_metric", "sample_values", "top_k"]

#: The metrics named by a string.
BUILTIN_METRICS = ("top1", "top5", "cosine")

MetricFunction = Callable[[Mapping[str, np.ndarray], Union[int, None]], float]
Metric = Union[str, MetricFunction]


def resolve_metric(metric: Metric) -> Metric:
    """A built-in metric's name, a function, or the function ``module:function`` names
    (one-line ``ValueError`` otherwise)."""
    if callable(metric) or metric in BUILTIN_METRICS:
        return metric
    if not isinstance(metric, str) or metric.count(":") != 1:
        raise ValueError(f"metric must be {', '.join(BUILTIN_METRICS)}, a function or 'module:function', "
                         f"not {metric!r}")
    module_name, _, name = metric.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"metric {metric}: cannot import {module_name!r} ({exc})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise ValueError(f"metric {metric}: module {module_name!r} has no function {name!r}")
    return function


def metric_name(metric: Metric) -> str:
    """``top1``, or ``module:qualified.name`` of a function (of its class, for an object)."""
    if isinstance(metric, str):
        return metric
    owner = metric if hasattr(metric, "__qualname__") else type(metric)
    return f"{owner.__module__}:{owner.__qualname__}"


def needs_labels(metric: Metric) -> bool:
    return metric in ("top1", "top5")


def against_float(metric: Metric) -> bool:
    """Whether the float model has a value of its own (not for ``cosine``, its reference)."""
    return metric != "cosine"


def top_k(scores: np.ndarray, labels: np.ndarray, k: int) -> list[float]:
    """1.0 where the label is among the ``k`` highest of each row of ``scores`` (module docstring)."""
    rows = np.asarray(scores).reshape(len(labels), -1)
    if labels.size and int(labels.max()) >= rows.shape[1]:
        raise ValueError(f"label {int(labels.max())} is not a class of the model's first output "
                         f"({rows.shape[1]} classes)")
    order = np.argsort(-rows, axis=1, kind="stable")[:, :k]
    return [float(label in row) for row, label in zip(order, labels)]


def cosine(outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], count: int) -> list[float]:
    """Per sample, the cosine of ``outputs`` to ``reference`` (module docstring)."""
    a = _joined(outputs, count)
    b = _joined(reference, count)
    dot = (a * b).sum(axis=1)
    norms = np.sqrt((a * a).sum(axis=1)) * np.sqrt((b * b).sum(axis=1))
    values = []
    zeros_a = np.logical_not(a.any(axis=1)).tolist()
    zeros_b = np.logical_not(b.any(axis=1)).tolist()
    for d, n, zero_a, zero_b in zip(dot, norms, zeros_a, zeros_b):
        values.append(1.0 if zero_a and zero_b else 0.0 if zero_a or zero_b else float(d / n))
    return values


def _joined(outputs: Mapping[str, np.ndarray], count: int) -> np.ndarray:
    parts = []
    for name, value in outputs.items():
        if np.ndim(value) == 0 or np.shape(value)[0] != count:
            raise ValueError(f"output {name!r} of shape {np.shape(value)} has no batch axis of {count} samples")
        parts.append(np.asarray(value, np.float64).reshape(count, -1))
    return np.concatenate(parts, axis=1)


def sample_values(metric: Metric, outputs: Mapping[str, np.ndarray], labels: np.ndarray | None,
                  reference: Mapping[str, np.ndarray] | None = None) -> list[float]:
    """``metric`` on each sample of a batch of ``outputs`` (``reference``: the float model's,
    for ``cosine``)."""
    count = len(next(iter(outputs.values())))
    if metric in ("top1", "top5"):
        assert labels is not None  # (checked where the evaluation starts: needs_labels)
        return top_k(next(iter(outputs.values())), labels, 1 if metric == "top1" else 5)
    if metric == "cosine":
        assert reference is not None
        return cosine(outputs, reference, count)
    assert callable(metric)
    values = []
    for i in range(count):
        one = {name: value[i] for name, value in outputs.items()}
        label = None if labels is None else int(labels[i])
        try:
            value = float(metric(one, label))
        except Exception as exc:  # a user's function: its failure, said in one line
            reason = str(exc).splitlines()[0] if str(exc) else ""
            raise ValueError(f"metric {metric_name(metric)} failed: {type(exc).__name__}: {reason}") from None
        values.append(value)
    return values
