"""The lowering pipeline: schedule → loop IR → passes → program, with checks between steps.

Read it top to bottom: each line is one pass, each pass a pure function of the IR.
"""

from __future__ import annotations

from collections.abc import Callable

from openvta.isa import Config, Module, TokenQueue
from openvta.runtime import Program

from .codegen import SymbolInfo, generate
from .intrin import Intrinsic, gemm_intrinsic
from .ir import (Copy, Dep, DepAction, Elementwise, Loop, LoopKind, LoweringError, Reduction, Reset, Stmt,
                 Threaded, UopInsn, walk)
from .lower import Lowered, lower_schedule
from .passes.fold_uop_loops import fold_uop_loops
from .passes.inject_dma import inject_dma
from .passes.inject_vthreads import inject_vthreads
from .passes.insert_dep_tokens import insert_dep_tokens
from .passes.lower_alu import lower_alu
from .passes.match_tensorize import match_tensorize
from .schedule import Schedule

__all__ = ["lower", "build", "PASSES"]

Pass = Callable[[Lowered, Intrinsic], Lowered]

PASSES: list[tuple[str, Pass]] = [
    ("inject_dma", lambda ir, _: inject_dma(ir)),  # buffer copies → 2-D DMA with padding
    ("match_tensorize", match_tensorize),  # tensorized reductions → GEMM (checked)
    ("lower_alu", lambda ir, _: lower_alu(ir)),  # element-wise stages → in-place ALU ops
    ("fold_uop_loops", lambda ir, _: fold_uop_loops(ir)),  # ≤ 2 loops, the rest micro-ops
    ("inject_vthreads", lambda ir, _: inject_vthreads(ir)),  # replicate and interleave
    ("insert_dep_tokens", lambda ir, _: insert_dep_tokens(ir)),  # RAW/WAR tokens, prime, drain
]


_AFTER = {
    "inject_dma": (Copy,),
    "match_tensorize": (Reduction, Reset),
    "lower_alu": (Elementwise,),
}


def _check(name: str, ir: Lowered) -> None:
    nodes = list(walk(ir.body))
    done = [n for p, _ in PASSES[: [p for p, _ in PASSES].index(name) + 1] for n in _AFTER.get(p, ())]
    for node in nodes:
        if done and isinstance(node, tuple(done)):
            raise LoweringError(name, f"left a {type(node).__name__} behind")
        if name in ("fold_uop_loops", "inject_vthreads", "insert_dep_tokens") \
                and isinstance(node, UopInsn) and len(node.loops) > 2:
            raise LoweringError(name, f"{node.stage} has more than two micro-op loops")
        if name in ("inject_vthreads", "insert_dep_tokens") and isinstance(node, Loop) \
                and node.kind == LoopKind.VTHREAD:
            raise LoweringError(name, "left a virtual-thread loop behind")
    if name == "insert_dep_tokens":
        balance = _token_balance(ir.body)
        for queue, count in balance.items():
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


def lower(schedule: Schedule, cfg: Config, intrinsic: Intrinsic | None = None) -> Lowered:
    """Lower ``schedule`` and run every pass, checking invariants between them."""
    ir = lower_schedule(schedule, cfg)
    intrinsic = intrinsic or gemm_intrinsic(cfg)
    for name, run in PASSES:
        ir = run(ir, intrinsic)
        _check(name, ir)
    return ir


def build(schedule: Schedule, cfg: Config, symbols: SymbolInfo | None = None,
          intrinsic: Intrinsic | None = None) -> Program:
    """Lower ``schedule`` and generate the program; ``symbols`` gives each tensor's role, layout, data."""
    return generate(lower(schedule, cfg, intrinsic), symbols or {})
