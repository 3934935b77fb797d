"""Resize of NCHW data in height and width: nearest and (bi)linear, ONNX's coordinate modes.

ONNX's definition (its reference implementation, ``onnx.reference.ops.op_resize``): output
index ``x`` maps to the input coordinate ``x_orig`` by the coordinate transformation
(``half_pixel``: ``(x + 0.5)/scale − 0.5``; ``pytorch_half_pixel``: the same, ``−0.5`` for an
output of one; ``asymmetric``: ``x/scale``; ``align_corners``: ``x·(in − 1)/(out − 1)``), where
``scale`` is the ``scales`` input as given, or ``sizes/in``.  Linear takes
``(1 − r)·d[⌊x_orig⌋] + r·d[⌊x_orig⌋ + 1]``, nearest one of the two by ``nearest_mode``; an
index past an edge is the edge's (ONNX pads by edge values).  Both are separable: height,
then width.

In the integer graph a Resize runs on int8 codes of one scale (its output keeps its input's,
``ScaleRule.PRESERVE``): nearest picks codes (exact), linear interpolates the codes in
float64 and rounds half to even, which stays within the codes it interpolates.  A nearest
Resize by whole factors never reaches here: the ONNX preparation makes it a repetition
(``onnx_prepare._resize``).  Cubic interpolation, ``antialias``, ``tf_crop_and_resize``,
``half_pixel_symmetric``, ``axes`` and an aspect-ratio policy are not this kernel's (the
converter declines them; ONNX's reference kernel runs them).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from openvta.isa import INT8_MAX, INT8_MIN

from ..errors import OpError
from ..ir import Attrs, Op, TensorType
from .base import OnnxExample, OpDef, PatternKind, QuantRule, ScaleRule, cpu_only, ints_attr

__all__ = ["DEFS", "COORDINATE_MODES", "NEAREST_MODES"]

#: The coordinate transformations this kernel computes.
COORDINATE_MODES = ("half_pixel", "pytorch_half_pixel", "asymmetric", "align_corners")
#: How nearest picks between the two neighbours of a coordinate that is not whole.
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _scales(attrs: Attrs) -> tuple[float, float]:
    scales = attrs.get("scales")
    if not isinstance(scales, tuple) or len(scales) != 2 or not all(isinstance(s, float) and s > 0 for s in scales):
        raise OpError(f"Resize scales must be two positive numbers (height, width), not {scales!r}")
    return scales[0], scales[1]


def _infer(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    data = inputs[0]
    if data.ndim != 4:
        raise OpError(f"Resize data must be 4-D NCHW, not {data.shape!r}")
    size = ints_attr(attrs, "size", 2)
    if min(size) < 1:
        raise OpError(f"Resize output size must be positive, not {size!r}")
    _scales(attrs)
    if attrs.get("mode") not in ("nearest", "linear") or attrs.get("coordinate_transformation_mode") \
            not in COORDINATE_MODES or attrs.get("nearest_mode") not in NEAREST_MODES:
        raise OpError(f"Resize mode {attrs.get('mode')!r} with {attrs.get('coordinate_transformation_mode')!r} "
                      f"and {attrs.get('nearest_mode')!r} is not openvta's")
    return TensorType(data.shape[:2] + size, data.dtype)


def _coordinates(out: int, length: int, scale: float, mode: str) -> np.ndarray:
    x = np.arange(out, dtype=np.float64)
    if mode == "align_corners":
        return np.zeros(out) if out == 1 else x * (length - 1) / (scale * length - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "pytorch_half_pixel" and scale * length == 1:
        return np.full(out, -0.5)
    return (x + 0.5) / scale - 0.5


def _resample(data: np.ndarray, axis: int, out: int, scale: float, attrs: Attrs) -> np.ndarray:
    length = data.shape[axis]
    coords = _coordinates(out, length, scale, str(attrs["coordinate_transformation_mode"]))
    low = np.floor(coords)
    ratio = coords - low
    low_i = low.astype(np.int64)
    if attrs["mode"] == "nearest":
        rule = str(attrs["nearest_mode"])
        whole = ratio == 0
        up = {"round_prefer_floor": ratio > 0.5, "round_prefer_ceil": ratio >= 0.5, "floor": np.zeros_like(whole),
              "ceil": np.ones_like(whole)}[rule] & ~whole
        return np.take(data, np.clip(low_i + up, 0, length - 1), axis=axis)
    shape = [1] * data.ndim
    shape[axis] = out
    a = np.take(data, np.clip(low_i, 0, length - 1), axis=axis).astype(np.float64)
    b = np.take(data, np.clip(low_i + 1, 0, length - 1), axis=axis).astype(np.float64)
    r = ratio.reshape(shape)
    return (1 - r) * a + r * b


def _resize(x: np.ndarray, attrs: Attrs) -> np.ndarray:
    (oh, ow), (sh, sw) = ints_attr(attrs, "size", 2), _scales(attrs)
    return _resample(_resample(x, 2, oh, sh, attrs), 3, ow, sw, attrs)


def _float(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    return _resize(inputs[0], attrs).astype(np.float32)


def _int(inputs: Sequence[np.ndarray], attrs: Attrs) -> np.ndarray:
    """On int8 codes: nearest picks them, linear rounds its float64 interpolation half to even."""
    result = _resize(inputs[0], attrs)
    return np.clip(np.rint(result), INT8_MIN, INT8_MAX).astype(inputs[0].dtype)


DEFS = (
    OpDef(Op.RESIZE, PatternKind.INJECTIVE, (1, 1), _infer, _float, _int,
          accel_ok=cpu_only("a resize runs on the CPU between accelerator regions"), scale_rule=ScaleRule.PRESERVE,
          examples=(OnnxExample(((1, 2, 4, 5), None), {"mode": "linear"}, constants={2: (1.0, 1.0, 2.0, 1.5)}),
                    OnnxExample(((1, 3, 6, 6), None), {"mode": "linear", "coordinate_transformation_mode":
                                                       "align_corners"}, constants={2: (1.0, 1.0, 0.5, 1.5)}),
                    OnnxExample(((2, 1, 3, 4), None), {"mode": "nearest", "coordinate_transformation_mode":
                                                       "asymmetric", "nearest_mode": "round_prefer_ceil"},
                                constants={2: (1.0, 1.0, 1.7, 2.5)})),
          quantize=QuantRule.SAME),
)
