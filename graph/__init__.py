"""The graph level: a model's graph IR, op registry, ONNX frontend, passes and executor.

``compile_model`` takes a float32 ONNX model and calibration samples (or a QDQ model
quantized by onnxruntime, with ``quantize="exact"``: its own scales) to an int8
:class:`CompiledModel` (``reference``, ``float_reference``, ``summary``, ``save``);
``load_model`` reads it back; ``CompiledModel.run`` runs the CPU groups in numpy and each
accelerator region's program on a back end.  ``import_onnx`` reads a model into a
:class:`Graph`; ``execute`` runs a graph through the registry's numpy references.
"""

from .errors import ExecutionError, GraphError, ModelError, OpError, PassError
from .execute import execute
from .frontends.onnx import import_onnx
from .ir import (Attrs, Device, DType, Graph, Node, Op, Placement, QuantParams, RequantMode,
                 TensorType)
from .compiled_model import CompiledModel, KernelReport, ModelOutputs, ModelReport, load_model
from .ops.base import OpDef, PatternKind, ScaleRule
from .pipeline import PASSES, CompileOptions, compile_model
from .regions import MemoryPlan, Region, RegionKernel, RegionTensor, Role
from .registry import REGISTRY, op_def

__all__ = [
    "Attrs", "CompileOptions", "CompiledModel", "Device", "DType", "ExecutionError", "Graph",
    "GraphError", "KernelReport", "MemoryPlan", "ModelError", "ModelOutputs", "ModelReport", "Node",
    "Op", "OpDef", "OpError", "PASSES", "PassError", "PatternKind", "Placement", "QuantParams",
    "REGISTRY", "Region", "RegionKernel", "RegionTensor", "RequantMode", "Role", "ScaleRule",
    "TensorType", "compile_model", "execute", "import_onnx", "load_model", "op_def",
]
