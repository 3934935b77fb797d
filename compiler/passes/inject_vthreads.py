"""Pass: virtual-thread injection — replicate and interleave the threads' statements.

Pre: at most one ``vthread`` loop (from the schedule) around host loops and machine
statements (:class:`Dma`, :class:`UopInsn`).  Post: no vthread loop; the host loops
inside it are shared by the threads, and every run of consecutive machine statements
of one module appears once per thread, thread after thread, wrapped in
:class:`Threaded` (which binds the vthread variable and selects the thread's slice of
every buffer).  So thread 1's loads follow thread 0's loads and come before thread 0's
compute, which is what lets a load overlap a compute once tokens order them.

A vthread loop with a :attr:`~openvta.compiler.ir.Loop.tail` (the last thread's tile is a
tail tile) gives the last thread its statements from the tail body: the two bodies must
have the same loops and the same machine statements of the same modules in the same
order (only extents and addresses differ), else the threads could not run in lockstep
and the pass raises a :class:`LoweringError` saying where they differ.
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
            return _spread(stmt.body, stmt.body if stmt.tail is None else stmt.tail, stmt.var, stmt.extent)
        return replace(stmt, body=_visit(stmt.body))
    if isinstance(stmt, Block):
        return Block(tuple(_visit(s) for s in stmt.stmts))
    if isinstance(stmt, (Dma, UopInsn)):
        return Threaded(0, None, stmt)
    return stmt


def _spread(stmt: Stmt, tail: Stmt, var: Var, threads: int) -> Stmt:
    """``stmt`` for threads ``0..threads-2`` and ``tail`` for the last, interleaved."""
    if isinstance(stmt, Loop):
        if stmt.kind == LoopKind.VTHREAD:
            raise LoweringError("inject_vthreads", "only one virtual-thread axis per program")
        if not (isinstance(tail, Loop) and (tail.var, tail.extent) == (stmt.var, stmt.extent)):
            raise LoweringError("inject_vthreads", f"the last thread's tail tile does not run the loop "
                                f"{stmt.var.name} (extent {stmt.extent}) of the other threads")
        return replace(stmt, body=_spread(stmt.body, tail.body, var, threads))
    items = _flatten(list(stmt.stmts) if isinstance(stmt, Block) else [stmt])
    tails = _flatten(list(tail.stmts) if isinstance(tail, Block) else [tail])
    if len(items) != len(tails):
        raise LoweringError("inject_vthreads", f"the last thread's tail tile has {len(tails)} statements "
                            f"where the other threads have {len(items)}")
    out: list[Stmt] = []
    run: list[tuple[Stmt, Stmt]] = []

    def flush() -> None:
        for t in range(threads):
            out.extend(Threaded(t, var, last if t == threads - 1 else s) for s, last in run)
        run.clear()

    for item, last in zip(items, tails):
        if isinstance(item, Loop):
            flush()
            out.append(_spread(item, last, var, threads))
            continue
        if type(last) is not type(item) or module_of_stmt(last) != module_of_stmt(item):
            raise LoweringError("inject_vthreads", f"the last thread's tail tile runs a {type(last).__name__} "
                                f"where the other threads run a {type(item).__name__} on "
                                f"{module_of_stmt(item).name.lower()}")
        if run and module_of_stmt(run[-1][0]) != module_of_stmt(item):
            flush()
        run.append((item, last))
    flush()
    return Block(tuple(out))


def _flatten(items: list[Stmt]) -> list[Stmt]:
    out: list[Stmt] = []
    for item in items:
        out.extend(_flatten(list(item.stmts)) if isinstance(item, Block) else [item])
    return out
