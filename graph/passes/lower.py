"""Pass: lower — each accelerator region becomes one program.

For each region, every kernel's compiler operator and its lowered schedule (as match
kernels built them: :attr:`~openvta.graph.kernel.KernelMatch.built`; built here only for a
graph read from a model file) and every tensor at the offset memory planning gave it go to
:func:`openvta.compiler.build_program_starts`: one instruction stream running the kernels
in order with a barrier between them, one DRAM arena.  Constants (weights, biases, the
epilogues' per-channel vectors) are given as data, so the compiler packs them into the
program's image once, here, at compile time; activations entering the region are left for
the executor to write before each run.

The region keeps the program and the index of each kernel's first instruction (for
per-kernel cycles).

With tuned ``plans`` (kernel key → knobs, plain data: the facade reads a tuning log),
each kernel gets the tuned plan of its key (:meth:`~openvta.graph.kernel.KernelMatch.
with_plans`: checked by the planner and lowered first, once; that build is the program's)
or keeps the default one, and its kernel in ``graph.kernels`` says which (``plan``: the
knobs; ``tuning``: tuned, no record, or refused, with ``tuning_reason``) — refused also
when a region's program does not build with its tuned plans together (then the whole
region is built with the default ones, as match kernels built them).  Placement is not
changed by tuning: ``match kernels`` decided it with the default plans.

Preconditions: regions with planned offsets (plan memory), aligned for ``cfg``.
Postconditions: every region has its program, whose symbols are the region's tensors at
their offsets, in their layouts, with their logical shapes; every kernel of
``graph.kernels`` has its plan, and with ``plans`` where it came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from openvta.compiler import Kernel, LoweringError, ProgramTensor, build_program_starts
from openvta.isa import Config
from openvta.runtime import Program

from ..errors import PassError
from ..ir import Graph
from ..kernel import KernelMatch, Plans, PlanSource
from ..regions import Region, RegionTensor, Role, check_program
from .match_kernels import group_kernels

__all__ = ["lower_regions"]

_PASS = "lower"


def _data(tensor: RegionTensor, graph: Graph, vectors: dict[str, np.ndarray]) -> np.ndarray | None:
    if tensor.role not in (Role.WEIGHT, Role.BIAS):
        return None
    if tensor.value is not None:
        return np.asarray(graph.constants[tensor.value])
    return vectors[tensor.name]


def _program_tensor(tensor: RegionTensor, data: np.ndarray | None, region: int) -> ProgramTensor:
    if tensor.offset is None:
        raise PassError(_PASS, f"region {region} tensor {tensor.name!r} has no offset; run plan "
                               "memory first")
    return ProgramTensor(tensor.name, tensor.offset, tensor.dtype.value, tensor.layout, tensor.shape,
                         tensor.role.value, data)


def _planned(region: Region, matches: dict[int, KernelMatch], cfg: Config,
             plans: Plans | None) -> dict[int, KernelMatch]:
    """Group → its kernel, built and lowered: with its tuned plan or its default one (``plans``)."""
    planned = {}
    for kernel in region.kernels:
        match = matches[kernel.group]
        if match.name != kernel.name or dict(match.bind) != dict(kernel.bind):
            raise PassError(_PASS, f"region {region.index} kernel {kernel.name!r} no longer matches "
                                   f"its group {kernel.group}; run pack layouts again")
        planned[kernel.group] = match.lowered(cfg) if plans is None else match.with_plans(cfg, plans)
    return planned


def _kernels(region: Region, planned: dict[int, KernelMatch], cfg: Config) -> list[Kernel]:
    """The compiler's kernels of ``region``: each operator with its lowered schedule."""
    return [planned[kernel.group].kernel(cfg) for kernel in region.kernels]


def _build(kernels: Sequence[Kernel], tensors: list[ProgramTensor],
           cfg: Config) -> tuple[Program, tuple[int, ...]] | str:
    """The region's program and kernel starts, or why the compiler refuses it (one line)."""
    try:
        return build_program_starts(kernels, cfg, tensors=tensors)
    except (LoweringError, ValueError) as exc:
        return str(exc).splitlines()[0]


def _lower_region(region: Region, graph: Graph, cfg: Config, matches: dict[int, KernelMatch],
                  plans: Plans | None) -> tuple[Region, dict[int, KernelMatch]]:
    """The region with its program, and its kernels with the plan each was built with."""
    vectors: dict[str, np.ndarray] = {}
    for kernel in region.kernels:
        vectors.update(matches[kernel.group].vectors)
    tensors = [_program_tensor(t, _data(t, graph, vectors), region.index) for t in region.tensors]
    planned = _planned(region, matches, cfg, plans)
    program = _build(_kernels(region, planned, cfg), tensors, cfg)
    if isinstance(program, str) and any(m.tuning is PlanSource.TUNED for m in planned.values()):
        # each tuned plan lowers alone, but not all of them in one program (its size)
        why = f"the region's program does not build with its tuned plans: {program}"
        planned = {group: replace(matches[group].lowered(cfg), tuning=PlanSource.REFUSED, tuning_reason=why)
                   if match.tuning is PlanSource.TUNED else match for group, match in planned.items()}
        program = _build(_kernels(region, planned, cfg), tensors, cfg)
    if isinstance(program, str):
        raise PassError(_PASS, f"region {region.index} ({', '.join(k.name for k in region.kernels)})"
                               f": {program}")
    lowered = replace(region, program=program[0], kernel_starts=program[1])
    check_program(lowered, cfg)  # the postcondition: what the executor relies on
    return lowered, planned


def lower_regions(graph: Graph, cfg: Config, plans: Plans | None = None) -> Graph:
    """``graph`` with one program per accelerator region (module docstring)."""
    if not graph.regions:
        return graph
    matches = group_kernels(graph, cfg)
    regions, kernels = [], dict(matches)
    for region in graph.regions:
        lowered, planned = _lower_region(region, graph, cfg, matches, plans)
        regions.append(lowered)
        kernels.update(planned)
    return graph.replace(regions=tuple(regions), kernels=kernels)
