"""What each instruction does to the buffers and DRAM (docs/ISA.md §3), vectorized.

This is the living definition of the ISA's arithmetic: the functional simulator runs
it, and the cycle model calls the same functions at simulated time.  Each
``execute_*`` mutates a :class:`MachineState` and returns the accesses it made to
the buffers that more than one module touches (for the race checker).

Vectorization: a whole micro-op loop is one numpy computation (GEMM: one matrix
product, see :mod:`.gemm`; ALU: see :mod:`.alu`), then wrapped to 32 bits.  All that
depends on the indices alone (the index grids, the products' layout, the touched
tiles, the accesses) is a plan made once per distinct instruction fields and micro-op
words (:func:`loop_plan`) and kept in the :class:`MachineState`.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from openvta.isa import (INT8_MIN, AluInsn, AluOp, Config, DrainError, GemmInsn, MemInsn, MemoryType, decode_header,
                         dram_type, drain_tiles, epi_base_of, layouts_of, reads_residual, stages_fit)
from openvta.isa.encoding import Format

from ..errors import MemoryAccessError
from .alu import Index, alu_waves, as_index, run_alu
from .gemm import GemmPlan, Grid, plan_gemm

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

    def __init__(self, cfg: Config, dram: np.ndarray, plans: dict[tuple, _LoopPlan] | None = None) -> None:
        b, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
        self.cfg = cfg
        self.dram = np.array(dram, dtype=np.uint8)
        self.inp = np.zeros((cfg.inp_depth, b, bi), dtype=np.int8)
        self.wgt = np.zeros((cfg.wgt_depth, bo, bi), dtype=np.int8)
        self.acc = np.zeros((cfg.acc_depth, b, bo), dtype=np.int32)
        self.out = np.zeros((cfg.out_depth, b, bo), dtype=np.int8)
        self.uop = np.zeros(cfg.uop_depth, dtype=np.uint32)
        #: machine v2's epi buffer (empty without a drain unit), int32 words like acc tiles
        self.epi = np.zeros((cfg.epi_depth, b, bo), dtype=np.int32)
        fields = layouts_of(cfg)[Format.UOP].fields
        #: (name, shift, mask) of each micro-op field, all unsigned and in word 0
        self.uop_fields = [(f.name, f.shift, f.mask) for f in fields]
        assert not any(f.signed or f.word for f in fields)
        #: DRAM race tracking granule: the smallest element of any memory type.
        self.granule = min(cfg.elem_bytes(m) for m in MemoryType)
        #: loop plans of GEMM and ALU instructions, by fields and micro-ops (see :func:`loop_plan`);
        #: ``plans`` shares them with other states of the same configuration
        self.plans: dict[tuple, _LoopPlan] = {} if plans is None else plans
        self._buffers = {MemoryType.INP: self.inp, MemoryType.WGT: self.wgt, MemoryType.ACC: self.acc,
                         MemoryType.ACC_8BIT: self.acc, MemoryType.UOP: self.uop, MemoryType.OUT: self.out,
                         MemoryType.EPI: self.epi, MemoryType.EPI_8BIT: self.epi}
        self._elem_bytes = {m: cfg.elem_bytes(m) for m in MemoryType}
        self._dram_dtype: dict[MemoryType, tuple[np.dtype, tuple[int, ...]]] = {
            MemoryType.INP: (np.dtype(np.int8), (b, bi)),
            MemoryType.WGT: (np.dtype(np.int8), (bo, bi)),
            MemoryType.ACC: (np.dtype("<i4"), (b, bo)),
            MemoryType.ACC_8BIT: (np.dtype(np.int8), (b, bo)),
            MemoryType.UOP: (np.dtype("<u4"), ()),
            MemoryType.OUT: (np.dtype(np.int8), (b, bo)),
            MemoryType.EPI: (np.dtype("<i4"), (b, bo)),
            MemoryType.EPI_8BIT: (np.dtype(np.int8), (b, bo)),
        }

    def buffer(self, memory_type: MemoryType) -> np.ndarray:
        return self._buffers[memory_type]

    def dram_rows(self, insn: MemInsn, what: str) -> tuple[int, int, int]:
        """``start, step, row_bytes``: the byte offsets of the DRAM rows ``insn`` moves."""
        elem = self._elem_bytes[dram_type(insn.opcode, insn.memory_type)]
        row_bytes = insn.x_size * elem
        start, step = insn.dram_base * elem, insn.x_stride * elem
        end = start + (insn.y_size - 1) * step + row_bytes if insn.y_size else 0
        if end > len(self.dram):
            raise MemoryAccessError(
                f"{what} accesses DRAM bytes up to {end}, past the end of DRAM "
                f"({len(self.dram)} bytes)"
            )
        return start, step, row_bytes

    def dram_view(self, start: int, step: int, rows: int, row_bytes: int) -> np.ndarray:
        """The DRAM bytes of ``rows`` rows of ``row_bytes`` ``step`` apart, as a writeable view."""
        if rows == 0:
            return self.dram[:0].reshape(0, row_bytes)
        return np.ndarray((rows, row_bytes), np.uint8, self.dram, start, (step, 1))

    def dram_granules(self, start: int, step: int, rows: int, row_bytes: int) -> np.ndarray | slice | Rows:
        g = self.granule
        if rows == 1 or (rows > 1 and step == row_bytes):
            # rows back to back (x_stride == x_size): one contiguous range
            first = start // g
            return slice(first, first + rows * (row_bytes // g))
        step = step if rows > 1 else 0
        if rows and step % g == 0 and start % g == 0:
            return Rows(start // g, rows, row_bytes // g, step // g)
        starts = start + np.arange(rows, dtype=np.int64) * step
        per_row = np.arange(row_bytes // g, dtype=np.int64)
        return (starts[:, None] // g + per_row[None, :]).reshape(-1)


def _check_sram(state: MachineState, memory_type: MemoryType, lo: int, hi: int, what: str) -> None:
    # both ends: a drain descriptor's residual base is a signed int32, and numpy would read
    # a negative start from the buffer's end (instruction fields are unsigned)
    depth = state.cfg.buffer_depth(memory_type)
    if lo < 0 or hi > depth:
        name = {MemoryType.ACC_8BIT: "acc", MemoryType.EPI_8BIT: "epi"}.get(memory_type, memory_type.name.lower())
        where = "before its first element (0)" if lo < 0 else f"past its depth ({depth})"
        raise MemoryAccessError(f"{what} accesses {name} buffer elements {lo}..{hi - 1}, {where}")


def execute_load(state: MachineState, insn: MemInsn, what: str) -> list[Access]:
    """LOAD: a 2-D strided DRAM copy with zero padding (-128 with ``pad_min``) into one buffer."""
    if insn.x_size == 0:
        return []
    mt = insn.memory_type
    y, x = insn.y_size, insn.x_size
    rows = insn.y_pad_0 + y + insn.y_pad_1
    cols = insn.x_pad_0 + x + insn.x_pad_1
    lo, hi = insn.sram_base, insn.sram_base + rows * cols
    _check_sram(state, mt, lo, hi, what)
    start, step, row_bytes = state.dram_rows(insn, what)
    dtype, tile = state._dram_dtype[mt]
    data = state.dram_view(start, step, y, row_bytes).view(dtype).reshape((y, x) + tile)
    buffer = state._buffers[mt]
    block = buffer[lo:hi].reshape((rows, cols) + buffer.shape[1:])  # a view: written in place
    if rows * cols != y * x:
        block[...] = INT8_MIN if insn.pad_min else 0
    block[insn.y_pad_0 : insn.y_pad_0 + y, insn.x_pad_0 : insn.x_pad_0 + x] = data
    dram = Access("dram", False, state.dram_granules(start, step, y, row_bytes))
    if mt == MemoryType.INP or mt == MemoryType.WGT:
        return [dram, Access("inp" if mt == MemoryType.INP else "wgt", True, slice(lo, hi))]
    if state.cfg.has_drain and (mt == MemoryType.ACC or mt == MemoryType.ACC_8BIT):
        # machine v2: a STORE ACC (store module) reads and zeroes acc tiles, so a LOAD ACC's
        # write of them is shared, in the out/acc index space like GEMM's and ALU's writes
        return [dram, Access("out", True, slice(lo, hi))]
    return [dram]


def _drain(state: MachineState, insn: MemInsn, lo: int, hi: int, what: str) -> np.ndarray:
    """Machine v2's drain unit on acc tiles ``lo..hi`` (:mod:`openvta.isa.drain`): the int8
    tiles it writes; the acc tiles are zeroed."""
    base = epi_base_of(insn)
    _check_sram(state, MemoryType.EPI, base, base + 1, f"{what} (its descriptor header)")
    try:
        stages, res_base, stride = decode_header(state.epi[base], f"{what}: descriptor epi[{base}]")
    except DrainError as exc:
        raise MemoryAccessError(str(exc)) from None
    why = stages_fit(state.cfg, stages)
    if why is not None:
        raise MemoryAccessError(f"{what}: descriptor epi[{base}] has {why}")
    words_at = base + stride * np.arange(1, len(stages) + 1, dtype=np.int64)
    if len(stages) and (stride < 0 or words_at[-1] >= state.cfg.epi_depth):
        raise MemoryAccessError(f"{what}: descriptor epi[{base}] reads operand words up to epi[{int(words_at[-1])}], "
                                f"outside the epi buffer ({state.cfg.epi_depth} words)")
    lanes = state.cfg.BATCH * state.cfg.BLOCK_OUT
    count = hi - lo
    residual = None
    if reads_residual(stages):
        _check_sram(state, MemoryType.EPI, res_base, res_base + count, f"{what} (its residual)")
        residual = state.epi[res_base : res_base + count].reshape(count, lanes)
    words = state.epi[words_at].reshape(len(stages), lanes)
    result = drain_tiles(state.acc[lo:hi].reshape(count, lanes), residual, stages, words)
    # the low 8 bits, copied before the tiles are zeroed: with no stage on X, ``result`` is
    # a view of the accumulator
    tiles = result.astype(np.int8).reshape((count,) + state.out.shape[1:])
    state.acc[lo:hi] = 0
    return tiles


def execute_store(state: MachineState, insn: MemInsn, what: str) -> list[Access]:
    """STORE: out buffer tiles (or, draining, acc tiles through the drain unit) to a 2-D
    strided DRAM region."""
    if insn.x_size == 0:
        return []
    y = insn.y_size
    lo, hi = insn.sram_base, insn.sram_base + y * insn.x_size
    drains = insn.memory_type == MemoryType.ACC
    _check_sram(state, MemoryType.ACC if drains else MemoryType.OUT, lo, hi, what)
    start, step, row_bytes = state.dram_rows(insn, what)
    tiles = _drain(state, insn, lo, hi, what) if drains else state.out[lo:hi]
    data = tiles.reshape(y, row_bytes).view(np.uint8)
    if insn.x_stride == insn.x_size or y == 1:
        state.dram[start : start + row_bytes * y] = data.reshape(-1)
    elif step >= row_bytes:  # rows apart: a strided view
        state.dram_view(start, step, y, row_bytes)[...] = data
    else:  # overlapping rows: the later row wins, as in program order
        starts = start + np.arange(y, dtype=np.int64) * step
        state.dram[(starts[:, None] + np.arange(row_bytes)[None, :]).reshape(-1)] = data.reshape(-1)
    # a drain reads and zeroes the accumulator tiles: a write of their index space ("out")
    return [
        Access("out", drains, slice(lo, hi)),
        Access("dram", True, state.dram_granules(start, step, y, row_bytes)),
    ]


class LoopIndices(NamedTuple):
    """Buffer indices of every micro-op execution, shape ``(iter_out, iter_in, uops)``."""

    dst: np.ndarray
    src: np.ndarray
    wgt: np.ndarray | None


def loop_indices(state: MachineState, insn: GemmInsn | AluInsn, what: str) -> LoopIndices:
    """Expand the micro-op loops of ``insn`` into index arrays, checking every range."""
    dst, src, wgt = loop_grids(state, insn, what)
    return LoopIndices(dst.full(), src.full(), None if wgt is None else wgt.full())


def loop_grids(state: MachineState, insn: GemmInsn | AluInsn, what: str) -> tuple[Grid, Grid, Grid | None]:
    """The micro-op loops of ``insn`` as unexpanded :class:`~.gemm.Grid` s (dst, src, wgt),
    checking every range."""
    cfg = state.cfg
    if insn.uop_bgn < 0 or insn.uop_end > cfg.uop_depth or insn.uop_bgn > insn.uop_end:
        raise MemoryAccessError(
            f"{what} uses micro-ops {insn.uop_bgn}..{insn.uop_end - 1}, outside the micro-op "
            f"buffer (depth {cfg.uop_depth})"
        )
    # decode_uops, inlined: micro-op fields are unsigned bit fields of one 32-bit word
    words = state.uop[insn.uop_bgn : insn.uop_end].astype(np.int64)
    uops = {name: (words >> shift) & mask for name, shift, mask in state.uop_fields}
    iters = (insn.iter_out, insn.iter_in)

    def expand(name: str, factor_out: int, factor_in: int, depth: int, buffer: str) -> Grid:
        base = uops[name]
        # micro-op fields and factors are unsigned: the smallest index is base.min() >= 0, the
        # largest at the last iteration of both loops
        if base.size and insn.iter_out and insn.iter_in:
            top = int(base.max()) + (insn.iter_out - 1) * factor_out + (insn.iter_in - 1) * factor_in
            if top >= depth:
                raise MemoryAccessError(
                    f"{what} reaches {buffer} buffer element {top} through {name}, "
                    f"past its depth ({depth})"
                )
        return Grid(base, factor_out, factor_in, iters)

    dst = expand("dst_idx", insn.dst_factor_out, insn.dst_factor_in, cfg.acc_depth, "acc")
    if isinstance(insn, AluInsn):
        src = expand("src_idx", insn.src_factor_out, insn.src_factor_in, cfg.acc_depth, "acc")
        return dst, src, None
    src = expand("src_idx", insn.src_factor_out, insn.src_factor_in, cfg.inp_depth, "inp")
    wgt = expand("wgt_idx", insn.wgt_factor_out, insn.wgt_factor_in, cfg.wgt_depth, "wgt")
    return dst, src, wgt


class _LoopPlan(NamedTuple):
    """What a GEMM or ALU instruction does, worked out from its fields and micro-ops alone."""

    executions: int
    #: every accumulator index written, in execution order (ALU), or the GEMM targets
    #: (a slice when they are one ascending run and no two are the same)
    dst: Index
    touched: np.ndarray | slice  # the distinct ones, as the out elements refreshed
    accesses: list[Access]
    gemm: GemmPlan | None = None
    #: GEMM: the distinct targets, and how to sum repeated ones (None: all distinct)
    sums: tuple[np.ndarray | slice, np.ndarray, np.ndarray] | None = None
    #: GEMM: distinct targets ``first + r·row + c·col`` of one ``(R, C)`` product, as
    #: ``(first, R, C, row, col)``: added through a strided view, not gathered
    strided: tuple[int, int, int, int, int] | None = None
    #: ALU: the sources, and the waves that run the executions exactly
    src: np.ndarray | None = None
    waves: list[tuple[Index, Index | None]] | None = None


def loop_plan(state: MachineState, insn: GemmInsn | AluInsn, what: str) -> _LoopPlan:
    """The plan of ``insn`` with the micro-ops now in the buffer, made once and reused."""
    key = (insn.opcode, insn.reset_reg, insn.uop_bgn, insn.uop_end, insn.iter_out, insn.iter_in,
           insn.dst_factor_out, insn.dst_factor_in, insn.src_factor_out, insn.src_factor_in,
           getattr(insn, "wgt_factor_out", 0), getattr(insn, "wgt_factor_in", 0),
           getattr(insn, "use_imm", False),
           state.uop[insn.uop_bgn : insn.uop_end].tobytes() if insn.uop_end <= len(state.uop) else b"")
    plan = state.plans.get(key)
    if plan is None:
        dst, src, wgt = loop_grids(state, insn, what)
        if isinstance(insn, AluInsn):
            plan = _alu_plan(state, insn, dst.full().reshape(-1), src.full().reshape(-1))
        else:
            plan = _gemm_plan(state, insn, dst, src, wgt)
        state.plans[key] = plan
    return plan


def _gemm_plan(state: MachineState, insn: GemmInsn, dst: Grid, src: Grid, wgt: Grid | None) -> _LoopPlan:
    cfg = state.cfg
    executions = int(np.prod(dst.shape))
    if insn.reset_reg or executions == 0:
        targets = dst.full().reshape(-1)
        touched = as_index(unique_index(targets, cfg.acc_depth))
        # machine v2: the store module's drain reads acc tiles, so a reset's write of them is
        # shared (in the out/acc index space, as a LOAD ACC's); on VTA's, only compute's
        shared = [Access("out", True, touched)] if cfg.has_drain and executions else []
        return _LoopPlan(executions, targets, touched, shared)
    assert wgt is not None
    gemm = plan_gemm(dst, src, wgt)
    targets = gemm.targets
    order = np.argsort(targets, kind="stable")
    sorted_targets = targets[order]
    starts = np.flatnonzero(np.r_[True, sorted_targets[1:] != sorted_targets[:-1]])
    sums = None if len(starts) == len(targets) else (sorted_targets[starts], order, starts)
    touched = as_span(unique_index(targets, cfg.acc_depth))
    accesses = [
        Access("inp", False, as_span(unique_index(gemm.inputs, cfg.inp_depth))),
        Access("wgt", False, as_span(unique_index(gemm.weights, cfg.wgt_depth))),
        Access("out", True, touched),
    ]
    dst_index = as_index(targets) if sums is None else targets
    strided = None
    if (sums is None and not isinstance(dst_index, slice) and len(gemm.parts) == 1
            and gemm.parts[0].matmul and gemm.parts[0].src.ndim == 2):
        strided = _strided(targets, len(gemm.parts[0].src), len(gemm.parts[0].wgt))
    return _LoopPlan(executions, dst_index, touched, accesses, gemm, sums, strided)


def _strided(targets: np.ndarray, rows: int, cols: int) -> tuple[int, int, int, int, int] | None:
    """``targets`` ``(rows·cols,)`` as ``(first, rows, cols, row, col)`` when they are
    ``first + r·row + c·col`` with non-negative steps (None otherwise)."""
    grid = targets.reshape(rows, cols)
    first = int(grid[0, 0])
    row = int(grid[1, 0]) - first if rows > 1 else 0
    col = int(grid[0, 1]) - first if cols > 1 else 0
    affine = first + np.arange(rows)[:, None] * row + np.arange(cols)[None, :] * col
    if row < 0 or col < 0 or not np.array_equal(grid, affine):
        return None
    return first, rows, cols, row, col


def _alu_plan(state: MachineState, insn: AluInsn, dst: np.ndarray, src: np.ndarray) -> _LoopPlan:
    if dst.size == 0:
        return _LoopPlan(0, dst, dst, [])
    src_used = None if insn.use_imm else src
    touched = as_span(unique_index(dst, state.cfg.acc_depth))
    return _LoopPlan(dst.size, dst, touched, [Access("out", True, touched)],
                     src=src_used, waves=alu_waves(dst, src_used))


def execute_gemm(state: MachineState, insn: GemmInsn, what: str) -> tuple[list[Access], int]:
    """GEMM: returns the accesses and the number of micro-op executions."""
    plan = loop_plan(state, insn, what)
    if plan.executions == 0:
        return [], 0
    acc = state.acc
    if insn.reset_reg:
        acc[plan.touched] = 0
        return plan.accesses, plan.executions
    assert plan.gemm is not None
    values = plan.gemm.products(state.inp, state.wgt)  # int32: the sums wrap as acc does
    if plan.strided is not None:
        first, rows, cols, row, col = plan.strided
        tile = acc.strides[0]
        view: np.ndarray = np.ndarray((rows, cols) + acc.shape[1:], acc.dtype, acc, first * tile,
                                      (row * tile, col * tile) + acc.strides[1:])
        view += values.reshape(view.shape)
    else:
        if plan.sums is None:
            target: Index = plan.dst
        else:
            target, order, starts = plan.sums
            values = np.add.reduceat(values[order], starts, axis=0)
        acc[target] += values
    state.out[plan.touched] = acc[plan.touched].astype(np.int8)
    return plan.accesses, plan.executions


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


def execute_alu(state: MachineState, insn: AluInsn, what: str) -> tuple[list[Access], int]:
    """ALU: returns the accesses and the number of micro-op executions."""
    plan = loop_plan(state, insn, what)
    if plan.executions == 0:
        return [], 0
    assert isinstance(plan.dst, np.ndarray)
    run_alu(state.acc, AluOp(insn.alu_opcode), plan.dst, plan.src, insn.imm, plan.waves)
    state.out[plan.touched] = state.acc[plan.touched].astype(np.int8)
    return plan.accesses, plan.executions
