"""openvta: an open deep-learning accelerator stack in the style of TVM's VTA.

The layers are subpackages: :mod:`openvta.isa` (the contract), :mod:`openvta.runtime`
(program files, the builder, devices), :mod:`openvta.sim` (the functional simulator and
the cycle model), :mod:`openvta.compiler` (tensor expressions, schedules, lowering,
operators); :mod:`openvta.hw` is to come (see the README's status).
"""

from openvta.isa import PRESETS, Config, preset
from openvta.runtime import Device, Program, ProgramBuilder, Result, load_program

from .api import Simulated, compile, operator, simulate

__version__ = "0.1.0"

__all__ = ["PRESETS", "Config", "Device", "Program", "ProgramBuilder", "Result", "Simulated",
           "compile", "load_program", "operator", "preset", "simulate", "__version__"]
