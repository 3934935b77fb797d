"""openvta: an open deep-learning accelerator stack in the style of TVM's VTA.

The layers are subpackages: :mod:`openvta.isa` (the contract), :mod:`openvta.runtime`
(program files, the builder, devices), :mod:`openvta.sim` (the functional simulator and
the cycle model), :mod:`openvta.compiler` (tensor expressions, schedules, lowering,
operators), :mod:`openvta.graph` (models: ONNX import, quantization, partitioning,
fusion), :mod:`openvta.hw` (the RTL, its co-simulation and the FPGA flow).
"""

from openvta.isa import PRESETS, Config, preset
from openvta.runtime import Device, Program, ProgramBuilder, Result, load_program

from openvta.graph.model import CompiledModel, load_model
from openvta.graph.pipeline import compile_model

from .api import Simulated, compile, operator, simulate

__version__ = "0.1.0"

__all__ = ["PRESETS", "CompiledModel", "Config", "Device", "Program", "ProgramBuilder", "Result",
           "Simulated", "compile", "compile_model", "load_model", "load_program", "operator",
           "preset", "simulate", "__version__"]
