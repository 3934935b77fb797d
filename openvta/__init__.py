"""openvta: an open deep-learning accelerator stack in the style of TVM's VTA.

The layers are subpackages: :mod:`openvta.isa` (the contract), :mod:`openvta.runtime`
(program files, the builder, devices), :mod:`openvta.sim` (the functional simulator and
the cycle model), :mod:`openvta.compiler` (tensor expressions, schedules, lowering,
operators), :mod:`openvta.graph` (models: ONNX import, quantization, partitioning,
fusion), :mod:`openvta.hw` (the RTL, its co-simulation and the FPGA flow).
"""

from typing import TYPE_CHECKING, Any

from openvta.isa import PRESETS, Config, preset
from openvta.runtime import Device, Program, ProgramBuilder, Result, load_program

from .api import Simulated, compile, operator, simulate

if TYPE_CHECKING:
    from openvta.graph.model import CompiledModel, load_model
    from openvta.graph.pipeline import compile_model

__version__ = "0.1.0"

#: The graph level, imported on first use (an RTL simulator process imports openvta and
#: needs none of it).
_LAZY = {"compile_model": "openvta.graph.pipeline", "load_model": "openvta.graph.model",
         "CompiledModel": "openvta.graph.model"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'openvta' has no attribute {name!r}")


__all__ = ["PRESETS", "CompiledModel", "Config", "Device", "Program", "ProgramBuilder", "Result",
           "Simulated", "compile", "compile_model", "load_model", "load_program", "operator",
           "preset", "simulate", "__version__"]
