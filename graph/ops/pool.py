"""MaxPool, AveragePool and GlobalAveragePool (N-D: NCW, NCHW, NCDHW; dilations, ceil_mode).

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
from .base import OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, int_attr, ints_attr
from .windows import avg_pool, dilated_spans, max_pool

__all__ = ["DEFS"]


Geometry = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]


def _geometry(attrs: Attrs, rank: int) -> Geometry:
    """Kernel, strides, pads (every begin, then every end) and dilations of ``rank`` axes."""
    kernel = ints_attr(attrs, "kernel_shape", rank)
    strides = ints_attr(attrs, "strides", rank, (1,) * rank)
    pads = ints_attr(attrs, "pads", 2 * rank, (0,) * 2 * rank)
    dilations = ints_attr(attrs, "dilations", rank, (1,) * rank)
    return kernel, strides, pads, dilations


def _out_size(size: int, span: int, stride: int, begin: int, end: int, ceil: bool) -> int:
    """Output positions along one axis; with ``ceil_mode`` one more where a partial window
    remains, unless it would start past the input and the begin padding (ONNX's rule)."""
    reach = size + begin + end - span
    out = (-(-reach // stride) if ceil else reach // stride) + 1
    if ceil and (out - 1) * stride >= size + begin:
        out -= 1
    return out


def _out_sizes(sizes: Sequence[int], attrs: Attrs) -> tuple[int, ...]:
    kernel, strides, pads, dilations = _geometry(attrs, len(sizes))
    ceil = bool(int_attr(attrs, "ceil_mode", 0))
    rank = len(sizes)
    return tuple(_out_size(n, span, s, pads[i], pads[rank + i], ceil)
                 for i, (n, span, s) in enumerate(zip(sizes, dilated_spans(kernel, dilations), strides)))


def _end_pads(attrs: Attrs, sizes: Sequence[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The pads, and the cells ``ceil_mode`` adds past every end pad (no window counts them)."""
    kernel, strides, pads, dilations = _geometry(attrs, len(sizes))
    rank = len(sizes)
    if not int_attr(attrs, "ceil_mode", 0):
        return pads, (0,) * rank
    extra = tuple(max(0, (o - 1) * s + span - (n + pads[i] + pads[rank + i]))
                  for i, (o, s, span, n) in enumerate(zip(_out_sizes(sizes, attrs), strides,
                                                          dilated_spans(kernel, dilations), sizes)))
    return pads, extra


def _pool_infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.ndim < 3:
        raise OpError(f"pooling data must be N-D (N, C, spatial...), not {data.ndim}-D {data}")
    sizes = data.shape[2:]
    if not all(isinstance(n, int) for n in sizes):
        raise OpError(f"pooling data must have static spatial sizes, not {data.shape!r}")
    kernel, strides, pads, dilations = _geometry(attrs, len(sizes))
    spans = dilated_spans(kernel, dilations)
    if min(kernel) < 1 or min(strides) < 1 or min(dilations) < 1 or min(pads) < 0 \
            or any(p >= span for p, span in zip(pads, spans + spans)):
        raise OpError(f"pooling kernel {kernel}, strides {strides}, dilations {dilations} and pads {pads} "
                      "must be positive, and each pad smaller than the (dilated) kernel")
    out = _out_sizes([int(n) for n in sizes], attrs)
    if min(out) < 1:
        raise OpError(f"pooling kernel {kernel} must fit the padded {'x'.join(map(str, sizes))} data")
    if data.dtype not in (DType.FLOAT32, DType.INT8):
        raise OpError(f"pooling data must be float32 or int8, not {data.dtype.value}")
    return TensorType(data.shape[:2] + out, data.dtype)


def _with_extra(pads: tuple[int, ...], extra: tuple[int, ...]) -> tuple[int, ...]:
    rank = len(extra)
    return pads[:rank] + tuple(p + e for p, e in zip(pads[rank:], extra))


def _max_pool(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    sizes = inputs[0].shape[2:]
    kernel, strides, _, dilations = _geometry(attrs, len(sizes))
    pads, extra = _end_pads(attrs, sizes)
    return max_pool(inputs[0], kernel, strides, _with_extra(pads, extra), dilations)


def _average(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    x = inputs[0]
    sizes = x.shape[2:]
    include_pad = bool(int_attr(attrs, "count_include_pad", 0))
    kernel, strides, _, dilations = _geometry(attrs, len(sizes))
    pads, extra = _end_pads(attrs, sizes)
    rank = len(sizes)
    if include_pad and any(extra):  # the pads count, the cells ceil_mode adds do not
        padded = np.pad(x, ((0, 0), (0, 0)) + tuple(zip(pads[:rank], pads[rank:])))
        out = avg_pool(padded, kernel, strides, (0,) * rank + extra, False, dilations)
    else:
        out = avg_pool(x, kernel, strides, _with_extra(pads, extra), include_pad, dilations)
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
    flat = x.reshape(x.shape[:2] + (-1,))
    out = avg_pool(flat, (flat.shape[2],), (1,), (0, 0), include_pad=True)
    return out.reshape(x.shape[:2] + (1,) * (x.ndim - 2)).astype(x.dtype)


_CPU = cpu_only("pooling runs on the CPU (the accelerator has no pooling unit)")
DEFS = (
    OpDef(_Op.MAX_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _pool_infer, _max_pool, _max_pool,
          accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, quantize=QuantRule.PICK, examples=(
              OnnxExample(((2, 3, 6, 6),), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              OnnxExample(((1, 2, 7, 5),), {"kernel_shape": [3, 3], "strides": [2, 1],
                                            "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "strides": [2, 2],
                                            "auto_pad": "SAME_UPPER"}),
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
              OnnxExample(((1, 2, 9),), {"kernel_shape": [3], "dilations": [2], "pads": [1, 2]}),
              OnnxExample(((1, 2, 5, 4, 6),), {"kernel_shape": [2, 2, 2], "dilations": [2, 1, 1],
                                               "strides": [1, 1, 2], "ceil_mode": 1}),
          )),
    OpDef(_Op.AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _pool_infer, _average,
          _average, accel_ok=_CPU, scale_rule=ScaleRule.PRESERVE, quantize=QuantRule.SAME, examples=(
              OnnxExample(((2, 3, 6, 6),), {"kernel_shape": [2, 2], "strides": [2, 2]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
              OnnxExample(((1, 2, 5, 5),), {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1],
                                            "count_include_pad": 1}),
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
              OnnxExample(((1, 2, 6, 6),), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                                            "ceil_mode": 1, "count_include_pad": 1}),
              OnnxExample(((2, 3, 7),), {"kernel_shape": [3], "strides": [2], "pads": [1, 1]}),
              OnnxExample(((1, 2, 4, 5, 5),), {"kernel_shape": [2, 3, 3], "pads": [0, 1, 1, 1, 1, 1],
                                               "count_include_pad": 1}),
          )),
    OpDef(_Op.GLOBAL_AVERAGE_POOL, PatternKind.OUT_ELEMWISE_FUSABLE, (1, 1), _global_infer,
          _global_average, _global_average, accel_ok=_CPU, quantize=QuantRule.REDUCE,
          examples=(OnnxExample(((2, 3, 4, 5),)),)),
)
