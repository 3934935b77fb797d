"""Pass: lower — each accelerator region becomes one program.

For each region, every kernel's compiler operator (its group matched again:
:func:`~openvta.graph.passes.match_kernels.group_kernels`, deterministic) and every tensor
at the offset memory planning gave it go to :func:`openvta.compiler.build_program_starts`:
one instruction stream running the kernels in order with a barrier between them, one
DRAM arena.  Constants (weights, biases, the epilogues' per-channel vectors) are given as
data, so the compiler packs them into the program's image once, here, at compile time;
activations entering the region are left for the executor to write before each run.

The region keeps the program and the index of each kernel's first instruction (for
per-kernel cycles).

With tuned ``plans`` (kernel key → knobs, plain data: the facade reads a tuning log),
each kernel gets the tuned plan of its key (:meth:`~openvta.graph.kernel_match.
KernelMatch.build`: checked by the planner and lowered first) or keeps the default one,
and its anchor node's placement reason says which, after a ``"; "``: ``tuned plan from
records (cob=2, …)``, ``default plan (no record)``, or the default plan and why the tuned
one was refused — also when a region's program does not build with its tuned plans
together (then the whole region is built with the default ones).  Placement is not
changed by tuning: ``match kernels`` decided it with the default plans.

Preconditions: regions with planned offsets (plan memory), aligned for ``cfg``.
Postconditions: every region has its program, whose symbols are the region's tensors at
their offsets, in their layouts, with their logical shapes; with ``plans``, every
kernel's anchor says which plan it has.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from openvta.compiler import Kernel, LoweringError, ProgramTensor, build_program_starts
from openvta.isa import Config
from openvta.runtime import Program

from ..errors import PassError
from ..ir import Graph, Placement
from ..kernel_match import DEFAULT_PLAN, PLAN_NOTE, TUNED_PLAN, KernelMatch, Plans
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


def _kernels(region: Region, matches: dict[int, KernelMatch], cfg: Config,
             plans: Plans | None) -> list[Kernel]:
    kernels = []
    for kernel in region.kernels:
        match = matches[kernel.group]
        if match.name != kernel.name or dict(match.bind) != dict(kernel.bind):
            raise PassError(_PASS, f"region {region.index} kernel {kernel.name!r} no longer matches "
                                   f"its group {kernel.group}; run pack layouts again")
        kernels.append(Kernel(match.build(cfg, plans), kernel.bind, kernel.name))
    return kernels


def _build(kernels: Sequence[Kernel], tensors: list[ProgramTensor],
           cfg: Config) -> tuple[Program, tuple[int, ...]] | str:
    """The region's program and kernel starts, or why the compiler refuses it (one line)."""
    try:
        return build_program_starts(kernels, cfg, tensors=tensors)
    except (LoweringError, ValueError) as exc:
        return str(exc).splitlines()[0]


def _lower_region(region: Region, graph: Graph, cfg: Config, matches: dict[int, KernelMatch],
                  plans: Plans | None) -> tuple[Region, dict[str, str]]:
    """The region with its program, and each kernel's plan note by anchor node (with ``plans``)."""
    vectors: dict[str, np.ndarray] = {}
    for kernel in region.kernels:
        vectors.update(matches[kernel.group].vectors)
    tensors = [_program_tensor(t, _data(t, graph, vectors), region.index) for t in region.tensors]
    kernels = _kernels(region, matches, cfg, plans)
    anchors = [matches[k.group].anchor for k in region.kernels]
    notes = {a: str(k.operator.notes[PLAN_NOTE]) for a, k in zip(anchors, kernels) if PLAN_NOTE in k.operator.notes}
    built = _build(kernels, tensors, cfg)
    if isinstance(built, str) and any(note.startswith(TUNED_PLAN) for note in notes.values()):
        # each tuned plan lowers alone, but not all of them in one program (its size)
        why = built
        built = _build(_kernels(region, matches, cfg, None), tensors, cfg)
        notes = {a: f"{DEFAULT_PLAN} (the region's program does not build with its tuned plans: {why})"
                 if note.startswith(TUNED_PLAN) else note for a, note in notes.items()}
    if isinstance(built, str):
        raise PassError(_PASS, f"region {region.index} ({', '.join(k.name for k in region.kernels)})"
                               f": {built}")
    lowered = replace(region, program=built[0], kernel_starts=built[1])
    check_program(lowered, cfg)  # the postcondition: what the executor relies on
    return lowered, notes


def _noted(graph: Graph, notes: dict[str, str]) -> Graph:
    """``graph`` with each anchor's plan note after its placement reason."""
    nodes = tuple(replace(n, placement=Placement(n.placement.device, f"{n.placement.reason}; {notes[n.name]}"))
                  if n.name in notes and n.placement is not None else n for n in graph.nodes)
    return graph.replace(nodes=nodes)


def lower_regions(graph: Graph, cfg: Config, plans: Plans | None = None) -> Graph:
    """``graph`` with one program per accelerator region (module docstring)."""
    if not graph.regions:
        return graph
    matches = group_kernels(graph, cfg)
    regions, notes = [], {}
    for region in graph.regions:
        lowered, found = _lower_region(region, graph, cfg, matches, plans)
        regions.append(lowered)
        notes.update(found)
    return _noted(graph, notes).replace(regions=tuple(regions))
