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
from .base import OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, int_attr, ints_attr
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


def _indices(indices: np.ndarray, size: np.ndarray | int, what: str) -> np.ndarray:
    """``indices`` made non-negative (ONNX counts negative ones from the end); one out of
    range is an error naming it."""
    bad = (indices < -size) | (indices >= size)
    if bad.any():
        where = tuple(int(i[0]) for i in np.nonzero(bad))
        raise OpError(f"{what} index {int(indices[where])} at {where} is out of range for an axis of "
                      f"{int(np.broadcast_to(size, indices.shape)[where])}")
    return np.where(indices < 0, indices + size, indices)


def _gather_elements_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data, indices = inputs
    if indices.dtype is not DType.INT64:
        raise OpError(f"GatherElements indices must be int64, not {indices.dtype.value}")
    if indices.ndim != data.ndim:
        raise OpError(f"GatherElements indices {indices.shape!r} must have the data's rank {data.ndim}")
    checked_axis(attrs, data.ndim, Op.GATHER_ELEMENTS, 0)
    return TensorType(indices.shape, data.dtype)


def _gather_elements(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's GatherElements by ``np.take_along_axis`` (not ``onnx.reference``'s, whose
    ``np.choose`` fails from 64 entries on the gathered axis; docs/DECISIONS.md)."""
    data, indices = inputs
    axis = checked_axis(attrs, data.ndim, Op.GATHER_ELEMENTS, 0)
    return np.take_along_axis(data, _indices(indices, data.shape[axis], "GatherElements"), axis=axis)


def _gather_nd_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data, indices = inputs
    batch = int_attr(attrs, "batch_dims", 0)
    depth = indices.shape[-1] if indices.ndim else None
    if indices.dtype is not DType.INT64 or not isinstance(depth, int) or not 0 <= batch < min(data.ndim, indices.ndim) \
            or batch + depth > data.ndim or data.shape[:batch] != indices.shape[:batch]:
        raise OpError(f"GatherND indices {indices} must be int64 tuples of at most {data.ndim - batch} indices "
                      f"into {data} after {batch} batch dimensions")
    return TensorType(indices.shape[:-1] + data.shape[batch + depth:], data.dtype)


def _gather_nd(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's GatherND: each innermost tuple of ``indices`` picks a slice of ``data``, per
    batch entry (the first ``batch_dims`` dimensions, shared)."""
    data, indices = inputs
    batch = int_attr(attrs, "batch_dims", 0)
    depth = indices.shape[-1]
    lead = indices.shape[:batch]
    indices = _indices(indices, np.array(data.shape[batch:batch + depth], np.int64), "GatherND")
    flat_data = data.reshape((int(np.prod(lead, dtype=np.int64)),) + data.shape[batch:])
    flat_index = indices.reshape((flat_data.shape[0], -1, depth))
    picked = np.stack([flat_data[b][tuple(flat_index[b].T)] for b in range(flat_data.shape[0])])
    return picked.reshape(indices.shape[:-1] + data.shape[batch + depth:])


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
    OpDef(Op.GATHER_ELEMENTS, PatternKind.INJECTIVE, (2, 2), _gather_elements_infer, _gather_elements,
          _gather_elements, accel_ok=_CPU, examples=(
              OnnxExample(((70,),), constants={1: (69, 0, -1, 64, 3)}),  # onnx.reference fails from 64 entries
              OnnxExample(((4,),), {"axis": 0}, constants={1: (3, 3, 0)}),
          )),
    OpDef(Op.GATHER_ND, PatternKind.INJECTIVE, (2, 2), _gather_nd_infer, _gather_nd, _gather_nd, accel_ok=_CPU,
          examples=(OnnxExample(((4, 3),), constants={1: (1, -1)}), OnnxExample(((4, 3, 2),), constants={1: (2,)}))),
    OpDef(Op.CAST, PatternKind.ELEMWISE, (1, 1), _cast_infer, _cast, None, accel_ok=_CPU,
          examples=(OnnxExample(((2, 3, 4),), {"to": 1}),)),
    OpDef(Op.EXPAND, PatternKind.BROADCAST, (1, 1), _expand_infer, _expand, _expand, accel_ok=_CPU,
          scale_rule=ScaleRule.PRESERVE, examples=(OnnxExample(((3, 1),), constants={1: (2, 3, 4)}),
                                                   OnnxExample(((2, 1, 5),), constants={1: (4, 1)})),
          quantize=QuantRule.MOVE),
)
