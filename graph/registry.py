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
from .ops import elementwise, indexing, linear, onnx_reference, pool, quant, resize, shape, tensor, transformer
from .ops.base import OpDef

__all__ = ["REGISTRY", "ONNX_OPS", "INTERNAL_OPS", "QUANT_OPS", "check_registry", "op_def"]

REGISTRY: Mapping[Op, OpDef] = MappingProxyType({
    d.op: d for module in (linear, elementwise, pool, shape, resize, quant, tensor, transformer, indexing,
                           onnx_reference)
    for d in module.DEFS})

# The integer graph's own ops and the fallback; every other op is an ONNX op of the same name.
INTERNAL_OPS = frozenset({Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE, Op.WIDE_BYTE, Op.JOIN_WIDE, Op.TABLE, Op.IM2COL,
                          Op.ONNX_REFERENCE})
# The ops only an integer graph holds (Im2Col, which legalize makes, is in float graphs too).
QUANT_OPS = frozenset({Op.QUANTIZE, Op.DEQUANTIZE, Op.REQUANTIZE, Op.WIDE_BYTE, Op.JOIN_WIDE, Op.TABLE})
ONNX_OPS = frozenset(REGISTRY) - INTERNAL_OPS



def check_registry(registry: Mapping[Op, OpDef]) -> None:
    """Refuse, at import, a registry that is not complete: every :class:`Op` has an entry
    under its own key, and every ONNX op a float reference (what ``float_reference`` and the
    frontend's tests run) and at least one ONNX example (the generated tests' model).

    Raises
    ------
    ImportError
        naming each op and what its entry lacks.
    """
    problems = [f"{op.value} has no registry entry (graph/ops)" for op in Op if op not in registry]
    for op, entry in registry.items():
        if entry.op is not op:
            problems.append(f"{op.value}'s entry is {entry.op.value}'s")
        elif op not in INTERNAL_OPS:
            problems += [f"{op.value} has no {what}" for what, missing in (
                ("float reference", entry.float_ref is None), ("ONNX example", not entry.examples)) if missing]
    if problems:  # a programming error, caught by importing the package
        raise ImportError(f"the op registry is incomplete: {'; '.join(problems)}")


check_registry(REGISTRY)


def op_def(op: Op) -> OpDef:
    """The registry entry of ``op``."""
    return REGISTRY[op]
