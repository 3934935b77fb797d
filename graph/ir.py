"""The graph IR: typed tensors, nodes and graphs, all frozen.

A :class:`Graph` holds its nodes in topological order and every value in static single
assignment form: each tensor name is defined once, by a graph input, a constant or one
node output.  Every value carries a :class:`TensorType` (shape, dtype, optional
quantization parameters); the first dimension may be symbolic (a string, the batch).
Passes never mutate a graph: they build a new one (``dataclasses.replace``).

Examples
--------
>>> t = TensorType(("N", 1, 8, 8), DType.FLOAT32)
>>> str(t), t.nbytes(batch=2)
('float32[N,1,8,8]', 512)
>>> n = Node("r", Op.RELU, ("x",), ("y",))
>>> g = Graph("tiny", ("x",), ("y",), (n,), {}, {"x": t, "y": t})
>>> print(g.dump())
graph tiny
  input x: float32[N,1,8,8]
  y: float32[N,1,8,8] = Relu(x)  # r
  output y
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Union

import numpy as np

from .dtypes import Device, DType

if TYPE_CHECKING:
    from .kernel import KernelMatch
    from .region_types import MemoryPlan, Region

__all__ = ["DType", "Op", "Device", "RequantMode", "Attrs", "AttrValue", "QuantParams",
           "TensorType", "Placement", "Precision", "Node", "Graph", "Dim"]

Dim = Union[int, str]


class Op(enum.Enum):
    """The enumerated op set: ONNX ops by their ONNX names, then the integer-graph ops."""

    CONV = "Conv"
    GEMM = "Gemm"
    MATMUL = "MatMul"
    RELU = "Relu"
    CLIP = "Clip"
    ADD = "Add"
    BATCH_NORM = "BatchNormalization"
    MAX_POOL = "MaxPool"
    AVERAGE_POOL = "AveragePool"
    GLOBAL_AVERAGE_POOL = "GlobalAveragePool"
    FLATTEN = "Flatten"
    RESHAPE = "Reshape"
    IDENTITY = "Identity"
    DROPOUT = "Dropout"
    SOFTMAX = "Softmax"
    MUL = "Mul"
    LRN = "LRN"
    CONCAT = "Concat"
    TRANSPOSE = "Transpose"
    UNSQUEEZE = "Unsqueeze"
    SQUEEZE = "Squeeze"
    PAD = "Pad"
    SUB = "Sub"
    DIV = "Div"
    POW = "Pow"
    ERF = "Erf"
    SQRT = "Sqrt"
    SIGMOID = "Sigmoid"
    TANH = "Tanh"
    GELU = "Gelu"
    REDUCE_MEAN = "ReduceMean"
    REDUCE_SUM = "ReduceSum"
    LAYER_NORM = "LayerNormalization"
    GATHER = "Gather"
    CAST = "Cast"
    EXPAND = "Expand"
    SLICE = "Slice"
    RESIZE = "Resize"
    HARD_SWISH = "HardSwish"
    HARD_SIGMOID = "HardSigmoid"
    LEAKY_RELU = "LeakyRelu"
    PRELU = "PRelu"
    IS_NAN = "IsNaN"
    GATHER_ELEMENTS = "GatherElements"
    GATHER_ND = "GatherND"
    QUANTIZE = "Quantize"
    DEQUANTIZE = "Dequantize"
    REQUANTIZE = "Requantize"
    WIDE_BYTE = "WideByte"
    JOIN_WIDE = "JoinWide"
    TABLE = "Table"
    IM2COL = "Im2Col"
    #: an ONNX node openvta has no kernel for, run by ONNX's reference implementation
    ONNX_REFERENCE = "OnnxReference"


class RequantMode(enum.Enum):
    """Requantization schemes: shift only (VTA's), a fixed-point multiply and shift, or
    onnxruntime's float32 multiply with ties to even (``exact``, for QDQ models)."""

    POW2 = "pow2"
    FIXED = "fixed"
    EXACT = "exact"


#: Attributes the text dump leaves out: a fallback node's one-node ONNX model (base64), and its
#: operator and output shape, which the line shows anyway.
HIDDEN_ATTRS = frozenset({"onnx_model", "op_type", "out_shape"})

AttrValue = Union[int, float, str, tuple[int, ...], tuple[float, ...], DType, RequantMode]


def _attr_value(key: str, value: object) -> AttrValue:
    if isinstance(value, (bool, np.bool_)):
        return int(value)
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value)
    if isinstance(value, (str, DType, RequantMode)):
        return value
    if isinstance(value, (tuple, list, np.ndarray)):
        items = [_attr_value(key, v) for v in value]
        ints = [v for v in items if isinstance(v, int)]
        floats = [v for v in items if isinstance(v, float)]
        if len(ints) == len(items):
            return tuple(ints)
        if len(floats) == len(items):
            return tuple(floats)
    raise TypeError(f"attribute {key!r} must be a number, a string, an enum or a tuple of "
                    f"numbers, not {value!r}")


