"""Flatten, Reshape and Slice: injective ops that only change the shape (or pick a part).

Both keep the dtype and the quantization scale, and run on the CPU (between
accelerator regions a change of shape is a change of packed layout).  Reshape's target
is the attribute ``shape`` (the ONNX frontend reads it from the constant second input):
``0`` copies the input's dimension, ``-1`` is inferred.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..errors import OpError
from ..ir import Attrs, Dim, Op, TensorType
from .base import OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, int_attr, ints_attr

__all__ = ["DEFS", "reshape_target"]


def _product(dims: Sequence[Dim]) -> Dim:
    symbols = [d for d in dims if isinstance(d, str)]
    if not symbols:
        return math.prod(d for d in dims if isinstance(d, int))
    if len(symbols) == 1 and all(d == 1 for d in dims if isinstance(d, int)):
        return symbols[0]
    raise OpError(f"dimensions {tuple(dims)!r} with a symbolic batch must not be merged")


def _flatten_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    axis = int_attr(attrs, "axis", 1)
    if not -data.ndim <= axis <= data.ndim:
        raise OpError(f"Flatten axis must lie within [-{data.ndim}, {data.ndim}], not {axis}")
    if axis < 0:
        axis += data.ndim
    return TensorType((_product(data.shape[:axis]), _product(data.shape[axis:])), data.dtype)


def _flatten(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    axis = int_attr(attrs, "axis", 1)
    axis = axis if axis >= 0 else axis + x.ndim
    return x.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])).copy()


def reshape_target(shape: tuple[Dim, ...], target: tuple[int, ...]) -> tuple[Dim, ...]:
    """The output shape of reshaping ``shape`` to ``target`` (ONNX rules, ``allowzero=0``).

    Examples
    --------
    >>> reshape_target(("N", 16, 2, 2), (0, -1))
    ('N', 64)
    >>> reshape_target(("N", 16, 2, 2), (-1, 64))
    ('N', 64)
    """
    if sum(t == -1 for t in target) > 1 or any(t < -1 for t in target):
        raise OpError(f"Reshape shape must hold sizes, 0 and at most one -1, not {target!r}")
    if any(t == 0 and i >= len(shape) for i, t in enumerate(target)):
        raise OpError(f"Reshape shape {target!r} copies a dimension {shape!r} does not have")
    dims: list[Dim] = [shape[i] if t == 0 else t for i, t in enumerate(target)]
    known_in = math.prod(d for d in shape if isinstance(d, int))
    known_out = math.prod(d for d in dims if isinstance(d, int) and d != -1)
    symbols_in = [d for d in shape if isinstance(d, str)]
    symbols_out = [d for d in dims if isinstance(d, str)]
    if -1 in dims:
        if symbols_in != symbols_out and not (len(symbols_in) == 1 and not symbols_out
                                              and known_in == known_out):
            raise OpError(f"Reshape of {shape!r} to {target!r} cannot keep the symbolic batch")
        if symbols_in != symbols_out:
            fill: Dim = symbols_in[0]
        elif known_out == 0 or known_in % known_out:
            raise OpError(f"Reshape of {shape!r} to {target!r} must keep the element count")
        else:
            fill = known_in // known_out
        dims[dims.index(-1)] = fill
    elif symbols_in != symbols_out or known_in != known_out:
        raise OpError(f"Reshape of {shape!r} to {target!r} must keep the element count")
    return tuple(dims)


def _reshape_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    target = ints_attr(attrs, "shape")
    if int_attr(attrs, "allowzero", 0):
        raise OpError("Reshape with allowzero=1 is not supported")
    return TensorType(reshape_target(inputs[0].shape, target), inputs[0].dtype)


def _reshape(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    target = tuple(x.shape[i] if t == 0 else t for i, t in enumerate(ints_attr(attrs, "shape")))
    return np.reshape(x, target).copy()


def _slices(attrs: Attrs, shape: Sequence[Dim]) -> tuple[slice, ...]:
    """The numpy index of ONNX's Slice: ``starts``/``ends`` (clamped as ONNX does), ``axes``
    (default every one from 0), ``steps`` (default 1, never 0); the symbolic batch whole."""
    starts, ends = ints_attr(attrs, "starts"), ints_attr(attrs, "ends")
    axes = ints_attr(attrs, "axes", default=tuple(range(len(starts))))
    steps = ints_attr(attrs, "steps", default=(1,) * len(starts))
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise OpError(f"Slice starts, ends, axes and steps must have one length, not {starts!r}, {ends!r}, "
                      f"{axes!r}, {steps!r}")
    index = [slice(None)] * len(shape)
    for start, end, axis, step in zip(starts, ends, axes, steps):
        if not -len(shape) <= axis < len(shape) or step == 0:
            raise OpError(f"Slice axis {axis} must lie within the {len(shape)} dimensions and its step be "
                          f"nonzero, not {step}")
        size = shape[axis]
        if not isinstance(size, int):
            raise OpError(f"Slice of the symbolic batch (axis {axis}) is not supported")
        first, stop, step = slice(start, end, step).indices(size)  # (ONNX's clamping is Python's)
        index[axis % len(shape)] = slice(first, stop if stop >= 0 else None, step)  # (-1: before the first)
    return tuple(index)


def _slice_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    index = _slices(attrs, data.shape)
    shape = tuple(d if isinstance(d, str) else len(range(d)[s]) for d, s in zip(data.shape, index))
    return TensorType(shape, data.dtype)


def _slice(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return np.ascontiguousarray(inputs[0][_slices(attrs, inputs[0].shape)])


_CPU = cpu_only("a change of shape runs on the CPU between accelerator regions")
DEFS = (
    OpDef(Op.FLATTEN, PatternKind.INJECTIVE, (1, 1), _flatten_infer, _flatten, _flatten,
          accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, examples=(
              OnnxExample(((2, 3, 4, 5),)),
              OnnxExample(((2, 3, 4, 5),), {"axis": 2}),
              OnnxExample(((2, 3, 4, 5),), {"axis": -1}),
              OnnxExample(((2, 3, 4),), {"axis": 0}),
          ), quantize=QuantRule.MOVE),
    OpDef(Op.RESHAPE, PatternKind.INJECTIVE, (1, 1), _reshape_infer, _reshape, _reshape,
          accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, examples=(
              OnnxExample(((2, 3, 4),), constants={1: (0, -1)}),
              OnnxExample(((2, 3, 4),), constants={1: (4, 3, 2)}),
              OnnxExample(((2, 3, 4),), constants={1: (-1,)}),
          ), quantize=QuantRule.MOVE),
    OpDef(Op.SLICE, PatternKind.INJECTIVE, (1, 1), _slice_infer, _slice, _slice,
          accel_ok=cpu_only("a slice runs on the CPU between accelerator regions"), scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((2, 6, 5),), constants={1: (1, 0), 2: (5, 4), 3: (1, 2)}),
                    OnnxExample(((4, 7),), constants={1: (-1,), 2: (-100,), 3: (1,), 4: (-2,)}),
                    OnnxExample(((3, 8),), constants={1: (0, 2), 2: (2, 1000), 3: (0, 1), 4: (1, 3)})),
          quantize=QuantRule.MOVE),
)
