"""Pass: buffer copies become DMA (2-D strided LOAD/STORE with zero padding).

Pre: :class:`~openvta.compiler.ir.Copy` statements over regions of a row-major
tensor (tile axes excluded).  Post: :class:`~openvta.compiler.ir.Dma` statements whose
dimensions are merged where contiguous: the innermost merged dimension is the DMA
row (``x``), the next one the rows (``y``, strided), outer ones become one instruction
each.  Padding, recognised by lowering from the copy's access pattern, may only fall
on the ``y`` and ``x`` dimensions (4 bits each, checked at code generation).
"""

from __future__ import annotations

from openvta.isa import MemoryType, Module

from ..ir import Copy, Direction, Dma, DmaDim, LoweringError, Scope, Stmt, transform
from ..lower import Lowered
from ..te import BinOp, Const, Expr

__all__ = ["inject_dma"]

_LOAD_TYPES = {Scope.INP: MemoryType.INP, Scope.WGT: MemoryType.WGT}


def inject_dma(lowered: Lowered) -> Lowered:
    """Replace every Copy by a Dma (see the module docstring)."""
    from dataclasses import replace

    return replace(lowered, body=transform(lowered.body, _copy_to_dma))


def _copy_to_dma(stmt: Stmt) -> Stmt:
    if not isinstance(stmt, Copy):
        return stmt
    merged = merge_dims(stmt)
    for dim in merged[:-2]:
        if dim.valid[0] != 0:
            raise LoweringError("inject_dma", f"{stmt.stage}: padding on an outer axis cannot be "
                                "done by DMA (only the two innermost axes may be padded)")
    if stmt.direction == Direction.STORE:
        if any(stmt.source_offset):
            raise LoweringError("inject_dma", f"{stmt.stage}: a store cannot pad")
        return Dma(stmt.stage, Module.STORE, MemoryType.OUT, stmt.buffer, stmt.tensor, merged,
                   store=True)
    if stmt.buffer.scope == Scope.ACC:
        memory_type = MemoryType.ACC if stmt.tensor.dtype == "int32" else MemoryType.ACC_8BIT
        return Dma(stmt.stage, Module.COMPUTE, memory_type, stmt.buffer, stmt.tensor, merged)
    if stmt.tensor.dtype != "int8":
        raise LoweringError("inject_dma", f"{stmt.stage}: the {stmt.buffer.scope} buffer holds "
                            f"int8 tiles, not {stmt.tensor.dtype}")
    return Dma(stmt.stage, Module.LOAD, _LOAD_TYPES[stmt.buffer.scope], stmt.buffer, stmt.tensor,
               merged)


_MAX_EXTENT = (1 << 16) - 1


def merge_dims(stmt: Copy) -> tuple[DmaDim, ...]:
    """The copy's axes, innermost first merged while the inner block covers whole axes."""
    sizes = stmt.tensor.shape[:-2]
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * sizes[d + 1]
    out: list[DmaDim] = []
    units, full = 1, False
    for d in range(len(sizes) - 1, -1, -1):
        extent, offset, size = stmt.shape[d], stmt.source_offset[d], sizes[d]
        if out and full and offset == 0 and extent * out[0].extent <= _MAX_EXTENT:
            head = out[0]
            start: Expr = BinOp("*", stmt.start[d], Const(units))
            out[0] = DmaDim(extent * head.extent, head.stride, start, (0, size * units))
            units *= size
        else:
            out.insert(0, DmaDim(extent, strides[d], stmt.start[d], (offset, offset + size)))
            units = size
        full = extent == size and offset == 0
    while len(out) < 2:
        out.insert(0, DmaDim(1, out[0].stride * out[0].valid[1] if out else 1, Const(0), (0, 1)))
    return tuple(out)
