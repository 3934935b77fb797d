"""The kernel of a fused accelerator group, as a value the graph keeps: :class:`KernelMatch`.

``match kernels`` decides once which compiler operator computes each accelerator group —
its operator, parameters, epilogue, operand binding — builds that operator with its default
plan and lowers it, and leaves the answer in the graph (``Graph.kernels``, group → match),
as Relay's FuseOps leaves a primitive function; the passes after it (pack layouts, lower),
the executor, ``tune_model`` and the summary read it and never match, build or lower again.
``lower`` replaces the default plan by a tuned one where it is given one and it is taken
(built and lowered once, to check it).  The model file stores the match and its plan
(``openvta-model/2``), plain data; the built operator and its loop IR are not saved, and a
loaded kernel builds them again when asked.

The default plan is the operator's: its descriptor's
(:meth:`~openvta.compiler.ops.OperatorDescriptor.default_plan`, which on machine v2 weighs 1
and 2 virtual threads by their estimated cycles), not the graph's.

This module imports no other module of the graph level, so that the IR may hold it.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from openvta.compiler import Epilogue, Kernel, LoweringError, Operator, lower, operator_spec
from openvta.compiler.kernel_key import kernel_key, plan_refusals
from openvta.compiler.lower import Lowered
from openvta.compiler.ops import OperatorDescriptor
from openvta.isa import Config

__all__ = ["BuiltKernel", "KernelMatch", "PlanSource", "Plans", "TUNED_PLAN", "DEFAULT_PLAN", "NO_RECORD",
           "kernel_operator"]

#: Tuned plans as plain data: kernel key → knobs (``openvta.compiler.kernel_key``).
Plans = Mapping[str, Mapping[str, Any]]
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


def kernel_operator(descriptor: OperatorDescriptor, params: Mapping[str, Any], cfg: Config, epilogue: Epilogue,
                    **schedule: Any) -> Operator:
    """The operator ``descriptor`` builds for a graph kernel: its parameters, no shift or clip
    of its own, the kernel's ``epilogue`` after the bias; ``schedule`` (the factory keywords of
    a plan) or, without, the factory's own plan."""
    return descriptor.factory(cfg, **params, shift=None, clip=None, epilogue=epilogue, **schedule)


@dataclass(frozen=True, eq=False)
class BuiltKernel:
    """A kernel's operator scheduled with one plan, and that schedule lowered for ``operator.cfg``
    (what ``lower`` hands the compiler: :class:`openvta.compiler.Kernel` ``(operator, …, lowered)``).

    Members
    -------
    operator :
        the scheduled operator.
    lowered :
        ``lower(operator.schedule, operator.cfg)``: its loop IR, every compiler pass run.
    """

    operator: Operator
    lowered: Lowered

    @classmethod
    def of(cls, operator: Operator) -> BuiltKernel:
        """``operator`` and its lowered schedule (``LoweringError`` if the compiler refuses it)."""
        return cls(operator, lower(operator.schedule, operator.cfg))


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
        the knobs of the schedule it is built with (the descriptor's plan space), or None
        before it is built.
    tuning, tuning_reason :
        for a model compiled with tuned plans, where its plan came from (:class:`PlanSource`)
        and, for a refused one, why; None and ``""`` otherwise.
    built :
        the operator with that plan and its lowered schedule (:meth:`lowered`), or None: not
        built yet, or read from a model file (not saved: it is built again when asked).
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
    built: BuiltKernel | None = field(default=None, compare=False, repr=False)

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

    def _operator(self, cfg: Config, knobs: Mapping[str, Any] | None = None) -> Operator:
        """The operator with ``knobs``, or with the descriptor's default plan."""
        descriptor = operator_spec(self.operator)
        params = {**self.params, "shift": None, "clip": None, "epilogue": self.epilogue}
        if knobs is None:
            knobs = descriptor.default_plan(cfg, params)
        schedule = {} if knobs is None else descriptor.plan_kwargs(knobs)
        return kernel_operator(descriptor, self.params, cfg, self.epilogue, **schedule)

    def _with(self, built: BuiltKernel, **changes: Any) -> KernelMatch:
        knobs = operator_spec(self.operator).plans.of_operator(built.operator)
        return replace(self, built=built, plan=knobs, **changes)

    def _built_for(self, cfg: Config) -> BuiltKernel | None:
        return self.built if self.built is not None and self.built.operator.cfg == cfg else None

    def lowered(self, cfg: Config) -> KernelMatch:
        """This kernel built with its default plan and lowered for ``cfg``: itself when it is
        built for ``cfg`` already (``match kernels`` leaves every kernel so).

        Raises
        ------
        LoweringError, ValueError
            when the compiler refuses it (no tiling fits, a parameter, the DRAM address space).
        """
        if self._built_for(cfg) is not None:
            return self
        return self._with(BuiltKernel.of(self._operator(cfg)))

    def kernel(self, cfg: Config) -> Kernel:
        """The compiler's kernel (:func:`openvta.compiler.build_program`): the operator it is
        built with, its binding and its lowered schedule (built now if it is not, as
        :meth:`lowered`)."""
        built = self._built_for(cfg) or BuiltKernel.of(self._operator(cfg))
        return Kernel(built.operator, self.bind, self.name, built.lowered)

    def build(self, cfg: Config) -> Operator:
        """The scheduled operator for ``cfg``: the one it is built with (:attr:`built`), or one
        with its default plan (``LoweringError`` or ``ValueError`` if the compiler refuses)."""
        built = self._built_for(cfg)
        return built.operator if built is not None else self._operator(cfg)

    def with_plans(self, cfg: Config, plans: Plans) -> KernelMatch:
        """This kernel with the tuned plan of its key in ``plans`` (kernel key → knobs), built
        and lowered, or with its default plan, and where its plan came from (:attr:`tuning`).

        A tuned plan is never used unchecked: it is refused, with the reason in
        :attr:`tuning_reason`, when it is malformed, the planner's checks refuse it or it does
        not lower.  The default plan's build is the one it has (:meth:`lowered`).
        """
        default = self.lowered(cfg)
        knobs = plans.get(kernel_key(default.build(cfg)))
        if knobs is None:
            return replace(default, tuning=PlanSource.NO_RECORD, tuning_reason="")
        shown = ", ".join(f"{name}={value}" for name, value in knobs.items())
        try:
            tuned = self._operator(cfg, knobs)
            refused = plan_refusals(tuned)
            if not refused:
                return self._with(BuiltKernel.of(tuned), tuning=PlanSource.TUNED, tuning_reason="")
        except (LoweringError, ValueError, TypeError) as exc:  # a malformed record's knobs too
            refused = [str(exc).splitlines()[0]]
        return replace(default, tuning=PlanSource.REFUSED,
                       tuning_reason=f"the tuned plan {shown} is refused: {refused[0]}")
