"""Pass: a conv2d's or dense layer's epilogue moves from the compute ALU to the drain unit.

Machine v2 only (the drain unit, docs/ISA.md §9): on any other machine the pass returns
its input, since no descriptor fits an epi buffer of no words.  Pre: the ALU instructions
of :mod:`.lower_alu`, the DMA of :mod:`.inject_dma`.
In each block that stores the output of a GEMM, when every ALU instruction updates the
output tile or one whole-tensor operand (a residual, ``R``) with an immediate, a
per-channel operand or ``R``, and there are at most ``DRAIN_STAGES`` of them once the
ALU's rounding steps are one RSHR and a clip one CLIP, each an operation its stage has
(``DRAIN_OPS``):

* the ALU instructions go; each becomes a stage of a descriptor;
* the per-channel operands' LOADs into the accumulator (compute) become LOADs into the
  epi buffer (store), one per stage; the headers and the immediates are constant words
  (:class:`~openvta.compiler.ir.Dma` ``words``);
* the store becomes a draining STORE ACC (``drain``), which code generation splits at
  the tile's channel blocks (one descriptor each), each STORE preceded by the load of its
  residual elements into the epi buffer (the store's own geometry, from the residual
  tensor: no compute-module LOAD, no ALU instruction);
* loops of one iteration are inlined, so that each virtual thread's GEMM is a statement of
  the tile's block and the thread's store waits for its own GEMM, not for the other
  threads' (the token pass orders the stores after a loop of several threads);
* the tile's first and last reduction steps are peeled from its loop, for the same reason
  (a thread's first GEMM waits for its own store, its store for its own last GEMM);
* each thread's loads alternate between two copies of its inp and wgt slices when they
  fit (``load_copies``): a reduction step loads while the thread's previous GEMM runs,
  with one more compute→load token primed per thread (the token pass) — double buffering;
* the tile's reset pass goes: a drain zeroes what it stores, so each thread's accumulator
  tile is reset once, before its first tile (a GEMM reset of the whole buffer at the top
  of the virtual-thread loop);
* each thread's tiles alternate between two copies of its accumulator slice when they fit
  and every store drains (``acc_copies``): a tile's GEMMs run while the drain stores the
  thread's previous tile, with one more store→compute token primed per thread — the
  accumulator double-buffered, so a tile boundary costs no compute cycles.

The descriptors of a tile's ``s`` channel blocks lie side by side (docs/ISA.md §9): the
``s`` headers, then stage 0's ``s`` words, and so on.  The epi loads are placed right
before the store, so the token pass sees one store run per tile, as before.

An epilogue with no per-channel operand (shifts, immediates, a residual: batch_matmul's)
has one descriptor for the whole tile, so a STORE spans channel blocks.  A kernel whose
every block has per-channel operands and channel blocks of one accumulator tile each (a
dense layer: its rows; a convolution of a 1×1 output) stays on the ALU: drained, it would
be a STORE a tile, each with the drain's fill cycles (docs/DECISIONS.md, "Which epilogues
drain", has the measurements).  All blocks or none: the drains' zeroing replaces the
accumulator's resets.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from openvta.isa import Config, DrainOp, DrainStage, MemoryType, Module, encode_header, stages_fit
from openvta.isa.arith import clip_word

from ..ir import (Block, Buffer, Dma, DmaDim, Drain, Loop, LoopKind, MicroOp, Scope, Stmt, UopInsn, UopKind,
                  UopLoopSpec,
                  transform, walk)
from ..bounds import substitute
from ..lower import Lowered
from ..te import Const, Expr, Var

__all__ = ["drain_epilogue", "load_copies"]


def drain_epilogue(lowered: Lowered) -> Lowered:
    cfg = lowered.cfg
    sizes: list[int] = []  # each drained block's epi words
    tile_runs: list[bool] = []  # each drained block's: a STORE a tile (per-channel operands)
    drained: set[Buffer] = set()

    def visit(stmt: Stmt, reshape: bool) -> Stmt:
        """``reshape``: inline and peel loops (not under an uneven thread split, whose last
        thread's body must keep the other threads' loops)."""
        if reshape and isinstance(stmt, Loop) and stmt.kind == LoopKind.HOST and stmt.extent == 1 \
                and stmt.tail is None:
            return visit(_substitute(stmt.body, stmt.var), reshape)
        if isinstance(stmt, Loop):
            inner_reshape = reshape and not (stmt.kind == LoopKind.VTHREAD and stmt.tail is not None)
            tail = None if stmt.tail is None else visit(stmt.tail, inner_reshape)
            return replace(stmt, body=visit(stmt.body, inner_reshape), tail=tail)
        if isinstance(stmt, Block):
            inner = Block(tuple(visit(s, reshape) for s in stmt.stmts))
            block = _drain_block(lowered, inner, sizes, tile_runs, drained, reshape)
            return inner if block is None else block
        return stmt

    resets: dict[Buffer, UopInsn] = {}
    body = visit(lowered.body, True)
    if not sizes or all(tile_runs):
        return lowered  # (every block a STORE a tile: the ALU is faster; all or none, for the resets)
    body = transform(body, lambda s: _without_resets(s, drained, resets))
    # one reset per region: a tail tile's accumulator lies inside the whole tiles' (the same
    # addresses, smaller), which the reset before them clears already
    kept = [r for b, r in resets.items()
            if not any(o is not b and o.scope == b.scope and o.offset <= b.offset
                       and b.offset + b.elems <= o.offset + o.elems and (o.elems, o.name) > (b.elems, b.name)
                       for o in resets)]
    body = _reset_once(body, kept)
    slices = {**lowered.slices, Scope.EPI: max(sizes)}
    # the accumulator alternates only when every store drains and nothing else uses it
    fits = 2 * lowered.vthreads * slices.get(Scope.ACC, 0) <= cfg.acc_depth
    acc_copies = 2 if fits and not any(_uses_acc_besides_drains(s) for s in walk(body)) else 1
    return replace(lowered, body=body, slices=slices, load_copies=load_copies(cfg, lowered.vthreads, slices),
                   acc_copies=acc_copies)


def _uses_acc_besides_drains(stmt: Stmt) -> bool:
    """A store that does not drain, a compute LOAD into the accumulator, an ALU instruction."""
    if isinstance(stmt, Dma):
        return (stmt.store and stmt.drain is None) or (
            stmt.module == Module.COMPUTE and stmt.memory_type in (MemoryType.ACC, MemoryType.ACC_8BIT))
    return isinstance(stmt, UopInsn) and stmt.kind == UopKind.ALU


def load_copies(cfg: Config, vthreads: int, slices: Mapping[Scope, int]) -> int:
    """Copies of each thread's inp and wgt slices that its loads alternate between on
    machine v2 (:func:`drain_epilogue` sets them; 1 on any other machine): 2 when every
    thread's fit twice (a step's loads beside the thread's previous GEMM), else 1."""
    fits = (2 * vthreads * slices.get(Scope.INP, 0) <= cfg.inp_depth
            and 2 * vthreads * slices.get(Scope.WGT, 0) <= cfg.wgt_depth)
    return 2 if fits else 1


