"""TVM-style compiler: tensor expressions, schedules, lowering passes, operators.

``te`` says what to compute, ``create_schedule`` and the :class:`Stage` primitives say
how, :func:`lower` runs the pass pipeline and :func:`build` emits the program.
"""

from . import te
from .intrin import Intrinsic, gemm_intrinsic
from .ir import LoweringError
from .ops.common import Operator
from .ops.conv2d import conv2d, plan_conv2d
from .ops.dense import dense, elementwise, plan_dense
from .pipeline import PASSES, build, lower
from .schedule import Schedule, ScheduleError, Stage, create_schedule

__all__ = [
    "Intrinsic", "LoweringError", "Operator", "PASSES", "Schedule", "ScheduleError", "Stage",
    "build", "conv2d", "create_schedule", "dense", "elementwise", "gemm_intrinsic", "lower",
    "plan_conv2d", "plan_dense", "te",
]
