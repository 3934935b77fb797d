"""The op registry: one :class:`~openvta.graph.ops.base.OpDef` per :class:`~openvta.graph.ir.Op`.

Everything that treats ops generically — shape inference, the executor, quantization,
partitioning, fusion, the generated tests — looks an op up here; no other module
branches on op names to learn what an op is.

Examples
--------
>>> op_def(Op.CONV).kind.name, op_def(Op.RELU).kind.name
('OUT_ELEMWISE_FUSABLE', 'ELEMWISE')
>>> sorted(o.value for o in ONNX_OPS)[:3]
['Add', 'AveragePool', 'BatchNormalization']
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .ir import Op
from .ops import elementwise, linear, pool, quant, shape
from .ops.base import OpDef

__all__ = ["REGISTRY", "ONNX_OPS", "INTERNAL_OPS", "op_def"]

REGISTRY: Mapping[Op, OpDef] = MappingProxyType({
    d.op: d for module in (linear, elementwise, pool, shape, quant) for d in module.DEFS})

# The integer graph's own ops; every other op is an ONNX op of the same name.
INTERNAL_OPS = frozenset({Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE})
ONNX_OPS = frozenset(REGISTRY) - INTERNAL_OPS

_missing = set(Op) - set(REGISTRY)
if _missing:  # a programming error, caught by importing the package
    raise ImportError(f"ops without a registry entry: {sorted(o.value for o in _missing)}")


def op_def(op: Op) -> OpDef:
    """The registry entry of ``op``."""
    return REGISTRY[op]