def _without_resets(stmt: Stmt, drained: set[Buffer], resets: dict[Buffer, UopInsn]) -> Stmt:
    if isinstance(stmt, UopInsn) and stmt.kind == UopKind.GEMM and stmt.reset and stmt.buffers[0] in drained:
        out = stmt.buffers[0]
        resets.setdefault(out, UopInsn(stmt.stage, UopKind.GEMM, (UopLoopSpec(out.elems, 1, 0, 0),),
                                       (MicroOp(0, 0, 0),), (out, out, out), reset=True))
        return Block(())
    return stmt


def _reset_once(body: Stmt, resets: list[UopInsn]) -> Stmt:
    """``resets`` at the top of the virtual-thread loop (of its body and its tail), or of ``body``."""
    if isinstance(body, Loop) and body.kind == LoopKind.VTHREAD:
        tail = None if body.tail is None else Block((*resets, body.tail))
        return replace(body, body=Block((*resets, body.body)), tail=tail)
    if isinstance(body, Loop) and _has_vthread(body):
        # a host loop around the thread loop (batch_matmul's heads): the resets go before it,
        # in a thread loop of their own; inside, each iteration's would clear the tiles the
        # previous iteration's drains still read
        threads = next(x for x in _loops(body) if x.kind == LoopKind.VTHREAD)
        empty = Block(())
        alone = replace(threads, body=empty, tail=None if threads.tail is None else empty)
        return Block((_reset_once(alone, resets), body))
    if isinstance(body, Loop):
        return Block((*resets, body))
    if isinstance(body, Block):
        inner = [i for i, s in enumerate(body.stmts) if _has_vthread(s)]
        if len(inner) == 1:
            stmts = list(body.stmts)
            stmts[inner[0]] = _reset_once(stmts[inner[0]], resets)
            return Block(tuple(stmts))
    return Block((*resets, body))


def _has_vthread(stmt: Stmt) -> bool:
    return any(s.kind == LoopKind.VTHREAD for s in _loops(stmt))


