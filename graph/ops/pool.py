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


def _out_size(size: int, kernel: int, stride: int, begin: int, end: int, ceil: bool) -> int:
    """Output positions along one axis; with ``ceil_mode`` one more where a partial window
    remains, unless it would start past the input and the begin padding (ONNX's rule)."""
    span = size + begin + end - kernel
    out = (-(-span // stride) if ceil else span // stride) + 1
    if ceil and (out - 1) * stride >= size + begin:
        out -= 1
    return out


def _ceil_extra(attrs: Attrs, height: int, width: int) -> tuple[int, int]:
    """The rows and columns ``ceil_mode`` adds past the end padding (cells no window counts)."""
    if not int_attr(attrs, "ceil_mode", 0):
        return 0, 0
    (kh, kw), (sh, sw), (top, left, bottom, right) = _geometry(attrs)
    oh = _out_size(height, kh, sh, top, bottom, True)
    ow = _out_size(width, kw, sw, left, right, True)
    return max(0, (oh - 1) * sh + kh - (height + top + bottom)), max(0, (ow - 1) * sw + kw - (width + left + right))


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
    ceil = bool(int_attr(attrs, "ceil_mode", 0))
    oh = _out_size(height, kernel[0], strides[0], pads[0], pads[2], ceil)
    ow = _out_size(width, kernel[1], strides[1], pads[1], pads[3], ceil)
    if oh < 1 or ow < 1:
        raise OpError(f"pooling kernel {kernel} must fit the padded {height}x{width} data")
    if data.dtype not in (DType.FLOAT32, DType.INT8):
        raise OpError(f"pooling data must be float32 or int8, not {data.dtype.value}")
    return TensorType(data.shape[:2] + (oh, ow), data.dtype)


def _max_pool(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    kernel, strides, (top, left, bottom, right) = _geometry(attrs)
    extra_h, extra_w = _ceil_extra(attrs, *inputs[0].shape[2:])
    return max_pool(inputs[0], kernel, strides, (top, left, bottom + extra_h, right + extra_w))


def _average(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    include_pad = bool(int_attr(attrs, "count_include_pad", 0))
    kernel, strides, (top, left, bottom, right) = _geometry(attrs)
    extra_h, extra_w = _ceil_extra(attrs, *x.shape[2:])
    if include_pad and (extra_h or extra_w):  # the pads count, the cells ceil_mode adds do not
        padded = np.pad(x, [(0, 0), (0, 0), (top, bottom), (left, right)])
        out = avg_pool(padded, kernel, strides, (0, 0, extra_h, extra_w), False)
    else:
        out = avg_pool(x, kernel, strides, (top, left, bottom + extra_h, right + extra_w), include_pad)
    return out.astype(x.dtype)


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
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
          )),
    OpDef(_Op.AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _pool_infer, _average,
          _average, accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, examples=(
              OnnxExample(((2, 3, 6, 6),), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                            "count_include_pad": 1}),
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                            "ceil_mode": 1, "count_include_pad": 1}),
          )),
    OpDef(_Op.GLOBAL_AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _global_infer,
          _global_average, _global_average, accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((2, 3, 4, 5),)),)),
)
