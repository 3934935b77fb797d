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
#: Narrower types a Cast rounds to, its result held in float32, which holds each of their
#: values exactly (ONNX's backend tests cast to them): INT8, UINT8, INT16, UINT16, FLOAT16,
#: BFLOAT16, the four FLOAT8s, UINT4, INT4, FLOAT4E2M1, FLOAT8E8M0, UINT2 and INT2.
ROUNDING_CASTS = frozenset({2, 3, 4, 5, 10, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26})
#: The FLOAT8 types whose Cast saturates by default (``saturate=1``).
_FLOAT8 = frozenset({17, 18, 19, 20})
_E8M0 = 24


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
    if to not in CAST_TYPES and to not in ROUNDING_CASTS:
        raise OpError(f"Cast to element type {to} is not supported (float32, int64, or a type float32 holds "
                      f"exactly: {', '.join(map(str, sorted(ROUNDING_CASTS)))})")
    return TensorType(inputs[0].shape, CAST_TYPES.get(to, DType.FLOAT32))


def _cast(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """ONNX's Cast.  To a narrower type (:data:`ROUNDING_CASTS`): its value, held in float32,
    converted as ``onnx.reference`` converts (ml_dtypes' rounding, FLOAT8 saturating unless
    ``saturate=0``, FLOAT8E8M0 by ``round_mode``)."""
    to, x = int_attr(attrs, "to"), inputs[0]
    if to in CAST_TYPES:
        dtype = CAST_TYPES[to].numpy
        if dtype.kind == "i" and x.dtype.kind == "f":  # float → int64 truncates toward zero, as ONNX
            x = np.trunc(x)
        return x.astype(dtype)
    from onnx import helper, numpy_helper  # the narrow types' numpy dtypes (ml_dtypes) come with onnx

    narrow = helper.tensor_dtype_to_np_dtype(to)
    saturate = bool(int_attr(attrs, "saturate", 1))
    if to in _FLOAT8 and saturate:
        y = numpy_helper.saturate_cast(x, narrow)
    elif to == _E8M0:
        mode = attrs.get("round_mode", "up")
        y = numpy_helper.to_float8e8m0(x, saturate, str(mode)).astype(narrow)
    else:
        with np.errstate(over="ignore", invalid="ignore"):  # out of range: inf or NaN, as ONNX's
            y = x.astype(narrow)
    return y.astype(np.float32)


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
