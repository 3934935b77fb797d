"""The graph level: a model's graph IR, op registry, ONNX frontend, passes and executor.

``import_onnx`` reads a float32 ONNX model into a :class:`Graph`; ``execute`` runs a
graph through the registry's numpy references.
"""

from .errors import ExecutionError, GraphError, ModelError, OpError, PassError
from .execute import execute
from .frontends.onnx import import_onnx
from .ir import (Attrs, Device, DType, Graph, MemoryPlan, Node, Op, Placement, QuantParams,
                 RequantMode, TensorType)
from .ops.base import OpDef, PatternKind, ScaleRule
from .registry import REGISTRY, op_def

__all__ = [
    "Attrs", "Device", "DType", "ExecutionError", "Graph", "GraphError", "MemoryPlan",
    "ModelError", "Node", "Op", "OpDef", "OpError", "PassError", "PatternKind", "Placement",
    "QuantParams", "REGISTRY", "RequantMode", "ScaleRule", "TensorType", "execute",
    "import_onnx", "op_def",
]
