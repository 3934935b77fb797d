"""ONNX node → graph node: per op, the attributes it accepts and how they normalize.

Every converter receives the node's attributes (as Python values), its non-empty
inputs and the types and constants known so far, and returns the node's inputs and
normalized attributes (see ``graph/ops``): Conv and pooling get explicit ``pads`` (no
``auto_pad``), Clip's bounds and Reshape's shape become attributes.  Anything it does
not support is a :class:`ModelError` naming the node, the attribute and the value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ModelError
from ..ir import Op, TensorType
from ..registry import ONNX_OPS
from ..ops.resize import COORDINATE_MODES, NEAREST_MODES

__all__ = ["Converter", "CONVERTERS", "OnnxNode", "check_converters"]


@dataclass(frozen=True)
class OnnxNode:
    """What a converter sees of an ONNX node."""

    name: str
    op_type: str
    inputs: tuple[str, ...]  # "" for an omitted optional input
    attrs: Mapping[str, object]
    types: Mapping[str, TensorType]
    constants: Mapping[str, np.ndarray]

    def fail(self, message: str) -> ModelError:
        return ModelError(f"node {self.name!r} ({self.op_type}) {message}")

    def present(self) -> tuple[str, ...]:
        """The inputs up to the last given one (trailing omitted inputs dropped)."""
        names = list(self.inputs)
        while names and not names[-1]:
            names.pop()
        if "" in names:
            raise self.fail("omits an input before a given one; this op needs them in order")
        return tuple(names)

    def constant(self, index: int, what: str) -> np.ndarray | None:
        if index >= len(self.inputs) or not self.inputs[index]:
            return None
        if self.inputs[index] not in self.constants:
            raise self.fail(f"{what} must be a constant (an initializer)")
        return self.constants[self.inputs[index]]

    def spatial(self, index: int, rank: int | None = 4) -> tuple[int, ...]:
        """The spatial sizes of input ``index`` (NCHW: 4-D; ``rank=None``: any N-D from 3-D)."""
        shape = self.types[self.inputs[index]].shape
        if (rank is None and len(shape) < 3) or (rank is not None and len(shape) != rank):
            want = "N-D (N, C, spatial...)" if rank is None else "4-D NCHW"
            raise self.fail(f"input must be {want}, not {len(shape)}-D {shape!r}")
        sizes = shape[2:]
        assert all(isinstance(n, int) for n in sizes)  # only the batch is symbolic
        return tuple(int(n) for n in sizes)


Attrs = dict[str, object]
Converter = Callable[[OnnxNode], tuple[tuple[str, ...], Attrs]]


def _only(node: OnnxNode, allowed: Sequence[str]) -> None:
    for key in node.attrs:
        if key not in allowed:
            supported = ", ".join(allowed) if allowed else "none"
            raise node.fail(f"attribute {key!r} is not supported; supported: {supported}")


def _ints(node: OnnxNode, key: str, default: Sequence[object], length: int) -> tuple[int, ...]:
    value = node.attrs.get(key, default)
    if not isinstance(value, (list, tuple)) or len(value) != length \
            or not all(isinstance(v, int) for v in value):
        raise node.fail(f"attribute {key} must be {length} integers, not {value!r}")
    return tuple(value)


def _ones(node: OnnxNode, key: str) -> None:
    value = node.attrs.get(key)
    if value is None:
        return
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    if any(v != 1 for v in items):
        raise node.fail(f"attribute {key} must be all 1, not {items!r}")


def _zero(node: OnnxNode, key: str) -> None:
    if node.attrs.get(key, 0) != 0:
        raise node.fail(f"attribute {key} must be 0, not {node.attrs[key]!r}")


def _pads(node: OnnxNode, sizes: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int] | None = None) -> tuple[int, ...]:
    """The begin pads then the end pads of every spatial axis of ``sizes`` (``auto_pad`` resolved)."""
    rank = len(sizes)
    mode = node.attrs.get("auto_pad", "NOTSET")
    if mode == "NOTSET":
        return _ints(node, "pads", (0,) * 2 * rank, 2 * rank)
    if mode == "VALID":
        return (0,) * 2 * rank
    if mode not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.fail(f"attribute auto_pad must be NOTSET, VALID, SAME_UPPER or SAME_LOWER, "
                        f"not {mode!r}")
    begin, end = [], []
    for size, k, s, d in zip(sizes, kernel, strides, dilations or (1,) * rank):
        total = max((-(-size // s) - 1) * s + (k - 1) * d + 1 - size, 0)
        small, large = total // 2, total - total // 2
        first = small if mode == "SAME_UPPER" else large
        begin.append(first)
        end.append(total - first)
    return tuple(begin + end)


def _conv(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides"))
    inputs = node.present()
    channels = node.types[inputs[0]].shape[1]
    weight = node.types[inputs[1]].shape
    node.spatial(0)
    if len(weight) != 4:
        raise node.fail(f"weight must be 4-D OIHW, not {len(weight)}-D {weight!r}")
    _ones(node, "dilations")
    kernel = _ints(node, "kernel_shape", weight[2:], 2)
    if kernel != tuple(weight[2:]):
        raise node.fail(f"attribute kernel_shape must match the weight's {weight[2:]!r}, not {kernel!r}")
    group = node.attrs.get("group", 1)
    if not isinstance(group, int) or group < 1 or channels % group or weight[0] % group \
            or weight[1] * group != channels:
        raise node.fail(f"attribute group must divide the {channels} input channels and the "
                        f"{weight[0]} output channels (weight {weight!r}), not {group!r}")
    strides = _ints(node, "strides", (1, 1), 2)
    pads = _pads(node, node.spatial(0), kernel, strides)
    return inputs, {"kernel_shape": kernel, "strides": strides, "pads": pads, "group": group}


def _pool(node: OnnxNode, average: bool) -> tuple[tuple[str, ...], Attrs]:
    allowed = ["auto_pad", "ceil_mode", "dilations", "kernel_shape", "pads", "strides"]
    allowed += ["count_include_pad"] if average else ["storage_order"]
    _only(node, allowed)
    sizes = node.spatial(0, None)
    rank = len(sizes)
    _zero(node, "storage_order")
    kernel = _ints(node, "kernel_shape", (), rank)
    strides = _ints(node, "strides", (1,) * rank, rank)
    dilations = _ints(node, "dilations", (1,) * rank, rank)
    attrs: Attrs = {"kernel_shape": kernel, "strides": strides,
                    "pads": _pads(node, sizes, kernel, strides, dilations), "ceil_mode": node.attrs.get("ceil_mode", 0)}
    if any(d != 1 for d in dilations):
        attrs["dilations"] = dilations
    if average:
        attrs["count_include_pad"] = node.attrs.get("count_include_pad", 0)
    return node.present(), attrs


def _gemm(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("alpha", "beta", "transA", "transB"))
    attrs = {key: node.attrs[key] for key in ("alpha", "beta", "transA", "transB") if key in node.attrs}
    return node.present(), attrs


def _clip(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ())
    attrs: Attrs = {}
    for index, key in ((1, "min"), (2, "max")):
        bound = node.constant(index, key)
        if bound is not None:
            if bound.size != 1:
                raise node.fail(f"{key} must be a scalar, not shape {bound.shape!r}")
            attrs[key] = float(bound.reshape(()))
    return (node.inputs[0],), attrs


def _reshape(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("allowzero",))
    shape = node.constant(1, "shape")
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise node.fail("shape must be a constant 1-D integer tensor")
    if node.attrs.get("allowzero", 0) and 0 in shape:  # (allowzero=1 without a 0: the same as 0)
        raise node.fail("allowzero=1 with a 0 in the shape (a dimension of size 0) is not supported")
    return (node.inputs[0],), {"shape": tuple(int(v) for v in shape)}


def _dropout(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("seed",))
    training = node.constant(2, "training_mode")
    if training is not None and bool(training.reshape(())):
        raise node.fail("training_mode must be false (inference only)")
    return (node.inputs[0],), {}


def _batch_norm(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("epsilon", "momentum", "training_mode"))
    _zero(node, "training_mode")
    return node.present(), {"epsilon": node.attrs.get("epsilon", 1e-5)}


def _axes_input(node: OnnxNode, required: bool) -> tuple[tuple[str, ...], Attrs]:
    """Unsqueeze's and Squeeze's ``axes``: the constant second input (opset 13)."""
    _only(node, ())
    axes = node.constant(1, "axes")
    if axes is None:
        if required:
            raise node.fail("needs its axes (a constant second input)")
        return (node.inputs[0],), {}
    return (node.inputs[0],), {"axes": tuple(int(a) for a in axes.reshape(-1))}


def _slice(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    """Slice's starts, ends, axes and steps: constant inputs (opset 10 on)."""
    _only(node, ())
    parts: Attrs = {}
    for index, key in ((1, "starts"), (2, "ends"), (3, "axes"), (4, "steps")):
        value = node.constant(index, key)
        if value is not None:
            parts[key] = tuple(int(v) for v in value.reshape(-1))
    if "starts" not in parts or "ends" not in parts:
        raise node.fail("needs its starts and ends (constant inputs)")
    return (node.inputs[0],), parts


