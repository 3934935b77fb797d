"""Pass: micro-op loop folding — at most two loops per instruction, the rest become micro-ops.

Pre: :class:`~openvta.compiler.ir.UopInsn` with any number of loops and one micro-op.
Post: at most two loops (``iter_out``, ``iter_in``) and the other loops enumerated as
micro-ops, in loop order.

Adjacent loops merge first when every index steps contiguously across them
(``outer factor = inner factor × inner extent``).  Then the two loops to keep are the
ones that leave the fewest micro-ops among the choices whose innermost remaining loop
moves the accumulator index — consecutive micro-ops then write different tiles and the
pipeline does not stall (docs/ISA.md has no hazard rule; results are the same either way,
as GEMM accumulation and ALU lanes commute across these loops).  Unrolled loops are
never kept.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from openvta.isa import Config
from openvta.isa.config import LOOP_ITER_WIDTH

from ..ir import LoweringError, MicroOp, Stmt, UopInsn, UopLoopSpec, transform
from ..lower import Lowered

__all__ = ["fold_uop_loops"]

_MAX_ITER = (1 << LOOP_ITER_WIDTH) - 1


def fold_uop_loops(lowered: Lowered) -> Lowered:
    return replace(lowered, body=transform(lowered.body, lambda s: _fold(s, lowered.cfg)))


def _merge(loops: list[UopLoopSpec], unrolled: list[bool]) -> tuple[list[UopLoopSpec], list[bool]]:
    out: list[UopLoopSpec] = []
    flags: list[bool] = []
    for loop, flag in zip(loops, unrolled):
        if loop.extent == 1:
            continue
        if out and not flag and not flags[-1]:
            prev = out[-1]
            if all(getattr(prev, f) == getattr(loop, f) * loop.extent for f in ("dst", "src", "wgt")) \
                    and prev.extent * loop.extent <= _MAX_ITER:
                out[-1] = UopLoopSpec(prev.extent * loop.extent, loop.dst, loop.src, loop.wgt)
                continue
        out.append(loop)
        flags.append(flag)
    return out, flags


def _fold(stmt: Stmt, cfg: Config) -> Stmt:
    if not isinstance(stmt, UopInsn):
        return stmt
    loops, flags = _merge(list(stmt.loops), list(stmt.unrolled) or [False] * len(stmt.loops))
    keep = _choose(loops, flags)
    rest = [loop for i, loop in enumerate(loops) if i not in keep]
    origin, = stmt.uops
    uops = []
    for point in itertools.product(*(range(loop.extent) for loop in rest)):
        uops.append(MicroOp(origin.dst + sum(i * lp.dst for i, lp in zip(point, rest)),
                            origin.src + sum(i * lp.src for i, lp in zip(point, rest)),
                            origin.wgt + sum(i * lp.wgt for i, lp in zip(point, rest))))
    if len(uops) > cfg.uop_depth:
        raise LoweringError("fold_uop_loops", f"{stmt.stage}: its kernel needs {len(uops)} "
                            f"micro-ops, the micro-op buffer holds {cfg.uop_depth}; use smaller "
                            "tiles")
    kept = tuple(loops[i] for i in keep)
    for loop in kept:
        if loop.extent > _MAX_ITER:
            raise LoweringError("fold_uop_loops", f"{stmt.stage}: a loop of {loop.extent} "
                                f"iterations exceeds the {LOOP_ITER_WIDTH}-bit iteration count")
    return replace(stmt, loops=kept, uops=tuple(uops), unrolled=())


def _choose(loops: list[UopLoopSpec], flags: list[bool]) -> tuple[int, ...]:
    """Indices (in order) of at most two loops to keep as instruction loops."""
    candidates = [i for i, flag in enumerate(flags) if not flag and loops[i].extent <= _MAX_ITER]
    best: tuple[tuple[int, int], tuple[int, ...]] | None = None
    for count in (2, 1, 0):
        for keep in itertools.combinations(candidates, count):
            rest = [loops[i] for i in range(len(loops)) if i not in keep]
            innermost = rest[-1] if rest else (loops[keep[-1]] if keep else None)
            stalls = 0 if innermost is None or innermost.dst != 0 else 1
            uops = 1
            for loop in rest:
                uops *= loop.extent
            score = (stalls, uops)
            if best is None or score < best[0]:
                best = (score, keep)
    assert best is not None
    return best[1]
