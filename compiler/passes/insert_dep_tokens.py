"""Pass: dependency tokens — RAW and WAR ordering between load, compute and store.

Pre: host loops, blocks and :class:`Threaded` machine statements (after vthread
injection).  Post: :class:`Dep` statements around them, so that for every thread:

* a load run pops compute→load (its buffer slice is free: WAR) and pushes
  load→compute (its tiles are loaded: RAW);
* a GEMM pops load→compute before and pushes compute→load after (it is done reading);
* in the block that stores (one tile of the output), the thread's first compute
  statement pops store→compute (its out slice has been stored: WAR) and its last
  pushes compute→store (its out tiles are ready: RAW); the store pops and pushes back.

Loop-carried dependencies use the same tokens across iterations; priming pushes one
compute→load token per copy of the thread's load slices (``load_copies``) and one
store→compute token per copy of its accumulator slice (``acc_copies``) before
everything, draining pops them after, so every queue is empty at FINISH.  Each thread's
tokens travel in the same order every iteration, which keeps the FIFO queues matched to
their threads; each token names its thread (code generation moves the thread's copies on).
"""

from __future__ import annotations

from dataclasses import replace

from openvta.isa import Module

from ..ir import Block, Dep, DepAction, Loop, Stmt, Threaded, UopInsn, UopKind, walk
from ..lower import Lowered
from .inject_vthreads import module_of_stmt

__all__ = ["insert_dep_tokens"]

L, C, S = Module.LOAD, Module.COMPUTE, Module.STORE
PUSH, POP = DepAction.PUSH, DepAction.POP


def insert_dep_tokens(lowered: Lowered) -> Lowered:
    body = _visit(lowered.body)
    leaves = [s for s in walk(lowered.body) if isinstance(s, Threaded)]
    loads = any(module_of_stmt(s) == L for s in leaves)
    stores = any(module_of_stmt(s) == S for s in leaves)
    prime: list[Stmt] = []
    drain: list[Stmt] = []
    for _ in range(lowered.vthreads):
        for _ in range(lowered.load_copies if loads else 0):  # each copy of the slices starts free
            prime.append(Dep(PUSH, C, L))
            drain.append(Dep(POP, C, L))
        for _ in range(lowered.acc_copies if stores else 0):  # each copy of the acc slice starts free
            prime.append(Dep(PUSH, S, C))
            drain.append(Dep(POP, S, C))
    return replace(lowered, body=Block((*prime, body, *drain)))


def _is_gemm(stmt: Stmt) -> bool:
    inner = stmt.stmt if isinstance(stmt, Threaded) else stmt
    return isinstance(inner, UopInsn) and inner.kind == UopKind.GEMM and not inner.reset


def _has_compute(stmt: Stmt) -> bool:
    return any(isinstance(s, Threaded) and module_of_stmt(s) == C for s in walk(stmt))


def _visit(stmt: Stmt) -> Stmt:
    if isinstance(stmt, Loop):
        return replace(stmt, body=_visit(stmt.body))
    if isinstance(stmt, Block):
        return Block(tuple(_block(list(stmt.stmts))))
    if isinstance(stmt, Threaded):
        return Block(tuple(_block([stmt])))
    return stmt


def _units(stmts: list[Stmt]) -> list[tuple[int | None, Module | None, list[Stmt]]]:
    """Runs of consecutive Threaded statements of one thread and module; other statements alone."""
    units: list[tuple[int | None, Module | None, list[Stmt]]] = []
    for s in stmts:
        if isinstance(s, Threaded):
            key = (s.thread, module_of_stmt(s))
            if units and units[-1][:2] == key:
                units[-1][2].append(s)
                continue
            units.append((s.thread, key[1], [s]))
        else:
            units.append((None, None, [_visit(s)]))
    return units


def _block(stmts: list[Stmt]) -> list[Stmt]:
    """Tokens of a block, segment by segment: a statement that stores inside (a loop over
    tiles) ends one, and so does a thread's compute after its own store in the segment;
    machine v2 inlines loops of one iteration (a tile loop of one whole tile, then a
    peeled tail tile), so several tiles' statements can share a block, and each tile's
    compute waits for its own store's token."""
    units = _units(stmts)
    out: list[Stmt] = []
    segment: list[tuple[int | None, Module | None, list[Stmt]]] = []
    stored: set[int | None] = set()  # threads that stored in this segment
    for unit in units:
        t, m, body = unit
        if t is None and _has_store(body[0]):
            out += _segment(segment)
            out += body
            segment, stored = [], set()
            continue
        if stored and ((m == C and t in stored) or (t is None and _has_compute(body[0]))):
            out += _segment(segment)  # the next tile: its compute waits for this one's store
            segment, stored = [], set()
        segment.append(unit)
        if m == S:
            stored.add(t)
    return out + _segment(segment)


def _has_store(stmt: Stmt) -> bool:
    return any(isinstance(s, Threaded) and module_of_stmt(s) == S for s in walk(stmt))


def _segment(units: list[tuple[int | None, Module | None, list[Stmt]]]) -> list[Stmt]:
    storing: set[int] = {t for t, m, _ in units if m == S and t is not None}
    first_compute: dict[int, int] = {}
    last_compute: dict[int, int] = {}
    for i, (t, m, body) in enumerate(units):
        threads: set[int] = set()
        if t is None:
            threads = set(storing) if _has_compute(body[0]) else set()
        elif m == C:
            threads = {t} & storing
        for thread in threads:
            first_compute.setdefault(thread, i)
            last_compute[thread] = i
    out: list[Stmt] = []
    for i, (t, m, body) in enumerate(units):
        for thread in sorted(storing):
            if first_compute.get(thread) == i and (t == thread or t is None):
                out.append(Dep(POP, S, C, thread))
        out.extend(_wrap(m, body, t))
        for thread in sorted(storing):
            if last_compute.get(thread) == i and (t == thread or t is None):
                out.append(Dep(PUSH, C, S, thread))
    return out


def _wrap(module: Module | None, body: list[Stmt], thread: int | None) -> list[Stmt]:
    if module == L:
        return [Dep(POP, C, L, thread), *body, Dep(PUSH, L, C, thread)]
    if module == S:
        return [Dep(POP, C, S, thread), *body, Dep(PUSH, S, C, thread)]
    if module == C:
        out: list[Stmt] = []
        for s in body:
            if _is_gemm(s):
                out += [Dep(POP, L, C, thread), s, Dep(PUSH, C, L, thread)]
            else:
                out.append(s)
        return out
    return body