def _resize(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    """Resize of NCHW data in height and width (``graph/ops/resize.py``): its constant
    ``scales`` or ``sizes`` made the output size and the scale each coordinate uses."""
    _only(node, ("mode", "coordinate_transformation_mode", "nearest_mode", "cubic_coeff_a", "exclude_outside",
                 "extrapolation_value", "antialias", "keep_aspect_ratio_policy"))
    mode = node.attrs.get("mode", "nearest")
    coords = node.attrs.get("coordinate_transformation_mode", "half_pixel")
    rounding = node.attrs.get("nearest_mode", "round_prefer_floor")
    if mode not in ("nearest", "linear") or coords not in COORDINATE_MODES or rounding not in NEAREST_MODES:
        raise node.fail(f"mode {mode!r} with coordinate_transformation_mode {coords!r} is not openvta's "
                        f"(nearest or linear; {', '.join(COORDINATE_MODES)})")
    if node.attrs.get("antialias", 0) or node.attrs.get("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise node.fail("antialias and an aspect-ratio policy are not supported")
    shape = node.spatial(0)
    scales, sizes = node.constant(2, "scales"), node.constant(3, "sizes")
    if scales is not None and scales.size:
        factors = [float(v) for v in scales.reshape(-1)]
        if len(factors) != 4 or factors[:2] != [1.0, 1.0] or min(factors) <= 0:
            raise node.fail(f"scales must be (1, 1, height, width) and positive, not {tuple(factors)!r}")
        size = tuple(int(np.floor(n * f)) for n, f in zip(shape, factors[2:]))
        per_axis = (factors[2], factors[3])
    elif sizes is not None and sizes.size == 4:
        size = tuple(int(v) for v in sizes.reshape(-1)[2:])
        if min(size) < 1:
            raise node.fail(f"sizes must be positive, not {tuple(sizes.reshape(-1))!r}")
        per_axis = (size[0] / shape[0], size[1] / shape[1])
    else:
        raise node.fail("needs constant scales or sizes of the 4 axes")
    return (node.inputs[0],), {"mode": mode, "coordinate_transformation_mode": coords, "nearest_mode": rounding,
                               "size": size, "scales": per_axis}


def _reduce(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    """ReduceMean's and ReduceSum's axes: an attribute (ReduceMean before opset 18) or a
    constant second input; none is every axis, or with ``noop_with_empty_axes`` no axis
    (``axes=()``: the identity)."""
    _only(node, ("axes", "keepdims", "noop_with_empty_axes"))
    attrs: Attrs = {"keepdims": node.attrs.get("keepdims", 1)}
    axes = node.constant(1, "axes")
    given = axes.reshape(-1).tolist() if axes is not None else node.attrs.get("axes")
    if isinstance(given, (list, tuple)) and len(given):
        attrs["axes"] = tuple(int(a) for a in given)
    elif node.attrs.get("noop_with_empty_axes", 0):
        attrs["axes"] = ()
    return (node.inputs[0],), attrs


def _layer_norm(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("axis", "epsilon", "stash_type"))
    if node.attrs.get("stash_type", 1) != 1:
        raise node.fail(f"attribute stash_type must be 1 (float32), not {node.attrs['stash_type']!r}")
    return node.present(), {k: node.attrs[k] for k in ("axis", "epsilon") if k in node.attrs}


def _cast(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("to",))
    if "to" not in node.attrs:
        raise node.fail("needs its attribute 'to'")
    return node.present(), {"to": node.attrs["to"]}


def _expand(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ())
    shape = node.constant(1, "shape")
    if shape is None or shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise node.fail("shape must be a constant 1-D integer tensor")
    return (node.inputs[0],), {"shape": tuple(int(v) for v in shape)}


def _pad(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
    _only(node, ("mode",))
    pads = node.constant(1, "pads")
    if pads is None:
        raise node.fail("needs its pads (a constant second input)")
    widths = [int(p) for p in pads.reshape(-1)]
    axes = node.constant(3, "axes")
    if axes is not None:  # (opset 18) pads for these axes only
        ndim = node.types[node.inputs[0]].ndim
        if len(widths) != 2 * axes.size:
            raise node.fail(f"pads must hold two sizes per axis of {axes.tolist()!r}, not {widths!r}")
        full = [0] * (2 * ndim)
        for k, axis in enumerate(int(a) % ndim for a in axes.reshape(-1)):
            full[axis], full[axis + ndim] = widths[k], widths[k + axes.size]
        widths = full
    attrs: Attrs = {"pads": tuple(widths), "mode": node.attrs.get("mode", "constant")}
    value = node.constant(2, "constant_value")
    if value is not None:
        attrs["value"] = float(value.reshape(-1)[0]) if value.size else 0.0
    return (node.inputs[0],), attrs


def _plain(*allowed: str) -> Converter:
    def convert(node: OnnxNode) -> tuple[tuple[str, ...], Attrs]:
        _only(node, allowed)
        return node.present(), {k: node.attrs[k] for k in allowed if k in node.attrs}
    return convert


CONVERTERS: Mapping[Op, Converter] = {
    Op.CONV: _conv,
    Op.GEMM: _gemm,
    Op.MATMUL: _plain(),
    Op.RELU: _plain(),
    Op.CLIP: _clip,
    Op.ADD: _plain(),
    Op.BATCH_NORM: _batch_norm,
    Op.MAX_POOL: lambda node: _pool(node, average=False),
    Op.AVERAGE_POOL: lambda node: _pool(node, average=True),
    Op.GLOBAL_AVERAGE_POOL: _plain(),
    Op.FLATTEN: _plain("axis"),
    Op.RESHAPE: _reshape,
    Op.IDENTITY: _plain(),
    Op.DROPOUT: _dropout,
    Op.SOFTMAX: _plain("axis"),
    Op.MUL: _plain(),
    Op.HARD_SWISH: _plain(),
    Op.HARD_SIGMOID: _plain("alpha", "beta"),
    Op.LEAKY_RELU: _plain("alpha"),
    Op.PRELU: _plain(),
    Op.IS_NAN: _plain(),
    Op.GATHER_ELEMENTS: _plain("axis"),
    Op.GATHER_ND: _plain("batch_dims"),
    Op.LRN: _plain("alpha", "beta", "bias", "size"),
    Op.CONCAT: _plain("axis"),
    Op.TRANSPOSE: _plain("perm"),
    Op.UNSQUEEZE: lambda node: _axes_input(node, required=True),
    Op.SQUEEZE: lambda node: _axes_input(node, required=False),
    Op.PAD: _pad,
    Op.SUB: _plain(),
    Op.DIV: _plain(),
    Op.POW: _plain(),
    Op.ERF: _plain(),
    Op.SQRT: _plain(),
    Op.SIGMOID: _plain(),
    Op.TANH: _plain(),
    Op.GELU: _plain("approximate"),
    Op.REDUCE_MEAN: lambda node: _reduce(node),
    Op.REDUCE_SUM: lambda node: _reduce(node),
    Op.LAYER_NORM: _layer_norm,
    Op.GATHER: _plain("axis"),
    Op.CAST: _cast,
    Op.EXPAND: _expand,
    Op.SLICE: _slice,
    Op.RESIZE: _resize,
}


def check_converters(converters: Mapping[Op, Converter], onnx_ops: frozenset[Op]) -> None:
    """Refuse, at import, an ONNX op of the registry without a converter here, or a converter
    for an op the registry does not hold as an ONNX op.

    Raises
    ------
    ImportError
        naming the ops.
    """
    missing = sorted(op.value for op in onnx_ops - set(converters))
    extra = sorted(op.value for op in set(converters) - onnx_ops)
    problems = ([f"ONNX ops without a converter in graph/frontends/onnx_ops.py: {', '.join(missing)}"] * bool(missing)
                + [f"converters for ops that are not ONNX ops of the registry: {', '.join(extra)}"] * bool(extra))
    if problems:
        raise ImportError("; ".join(problems))


check_converters(CONVERTERS, ONNX_OPS)