def _loops(stmt: Stmt) -> list[Loop]:
    if isinstance(stmt, Loop):
        return [stmt, *_loops(stmt.body)]
    if isinstance(stmt, Block):
        return [x for s in stmt.stmts for x in _loops(s)]
    return []


def _substitute(body: Stmt, var: Var, value: int | Expr = 0) -> Stmt:
    """``body`` with the loop variable ``var`` replaced by ``value``."""
    zero = {var: Const(value) if isinstance(value, int) else value}

    def leaf(stmt: Stmt) -> Stmt:
        if isinstance(stmt, Dma):
            return replace(stmt, dims=tuple(replace(d, start=substitute(d.start, zero)) for d in stmt.dims))
        return stmt

    return transform(body, leaf)


def _flat(stmts: tuple[Stmt, ...]) -> list[Stmt]:
    """The block's statements, with nested blocks (an ALU stage's, an inlined loop's) opened."""
    out: list[Stmt] = []
    for s in stmts:
        out.extend(_flat(s.stmts) if isinstance(s, Block) else [s])
    return out


def _words(cfg_lanes: int, value: int, count: int) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple([int(value)] * cfg_lanes) for _ in range(count))


#: A stage before it is placed: its op, whether it updates R, its operand (an immediate, the
#: channel operand's load into the accumulator, or None: R).
_Stage = tuple[DrainOp, bool, "int | Dma | None"]


