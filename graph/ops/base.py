"""What an op registry entry holds, and helpers its entries share.

Every op has one :class:`OpDef`: its pattern kind (TVM Relay FuseOps' kinds, which
fusion decides from), shape and type inference, a numpy float reference, a numpy
integer reference (for the quantized graph), an accelerator capability predicate that
says why not when it says no, its multiply-accumulate count, how quantization chooses
its output scale and rewrites it into the integer graph (:class:`QuantRule`), and ONNX
examples the generated tests run against onnxruntime.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from openvta.isa.arith import wrap_int32  # re-exported: the graph's references wrap like the accumulator

from ..errors import OpError
from ..ir import Attrs, AttrValue, DType, Node, Op, TensorType

if TYPE_CHECKING:
    from openvta.isa import Config

    from ..ir import Graph

__all__ = ["PatternKind", "QuantRule", "ScaleRule", "OpDef", "OnnxExample", "Kernel", "InferFn", "AccelFn",
           "MacsFn", "cpu_only", "no_macs", "int_attr", "ints_attr", "float_attr", "same_type",
           "require_float", "require_rank", "wrap_int32"]


class PatternKind(enum.IntEnum):
    """TVM Relay's op pattern kinds, in its order (a larger kind fuses less)."""

    ELEMWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    REDUCTION = 3
    OUT_ELEMWISE_FUSABLE = 4
    OPAQUE = 8


class QuantRule(enum.Enum):
    """How the quantize pass rewrites an op into the integer graph (``passes/quantize.py``
    holds one rewrite per rule; an op without one is a float island: its inputs dequantized,
    its output quantized where an int8 op reads it)."""

    PRODUCT = "product"  # int8 data × int8 constant weights → int32, then requantized (Conv, Gemm)
    MATMUL = "matmul"  # a product of two int8 activations (or of constant weights, as PRODUCT)
    ADD = "add"  # operands requantized to int32 in the sum's scale, added, saturated
    CLIP = "clip"  # the bounds in the input's scale
    MOVE = "move"  # moves codes (a reshape, a transpose): the same op on int8, any zero point
    PICK = "pick"  # picks codes (max pooling): the same op on int8, any zero point
    SAME = "same"  # the same op on int8 codes of one scale, zero point 0 (ReLU, average pooling)
    TABLE = "table"  # an element-wise function of one input: the table of its 256 codes
    SCALE_BY = "scale_by"  # Mul or Div by a positive scalar constant: a requantization
    SOFTMAX = "softmax"  # the integer softmax kernel
    LAYER_NORM = "layer_norm"  # the integer layer normalization kernel
    REDUCE = "reduce"  # an int32 sum, then requantized (ReduceSum, ReduceMean)
    CONCAT = "concat"  # each input requantized to the output's scale, the int8 codes joined
    PRELU = "prelu"  # one slope: a table; slopes per channel: its two halves requantized, added


class ScaleRule(enum.Enum):
    """How quantization picks an op's output scale."""

    PRESERVE = "preserve"  # the output keeps input 0's scale (max, reshape, relu, average)
    CALIBRATE = "calibrate"  # from the output's calibrated range


Kernel = Callable[[Sequence[np.ndarray], Attrs], np.ndarray]
InferFn = Callable[[Sequence[TensorType], Attrs], TensorType]
AccelFn = Callable[["Node", "Graph", "Config"], tuple[bool, str]]
MacsFn = Callable[[Sequence[TensorType], TensorType, Attrs], int]


@dataclass(frozen=True)
class OnnxExample:
    """One ONNX node to test the float reference with.

    Members
    -------
    inputs :
        shapes of the inputs given as random float32 data (``None``: an omitted input).
    attrs :
        the ONNX attributes.
    constants :
        input index → a constant (an initializer): a number is a 0-D tensor, a tuple
        1-D; integers are int64 (a Reshape's shape), floats float32.
    positive :
        indices of random inputs that must be positive (a variance).
    opset :
        the model's opset (13; 17 for LayerNormalization, 20 for Gelu).
    """

    inputs: tuple[tuple[int, ...] | None, ...]
    attrs: Mapping[str, object] = field(default_factory=dict)
    constants: Mapping[int, float | tuple[float, ...] | tuple[int, ...]] = field(default_factory=dict)
    positive: tuple[int, ...] = ()
    opset: int = 13


def cpu_only(reason: str) -> AccelFn:
    """A predicate that always answers no, with ``reason``."""

    def predicate(node: Node, graph: Graph, cfg: Config) -> tuple[bool, str]:
        return False, reason

    return predicate


def no_macs(inputs: Sequence[TensorType], output: TensorType, attrs: Attrs) -> int:
    return 0


@dataclass(frozen=True)
class OpDef:
    """The registry entry of one op (see the module docstring)."""

    op: Op
    kind: PatternKind
    arity: tuple[int, int]
    infer: InferFn
    float_ref: Kernel | None
    int_ref: Kernel | None
    accel_ok: AccelFn = cpu_only("no accelerator mapping for this op")
    scale_rule: ScaleRule = ScaleRule.CALIBRATE
    macs: MacsFn = no_macs
    examples: tuple[OnnxExample, ...] = ()
    quantize: QuantRule | None = None  # None: a float island in the integer graph

    def kernel(self, dtype: DType) -> Kernel:
        """The reference for inputs of ``dtype``: integer inputs run the integer one."""
        chosen = self.int_ref if dtype.is_quantized else self.float_ref
        if chosen is None:
            which = "integer" if dtype.is_quantized else "float"
            raise OpError(f"{self.op.value} has no {which} reference (input is {dtype.value})")
        return chosen


# -- attribute access with messages -------------------------------------------------------

def int_attr(attrs: Attrs, key: str, default: int | None = None) -> int:
    value = attrs.get(key, default)
    if not isinstance(value, int):
        raise OpError(f"attribute {key!r} must be an integer, not {value!r}")
    return value


def ints_attr(attrs: Attrs, key: str, length: int | None = None,
              default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    value = attrs.get(key, default)
    if not isinstance(value, tuple) or not all(isinstance(v, int) for v in value) \
            or (length is not None and len(value) != length):
        size = f"{length} " if length is not None else ""
        raise OpError(f"attribute {key!r} must be a tuple of {size}integers, not {value!r}")
    return tuple(v for v in value if isinstance(v, int))  # every one is: checked above


def float_attr(attrs: Mapping[str, AttrValue], key: str, default: float | None = None) -> float:
    value = attrs.get(key, default)
    if isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, float):
        raise OpError(f"attribute {key!r} must be a number, not {value!r}")
    return value


# -- inference helpers ---------------------------------------------------------------------

def same_type(inputs: Sequence[TensorType], attrs: Attrs) -> TensorType:
    """The output has input 0's shape and dtype (and no quantization of its own)."""
    return TensorType(inputs[0].shape, inputs[0].dtype)


def require_float(t: TensorType, op: Op) -> None:
    if t.dtype is not DType.FLOAT32:
        raise OpError(f"{op.value} input must be float32, not {t.dtype.value}")


def require_rank(t: TensorType, rank: int, what: str) -> None:
    if t.ndim != rank:
        raise OpError(f"{what} must be {rank}-D, not {t.ndim}-D {t}")
