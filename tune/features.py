"""Features of a configuration for the cost model, and the roofline bound it is scaled by.

Each operator's descriptor computes them (its ``plans.features``, in the operator's own file,
with :mod:`openvta.compiler.ops.costs`).  A configuration's features are its knobs and
what its program will do, computed from the plan the way the lowering emits it — tile
counts (tail tiles included), reduction steps, DRAM bytes per module (inputs, weights,
accumulators, outputs: for conv2d the bytes its loads and stores move, tail tiles and
padding included, equal to the run's counters — tests/tune/test_features.py), micro-ops per kernel, instructions (an
estimate), threads, buffer occupancy, arithmetic intensity, the epilogue's ALU cycles and
the roofline bound: the compute module's cycles — the MACs at the peak rate *plus* the
epilogue's ALU cycles (one per output vector and stage: the compute module runs the GEMM
and the ALU micro-ops one after the other) — or the bytes at the bus rate, whichever is
slower.  Without the ALU term the bound of a short 1×1 layer (ResNet-18 C4, C7, C10) is
the bytes, which fall as tiles grow while the cycles, held up by the epilogue, fall far
less: the target below then moves against the cycles and misleads the model.  They are
computed rather than read from a lowered program because the search scores thousands
of configurations per batch and lowering one takes tens of milliseconds.  The shape is
among the features, so that records of other shapes of an operator transfer.

The cost model learns ``log(cycles / roofline)`` (:func:`target`): how far from its own
bound a configuration lands, comparable across shapes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from openvta.compiler.ops import operator_spec
from openvta.isa import Config

__all__ = ["features", "named_features", "roofline_cycles", "target"]


def named_features(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> dict[str, float]:
    return operator_spec(operator).plans.features(cfg, params, knobs)


def features(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> np.ndarray:
    """The feature vector of one configuration (the same names, in the same order, for
    every configuration of ``operator``); sizes enter as ``log2(1 + x)``."""
    values = named_features(operator, cfg, params, knobs)
    return np.array([math.log2(1.0 + max(float(x), 0.0)) for x in values.values()], dtype=np.float64)


def roofline_cycles(operator: str, cfg: Config, params: Mapping[str, Any], knobs: Mapping[str, Any]) -> float:
    """The roofline bound of a configuration's estimated MACs, epilogue and bytes, in cycles."""
    return named_features(operator, cfg, params, knobs)["roofline"]


def target(cycles: float, roofline: float) -> float:
    """What the cost model learns: ``log(cycles / roofline)`` (0 on the bound)."""
    return math.log(cycles / roofline)
