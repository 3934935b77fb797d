"""Index inputs and what reads them (a transformer's import): Gather, Cast and Expand.

A transformer's inputs are token ids and an attention mask, int64 tensors that are never
quantized (an *index* tensor, :attr:`~openvta.graph.dtypes.DType.INT64`): Gather looks a
token's row up in an embedding table, Cast turns the mask into float32 for the float
math after it, and Expand (with Unsqueeze, Reshape and Identity) reshapes either on the
way.  They run on the CPU with one numpy kernel for every dtype: an embedding table is a
float constant and its rows a float island's value, as in onnxruntime.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import OpError
from ..ir import Attrs, DType, Op, TensorType
from .base import OnnxExample, OpDef, PatternKind, cpu_only, int_attr, ints_attr
from .elementwise import broadcast_shape
from .tensor import checked_axis

__all__ = ["DEFS", "CAST_TYPES"]

#: The element types Cast converts to, by ONNX ``TensorProto`` number: FLOAT and INT64.
CAST_TYPES = {1: DType.FLOAT32, 7: DType.INT64}

def _gather_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data, indices = inputs
    if indices.dtype is not DType.INT64:
        raise OpError(f"Gather indices must be int64, not {indices.dtype.value}")
    axis = checked_axis(attrs, data.ndim, Op.GATHER, 0)
    return TensorType(data.shape[:axis] + indices.shape + data.shape[axis + 1:], data.dtype)


def _gather(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's Gather: negative indices count from the end; one out of range is an error
    naming it (a token id past the vocabulary)."""
    data, indices = inputs
    axis = checked_axis(attrs, data.ndim, Op.GATHER, 0)
    size = data.shape[axis]
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        raise OpError(f"Gather index {int(indices[bad].reshape(-1)[0])} is out of range for an axis of "
                      f"{size} (-{size}..{size - 1})")
    return np.take(data, np.where(indices < 0, indices + size, indices), axis=axis)


def _cast_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    to = int_attr(attrs, "to")
    if to not in CAST_TYPES:
        raise OpError(f"Cast to element type {to} is not openvta's (float32 or int64)")
    return TensorType(inputs[0].shape, CAST_TYPES[to])


def _cast(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's Cast to float32 or int64 (float → int64 truncates toward zero, as ONNX)."""
    x, dtype = inputs[0], CAST_TYPES[int_attr(attrs, "to")].numpy
    if dtype.kind == "i" and x.dtype.kind == "f":
        x = np.trunc(x)
    return x.astype(dtype)


def _expand_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    return TensorType(broadcast_shape(inputs[0].shape, ints_attr(attrs, "shape")), inputs[0].dtype)


def _expand(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    shape = np.broadcast_shapes(inputs[0].shape, ints_attr(attrs, "shape"))
    return np.ascontiguousarray(np.broadcast_to(inputs[0], shape))


_CPU = cpu_only("runs on the CPU (an index tensor, or what reads one)")
DEFS = (
    OpDef(Op.GATHER, PatternKind.INJECTIVE, (2, 2), _gather_infer, _gather, None, accel_ok=cpu_only(
        "an embedding lookup runs on the CPU: a row of the table per token id"), examples=(
        OnnxExample(((10, 6),), constants={1: (3, 0, 9, 3)}),
        OnnxExample(((4, 5, 3),), {"axis": 1}, constants={1: (-1, 2)}),
    )),
    OpDef(Op.CAST, PatternKind.ELEMWISE, (1, 1), _cast_infer, _cast, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), {"to": 1}),)),
    OpDef(Op.EXPAND, PatternKind.BROADCAST, (1, 1), _expand_infer, _expand, None, accel_ok=_CPU,
          examples=(OnnxExample(((3, 1),), constants={1: (2, 3, 4)}),
                    OnnxExample(((2, 1, 5),), constants={1: (4, 1)}))),
)