class Attrs(Mapping[str, AttrValue]):
    """An immutable, hashable mapping of node attributes (sorted by key)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[str, object] | Iterable[tuple[str, object]] = ()) -> None:
        pairs = dict(items)
        self._items: tuple[tuple[str, AttrValue], ...] = tuple(
            sorted((str(k), _attr_value(str(k), v)) for k, v in pairs.items()))

    def __getitem__(self, key: str) -> AttrValue:
        for k, v in self._items:
            if k == key:
                return v
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (k for k, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(self._items)

    def __repr__(self) -> str:
        return "Attrs({" + ", ".join(f"{k!r}: {v!r}" for k, v in self._items) + "})"

    def replace(self, **changes: object) -> Attrs:
        """A copy with ``changes`` applied (a value of ``None`` removes the key)."""
        merged: dict[str, object] = dict(self._items)
        for key, value in changes.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        return Attrs(merged)

    def text(self) -> str:
        """``key=value`` pairs for the text dump (not a fallback node's ONNX model)."""
        return " ".join(f"{k}={_show(v)}" for k, v in self._items if k not in HIDDEN_ATTRS)


def _show(value: AttrValue) -> str:
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return "(" + ",".join(f"{v:.6g}" if isinstance(v, float) else str(v) for v in value) + ")"
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


@dataclass(frozen=True)
class QuantParams:
    """Symmetric quantization: ``real = scale * (q - zero_point)``, per tensor or per channel.

    Members
    -------
    scale :
        one positive scale, or one per channel along ``axis``.
    zero_point :
        0 for the symmetric int8 scheme used throughout.
    axis :
        the channel axis of per-channel scales (``None`` for one scale).
    """

    scale: tuple[float, ...]
    zero_point: int = 0
    axis: int | None = None

    def __post_init__(self) -> None:
        scale = tuple(float(s) for s in self.scale)
        object.__setattr__(self, "scale", scale)
        if not scale or not all(math.isfinite(s) and s > 0 for s in scale):
            raise ValueError(f"quantization scale must be positive and finite, not {scale!r}")
        if len(scale) > 1 and self.axis is None:
            raise ValueError("per-channel quantization scales must name their axis, not None")

    def array(self, ndim: int) -> np.ndarray:
        """The scales as float64, shaped to broadcast over a tensor of ``ndim`` dimensions."""
        values = np.asarray(self.scale, dtype=np.float64)
        if self.axis is None:
            return values.reshape(())
        shape = [1] * ndim
        shape[self.axis] = len(self.scale)
        return values.reshape(shape)

    def __str__(self) -> str:
        if len(self.scale) == 1:
            return f"scale={self.scale[0]:.6g}"
        return f"scale[{len(self.scale)}]@axis{self.axis}"


@dataclass(frozen=True)
class TensorType:
    """A tensor's shape (ints, a string for the symbolic batch), dtype and quantization."""

    shape: tuple[Dim, ...]
    dtype: DType
    quant: QuantParams | None = None

    def __post_init__(self) -> None:
        shape = tuple(d if isinstance(d, str) else int(d) for d in self.shape)
        object.__setattr__(self, "shape", shape)
        if any(isinstance(d, int) and d < 0 for d in shape):
            raise ValueError(f"tensor shape must hold non-negative sizes, not {shape!r}")

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def concrete(self, batch: int = 1) -> tuple[int, ...]:
        """The shape with every symbolic dimension set to ``batch``."""
        return tuple(batch if isinstance(d, str) else d for d in self.shape)

    def nbytes(self, batch: int = 1) -> int:
        return math.prod(self.concrete(batch)) * self.dtype.itemsize

    def with_quant(self, quant: QuantParams | None) -> TensorType:
        return replace(self, quant=quant)

    def __str__(self) -> str:
        text = f"{self.dtype.value}[{','.join(str(d) for d in self.shape)}]"
        return text + (f" {{{self.quant}}}" if self.quant else "")


@dataclass(frozen=True)
class Placement:
    """Where a node runs and why."""

    device: Device
    reason: str

    def __str__(self) -> str:
        return f"{self.device.value} ({self.reason})"


@dataclass(frozen=True)
class Precision:
    """A node's activation bits under mixed precision (docs/DECISIONS.md, "Mixed precision").

    In the float graph, after calibration, a Conv's or Gemm's input and output bits (an
    Add's output bits: a 16-bit residual sum), each 8 or 16; in the integer graph, each
    int8 pass of a wide product also says how many ``passes`` compute it.
    """

    input_bits: int = 8
    output_bits: int = 8
    passes: int = 1

    def __post_init__(self) -> None:
        if self.input_bits not in (8, 16) or self.output_bits not in (8, 16):
            raise ValueError(f"activation bits must be 8 or 16, not {self.input_bits} and {self.output_bits}")
        if not isinstance(self.passes, int) or self.passes < 1:
            raise ValueError(f"a product's passes must be a positive integer, not {self.passes!r}")

    @property
    def bits(self) -> tuple[int, int]:
        return self.input_bits, self.output_bits

    def __str__(self) -> str:
        passes = f", {self.passes} int8 passes" if self.passes > 1 else ""
        return f"{self.input_bits}-bit in, {self.output_bits}-bit out{passes}"


@dataclass(frozen=True)
class Node:
    """One operation: ``outputs = op(inputs; attrs)``, with its placement, fused group and,
    under mixed precision, its activation bits."""

    name: str
    op: Op
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Attrs = field(default_factory=Attrs)
    placement: Placement | None = None
    group: int | None = None
    precision: Precision | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"node name must be a non-empty string, not {self.name!r}")
        if not isinstance(self.op, Op):
            raise TypeError(f"node {self.name!r} op must be an Op, not {self.op!r}")
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        if not isinstance(self.attrs, Attrs):
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    @property
    def op_name(self) -> str:
        """The op's name: the ONNX operator of a fallback node (``Op.ONNX_REFERENCE``)."""
        if self.op is Op.ONNX_REFERENCE:
            kind = self.attrs.get("op_type")
            return kind if isinstance(kind, str) else self.op.value
        return self.op.value

    @property
    def label(self) -> str:
        """``'name' (Op)``, how errors name a node."""
        return f"{self.name!r} ({self.op_name})"


