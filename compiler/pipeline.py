"""The lowering pipeline: schedule → loop IR → passes → program, with checks between steps.

Read it top to bottom: each line is one pass, each pass a pure function of the IR.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from openvta.isa import Config, Module, TokenQueue
from openvta.runtime import Program, Progress

from .codegen import SymbolInfo, generate
from .intrin import Intrinsic, gemm_intrinsic
from .ir import (Copy, Dep, DepAction, Elementwise, Loop, LoopKind, LoweringError, Reduction, Reset, Stmt,
                 Threaded, UopInsn, walk)
from .lower import Lowered, lower_schedule
from .limits import MAX_INSNS, check_dram, check_insns, count_insns
from .passes.drain_epilogue import drain_epilogue
from .passes.fold_uop_loops import fold_uop_loops
from .passes.inject_dma import inject_dma
from .passes.inject_vthreads import inject_vthreads
from .passes.insert_dep_tokens import insert_dep_tokens
from .passes.lower_alu import lower_alu
from .passes.match_tensorize import match_tensorize
from .schedule import Schedule

__all__ = ["lower", "build", "PASSES", "Invariant", "Step", "Progress", "no_progress"]

Pass = Callable[[Lowered, Intrinsic], Lowered]


class Invariant(Enum):
    """A property of the loop IR that holds from the pass that establishes it onwards."""

    AT_MOST_TWO_UOP_LOOPS = "every micro-op instruction has at most two loops"
    NO_VTHREAD_LOOPS = "no virtual-thread loop is left"
    TOKENS_BALANCED = "every token queue is empty at the end of the program"


@dataclass(frozen=True)
class Step:
    """One pass of :data:`PASSES` and what holds after it (and after every later pass).

    Parameters
    ----------
    name :
        the pass's name, as :class:`~openvta.compiler.ir.LoweringError` and progress reports give it.
    run :
        the pass.
    removes :
        the statement kinds it lowers away: none may be left after it.
    establishes :
        the invariants that hold from it on.
    """

    name: str
    run: Pass
    removes: tuple[type[Stmt], ...] = ()
    establishes: frozenset[Invariant] = frozenset()


PASSES: list[Step] = [
    Step("inject_dma", lambda ir, _: inject_dma(ir), (Copy,)),  # buffer copies → 2-D DMA with padding
    Step("match_tensorize", match_tensorize, (Reduction, Reset)),  # tensorized reductions → GEMM (checked)
    Step("lower_alu", lambda ir, _: lower_alu(ir), (Elementwise,)),  # element-wise stages → in-place ALU ops
    Step("drain_epilogue", lambda ir, _: drain_epilogue(ir)),  # machine v2: the epilogue on the drain unit
    Step("fold_uop_loops", lambda ir, _: fold_uop_loops(ir),  # ≤ 2 loops, the rest micro-ops
         establishes=frozenset({Invariant.AT_MOST_TWO_UOP_LOOPS})),
    Step("inject_vthreads", lambda ir, _: inject_vthreads(ir),  # replicate and interleave
         establishes=frozenset({Invariant.NO_VTHREAD_LOOPS})),
    Step("insert_dep_tokens", lambda ir, _: insert_dep_tokens(ir),  # RAW/WAR tokens, prime, drain
         establishes=frozenset({Invariant.TOKENS_BALANCED})),
]


def _check(done: Sequence[Step], ir: Lowered) -> None:
    """Check the IR after the steps ``done`` against everything they promise (the last one ran last)."""
    name = done[-1].name
    removed = tuple(kind for step in done for kind in step.removes)
    holds = frozenset().union(*(step.establishes for step in done))
    for node in walk(ir.body):
        if removed and isinstance(node, removed):
            raise LoweringError(name, f"left a {type(node).__name__} behind")
        if Invariant.AT_MOST_TWO_UOP_LOOPS in holds and isinstance(node, UopInsn) and len(node.loops) > 2:
            raise LoweringError(name, f"{node.stage} has more than two micro-op loops")
        if Invariant.NO_VTHREAD_LOOPS in holds and isinstance(node, Loop) and node.kind == LoopKind.VTHREAD:
            raise LoweringError(name, "left a virtual-thread loop behind")
    if Invariant.TOKENS_BALANCED in holds:
        for queue, count in _token_balance(ir.body).items():
            if count:
                raise LoweringError(name, f"token queue {queue.label} is left with {count:+d} "
                                    "tokens at the end of the program")


def _token_balance(stmt: Stmt) -> dict[TokenQueue, int]:
    total = {q: 0 for q in TokenQueue}

    def visit(s: Stmt, times: int) -> None:
        if isinstance(s, Dep):
            queue = TokenQueue.between(Module(s.src), Module(s.dst))
            total[queue] += times if s.action == DepAction.PUSH else -times
        elif isinstance(s, Loop):
            visit(s.body, times * s.extent)
        elif isinstance(s, Threaded):
            visit(s.stmt, times)
        else:
            for child in getattr(s, "stmts", ()):
                visit(child, times)

    visit(stmt, 1)
    return total


def no_progress(what: str, done: int, total: int | None) -> None:
    """The progress callback of a caller that passes none."""


def lower(schedule: Schedule, cfg: Config, intrinsic: Intrinsic | None = None, *,
          progress: Progress | None = None) -> Lowered:
    """Lower ``schedule`` and run every pass, checking invariants between them.

    ``progress(name, index, total)`` is called before lowering (``"lower_schedule"``, 0)
    and before each pass of :data:`PASSES` (its name, 1, 2, …), ``total`` being
    ``len(PASSES) + 1``.
    """
    report = progress or no_progress
    total = len(PASSES) + 1
    report("lower_schedule", 0, total)
    ir = lower_schedule(schedule, cfg)
    intrinsic = intrinsic or gemm_intrinsic(cfg)
    for index, step in enumerate(PASSES):
        report(step.name, index + 1, total)
        ir = step.run(ir, intrinsic)
        _check(PASSES[: index + 1], ir)
    return ir


def build(schedule: Schedule, cfg: Config, symbols: SymbolInfo | None = None,
          intrinsic: Intrinsic | None = None, *, progress: Progress | None = None,
          max_insns: int | None = MAX_INSNS) -> Program:
    """Lower ``schedule``, check the program's size, and generate it.

    Parameters
    ----------
    symbols :
        per tensor: its role, layout name and DRAM contents (or None: zeros).
    progress :
        ``progress(what, done, total)``: called with each pass's name before it runs (see
        :func:`lower`), then during code generation with ``"codegen"``, the instructions
        emitted so far and the total :func:`~openvta.compiler.limits.count_insns` expects
        (at most about a thousand calls; the last has ``done == total``).
    max_insns :
        refuse a program of more instructions than this (None: no bound).

    Raises
    ------
    LoweringError
        from a pass, or (``"check size"``) when the tensors and instructions do not fit
        the DRAM address space or the instructions exceed ``max_insns``.
    """
    ir = lower(schedule, cfg, intrinsic, progress=progress)
    insns = count_insns(ir.body)
    check_dram("check size", cfg, [(t.name, t.shape, t.dtype) for t in (*ir.inputs, ir.output)], insns)
    check_insns(insns, max_insns)
    return generate(ir, symbols or {}, progress=progress, total=insns)
