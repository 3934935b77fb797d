"""The kernel of a fused accelerator group, as a value the graph keeps: :class:`KernelMatch`.

``match kernels`` decides once which compiler operator computes each accelerator group —
its operator, parameters, epilogue, operand binding — and leaves the answer in the graph
(``Graph.kernels``, group → match), as Relay's FuseOps leaves a primitive function; the
passes after it (pack layouts, lower), the executor, ``tune_model`` and the summary read
it and never match again.  ``lower`` adds the plan each kernel was built with.  The model
file stores it (``openvta-model/2``).

This module imports no other module of the graph level, so that the IR may hold it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from openvta.compiler import Epilogue, LoweringError, Operator, lower, operator_spec
from openvta.compiler.kernel_key import kernel_key, plan_kwargs, plan_refusals
from openvta.compiler.ops import OperatorDescriptor
from openvta.isa import Config

__all__ = ["KernelMatch", "Plans", "PLAN_NOTE", "TUNED_PLAN", "DEFAULT_PLAN", "NO_RECORD", "kernel_operator"]

#: Tuned plans as plain data: kernel key → knobs (``openvta.compiler.kernel_key``).
Plans = Mapping[str, Mapping[str, Any]]
#: ``Operator.notes`` entry saying which plan a kernel built with ``plans`` has.
PLAN_NOTE = "plan"
#: The note of a kernel built with the tuned plan of its key.
TUNED_PLAN = "tuned plan from records"
#: How the note of a kernel with its default plan begins.
DEFAULT_PLAN = "default plan"
#: The note of a kernel whose key has no tuned plan.
NO_RECORD = f"{DEFAULT_PLAN} (no record)"


def kernel_operator(descriptor: OperatorDescriptor, params: dict[str, Any], cfg: Config, epilogue: Epilogue,
                    **schedule: Any) -> Operator:
    """The operator ``descriptor`` builds for a graph kernel: its parameters, no shift or clip
    of its own, the kernel's ``epilogue`` after the bias."""
    return descriptor.factory(cfg, **params, shift=None, clip=None, epilogue=epilogue, **schedule)


@dataclass(frozen=True, eq=False)
class KernelMatch:
    """A group as a compiler operator.

    Members
    -------
    group, name :
        the fused group and its node names joined by ``+``.
    operator :
        ``conv2d`` or ``dense``.
    params :
        the factory's shape parameters (for ``cfg.BATCH`` samples) and ``bias``.
    epilogue :
        the stages after the bias add.
    bind :
        operator symbol → graph value or constant, or (channel vectors) a fresh name.
    vectors :
        fresh name → the int32 ``(channels,)`` contents of each channel vector.
    macs :
        the anchor's multiply-accumulates per sample.
    adds :
        the Add nodes of the chain (residual adds), in order.
    """

    group: int
    name: str
    operator: str
    params: Mapping[str, int | bool]
    epilogue: Epilogue
    bind: Mapping[str, str]
    vectors: Mapping[str, np.ndarray]
    macs: int
    adds: tuple[str, ...] = ()
    anchor: str = ""

    def _operator(self, cfg: Config, **schedule: Any) -> Operator:
        return kernel_operator(operator_spec(self.operator), dict(self.params), cfg, self.epilogue, **schedule)

    def build(self, cfg: Config, plans: Plans | None = None) -> Operator:
        """The scheduled operator (``LoweringError`` or ``ValueError`` if the compiler refuses).

        Without ``plans`` it has the planner's default schedule.  With ``plans`` (kernel key
        → knobs), the tuned plan of its key when there is one, the operator's
        ``notes["plan"]`` saying which: :data:`TUNED_PLAN` and the knobs, :data:`NO_RECORD`,
        or — when the tuned plan does not fit (the planner's checks), does not lower or is
        malformed — the default plan and why it was not used: a tuned plan is never used
        unchecked.
        """
        op = self._operator(cfg)
        if plans is None:
            return op
        knobs = plans.get(kernel_key(op))
        if knobs is None:
            op.notes[PLAN_NOTE] = NO_RECORD
            return op
        shown = ", ".join(f"{name}={value}" for name, value in knobs.items())
        try:
            tuned = self._operator(cfg, **plan_kwargs(self.operator, knobs))
            refused = plan_refusals(tuned)
            if not refused:
                lower(tuned.schedule, cfg)
        except (LoweringError, ValueError, TypeError) as exc:
            refused = [str(exc).splitlines()[0]]
        if refused:
            op.notes[PLAN_NOTE] = f"{DEFAULT_PLAN} (the tuned plan {shown} is refused: {refused[0]})"
            return op
        tuned.notes[PLAN_NOTE] = f"{TUNED_PLAN} ({shown})"
        return tuned
