"""A blocked int8 GEMM built by hand with :class:`ProgramBuilder`, with N virtual threads.

``C = saturate_int8((A @ Wᵀ) >> shift)`` (or the low 8 bits of ``A @ Wᵀ`` when
``shift`` is None), the way VTA's blocked-GEMM tutorial lays it out: the output is cut
into blocks of ``mb × nb`` tiles, the reduction into blocks of ``kb`` tiles, and each
virtual thread owns its own slice of the inp, wgt and acc buffers.  The threads'
instructions are interleaved so that the load of one thread's next tiles overlaps the
compute of another's (docs/ISA.md §5), which is what the tokens below order:

* compute→load: thread ``t``'s inp/wgt slice may be overwritten (WAR), primed once
  per thread;
* load→compute: its tiles are loaded (RAW);
* compute→store: its out tiles are ready (RAW);
* store→compute: its out slice has been stored and may be rewritten (WAR), primed
  once per thread.

This is the program of the demo, the functional benchmark and the back-end tests.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from openvta.compiler.ops.common import as_operand
from openvta.isa import INT8_MAX, INT8_MIN, AluOp, Config, MemoryType, Module, Uop
from openvta.isa.config import MAX_SHR_AMOUNT
from openvta.runtime import (
    BuildError,
    Program,
    ProgramBuilder,
    Role,
    UopKernel,
    UopLoop,
    ceil_div,
    pack_inp,
    pack_wgt,
    unpack_out,
)

__all__ = ["GemmBlocks", "build_blocked_gemm", "reference_gemm", "plan_blocks", "read_gemm_output"]


@dataclass(frozen=True)
class GemmBlocks:
    """Block sizes in tiles: ``mb`` row tiles × ``nb`` column tiles, ``kb`` reduction tiles."""

    mb: int
    nb: int
    kb: int


def plan_blocks(cfg: Config, m: int, n: int, k: int, vthreads: int) -> GemmBlocks:
    """The largest blocks whose ``vthreads`` slices fit every buffer."""
    mt, nt, kt = ceil_div(m, cfg.BATCH), ceil_div(n, cfg.BLOCK_OUT), ceil_div(k, cfg.BLOCK_IN)
    nb = min(nt, 16, cfg.wgt_depth // vthreads, cfg.acc_depth // vthreads)
    kb = min(kt, cfg.wgt_depth // (vthreads * nb), cfg.inp_depth // vthreads)
    mb = min(mt, cfg.inp_depth // (vthreads * kb), cfg.acc_depth // (vthreads * nb))
    if min(mb, nb, kb) < 1:
        raise BuildError(f"{vthreads} virtual threads do not fit the buffers of this configuration")
    return GemmBlocks(mb, nb, kb)


def reference_gemm(a: np.ndarray, w: np.ndarray, shift: int | None) -> np.ndarray:
    """numpy reference: 32-bit wrap-around accumulation, then shift and saturate to int8."""
    acc = (a.astype(np.int64) @ w.astype(np.int64).T).astype(np.int32)
    if shift is None:
        return acc.astype(np.int8)
    return np.clip(acc >> shift, INT8_MIN, INT8_MAX).astype(np.int8)


def build_blocked_gemm(
    cfg: Config,
    a: np.ndarray,
    w: np.ndarray,
    *,
    vthreads: int = 1,
    shift: int | None = None,
    blocks: GemmBlocks | None = None,
) -> Program:
    """Build the program computing ``C`` from ``A`` (``[M][K]``) and ``W`` (``[N][K]``).

    Symbols: ``A`` and ``W`` as packed tiles (inputs), ``C`` as packed out tiles (output).

    Raises
    ------
    ValueError
        for ``vthreads`` below 1, a ``shift`` outside ``0..31`` (what SHR does; numpy would
        disagree), matrices of values outside int8 or of different reduction sizes.
    """
    if vthreads < 1:
        raise ValueError(f"vthreads must be at least 1, not {vthreads!r}")
    if shift is not None and (not isinstance(shift, int) or not 0 <= shift <= MAX_SHR_AMOUNT):
        raise ValueError(f"shift must be an integer in 0..{MAX_SHR_AMOUNT} or None, not {shift!r}")
    a, w = as_operand("A", a, None, "int8"), as_operand("W", w, None, "int8")
    (m, k), (n, k2) = a.shape, w.shape
    if k != k2:
        raise ValueError(f"A is {m}×{k} and W is {n}×{k2}: the reduction sizes differ")
    blk = blocks or plan_blocks(cfg, m, n, k, vthreads)
    t = vthreads
    if t * blk.mb * blk.kb > cfg.inp_depth or t * blk.nb * blk.kb > cfg.wgt_depth \
            or t * blk.mb * blk.nb > cfg.acc_depth:
        raise BuildError(f"blocks {blk} × {t} virtual threads do not fit the buffers")
    # Pad the tiled matrices to whole blocks so every block has the same shape.
    mt = ceil_div(ceil_div(m, cfg.BATCH), blk.mb) * blk.mb
    nt = ceil_div(ceil_div(n, cfg.BLOCK_OUT), blk.nb) * blk.nb
    kt = ceil_div(ceil_div(k, cfg.BLOCK_IN), blk.kb) * blk.kb
    a_tiles = pack_inp(_pad(a, mt * cfg.BATCH, kt * cfg.BLOCK_IN), cfg)
    w_tiles = pack_wgt(_pad(w, nt * cfg.BLOCK_OUT, kt * cfg.BLOCK_IN), cfg)
    b = ProgramBuilder(cfg)
    b_, bi, bo = cfg.BATCH, cfg.BLOCK_IN, cfg.BLOCK_OUT
    sym_a = b.tensor("A", data=a_tiles, role=Role.INPUT, layout=f"MK{b_}m{bi}k")
    sym_w = b.tensor("W", data=w_tiles, role=Role.WEIGHT, layout=f"NK{bo}n{bi}k")
    sym_c = b.tensor("C", shape=(mt, nt, b_, bo), dtype="int8", role=Role.OUTPUT, layout=f"MN{b_}m{bo}n")
    out_blocks = [(i, j) for i in range(mt // blk.mb) for j in range(nt // blk.nb)]
    k_blocks = kt // blk.kb

    for _ in range(t):
        b.dep_push(Module.COMPUTE, Module.LOAD)
        b.dep_push(Module.STORE, Module.COMPUTE)
    for first in range(0, len(out_blocks), t):
        group = list(enumerate(out_blocks[first : first + t]))
        for kk in range(k_blocks):
            for tid, (i, j) in group:
                b.dep_pop(Module.COMPUTE, Module.LOAD)
                b.load_2d(MemoryType.INP, tid * blk.mb * blk.kb, sym_a,
                          offset=i * blk.mb * kt + kk * blk.kb,
                          y_size=blk.mb, x_size=blk.kb, x_stride=kt)
                b.load_2d(MemoryType.WGT, tid * blk.nb * blk.kb, sym_w,
                          offset=j * blk.nb * kt + kk * blk.kb,
                          y_size=blk.nb, x_size=blk.kb, x_stride=kt)
                b.dep_push(Module.LOAD, Module.COMPUTE)
            if kk == 0:
                # A last, partial group retires the idle threads: take their tokens out
                # of compute→load so the active threads keep receiving their own.
                for _ in range(t - len(group)):
                    b.dep_pop(Module.COMPUTE, Module.LOAD)
            for tid, _ in group:
                acc_base = tid * blk.mb * blk.nb
                b.dep_pop(Module.LOAD, Module.COMPUTE)
                if kk == 0:
                    b.dep_pop(Module.STORE, Module.COMPUTE)
                    b.gemm(UopKernel((Uop(acc_base),), (UopLoop(blk.mb * blk.nb, dst_factor=1),)),
                           reset=True)
                # micro-ops walk the output columns, the inner loop the rows and the outer
                # loop the reduction: consecutive micro-ops never hit the same accumulator.
                uops = tuple(Uop(acc_base + c, tid * blk.mb * blk.kb, tid * blk.nb * blk.kb + c * blk.kb)
                             for c in range(blk.nb))
                loops = (UopLoop(blk.kb, src_factor=1, wgt_factor=1),
                         UopLoop(blk.mb, dst_factor=blk.nb, src_factor=blk.kb))
                b.gemm(UopKernel(uops, loops))
                b.dep_push(Module.COMPUTE, Module.LOAD)
                if kk == k_blocks - 1:
                    if shift is not None:
                        _saturating_shift(b, acc_base, blk, shift)
                    b.dep_push(Module.COMPUTE, Module.STORE)
        for tid, (i, j) in group:
            b.dep_pop(Module.COMPUTE, Module.STORE)
            b.store_2d(tid * blk.mb * blk.nb, sym_c, offset=i * blk.mb * nt + j * blk.nb,
                       y_size=blk.mb, x_size=blk.nb, x_stride=nt)
            b.dep_push(Module.STORE, Module.COMPUTE)
    return b.finish()


def _saturating_shift(b: ProgramBuilder, acc_base: int, blk: GemmBlocks, shift: int) -> None:
    kernel = UopKernel((Uop(acc_base, acc_base),),
                       (UopLoop(blk.mb, dst_factor=blk.nb, src_factor=blk.nb),
                        UopLoop(blk.nb, dst_factor=1, src_factor=1)))
    b.alu(kernel, AluOp.SHR, imm=shift)
    b.alu(kernel, AluOp.MIN, imm=INT8_MAX)
    b.alu(kernel, AluOp.MAX, imm=INT8_MIN)


def _pad(matrix: np.ndarray, rows: int, cols: int) -> np.ndarray:
    out = np.zeros((rows, cols), dtype=matrix.dtype)
    out[: matrix.shape[0], : matrix.shape[1]] = matrix
    return out


def read_gemm_output(program: Program, dram: np.ndarray, m: int, n: int) -> np.ndarray:
    """The ``[m][n]`` int8 result from a final DRAM image."""
    return unpack_out(program.read("C", dram), m, n)
