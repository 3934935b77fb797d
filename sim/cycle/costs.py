"""What each instruction costs, in cycles and bursts (see :mod:`openvta.isa.timing`).

Pure functions of an instruction, the configuration and the timing parameters; the
SimPy processes in :mod:`.model` spend the time these return, and the tests check
them in closed form.
"""

from __future__ import annotations

import numpy as np

from openvta.isa import INSN_BYTES, Config, MemInsn, Timing

__all__ = ["Bursts", "dma_bursts", "fetch_bursts", "pad_elems", "hazard_stall_cycles"]


class Bursts:
    """A train of bursts as run-length pairs ``(count, beats)``, in order."""

    def __init__(self, runs: list[tuple[int, int]]) -> None:
        self.runs = [(count, beats) for count, beats in runs if count and beats]

    @property
    def count(self) -> int:
        return sum(count for count, _ in self.runs)

    @property
    def beats(self) -> int:
        return sum(count * beats for count, beats in self.runs)


def _row_bursts(row_bytes: int, rows: int, cfg: Config, timing: Timing) -> Bursts:
    bus = cfg.bus_bytes
    burst_bytes = timing.max_burst_beats * bus
    full, rest = divmod(row_bytes, burst_bytes)
    pattern = [(full, timing.max_burst_beats)] + ([(1, -(-rest // bus))] if rest else [])
    if rows == 1 or len(pattern) == 1 or full == 0:
        return Bursts([(count * rows, beats) for count, beats in pattern if count])
    return Bursts(pattern * rows)


def dma_bursts(insn: MemInsn, cfg: Config, timing: Timing) -> Bursts:
    """The bursts a LOAD reads or a STORE writes: each row split at ``max_burst_beats``."""
    if insn.x_size == 0 or insn.y_size == 0:
        return Bursts([])
    row_bytes = insn.x_size * cfg.elem_bytes(insn.memory_type)
    if insn.x_stride == insn.x_size:  # rows are contiguous in DRAM: one long transfer
        return _row_bursts(row_bytes * insn.y_size, 1, cfg, timing)
    return _row_bursts(row_bytes, insn.y_size, cfg, timing)


def fetch_bursts(count: int, cfg: Config, timing: Timing) -> list[int]:
    """Instructions per burst fetch reads, for a stream of ``count`` instructions."""
    per_burst = max(1, timing.max_burst_beats * cfg.bus_bytes // INSN_BYTES)
    full, rest = divmod(count, per_burst)
    return [per_burst] * full + ([rest] if rest else [])


def pad_elems(insn: MemInsn) -> int:
    """Zero elements a LOAD writes into its buffer (padding)."""
    if insn.x_size == 0:
        return 0
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    return rows * cols - insn.y_size * insn.x_size


def hazard_stall_cycles(writes: np.ndarray, reads: list[np.ndarray], pipeline_cycles: int) -> int:
    """Stall cycles of micro-op executions that touch a tile written too recently.

    Execution ``u`` waits ``pipeline_cycles − d`` cycles when the nearest earlier
    execution writing a tile it reads or writes is ``d < pipeline_cycles`` executions
    before it (a first-order model: it counts distances in executions, not in cycles).
    """
    n = len(writes)
    stall = np.zeros(n, dtype=np.int64)
    for distance in range(min(pipeline_cycles - 1, n - 1), 0, -1):
        earlier = writes[:-distance]
        hit = writes[distance:] == earlier
        for read in reads:
            hit |= read[distance:] == earlier
        stall[distance:] = np.where(hit, pipeline_cycles - distance, stall[distance:])
    return int(stall.sum())
