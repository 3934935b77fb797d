"""TVM-style compiler: tensor expressions, schedules, lowering passes, operators.

``te`` says what to compute, ``create_schedule`` and the :class:`Stage` primitives say
how, :func:`lower` runs the pass pipeline and :func:`build` emits the program.  An
operator ends with an :class:`Epilogue` of ALU stages (:mod:`.epilogue`;
:func:`requantize_stages` writes the graph level's requantization as one), and
:func:`build_program` puts several operators in one program (:mod:`.program`).
"""

from . import te
from .epilogue import AluStage, ChannelOperand, Epilogue, TensorOperand, apply_epilogue
from .intrin import Intrinsic, gemm_intrinsic
from .ir import LoweringError
from .ops import OPERATORS, REGISTRY, OperatorSpec, Param, operator_spec
from .ops.common import Operator
# the registry's factories, imported by name for static typing
from .ops.conv2d import conv2d, plan_conv2d
from .ops.dense import dense, plan_dense
from .ops.elementwise import elementwise
from .pipeline import PASSES, Progress, build, lower
from .program import Kernel, ProgramTensor, build_program, build_program_starts, program_reference
from .requantize import requantize_stages
from .schedule import Schedule, ScheduleError, Stage, create_schedule

__all__ = [
    "AluStage", "ChannelOperand", "Epilogue", "TensorOperand", "apply_epilogue", "requantize_stages",
    "Kernel", "ProgramTensor", "build_program", "build_program_starts", "program_reference",
    "Intrinsic", "LoweringError", "OPERATORS", "Operator", "OperatorSpec", "PASSES", "Param",
    "Progress", "REGISTRY", "Schedule", "ScheduleError", "Stage", "build", "create_schedule",
    "gemm_intrinsic", "lower", "operator_spec", "plan_conv2d", "plan_dense", "te",
    # every factory of the registry (tests/compiler/test_registry.py checks it): the first
    # three imported by name for static typing, every other one from the registry below
    "conv2d", "dense", "elementwise",
]
for _name, _spec in REGISTRY.items():
    if _name not in __all__:
        globals()[_name] = _spec.factory
        __all__.append(_name)
