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

:func:`check_regions` is part of ``Graph.verify``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING

from openvta.isa import Config
from openvta.runtime import Program
from openvta.runtime.roles import HOST_ROLES, Role

from .errors import GraphError
from .ir import Device, DType

if TYPE_CHECKING:
    from .ir import Graph

__all__ = ["MemoryPlan", "Role", "RegionTensor", "RegionKernel", "Region", "HOST_ROLES",
           "accelerator_runs", "check_regions", "check_program"]


@dataclass(frozen=True)
class MemoryPlan:
    """The host's arena: one for the tensors passed between fused groups, reused by liveness.

    Members
    -------
    offsets, sizes :
        per planned tensor: its byte offset in the arena and its size in bytes.
    arena_bytes :
        the arena's size with reuse; ``no_reuse_bytes`` the size without (every tensor
        its own aligned buffer).
    batch, alignment :
        the batch size the sizes are for, and the byte alignment of every offset.
    """

    offsets: Mapping[str, int]
    sizes: Mapping[str, int]
    arena_bytes: int
    no_reuse_bytes: int
    batch: int = 1
    alignment: int = 64

    def __post_init__(self) -> None:
        object.__setattr__(self, "offsets", MappingProxyType(dict(self.offsets)))
        object.__setattr__(self, "sizes", MappingProxyType(dict(self.sizes)))


# Role and HOST_ROLES are the runtime's (openvta.runtime.roles): a region's tensors are
# its program's symbols, with the same roles.


@dataclass(frozen=True)
class RegionTensor:
    """A tensor of a region's program.

    Members
    -------
    name :
        the program symbol.
    layout, shape, dtype :
        its packed layout (``NCHW1n16c``, ``OIHW16o16i``, ``C1n16c``, ``NC1n16c``…), logical
        shape (the batch dimension set to ``cfg.BATCH``) and element type.
    role :
        see :class:`Role`.
    value :
        the graph value or constant it holds; ``None`` for an epilogue's per-channel vector,
        which exists only in the program.
    offset :
        its first byte in the region's arena (``None`` until memory is planned).
    """

    name: str
    layout: str
    shape: tuple[int, ...]
    dtype: DType
    role: Role
    value: str | None = None
    offset: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def nbytes(self) -> int:
        """Its size packed, in bytes."""
        from openvta.compiler.layout import packed_shape

        return math.prod(packed_shape(self.layout, self.shape)) * self.dtype.itemsize


@dataclass(frozen=True)
class RegionKernel:
    """One fused group as a compiler kernel.

    Members
    -------
    name :
        the group's node names joined by ``+``.
    group :
        the fused group it runs.
    operator :
        the compiler registry's operator (``conv2d`` or ``dense``).
    bind :
        operator symbol (``data``, ``weight``, ``bias``, epilogue operands, ``out``) → the
        region tensor bound to it.
    epilogue :
        the epilogue's stages in one line (``Epilogue.describe``).
    macs :
        multiply-accumulates per sample (the graph's count, without block padding).
    """

    name: str
    group: int
    operator: str
    bind: Mapping[str, str]
    epilogue: str
    macs: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "bind", MappingProxyType(dict(self.bind)))


@dataclass(frozen=True, eq=False)
class Region:
    """Consecutive accelerator groups run as one program (module docstring)."""

    index: int
    kernels: tuple[RegionKernel, ...]
    tensors: tuple[RegionTensor, ...]
    arena_bytes: int = 0
    no_reuse_bytes: int = 0
    program: Program | None = None
    kernel_starts: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kernels", tuple(self.kernels))
        object.__setattr__(self, "tensors", tuple(self.tensors))
        object.__setattr__(self, "kernel_starts", tuple(int(s) for s in self.kernel_starts))

    @property
    def groups(self) -> tuple[int, ...]:
        return tuple(k.group for k in self.kernels)

    def tensor(self, name: str) -> RegionTensor:
        for tensor in self.tensors:
            if tensor.name == name:
                return tensor
        raise KeyError(f"region {self.index} has no tensor {name!r}")

    def with_role(self, role: Role) -> tuple[RegionTensor, ...]:
        return tuple(t for t in self.tensors if t.role is role)

    def live(self) -> dict[str, tuple[int, int]]:
        """Tensor name → the kernels during which it is live (first, last; inclusive).

        As the compiler's program check defines it: from the start (host-supplied roles) or
        from the kernel that writes it, to the last kernel that reads it, or to the end of
        the program for an output.
        """
        writer = {k.bind["out"]: i for i, k in enumerate(self.kernels)}
        readers: dict[str, list[int]] = {}
        for index, kernel in enumerate(self.kernels):
            for symbol, name in kernel.bind.items():
                if symbol != "out":
                    readers.setdefault(name, []).append(index)
        last = len(self.kernels) - 1
        live = {}
        for t in self.tensors:
            reads = readers.get(t.name, [])
            if t.role in HOST_ROLES:
                live[t.name] = (0, max(reads, default=0))
            elif t.name in writer:
                end = last if t.role is Role.OUTPUT else max(reads, default=writer[t.name])
                live[t.name] = (writer[t.name], end)
        return live

    def describe(self) -> list[str]:
        """Lines for the graph's text dump."""
        program = f", program of {self.program.insn_count} instructions" if self.program else ""
        lines = [f"region {self.index} (groups {', '.join(map(str, self.groups))}): arena "
                 f"{self.arena_bytes} bytes, {self.no_reuse_bytes} without reuse{program}"]
        for kernel in self.kernels:
            binds = ", ".join(f"{s}={n}" for s, n in kernel.bind.items())
            lines.append(f"  kernel {kernel.name}: {kernel.operator}({binds}); {kernel.epilogue}")
        for t in self.tensors:
            at = "" if t.offset is None else f" @{t.offset}"
            lines.append(f"  {t.role.value} {t.name}: {t.dtype.value}"
                         f"[{','.join(map(str, t.shape))}] {t.layout}{at}")
        return lines


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
