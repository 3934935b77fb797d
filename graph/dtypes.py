"""The graph's element types and placements, below every other graph module.

:mod:`.ir` re-exports both (``from openvta.graph.ir import DType``); they live here so that
the accelerator regions' data (:mod:`.region_types`), which the IR's :class:`~.ir.Graph`
holds, can use them without importing the IR.

The IR holds every tensor type of ONNX but strings: float32 and int64 are what openvta's
own kernels compute on (int8 and int32 in the integer graph), the others are carried for
the nodes that run on the CPU through ONNX's reference kernels (the narrow floats and
integers as the ``ml_dtypes`` types ONNX itself uses, imported when first needed: they come
with ``onnx``, in the ``model`` extra).

Examples
--------
>>> DType.of(np.dtype("uint16")), DType.BFLOAT16.numpy.itemsize, DType.BOOL.is_integer
(<DType.UINT16: 'uint16'>, 2, False)
"""

from __future__ import annotations

import enum

import numpy as np

__all__ = ["DType", "Device"]


class DType(enum.Enum):
    """Element types of graph tensors (the value is numpy's name of the type)."""

    FLOAT32 = "float32"
    INT8 = "int8"
    INT32 = "int32"
    INT64 = "int64"
    # carried for the CPU's ONNX reference kernels
    FLOAT64 = "float64"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    FLOAT8E4M3FN = "float8_e4m3fn"
    FLOAT8E4M3FNUZ = "float8_e4m3fnuz"
    FLOAT8E5M2 = "float8_e5m2"
    FLOAT8E5M2FNUZ = "float8_e5m2fnuz"
    FLOAT8E8M0 = "float8_e8m0fnu"
    FLOAT4E2M1 = "float4_e2m1fn"
    FLOAT6E2M3 = "float6_e2m3fn"
    FLOAT6E3M2 = "float6_e3m2fn"
    UINT8 = "uint8"
    INT16 = "int16"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    INT4 = "int4"
    UINT4 = "uint4"
    INT2 = "int2"
    UINT2 = "uint2"
    BOOL = "bool"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"

    @property
    def numpy(self) -> np.dtype:
        if self.value not in _NUMPY_OWN:
            import ml_dtypes  # noqa: F401  (onnx's dependency: registers bfloat16, the float8s, int4s with numpy)
        return np.dtype(self.value)

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_integer(self) -> bool:
        """A signed or unsigned integer type (not bool)."""
        return self in _INTEGERS

    @property
    def is_quantized(self) -> bool:
        """An integer graph's int8 or int32 value (INT64 is an *index*: token ids, a mask,
        a shape; never quantized, its ops run their plain numpy reference)."""
        return self in (DType.INT8, DType.INT32)

    @property
    def is_kernel_type(self) -> bool:
        """A type openvta's own kernels compute on (float32, the index type int64, and the
        integer graph's int8 and int32); the others only ONNX's reference kernels read."""
        return self in (DType.FLOAT32, DType.INT64, DType.INT8, DType.INT32)

    @classmethod
    def of(cls, dtype: np.dtype | type) -> DType:
        """The DType of a numpy dtype (``ValueError`` for one the IR does not hold)."""
        name = np.dtype(dtype).name
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"tensor dtype must be one of {', '.join(d.value for d in cls)}, "
                             f"not {name!r}") from None


#: The types numpy holds without ``ml_dtypes`` (a base install, without the ``model`` extra).
_NUMPY_OWN = frozenset({"float32", "int8", "int32", "int64", "float64", "float16", "uint8", "int16", "uint16",
                        "uint32", "uint64", "bool", "complex64", "complex128"})
_INTEGERS = frozenset({DType.INT8, DType.INT32, DType.INT64, DType.UINT8, DType.INT16, DType.UINT16,
                       DType.UINT32, DType.UINT64, DType.INT4, DType.UINT4, DType.INT2, DType.UINT2})


class Device(enum.Enum):
    """Where a node runs."""

    ACCEL = "accel"
    CPU = "cpu"
