"""MaxPool, AveragePool and GlobalAveragePool (2-D, NCHW).

Pooling keeps its input's quantization scale: a maximum of int8 values is an int8
value, and an integer mean is rounded half up (``kernels.round_div``).  TVM registers
pooling as out-element-wise-fusable; here pooling runs on the CPU (the accelerator has
no pooling unit), so the kind only matters for CPU groups.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import OpError
from ..ir import Attrs, DType, TensorType
from ..ir import Op as _Op
from .base import (OnnxExample, OpDef, PatternKind, ScaleRule, cpu_only, int_attr, ints_attr,
                   require_rank)
from .kernels import avg_pool, max_pool

__all__ = ["DEFS"]


def _geometry(attrs: Attrs) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    kh, kw = ints_attr(attrs, "kernel_shape", 2)
    sh, sw = ints_attr(attrs, "strides", 2, (1, 1))
    top, left, bottom, right = ints_attr(attrs, "pads", 4, (0, 0, 0, 0))
    return (kh, kw), (sh, sw), (top, left, bottom, right)


def _pool_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    require_rank(data, 4, "pooling data")
    kernel, strides, pads = _geometry(attrs)
    height, width = data.shape[2:]
    if not isinstance(height, int) or not isinstance(width, int):
        raise OpError(f"pooling data must have static height and width, not {data.shape!r}")
    if min(kernel) < 1 or min(strides) < 1 or min(pads) < 0 or max(pads) >= min(kernel):
        raise OpError(f"pooling kernel {kernel}, strides {strides} and pads {pads} must be "
                      "positive, and each pad smaller than the kernel")
    oh = (height + pads[0] + pads[2] - kernel[0]) // strides[0] + 1
    ow = (width + pads[1] + pads[3] - kernel[1]) // strides[1] + 1
    if oh < 1 or ow < 1:
        raise OpError(f"pooling kernel {kernel} must fit the padded {height}x{width} data")
    if data.dtype not in (DType.FLOAT32, DType.INT8):
        raise OpError(f"pooling data must be float32 or int8, not {data.dtype.value}")
    return TensorType(data.shape[:2] + (oh, ow), data.dtype)


def _max_pool(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return max_pool(inputs[0], *_geometry(attrs))


def _average(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    include_pad = bool(int_attr(attrs, "count_include_pad", 0))
    out = avg_pool(inputs[0], *_geometry(attrs), include_pad)
    return out.astype(inputs[0].dtype)


def _global_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.ndim < 3:
        raise OpError(f"GlobalAveragePool data must have spatial axes, not shape {data.shape!r}")
    if data.dtype not in (DType.FLOAT32, DType.INT8):
        raise OpError(f"GlobalAveragePool data must be float32 or int8, not {data.dtype.value}")
    return TensorType(data.shape[:2] + (1,) * (data.ndim - 2), data.dtype)


def _global_average(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    flat = x.reshape(x.shape[:2] + (1, -1))
    kernel, zero = (1, flat.shape[3]), (0, 0, 0, 0)
    out = avg_pool(flat, kernel, (1, 1), zero, include_pad=True)
    return out.reshape(x.shape[:2] + (1,) * (x.ndim - 2)).astype(x.dtype)


_CPU = cpu_only("pooling runs on the CPU (the accelerator has no pooling unit)")
DEFS = (
    OpDef(_Op.MAX_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _pool_infer, _max_pool, _max_pool,
          accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, examples=(
              OnnxExample(((2, 3, 6, 6),), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              OnnxExample(((1, 2, 7, 5),), {"kernel_shape": [3, 3], "strides": [2, 1],
                                            "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "strides": [2, 2],
                                            "auto_pad": "SAME_UPPER"}),
          )),
    OpDef(_Op.AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _pool_infer, _average,
          _average, accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, examples=(
              OnnxExample(((2, 3, 6, 6),), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                            "count_include_pad": 1}),
          )),
    OpDef(_Op.GLOBAL_AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _global_infer,
          _global_average, _global_average, accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((2, 3, 4, 5),)),)),
)
