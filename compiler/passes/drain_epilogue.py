"""Pass: a conv2d's or dense layer's epilogue moves from the compute ALU to the drain unit.

Machine v2 only (``cfg.has_drain``, docs/ISA.md §9); on any other machine the pass returns
its input.  Pre: the ALU instructions of :mod:`.lower_alu`, the DMA of :mod:`.inject_dma`.
In each block that stores the output of a GEMM, when every ALU instruction updates the
output tile (no whole-tensor operand: a residual stays on the ALU for now) with an
immediate or a per-channel operand, and there are at most ``DRAIN_STAGES`` of them:

* the ALU instructions go; each becomes a stage of a descriptor;
* the per-channel operands' LOADs into the accumulator (compute) become LOADs into the
  epi buffer (store), one per stage; the headers and the immediates are constant words
  (:class:`~openvta.compiler.ir.Dma` ``words``);
* the store becomes a draining STORE ACC (``drain``), which code generation splits at
  the tile's channel blocks (one descriptor each);
* loops of one iteration are inlined, so that each virtual thread's GEMM is a statement of
  the tile's block and the thread's store waits for its own GEMM, not for the other
  threads' (the token pass orders the stores after a loop of several threads);
* the tile's reset pass goes: a drain zeroes what it stores, so each thread's accumulator
  tile is reset once, before its first tile (a GEMM reset of the whole buffer at the top
  of the virtual-thread loop).

The descriptors of a tile's ``s`` channel blocks lie side by side (docs/ISA.md §9): the
``s`` headers, then stage 0's ``s`` words, and so on.  The epi loads are placed right before
the store, so the token pass sees one store run per tile, as before.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from openvta.isa import DrainStage, MemoryType, Module, encode_header

from ..ir import (Block, Buffer, Dma, DmaDim, Drain, Loop, LoopKind, MicroOp, Scope, Stmt, UopInsn, UopKind,
                  UopLoopSpec,
                  transform, walk)
from ..bounds import substitute
from ..lower import Lowered
from ..te import Const, Var

__all__ = ["drain_epilogue"]


def drain_epilogue(lowered: Lowered) -> Lowered:
    cfg = lowered.cfg
    if not cfg.has_drain:
        return lowered
    sizes: list[int] = []
    drained: set[Buffer] = set()

    def visit(stmt: Stmt) -> Stmt:
        if isinstance(stmt, Loop) and stmt.kind == LoopKind.HOST and stmt.extent == 1 and stmt.tail is None:
            return visit(_substitute(stmt.body, stmt.var))
        if isinstance(stmt, Loop):
            tail = None if stmt.tail is None else visit(stmt.tail)
            return replace(stmt, body=visit(stmt.body), tail=tail)
        if isinstance(stmt, Block):
            inner = Block(tuple(visit(s) for s in stmt.stmts))
            block = _drain_block(lowered, inner, sizes, drained)
            return inner if block is None else block
        return stmt

    resets: dict[Buffer, UopInsn] = {}
    body = visit(lowered.body)
    if not sizes:
        return lowered
    body = _reset_once(transform(body, lambda s: _without_resets(s, drained, resets)), list(resets.values()))
    slices = {**lowered.slices, Scope.EPI: max(sizes)}
    return replace(lowered, body=body, slices=slices)


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
    if isinstance(body, Loop):
        return replace(body, body=_reset_once(body.body, resets)) if _has_vthread(body) else Block((*resets, body))
    if isinstance(body, Block):
        inner = [i for i, s in enumerate(body.stmts) if _has_vthread(s)]
        if len(inner) == 1:
            stmts = list(body.stmts)
            stmts[inner[0]] = _reset_once(stmts[inner[0]], resets)
            return Block(tuple(stmts))
    return Block((*resets, body))


def _has_vthread(stmt: Stmt) -> bool:
    return any(isinstance(s, Loop) and s.kind == LoopKind.VTHREAD for s in _loops(stmt))


def _loops(stmt: Stmt) -> list[Stmt]:
    if isinstance(stmt, Loop):
        return [stmt, *_loops(stmt.body)]
    if isinstance(stmt, Block):
        return [x for s in stmt.stmts for x in _loops(s)]
    return []


def _substitute(body: Stmt, var: Var) -> Stmt:
    """``body`` of a loop of one iteration, its variable replaced by 0."""
    zero = {var: Const(0)}

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


def _drain_block(lowered: Lowered, block: Block, sizes: list[int], drained: set[Buffer]) -> Block | None:
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
    if len(alus) > cfg.DRAIN_STAGES:
        return None
    channel_loads = {s.buffer: s for s in stmts if isinstance(s, Dma) and not s.store
                     and s.module == Module.COMPUTE and s.memory_type == MemoryType.ACC}
    blocks, per_block = out.shape[1], int(np.prod(out.shape[2:]))
    lanes = cfg.BATCH * cfg.BLOCK_OUT
    stages: list[DrainStage] = []
    operands: list[Dma | int] = []
    for alu in alus:
        dst, src, _ = alu.buffers
        if dst != out:
            return None
        if alu.imm is not None:
            operands.append(alu.imm)
        elif src in channel_loads and src.elems == blocks:
            operands.append(channel_loads[src])
        else:
            return None
        assert alu.alu_op is not None
        stages.append(DrainStage(alu.alu_op))
    size = (1 + len(stages)) * blocks
    if size * lowered.vthreads > cfg.epi_depth:
        return None
    used = {id(d) for d in operands if isinstance(d, Dma)}
    if any(id(d) not in used for d in channel_loads.values()):
        return None  # a per-channel operand something else reads
    header = encode_header(cfg, tuple(stages), stride=blocks)
    name = f"{store.stage}.epi"
    epi_loads: list[Stmt] = [_constant(f"{name}.header", Buffer(f"{name}.header", Scope.EPI, 0, (blocks,)),
                                       tuple(tuple(int(v) for v in header) for _ in range(blocks)))]
    for k, operand in enumerate(operands):
        buffer = Buffer(f"{name}{k}", Scope.EPI, (k + 1) * blocks, (blocks,))
        if isinstance(operand, int):
            epi_loads.append(_constant(buffer.name, buffer, _words(lanes, operand, blocks)))
        else:
            epi_loads.append(replace(operand, stage=buffer.name, module=Module.STORE, memory_type=MemoryType.EPI,
                                     buffer=buffer))
    sizes.append(size)
    drained.add(out)
    drain = Drain(Buffer(name, Scope.EPI, 0, (size,)), per_block, blocks)
    kept: list[Stmt] = []
    for s in stmts:
        if s is store:
            kept += epi_loads
            kept.append(replace(store, memory_type=MemoryType.ACC, drain=drain))
        elif not (isinstance(s, UopInsn) and s.kind == UopKind.ALU) and not (isinstance(s, Dma) and id(s) in used):
            kept.append(s)
    return Block(tuple(kept))


def _constant(stage: str, buffer: Buffer, words: tuple[tuple[int, ...], ...]) -> Dma:
    count = len(words)
    dims = (DmaDim(1, count, Const(0), (0, 1)), DmaDim(count, 1, Const(0), (0, count)))
    return Dma(stage, Module.STORE, MemoryType.EPI, buffer, None, dims, words=words)  # type: ignore[arg-type]