def _fuse(stages: list[_Stage]) -> list[_Stage]:
    """The ALU's rounding steps ``SHR a, ADD 1, SHR 1`` (immediates, ``0 <= a <= 30``) as one
    RSHR ``a + 1``, and ``MIN high, MAX low`` (immediates) as one CLIP: exactly what the ALU
    computes (:func:`openvta.isa.arith.round_shift_lanes`, :func:`~openvta.isa.arith.clip_lanes`).
    A rounding ADD of an odd ``1 + 2·zp`` (a zero point folded into it for the ALU) is RSHR
    ``a + 1`` then ADD ``zp``: ``(y + 1 + 2·zp) >> 1 == ((y + 1) >> 1) + zp``."""
    out: list[_Stage] = []
    i = 0
    while i < len(stages):
        window = stages[i:i + 3]
        if len(window) == 3 and [w[0] for w in window] == [DrainOp.SHR, DrainOp.ADD, DrainOp.SHR] \
                and len({w[1] for w in window}) == 1 and all(isinstance(w[2], int) for w in window) \
                and isinstance(rounding := window[1][2], int) and rounding % 2 == 1 and window[2][2] == 1 \
                and isinstance(shift := window[0][2], int) and 0 <= shift <= 30:
            out.append((DrainOp.RSHR, window[0][1], shift + 1))
            if rounding != 1:
                out.append((DrainOp.ADD, window[0][1], (rounding - 1) // 2))
            i += 3
            continue
        pair = stages[i:i + 2]
        if len(pair) == 2 and (pair[0][0], pair[1][0]) == (DrainOp.MIN, DrainOp.MAX) and pair[0][1] == pair[1][1] \
                and isinstance(pair[0][2], int) and isinstance(pair[1][2], int) and pair[1][2] <= pair[0][2]:
            out.append((DrainOp.CLIP, pair[0][1], clip_word(pair[1][2], pair[0][2])))
            i += 2
            continue
        out.append(stages[i])
        i += 1
    return out


def _drain_block(lowered: Lowered, block: Block, sizes: list[int], tile_runs: list[bool], drained: set[Buffer],
                 peel: bool = True) -> Block | None:
    """The block with its epilogue on the drain unit, or None to leave it as it is."""
    cfg = lowered.cfg
    stmts = _flat(block.stmts)
    stores = [s for s in stmts if isinstance(s, Dma) and s.store]
    if len(stores) != 1 or stores[0].drain is not None:
        return None
    store = stores[0]
    out = store.buffer
    has_gemm = any(isinstance(x, UopInsn) and x.kind == UopKind.GEMM and not x.reset
                   for s in stmts for x in walk(s))
    if not has_gemm or len(out.shape) < 2:
        return None
    alus = [s for s in stmts if isinstance(s, UopInsn) and s.kind == UopKind.ALU]
    acc_loads = {s.buffer: s for s in stmts if isinstance(s, Dma) and not s.store and s.module == Module.COMPUTE
                 and s.memory_type in (MemoryType.ACC, MemoryType.ACC_8BIT)}
    blocks, per_block = out.shape[1], int(np.prod(out.shape[2:]))
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    residual = None  # the whole-tensor operand's load into the accumulator
    raw: list[_Stage] = []
    for alu in alus:
        dst, src, _ = alu.buffers
        assert alu.alu_op is not None
        if dst != out:
            load = acc_loads.get(dst)
            if load is None or dst.shape != out.shape or (residual is not None and residual is not load):
                return None
            residual = load
        on_r = dst != out
        if alu.imm is not None:
            raw.append((DrainOp(int(alu.alu_op)), on_r, alu.imm))
        elif residual is not None and src == residual.buffer:
            raw.append((DrainOp(int(alu.alu_op)), on_r, None))
        elif src in acc_loads and acc_loads[src].memory_type == MemoryType.ACC and src.elems == blocks:
            raw.append((DrainOp(int(alu.alu_op)), on_r, acc_loads[src]))
        else:
            return None
    staged = _fuse(raw)
    if stages_fit(cfg, tuple(DrainStage(op, on_r, operand is None) for op, on_r, operand in staged)) is not None:
        return None  # more stages than the unit has, or an operation its stage lacks (DRAIN_OPS)
    per_channel = any(isinstance(d, Dma) for _, _, d in staged)
    if not per_channel:
        blocks, per_block = 1, int(np.prod(out.shape))  # one descriptor for every channel block
    used = {id(d) for _, _, d in staged if isinstance(d, Dma)} | ({id(residual)} if residual is not None else set())
    if any(id(d) not in used for d in acc_loads.values()):
        return None  # an accumulator operand something else reads
    words = (1 + len(staged)) * blocks
    # a residual's elements go to the rest of the thread's slice, a STORE's worth at a time
    # (code generation splits the STOREs into pieces of at most ``chunk`` elements)
    chunk = min(per_block, cfg.epi_depth // lowered.vthreads - words) if residual is not None else 0
    size = words + chunk
    if size * lowered.vthreads > cfg.epi_depth or (residual is not None and chunk < 1):
        return None
    stages = tuple(DrainStage(op, on_r, operand is None) for op, on_r, operand in staged)
    name = f"{store.stage}.epi"
    header = encode_header(cfg, stages, res_base=words, stride=blocks)  # (res_base: relative to the slice)
    epi_loads: list[Stmt] = [replace(_constant(f"{name}.header", Buffer(f"{name}.header", Scope.EPI, 0, (blocks,)),
                                               tuple(tuple(int(v) for v in header) for _ in range(blocks))),
                                     slice_lane=1 if residual is not None else None)]
    for k, (_, _, operand) in enumerate(staged):
        buffer = Buffer(f"{name}{k}", Scope.EPI, (k + 1) * blocks, (blocks,))
        if isinstance(operand, Dma):
            epi_loads.append(replace(operand, stage=buffer.name, module=Module.STORE, memory_type=MemoryType.EPI,
                                     buffer=buffer))
        else:  # an immediate (an R operand's word is never read: zeros)
            epi_loads.append(_constant(buffer.name, buffer, _words(lanes, operand or 0, blocks)))
    sizes.append(size)
    tile_runs.append(per_channel and per_block == 1)
    drained.add(out)
    res = None
    if residual is not None:
        res = (residual.tensor, MemoryType.EPI_8BIT if residual.memory_type == MemoryType.ACC_8BIT else MemoryType.EPI,
               Buffer(f"{name}.residual", Scope.EPI, words, (chunk,)))
    drain = Drain(Buffer(name, Scope.EPI, 0, (size,)), per_block, blocks, res)
    kept: list[Stmt] = []
    for s in stmts:
        if s is store:
            kept += epi_loads
            kept.append(replace(store, memory_type=MemoryType.ACC, drain=drain))
        elif peel and isinstance(s, Loop) and s.kind == LoopKind.HOST and s.tail is None and s.extent > 1:
            # the reduction's first and last steps peeled: each thread's first and last GEMMs
            # are then statements of the block; its first waits for its own previous store
            # only, and its store may start after its last (not after the other threads')
            middle = [replace(s, body=_substitute(s.body, s.var, s.var + 1), extent=s.extent - 2)] \
                if s.extent > 2 else []
            kept += [_substitute(s.body, s.var, 0), *middle, _substitute(s.body, s.var, s.extent - 1)]
        elif not (isinstance(s, UopInsn) and s.kind == UopKind.ALU) and not (isinstance(s, Dma) and id(s) in used):
            kept.append(s)
    return Block(tuple(kept))


def _constant(stage: str, buffer: Buffer, words: tuple[tuple[int, ...], ...]) -> Dma:
    count = len(words)
    dims = (DmaDim(1, count, Const(0), (0, 1)), DmaDim(count, 1, Const(0), (0, count)))
    return Dma(stage, Module.STORE, MemoryType.EPI, buffer, None, dims, words=words)  # type: ignore[arg-type]  # a LOAD of constant words has no tensor
