"""Pass: virtual-thread injection — replicate and interleave the threads' statements.

Pre: at most one ``vthread`` loop (from the schedule) around host loops and machine
statements (:class:`Dma`, :class:`UopInsn`).  Post: no vthread loop; the host loops
inside it are shared by the threads, and every run of consecutive machine statements
of one module appears once per thread, thread after thread, wrapped in
:class:`Threaded` (which binds the vthread variable and selects the thread's slice of
every buffer).  So thread 1's loads follow thread 0's loads and come before thread 0's
compute, which is what lets a load overlap a compute once tokens order them.
"""

from __future__ import annotations

from dataclasses import replace

from openvta.isa import Module

from ..ir import Block, Dma, Loop, LoopKind, LoweringError, Stmt, Threaded, UopInsn
from ..lower import Lowered
from ..te import Var

__all__ = ["inject_vthreads", "module_of_stmt"]


def module_of_stmt(stmt: Stmt) -> Module:
    if isinstance(stmt, Dma):
        return stmt.module
    if isinstance(stmt, UopInsn):
        return Module.COMPUTE
    if isinstance(stmt, Threaded):
        return module_of_stmt(stmt.stmt)
    raise LoweringError("inject_vthreads", f"unexpected {type(stmt).__name__} among machine statements")


def inject_vthreads(lowered: Lowered) -> Lowered:
    return replace(lowered, body=_visit(lowered.body))


def _visit(stmt: Stmt) -> Stmt:
    if isinstance(stmt, Loop):
        if stmt.kind == LoopKind.VTHREAD:
            return _spread(stmt.body, stmt.var, stmt.extent)
        return replace(stmt, body=_visit(stmt.body))
    if isinstance(stmt, Block):
        return Block(tuple(_visit(s) for s in stmt.stmts))
    if isinstance(stmt, (Dma, UopInsn)):
        return Threaded(0, None, stmt)
    return stmt


def _spread(stmt: Stmt, var: Var, threads: int) -> Stmt:
    if isinstance(stmt, Loop):
        if stmt.kind == LoopKind.VTHREAD:
            raise LoweringError("inject_vthreads", "only one virtual-thread axis per program")
        return replace(stmt, body=_spread(stmt.body, var, threads))
    items: list[Stmt] = list(stmt.stmts) if isinstance(stmt, Block) else [stmt]
    out: list[Stmt] = []
    run: list[Stmt] = []

    def flush() -> None:
        for t in range(threads):
            out.extend(Threaded(t, var, s) for s in run)
        run.clear()

    for item in _flatten(items):
        if isinstance(item, Loop):
            flush()
            out.append(_spread(item, var, threads))
            continue
        if run and module_of_stmt(run[-1]) != module_of_stmt(item):
            flush()
        run.append(item)
    flush()
    return Block(tuple(out))


def _flatten(items: list[Stmt]) -> list[Stmt]:
    out: list[Stmt] = []
    for item in items:
        out.extend(_flatten(list(item.stmts)) if isinstance(item, Block) else [item])
    return out
