"""Measurement as plain jobs: build one configuration, run it on a back end, check its answer.

A :class:`MeasureJob` is a frozen dataclass of JSON values and :func:`run_job` a
module-level function, so a job pickles to any ``concurrent.futures`` executor — local
processes or Dask workers, which import this module.  The program runs through
:class:`openvta.runtime.Device` (never a simulator directly) with the job's cycle
budget as its timeout, and its output is compared with the operator's numpy
reference: a wrong answer is an error, never a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openvta.compiler.ir import LoweringError
from openvta.compiler.layout import unpack_by_layout
from openvta.compiler.ops import operator_spec
from openvta.isa import Config
from openvta.runtime import Device

from .knobs import knobs_of

__all__ = ["MeasureJob", "Outcome", "run_job", "OPERAND_SEED", "ERROR_KINDS"]

#: The seed of every job's random operands: measurements do not depend on the search's seed.
OPERAND_SEED = 0

#: Which lowering pass refused a configuration → the kind of error recorded.
_LOWERING_KINDS = {"fold_uop_loops": "micro-op buffer", "check size": "instruction budget",
                   "inject_dma": "DMA pattern", "check buffers": "buffer overflow",
                   "insert_dep_tokens": "token queue depth"}

#: Every kind of error a record may hold.
ERROR_KINDS = (*sorted(set(_LOWERING_KINDS.values())), "lowering", "timeout", "wrong answer", "run error")

#: Back ends that take a ``max_cycles`` bound.
_BOUNDED = ("cycle", "rtl")


@dataclass(frozen=True)
class MeasureJob:
    """One configuration to measure; every field is JSON data.

    Members
    -------
    operator, params :
        the registry name and every factory parameter but the knobs.
    hardware :
        the :class:`~openvta.isa.Config` as its JSON object.
    knobs :
        the configuration.
    backend :
        a back end of :class:`openvta.runtime.Device` (``cycle``, ``rtl``, ``board``).
    max_cycles :
        the cycle budget (the timeout) on back ends that take one; None: the back end's own.
    max_insns :
        the most instructions a program may have (more: an ``instruction budget`` error).
    options :
        more options for the back end (``port`` and ``baud`` for a board).
    """

    operator: str
    params: dict[str, Any]
    hardware: dict[str, Any]
    knobs: dict[str, Any]
    backend: str = "cycle"
    max_cycles: int | None = None
    max_insns: int = 1 << 18
    options: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Outcome:
    """What a job found: cycles and utilization, or an error ``{"kind", "message"}``."""

    cycles: int | None = None
    utilization: float | None = None
    error: dict[str, str] | None = None


def _error(kind: str, message: str) -> Outcome:
    return Outcome(error={"kind": kind, "message": message.splitlines()[0] if message else kind})


def run_job(job: MeasureJob) -> Outcome:
    """Build, run and check one configuration (see the module docstring).

    Returns an :class:`Outcome` with the error of a configuration refused when lowered, a
    run past the cycle budget (``timeout``), a ``wrong answer`` or a back end's failure
    (``run error``); any other exception is a bug and propagates.
    """
    cfg = Config.from_dict(job.hardware)
    spec = operator_spec(job.operator)
    try:
        op = spec.factory(cfg, **job.params, **knobs_of(job.operator).factory_kwargs(dict(job.knobs)))
        inputs = spec.random_operands(op, OPERAND_SEED)
        program = op.build(inputs, max_insns=job.max_insns)
    except LoweringError as exc:
        return _error(_LOWERING_KINDS.get(exc.where, "lowering"), str(exc))
    options = dict(job.options)
    if job.max_cycles is not None and job.backend in _BOUNDED:
        options["max_cycles"] = job.max_cycles
    try:
        result = Device(job.backend, **options).run(program)
    except RuntimeError as exc:
        if type(exc).__name__ == "CycleLimitError":
            return _error("timeout", f"more than {job.max_cycles} cycles (the budget)")
        return _error("run error", f"{type(exc).__name__}: {exc}")
    symbol = program.symbols["out"]
    out = unpack_by_layout(program.read("out", result.dram), symbol.layout, symbol.logical_shape)
    expected = op.reference(inputs)
    if out.shape != expected.shape or not np.array_equal(out, expected):
        wrong = int(np.count_nonzero(out != expected)) if out.shape == expected.shape else out.size
        return _error("wrong answer", f"{wrong} of {expected.size} output elements differ from the reference")
    cycles = result.counters.get("cycles")
    if cycles is None:
        return _error("run error", f"back end {job.backend} reports no cycle count")
    peak = cfg.BATCH * cfg.BLOCK_IN * cfg.BLOCK_OUT
    macs = result.counters.get("macs")  # an image built without its counters has none: unknown, not 0
    return Outcome(cycles=int(cycles), utilization=None if macs is None else macs / (int(cycles) * peak))
