"""The data the passes after fusion add to a graph: the memory plan and the accelerator regions.

:mod:`.regions` tells what they mean and re-exports them with the functions over a whole
graph; they live here, below :mod:`.ir`, because the IR's :class:`~.ir.Graph` holds them.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from openvta.runtime import Program
from openvta.runtime.roles import HOST_ROLES, Role

from .dtypes import DType

__all__ = ["MemoryPlan", "Role", "RegionTensor", "RegionKernel", "Region", "HOST_ROLES"]


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
