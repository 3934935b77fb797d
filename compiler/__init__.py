"""TVM-style compiler: tensor expressions, schedules, lowering passes, operators.

``te`` says what to compute, ``create_schedule`` and the :class:`Stage` primitives say
how, :func:`lower` runs the pass pipeline and :func:`build` emits the program.
"""

from . import te
from .intrin import Intrinsic, gemm_intrinsic
from .ir import LoweringError
from .ops import OPERATORS, REGISTRY, OperatorSpec, Param, operator_spec
from .ops.common import Operator
# the registry's factories, imported by name for static typing
from .ops.conv2d import conv2d, plan_conv2d
from .ops.dense import dense, plan_dense
from .ops.elementwise import elementwise
from .pipeline import PASSES, Progress, build, lower
from .schedule import Schedule, ScheduleError, Stage, create_schedule

__all__ = [
    "Intrinsic", "LoweringError", "OPERATORS", "Operator", "OperatorSpec", "PASSES", "Param",
    "Progress", "REGISTRY", "Schedule", "ScheduleError", "Stage", "build", "create_schedule",
    "gemm_intrinsic", "lower", "operator_spec", "plan_conv2d", "plan_dense", "te",
    # every factory of the registry (tests/compiler/test_registry.py checks it)
    "conv2d", "dense", "elementwise",
]
