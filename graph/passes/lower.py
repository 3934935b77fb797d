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

Preconditions: regions with planned offsets (plan memory), aligned for ``cfg``.
Postconditions: every region has its program, whose symbols are the region's tensors at
their offsets, in their layouts, with their logical shapes.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from openvta.compiler import Kernel, LoweringError, ProgramTensor, build_program_starts
from openvta.isa import Config

from ..errors import PassError
from ..ir import Graph
from ..kernel_match import KernelMatch
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


def _lower_region(region: Region, graph: Graph, cfg: Config,
                  matches: dict[int, KernelMatch]) -> Region:
    kernels: list[Kernel] = []
    vectors: dict[str, np.ndarray] = {}
    for kernel in region.kernels:
        match = matches[kernel.group]
        if match.name != kernel.name or dict(match.bind) != dict(kernel.bind):
            raise PassError(_PASS, f"region {region.index} kernel {kernel.name!r} no longer matches "
                                   f"its group {kernel.group}; run pack layouts again")
        vectors.update(match.vectors)
        kernels.append(Kernel(match.build(cfg), kernel.bind, kernel.name))
    tensors = [_program_tensor(t, _data(t, graph, vectors), region.index) for t in region.tensors]
    try:
        program, starts = build_program_starts(kernels, cfg, tensors=tensors)
    except (LoweringError, ValueError) as exc:
        raise PassError(_PASS, f"region {region.index} ({', '.join(k.name for k in region.kernels)})"
                               f": {exc}") from None
    lowered = replace(region, program=program, kernel_starts=starts)
    check_program(lowered, cfg)  # the postcondition: what the executor relies on
    return lowered


def lower_regions(graph: Graph, cfg: Config) -> Graph:
    """``graph`` with one program per accelerator region (module docstring)."""
    if not graph.regions:
        return graph
    matches = group_kernels(graph, cfg)
    return graph.replace(regions=tuple(_lower_region(r, graph, cfg, matches) for r in graph.regions))
