"""The graph's element types and placements, below every other graph module.

:mod:`.ir` re-exports both (``from openvta.graph.ir import DType``); they live here so that
the accelerator regions' data (:mod:`.region_types`), which the IR's :class:`~.ir.Graph`
holds, can use them without importing the IR.
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["DType", "Device"]


class DType(enum.Enum):
    """Element types of graph tensors."""

    FLOAT32 = "float32"
    INT8 = "int8"
    INT32 = "int32"
    INT64 = "int64"

    @property
    def numpy(self) -> np.dtype:
        return np.dtype(self.value)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_integer(self) -> bool:
        return self is not DType.FLOAT32

    @property
    def is_quantized(self) -> bool:
        """An integer graph's int8 or int32 value (INT64 is an *index*: token ids, a mask,
        a shape; never quantized, its ops run their plain numpy reference)."""
        return self in (DType.INT8, DType.INT32)

    @classmethod
    def of(cls, dtype: np.dtype | type) -> DType:
        """The DType of a numpy dtype (``ValueError`` for one the IR does not hold)."""
        name = np.dtype(dtype).name
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"tensor dtype must be one of {', '.join(d.value for d in cls)}, "
                             f"not {name!r}") from None


class Device(enum.Enum):
    """Where a node runs."""

    ACCEL = "accel"
    CPU = "cpu"