@dataclass(frozen=True, eq=False)
class Graph:
    """A model: inputs, outputs, nodes in topological order, constants and value types.

    From kernel matching on, ``kernels`` holds each accelerator group's kernel (group →
    :class:`~openvta.graph.kernel.KernelMatch`, decided once and read by every later pass);
    after memory planning ``memory`` holds the plan of the host's buffers; from layout
    packing on, ``regions`` the accelerator regions (:mod:`openvta.graph.regions`).
    ``notes`` say what the import changed (:func:`openvta.graph.frontends.onnx_prepare.prepare`).
    """

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    nodes: tuple[Node, ...]
    constants: Mapping[str, np.ndarray]
    types: Mapping[str, TensorType]
    memory: MemoryPlan | None = None
    regions: tuple[Region, ...] = ()
    kernels: Mapping[int, KernelMatch] = field(default_factory=dict)
    #: what the import did to the model (an opset upgraded, input shapes fixed), for the summary
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", tuple(self.regions))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "kernels", MappingProxyType(dict(sorted(self.kernels.items()))))
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        object.__setattr__(self, "nodes", tuple(self.nodes))
        frozen = {}
        for key, array in self.constants.items():
            view = np.asarray(array).view()
            view.flags.writeable = False
            frozen[key] = view
        object.__setattr__(self, "constants", MappingProxyType(frozen))
        object.__setattr__(self, "types", MappingProxyType(dict(self.types)))

    def replace(self, **changes: Any) -> Graph:
        return replace(self, **changes)

    def producers(self) -> dict[str, Node]:
        """Value name → the node that defines it."""
        return {out: node for node in self.nodes for out in node.outputs}

    def consumers(self) -> dict[str, list[Node]]:
        """Value name → the nodes that read it, in order (a node reading twice counts once)."""
        uses: dict[str, list[Node]] = {}
        for node in self.nodes:
            for name in dict.fromkeys(node.inputs):
                uses.setdefault(name, []).append(node)
        return uses

    def node(self, name: str) -> Node:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(f"graph {self.name!r} has no node {name!r}")

    def names(self) -> set[str]:
        """Every node and value name in use (for making fresh names)."""
        values = set(self.inputs) | set(self.constants) | set(self.types)
        return values | {n.name for n in self.nodes} | {o for n in self.nodes for o in n.outputs}

    def dump(self) -> str:
        """The readable text form: constants, inputs, one line per node, outputs."""
        lines = [f"graph {self.name}"]
        for name, array in self.constants.items():
            lines.append(f"  const {name}: {self.types.get(name, _array_type(array))}")
        for name in self.inputs:
            lines.append(f"  input {name}: {self.types.get(name, '?')}")
        for node in self.nodes:
            outs = ", ".join(f"{o}: {self.types.get(o, '?')}" for o in node.outputs)
            attrs = f" {node.attrs.text()}" if node.attrs else ""
            notes = [node.name]
            if node.placement is not None:
                notes.append(str(node.placement))
            if node.group is not None:
                notes.append(f"group {node.group}")
            if node.precision is not None:
                notes.append(str(node.precision))
            lines.append(f"  {outs} = {node.op_name}({', '.join(node.inputs)}){attrs}"
                         f"  # {' · '.join(notes)}")
        lines.append(f"  output {', '.join(self.outputs)}")
        lines.extend(f"  {line}" for region in self.regions for line in region.describe())
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.dump()


def _array_type(array: np.ndarray) -> TensorType:
    return TensorType(array.shape, DType.of(array.dtype))
