"""What each instruction does to the buffers and DRAM (docs/ISA.md §3), vectorized.

This is the living definition of the ISA's arithmetic: the functional simulator runs
it, and the cycle model calls the same functions at simulated time.  Each
``execute_*`` mutates a :class:`MachineState` and returns the accesses it made to
the buffers that more than one module touches (for the race checker).

Vectorization: a whole micro-op loop is one numpy computation (GEMM: one matrix
product, see :mod:`.gemm`; ALU: see :mod:`.alu`), then wrapped to 32 bits.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from openvta.isa import AluInsn, AluOp, Config, GemmInsn, MemInsn, MemoryType, layouts_of
from openvta.isa.encoding import Format

from ..errors import MemoryAccessError
from .alu import apply_alu
from .gemm import gemm_products

__all__ = ["Access", "Rows", "MachineState", "execute_load", "execute_store", "execute_gemm", "execute_alu"]


class Rows(NamedTuple):
    """Evenly spaced rows of contiguous elements: ``start + y·stride + x``, row-major."""

    start: int
    rows: int
    row_len: int
    stride: int


class Access(NamedTuple):
    """Elements of a shared resource that one instruction read or wrote."""

    resource: str  # "inp", "wgt", "out" or "dram" (DRAM in granules)
    write: bool
    #: element indices, a contiguous range, or evenly spaced rows (strided DRAM)
    elements: np.ndarray | slice | Rows


class MachineState:
    """The accelerator's buffers and its DRAM, as numpy arrays."""

    def __init__(self, cfg: Config, dram: np.ndarray) -> None:
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        self.cfg = cfg
        self.dram = np.array(dram, dtype=np.uint8)
        self.inp = np.zeros((cfg.inp_depth, b, bi), dtype=np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, bo, bi), dtype=np.int8)
        self.acc = np.zeros((cfg.acc_depth, b, bo), dtype=np.int32)
        self.out = np.zeros((cfg.out_depth, b, bo), dtype=np.int8)
        self.uop = np.zeros(cfg.uop_depth, dtype=np.uint32)
        fields = layouts_of(cfg)[Format.UOP].fields
        #: (name, shift, mask) of each micro-op field, all unsigned and in word 0
        self.uop_fields = [(f.name, f.shift, f.mask) for f in fields]
        assert not any(f.signed or f.word for f in fields)
        #: DRAM race tracking granule: the smallest element of any memory type.
        self.granule = min(cfg.elem_bytes(m) for m in MemoryType)
        self._dram_dtype: dict[MemoryType, tuple[np.dtype, tuple[int, ...]]] = {
            MemoryType.INP: (np.dtype(np.int8), (b, bi)),
            MemoryType.WGT: (np.dtype(np.int8), (bo, bi)),
            MemoryType.ACC: (np.dtype("<i4"), (b, bo)),
            MemoryType.ACC_8BIT: (np.dtype(np.int8), (b, bo)),
            MemoryType.UOP: (np.dtype("<u4"), ()),
            MemoryType.OUT: (np.dtype(np.int8), (b, bo)),
        }

    def buffer(self, memory_type: MemoryType) -> np.ndarray:
        return {
            MemoryType.INP: self.inp,
            MemoryType.WGT: self.wgt,
            MemoryType.ACC: self.acc,
            MemoryType.ACC_8BIT: self.acc,
            MemoryType.UOP: self.uop,
            MemoryType.OUT: self.out,
        }[memory_type]

    def dram_rows(self, insn: MemInsn, what: str) -> np.ndarray:
        """Byte offsets ``(y_size, row_bytes)`` of the DRAM rows ``insn`` moves."""
        elem = self.cfg.elem_bytes(insn.memory_type)
        row_bytes = insn.x_size * elem
        starts = (insn.dram_base + np.arange(insn.y_size, dtype=np.int64) * insn.x_stride) * elem
        end = int(starts[-1]) + row_bytes if insn.y_size else 0
        if end > len(self.dram):
            raise MemoryAccessError(
                f"{what} accesses DRAM bytes up to {end}, past the end of DRAM "
                f"({len(self.dram)} bytes)"
            )
        return starts

    def dram_granules(self, starts: np.ndarray, row_bytes: int) -> np.ndarray | slice | Rows:
        g = self.granule
        if len(starts) == 1 or (len(starts) > 1 and int(starts[1] - starts[0]) == row_bytes):
            # rows back to back (x_stride == x_size): one contiguous range
            first = int(starts[0]) // g
            return slice(first, first + len(starts) * (row_bytes // g))
        step = int(starts[1] - starts[0]) if len(starts) > 1 else 0
        if len(starts) and step % g == 0 and int(starts[0]) % g == 0:
            return Rows(int(starts[0]) // g, len(starts), row_bytes // g, step // g)
        per_row = np.arange(row_bytes // g, dtype=np.int64)
        return (starts[:, None] // g + per_row[None, :]).reshape(-1)


def _check_sram(state: MachineState, memory_type: MemoryType, lo: int, hi: int, what: str) -> None:
    depth = state.cfg.buffer_depth(memory_type)
    if hi > depth:
        name = "acc" if memory_type == MemoryType.ACC_8BIT else memory_type.name.lower()
        raise MemoryAccessError(
            f"{what} accesses {name} buffer elements {lo}..{hi - 1}, past its depth ({depth})"
        )


def execute_load(state: MachineState, insn: MemInsn, what: str) -> list[Access]:
    """LOAD: a 2-D strided DRAM copy with zero padding into one buffer."""
    if insn.x_size == 0:
        return []
    mt = insn.memory_type
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    lo, hi = insn.sram_base, insn.sram_base + rows * cols
    _check_sram(state, mt, lo, hi, what)
    starts = state.dram_rows(insn, what)
    elem = state.cfg.elem_bytes(mt)
    row_bytes = insn.x_size * elem
    raw = _dram_view(state.dram, starts, row_bytes)
    dtype, tile = state._dram_dtype[mt]
    data = raw.view(dtype).reshape((insn.y_size, insn.x_size) + tile)
    buffer = state.buffer(mt)
    block = buffer[lo:hi].reshape((rows, cols) + buffer.shape[1:])  # a view: written in place
    if rows * cols != insn.y_size * insn.x_size:
        block[...] = 0
    block[insn.y_pad_0 : insn.y_pad_0 + insn.y_size, insn.x_pad_0 : insn.x_pad_0 + insn.x_size] = data
    accesses = [Access("dram", False, state.dram_granules(starts, row_bytes))]
    if mt in (MemoryType.INP, MemoryType.WGT):
        accesses.append(Access(mt.name.lower(), True, slice(lo, hi)))
    return accesses


def _dram_view(dram: np.ndarray, starts: np.ndarray, row_bytes: int) -> np.ndarray:
    """The DRAM rows at byte offsets ``starts`` (evenly spaced) as a read-only ``(rows, row_bytes)`` view."""
    if len(starts) == 0:
        return dram[:0].reshape(0, row_bytes)
    step = int(starts[1] - starts[0]) if len(starts) > 1 else row_bytes
    return np.lib.stride_tricks.as_strided(dram[int(starts[0]):], (len(starts), row_bytes),
                                           (step, 1), writeable=False)


def execute_store(state: MachineState, insn: MemInsn, what: str) -> list[Access]:
    """STORE: out buffer tiles to a 2-D strided DRAM region."""
    if insn.x_size == 0:
        return []
    count = insn.y_size * insn.x_size
    lo, hi = insn.sram_base, insn.sram_base + count
    _check_sram(state, MemoryType.OUT, lo, hi, what)
    starts = state.dram_rows(insn, what)
    row_bytes = insn.x_size * state.cfg.out_elem_bytes
    data = state.out[lo:hi].reshape(insn.y_size, row_bytes).view(np.uint8)
    if insn.x_stride == insn.x_size or insn.y_size == 1:
        first = int(starts[0])
        state.dram[first : first + row_bytes * insn.y_size] = data.reshape(-1)
    else:
        state.dram[(starts[:, None] + np.arange(row_bytes)[None, :]).reshape(-1)] = data.reshape(-1)
    return [
        Access("out", False, slice(lo, hi)),
        Access("dram", True, state.dram_granules(starts, row_bytes)),
    ]


class LoopIndices(NamedTuple):
    """Buffer indices of every micro-op execution, shape ``(iter_out, iter_in, uops)``."""

    dst: np.ndarray
    src: np.ndarray
    wgt: np.ndarray | None


def loop_indices(state: MachineState, insn: GemmInsn | AluInsn, what: str) -> LoopIndices:
    """Expand the micro-op loops of ``insn`` into index arrays, checking every range."""
    cfg = state.cfg
    if insn.uop_end > cfg.uop_depth or insn.uop_bgn > insn.uop_end:
        raise MemoryAccessError(
            f"{what} uses micro-ops {insn.uop_bgn}..{insn.uop_end - 1}, outside the micro-op "
            f"buffer (depth {cfg.uop_depth})"
        )
    # decode_uops, inlined: micro-op fields are unsigned bit fields of one 32-bit word
    words = state.uop[insn.uop_bgn : insn.uop_end].astype(np.int64)
    uops = {name: (words >> shift) & mask for name, shift, mask in state.uop_fields}
    i = np.arange(insn.iter_out, dtype=np.int64)[:, None, None]
    j = np.arange(insn.iter_in, dtype=np.int64)[None, :, None]

    def expand(name: str, factor_out: int, factor_in: int, depth: int, buffer: str) -> np.ndarray:
        base = uops[name]
        # factors are unsigned: the largest index is at the last iteration of both loops
        if base.size and insn.iter_out and insn.iter_in:
            top = int(base.max()) + (insn.iter_out - 1) * factor_out + (insn.iter_in - 1) * factor_in
            if top >= depth:
                raise MemoryAccessError(
                    f"{what} reaches {buffer} buffer element {top} through {name}, "
                    f"past its depth ({depth})"
                )
        return base[None, None, :] + i * factor_out + j * factor_in

    dst = expand("dst_idx", insn.dst_factor_out, insn.dst_factor_in, cfg.acc_depth, "acc")
    if isinstance(insn, AluInsn):
        src = expand("src_idx", insn.src_factor_out, insn.src_factor_in, cfg.acc_depth, "acc")
        return LoopIndices(dst, src, None)
    src = expand("src_idx", insn.src_factor_out, insn.src_factor_in, cfg.inp_depth, "inp")
    wgt = expand("wgt_idx", insn.wgt_factor_out, insn.wgt_factor_in, cfg.wgt_depth, "wgt")
    return LoopIndices(dst, src, wgt)


def execute_gemm(state: MachineState, insn: GemmInsn, what: str) -> tuple[list[Access], int]:
    """GEMM: returns the accesses and the number of micro-op executions."""
    idx = loop_indices(state, insn, what)
    executions = idx.dst.size
    if executions == 0:
        return [], 0
    if insn.reset_reg:
        state.acc[idx.dst.reshape(-1)] = 0
        return [], executions
    assert idx.wgt is not None
    products = gemm_products(state.inp, state.wgt, idx.dst, idx.src, idx.wgt)
    _accumulate(state.acc, products.targets, products.values)
    cfg = state.cfg
    touched = as_span(unique_index(products.targets, cfg.acc_depth))
    state.out[touched] = state.acc[touched].astype(np.int8)
    accesses = [
        Access("inp", False, as_span(unique_index(products.inputs, cfg.inp_depth))),
        Access("wgt", False, as_span(unique_index(products.weights, cfg.wgt_depth))),
        Access("out", True, touched),
    ]
    return accesses, executions


def unique_index(index: np.ndarray, depth: int) -> np.ndarray:
    """The distinct values of ``index`` (all in ``[0, depth)``), sorted; O(n + depth)."""
    if index.size > depth // 8:
        seen = np.zeros(depth, dtype=bool)
        seen[index.reshape(-1)] = True
        return np.flatnonzero(seen)
    return np.unique(index)


def as_span(elements: np.ndarray) -> np.ndarray | slice:
    """Sorted distinct ``elements`` as a slice when they are one contiguous range."""
    if len(elements) and int(elements[-1]) - int(elements[0]) + 1 == len(elements):
        return slice(int(elements[0]), int(elements[-1]) + 1)
    return elements


def _accumulate(acc: np.ndarray, dst: np.ndarray, values: np.ndarray) -> None:
    """``acc[dst] += values`` with repeated destinations summed, 32-bit wrap-around."""
    order = np.argsort(dst, kind="stable")
    sorted_dst = dst[order]
    starts = np.flatnonzero(np.r_[True, sorted_dst[1:] != sorted_dst[:-1]])
    if len(starts) == len(dst):
        target, sums = dst, values
    else:
        target, sums = sorted_dst[starts], np.add.reduceat(values[order], starts, axis=0)
    acc[target] = (acc[target].astype(np.int64) + sums).astype(np.int32)


def execute_alu(state: MachineState, insn: AluInsn, what: str) -> tuple[list[Access], int]:
    """ALU: returns the accesses and the number of micro-op executions."""
    idx = loop_indices(state, insn, what)
    executions = idx.dst.size
    if executions == 0:
        return [], 0
    dst, src = idx.dst.reshape(-1), idx.src.reshape(-1)
    apply_alu(state.acc, AluOp(insn.alu_opcode), dst, None if insn.use_imm else src, insn.imm)
    touched = as_span(unique_index(dst, state.cfg.acc_depth))
    state.out[touched] = state.acc[touched].astype(np.int8)
    return [Access("out", True, touched)], executions
