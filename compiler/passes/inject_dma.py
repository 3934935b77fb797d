"""Pass: buffer copies become DMA (2-D strided LOAD/STORE with zero padding, or -128 on LOAD INP).

Pre: :class:`~openvta.compiler.ir.Copy` statements over regions of a row-major
tensor (tile axes excluded).  Post: :class:`~openvta.compiler.ir.Dma` statements whose
dimensions are merged where contiguous: the innermost merged dimension is the DMA
row (``x``), the next one the rows (``y``, strided; a copy that reads every step-th row
multiplies the row stride by the step), outer ones become one instruction each; a
merged dimension stays within the ``y_size``/``x_size`` fields of
:func:`~openvta.isa.layouts_of`'s memory layout.  Padding, recognised by lowering from
the copy's access pattern, may only fall on the ``y`` and ``x`` dimensions (the pad
fields' widths are checked at code generation).
"""

from __future__ import annotations

from openvta.isa import Config, Format, MemoryType, Module, layouts_of

from ..ir import Copy, Direction, Dma, DmaDim, LoweringError, Scope, Stmt, transform
from ..lower import Lowered
from ..te import ArithOp, BinOp, Const, Expr

__all__ = ["inject_dma"]

_LOAD_TYPES = {Scope.INP: MemoryType.INP, Scope.WGT: MemoryType.WGT}


def inject_dma(lowered: Lowered) -> Lowered:
    """Replace every Copy by a Dma (see the module docstring)."""
    from dataclasses import replace

    max_extent = max_dma_extent(lowered.cfg)
    return replace(lowered, body=transform(lowered.body, lambda s: _copy_to_dma(s, max_extent)))


def max_dma_extent(cfg: Config) -> int:
    """The most rows (``y_size``) or elements per row (``x_size``) one DMA instruction moves."""
    mem = layouts_of(cfg)[Format.MEM]
    return min(mem.field("y_size").high, mem.field("x_size").high)


def _copy_to_dma(stmt: Stmt, max_extent: int) -> Stmt:
    if not isinstance(stmt, Copy):
        return stmt
    merged = merge_dims(stmt, max_extent)
    if merged[-1].stride != 1 and merged[-1].extent > 1:
        raise LoweringError("inject_dma", f"{stmt.stage}: a DMA row is contiguous: the innermost "
                            "axis cannot be read with a step")
    for dim in merged[:-2]:
        if dim.valid[0] != 0:
            raise LoweringError("inject_dma", f"{stmt.stage}: padding on an outer axis cannot be "
                                "done by DMA (only the two innermost axes may be padded)")
    if stmt.direction == Direction.STORE:
        if any(stmt.source_offset) or any(step != 1 for step in stmt.source_step):
            raise LoweringError("inject_dma", f"{stmt.stage}: a store cannot pad")
        return Dma(stmt.stage, Module.STORE, MemoryType.OUT, stmt.buffer, stmt.tensor, merged,
                   store=True)
    if stmt.pad_value and stmt.buffer.scope != Scope.INP:
        raise LoweringError("inject_dma", f"{stmt.stage}: only the inp buffer can be padded with "
                            f"{stmt.pad_value} (LOAD INP's pad_min); pad the {stmt.buffer.scope} buffer with 0")
    if stmt.buffer.scope == Scope.ACC:
        memory_type = MemoryType.ACC if stmt.tensor.dtype == "int32" else MemoryType.ACC_8BIT
        return Dma(stmt.stage, Module.COMPUTE, memory_type, stmt.buffer, stmt.tensor, merged)
    if stmt.tensor.dtype != "int8":
        raise LoweringError("inject_dma", f"{stmt.stage}: the {stmt.buffer.scope} buffer holds "
                            f"int8 tiles, not {stmt.tensor.dtype}")
    return Dma(stmt.stage, Module.LOAD, _LOAD_TYPES[stmt.buffer.scope], stmt.buffer, stmt.tensor,
               merged, pad_value=stmt.pad_value)


def merge_dims(stmt: Copy, max_extent: int) -> tuple[DmaDim, ...]:
    """The copy's axes, innermost first merged while the inner block covers whole axes and
    the merged extent stays within ``max_extent``; an axis read with a step (every step-th
    index) is never merged, its DMA stride is step × the tensor's."""
    sizes = stmt.tensor.shape[:-2]
    steps = stmt.source_step or (1,) * len(sizes)
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * sizes[d + 1]
    out: list[DmaDim] = []
    units, full = 1, False
    for d in range(len(sizes) - 1, -1, -1):
        extent, offset, size, step = stmt.shape[d], stmt.source_offset[d], sizes[d], steps[d]
        if out and full and offset == 0 and step == 1 and extent * out[0].extent <= max_extent:
            head = out[0]
            start: Expr = BinOp(ArithOp.MUL, stmt.start[d], Const(units))
            out[0] = DmaDim(extent * head.extent, head.stride, start, (0, size * units))
            units *= size
        else:
            # valid: the copy coordinates that fall inside the tensor (-(-size // step) of them)
            out.insert(0, DmaDim(extent, strides[d] * step, stmt.start[d], (offset, offset - (-size // step))))
            units = size
        full = extent == size and offset == 0 and step == 1
    while len(out) < 2:
        out.insert(0, DmaDim(1, out[0].stride * out[0].valid[1] if out else 1, Const(0), (0, 1)))
    return tuple(out)
