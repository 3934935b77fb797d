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

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from openvta.compiler import Epilogue, LoweringError, Operator, lower, operator_spec
from openvta.compiler.kernel_key import kernel_key, plan_kwargs, plan_refusals
from openvta.compiler.ops import OperatorDescriptor
from openvta.isa import Config

__all__ = ["KernelMatch", "PlanSource", "Plans", "PLAN_NOTE", "TUNED_PLAN", "DEFAULT_PLAN", "NO_RECORD",
           "kernel_operator"]

#: Tuned plans as plain data: kernel key → knobs (``openvta.compiler.kernel_key``).
Plans = Mapping[str, Mapping[str, Any]]
#: ``Operator.notes`` entries: where the plan of a kernel built with ``plans`` came from (a
#: :class:`PlanSource`), and why a tuned plan was refused.
PLAN_NOTE = "plan"
PLAN_REASON = "plan_reason"
#: The note of a kernel built with the tuned plan of its key.
TUNED_PLAN = "tuned plan from records"
#: How the note of a kernel with its default plan begins.
DEFAULT_PLAN = "default plan"
#: The note of a kernel whose key has no tuned plan.
NO_RECORD = f"{DEFAULT_PLAN} (no record)"


class PlanSource(enum.Enum):
    """Where a kernel of a model compiled with tuned plans got its plan."""

    TUNED = "tuned"  # the tuned plan of its kernel key
    NO_RECORD = "no record"  # the default plan: no tuned plan for its key
    REFUSED = "refused"  # the default plan: the tuned one was refused (KernelMatch.tuning_reason says why)


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
    anchor :
        the anchor node's name.
    plan :
        the knobs of the schedule ``lower`` built it with (the descriptor's plan space), or
        None before lowering.
    tuning, tuning_reason :
        for a model compiled with tuned plans, where its plan came from (:class:`PlanSource`)
        and, for a refused one, why; None and ``""`` otherwise.
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
    plan: Mapping[str, Any] | None = field(default=None, compare=False)
    tuning: PlanSource | None = field(default=None, compare=False)
    tuning_reason: str = field(default="", compare=False)

    @property
    def plan_note(self) -> str | None:
        """Which plan it has, in words (``"tuned plan from records (cob=2, …)"``, ``"default
        plan (no record)"``, ``"default plan (<why>)"``), or None for a model compiled
        without tuned plans."""
        if self.tuning is None:
            return None
        if self.tuning is PlanSource.TUNED:
            shown = ", ".join(f"{name}={value}" for name, value in (self.plan or {}).items())
            return f"{TUNED_PLAN} ({shown})"
        if self.tuning is PlanSource.NO_RECORD:
            return NO_RECORD
        return f"{DEFAULT_PLAN} ({self.tuning_reason})"

    def _operator(self, cfg: Config, **schedule: Any) -> Operator:
        return kernel_operator(operator_spec(self.operator), dict(self.params), cfg, self.epilogue, **schedule)

    def _v2_default(self, cfg: Config, op: Operator) -> Operator:
        """On machine v2, the descriptor's default plan (which weighs 1 and 2 virtual threads
        by their estimated cycles) when it differs from the factory's and fits; else ``op``."""
        try:
            params = {**self.params, "shift": None, "clip": None, "epilogue": self.epilogue}
            knobs = operator_spec(self.operator).plans.default(cfg, params)
            if knobs is None:
                return op
            other = self._operator(cfg, **plan_kwargs(self.operator, knobs))
            return op if plan_refusals(other) else other
        except (LoweringError, ValueError, TypeError, KeyError):
            return op

    def build(self, cfg: Config, plans: Plans | None = None) -> Operator:
        """The scheduled operator (``LoweringError`` or ``ValueError`` if the compiler refuses).

        Without ``plans`` it has the planner's default schedule.  With ``plans`` (kernel key
        → knobs), the tuned plan of its key when there is one; the operator's
        ``notes["plan"]`` is the :class:`PlanSource` and ``notes["plan_reason"]`` why a tuned
        plan was refused — when it does not fit (the planner's checks), does not lower or is
        malformed: a tuned plan is never used unchecked.  :meth:`planned` records them.
        """
        op = self._operator(cfg)
        if cfg.has_drain:
            op = self._v2_default(cfg, op)
        if plans is None:
            return op
        knobs = plans.get(kernel_key(op))
        if knobs is None:
            op.notes[PLAN_NOTE] = PlanSource.NO_RECORD
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
            op.notes[PLAN_NOTE] = PlanSource.REFUSED
            op.notes[PLAN_REASON] = f"the tuned plan {shown} is refused: {refused[0]}"
            return op
        tuned.notes[PLAN_NOTE] = PlanSource.TUNED
        return tuned

    def planned(self, op: Operator) -> KernelMatch:
        """This kernel with the plan ``op`` (built by :meth:`build`) has, and where it came from."""
        source = op.notes.get(PLAN_NOTE)
        return replace(self, plan=operator_spec(self.operator).plans.of_operator(op),
                       tuning=source if isinstance(source, PlanSource) else None,
                       tuning_reason=str(op.notes.get(PLAN_REASON, "")))
