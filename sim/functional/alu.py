"""The ALU's vectorized sequential execution (its lane semantics are :mod:`openvta.isa.arith`'s).

docs/ISA.md has no hazard rule: a micro-op loop must give the result of executing its
micro-ops one after another, even when they read or write the same accumulator
tile.  :func:`apply_alu` executes in *waves*: wave ``k`` holds the ``k``-th write
to each destination, so destinations within a wave are distinct; it is exact when
every execution reads exactly the writes that precede it in program order, which
is checked, and otherwise falls back to one execution at a time.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from openvta.isa import AluOp
from openvta.isa.arith import alu_lanes, shr_amount

__all__ = ["alu_lanes", "apply_alu", "alu_waves", "run_alu", "as_index"]

def _occurrence(dst: np.ndarray) -> np.ndarray:
    """For each execution, how many earlier executions wrote the same destination."""
    order = np.argsort(dst, kind="stable")
    sorted_dst = dst[order]
    position = np.arange(len(dst))
    run_start = np.maximum.accumulate(
        np.where(np.r_[True, sorted_dst[1:] != sorted_dst[:-1]], position, 0)
    )
    rank = np.empty(len(dst), dtype=np.int64)
    rank[order] = position - run_start
    return rank


def _waves_exact(dst: np.ndarray, src: np.ndarray, wave: np.ndarray) -> bool:
    """True when processing by waves lets each execution read exactly its predecessors' writes."""
    n = len(dst)
    keys = np.sort(dst * n + np.arange(n))
    before = np.searchsorted(keys, src * n + np.arange(n)) - np.searchsorted(keys, src * n)
    total = np.searchsorted(keys, src * n + n) - np.searchsorted(keys, src * n)
    return bool((before == np.minimum(wave, total)).all())


#: A slice or an index array into the accumulator.
Index = np.ndarray | slice


def as_index(index: np.ndarray) -> Index:
    """``index`` as a slice when it is one ascending contiguous run (a view, no gather)."""
    n = len(index)
    if n and int(index[-1]) - int(index[0]) == n - 1 and (n < 3 or bool((np.diff(index) == 1).all())):
        return slice(int(index[0]), int(index[0]) + n)
    return index


def alu_waves(dst: np.ndarray, src: np.ndarray | None) -> list[tuple[Index, Index | None]] | None:
    """The waves ``(destinations, sources)`` that run ``dst``/``src`` executions exactly.

    ``None`` when no wave order is exact and the executions must run one at a time.
    """
    if len(dst) < 2 or bool((dst[1:] > dst[:-1]).all()):
        wave = np.zeros(len(dst), dtype=np.int64)  # distinct destinations: one wave
    else:
        wave = _occurrence(dst)
    if src is not None and not _waves_exact(dst, src, wave):
        return None
    if not wave.any():
        return [(as_index(dst), None if src is None else as_index(src))]
    waves: list[tuple[Index, Index | None]] = []
    for k in range(int(wave.max()) + 1):
        sel = wave == k
        waves.append((as_index(dst[sel]), None if src is None else as_index(src[sel])))
    return waves


def apply_alu(acc: np.ndarray, op: AluOp, dst: np.ndarray, src: np.ndarray | None, imm: int) -> None:
    """Run ALU executions ``acc[dst[u]] = op(acc[dst[u]], imm or acc[src[u]])`` in order."""
    run_alu(acc, op, dst, src, imm, alu_waves(dst, src))


def run_alu(acc: np.ndarray, op: AluOp, dst: np.ndarray, src: np.ndarray | None, imm: int,
            waves: list[tuple[Index, Index | None]] | None) -> None:
    """:func:`apply_alu` with the :func:`alu_waves` of ``dst`` and ``src`` given."""
    if waves is None:
        assert src is not None
        for u in range(len(dst)):
            acc[dst[u]] = alu_lanes(op, acc[dst[u]], acc[src[u]])
        return
    native, operand = _native(op, imm if src is None else None)
    for d, s in waves:
        b = operand if s is None else acc[s]
        if native is None:
            acc[d] = alu_lanes(op, acc[d], b)
        elif isinstance(d, slice):
            view = acc[d]
            native(view, b, out=view)  # numpy buffers the operands when they overlap
        else:
            acc[d] = native(acc[d], b)


def _native(op: AluOp, imm: int | None) -> tuple[Callable[..., np.ndarray] | None, np.integer]:
    """The int32 ufunc that computes ``op`` exactly, and the immediate operand as int32.

    MIN, MAX, ADD and MUL wrap to the same low 32 bits in int32 as in int64; SHR does
    when it shifts right by a constant (0..31).  Otherwise (None) the lanes go through
    :func:`alu_lanes` in int64.
    """
    if op == AluOp.SHR:
        if imm is None or (shift := shr_amount(imm)) < 0:
            return None, np.int64(0 if imm is None else imm)
        return np.right_shift, np.int32(shift)
    return _INT32_OPS[op], np.int32(0 if imm is None else imm)


_INT32_OPS = {AluOp.MIN: np.minimum, AluOp.MAX: np.maximum, AluOp.ADD: np.add, AluOp.MUL: np.multiply}
