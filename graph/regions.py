"""What the passes after fusion add to a graph: the memory plan and the accelerator regions.

:class:`MemoryPlan` is the host's arena (``plan memory``).  An accelerator region is
consecutive accelerator groups that run as one program.

After fusion, each maximal run of consecutive fused groups placed on the accelerator is a
:class:`Region` (groups are numbered in execution order, so a run of numbers is a run of
kernels with nothing on the CPU between them).  The passes after fusion fill it in:

- ``pack layouts`` makes the regions: one :class:`RegionKernel` per group (the compiler
  operator, its symbol bindings, its epilogue) and one :class:`RegionTensor` per tensor the
  program holds in DRAM, with its packed layout, its logical shape for ``cfg.BATCH``
  samples, its dtype and :class:`Role` — activations are packed only where they enter the
  region (role ``input``) and unpacked where they leave it (``output``); what stays inside
  is ``scratch``;
- ``plan memory`` gives every tensor its byte offset in the region's arena and records
  the arena's size with and without reuse;
- ``lower`` builds the region's program (one instruction stream) and records where each
  kernel's instructions start.

:func:`check_regions` is part of :func:`~openvta.graph.verify.verify_graph`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from openvta.isa import Config

from .errors import GraphError
from .ir import Device
from .region_types import HOST_ROLES, MemoryPlan, Region, RegionKernel, RegionTensor, Role

if TYPE_CHECKING:
    from .ir import Graph

__all__ = ["MemoryPlan", "Role", "RegionTensor", "RegionKernel", "Region", "HOST_ROLES",
           "accelerator_runs", "check_regions", "check_program"]


def accelerator_runs(graph: Graph) -> list[list[int]]:
    """The runs of consecutive fused groups placed on the accelerator, in order."""
    device: dict[int, Device] = {}
    for node in graph.nodes:
        if node.group is not None and node.placement is not None:
            device[node.group] = node.placement.device
    runs: list[list[int]] = []
    for group in sorted(device):
        if device[group] is not Device.ACCEL:
            continue
        if runs and runs[-1][-1] == group - 1:
            runs[-1].append(group)
        else:
            runs.append([group])
    return runs


def check_regions(graph: Graph) -> None:
    """Raise :class:`GraphError` unless the regions match the accelerator groups and values."""
    if not graph.regions:
        return
    runs = [r.groups for r in graph.regions]
    expected = [tuple(run) for run in accelerator_runs(graph)]
    if runs != expected:
        raise GraphError(f"graph {graph.name!r}: regions must run the accelerator groups "
                         f"{expected!r}, not {runs!r}")
    for region in graph.regions:
        names = {t.name for t in region.tensors}
        for t in region.tensors:
            if t.value is not None and t.value not in graph.types:
                raise GraphError(f"graph {graph.name!r}: region {region.index} tensor {t.name!r} "
                                 f"holds {t.value!r}, which is not a value of the graph")
        for kernel in region.kernels:
            unknown = [n for n in kernel.bind.values() if n not in names]
            if unknown:
                raise GraphError(f"graph {graph.name!r}: region {region.index} kernel "
                                 f"{kernel.name!r} binds {unknown[0]!r}, which is not a tensor "
                                 "of the region")


def check_program(region: Region, cfg: Config) -> None:
    """Raise :class:`GraphError` unless ``region``'s program is for ``cfg`` and holds every
    tensor of the region as a symbol at its offset, in its layout and logical shape, with
    one start per kernel."""
    program, where = region.program, f"region {region.index} program"
    if program is None:
        raise GraphError(f"{where} is missing; lower the region first")
    if program.config != cfg:
        raise GraphError(f"{where} is for the {program.config.name} configuration, the model for "
                         f"{cfg.name}")
    for t in region.tensors:
        symbol = program.symbols.get(t.name)
        found = None if symbol is None else (symbol.addr, symbol.layout, symbol.logical_shape)
        if found != (t.offset, t.layout, t.shape):
            raise GraphError(f"{where} must hold {t.name!r} at {t.offset} in {t.layout} as "
                             f"{t.shape}, not {found!r}")
    starts = list(region.kernel_starts)
    if len(starts) != len(region.kernels) or starts != sorted(set(starts)) or not starts \
            or starts[0] != 0 or starts[-1] >= program.insn_count:
        raise GraphError(f"{where} must have one increasing instruction start per kernel below "
                         f"{program.insn_count}, not {starts!r}")
