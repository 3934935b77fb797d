"""What each instruction costs, in cycles and bursts (see :mod:`openvta.isa.timing`).

Pure functions of an instruction, the configuration and the timing parameters; the
SimPy processes in :mod:`.model` spend the time these return, and the tests check
them in closed form.
"""

from __future__ import annotations

import numpy as np

from openvta.isa import INSN_BYTES, Config, MemInsn, Timing

__all__ = [
    "Bursts", "split_bursts", "load_row_bursts", "store_row_bursts", "fetch_bursts", "pad_elems",
    "hazard_stall_cycles",
]


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


def split_bursts(beats: int, max_burst: int) -> Bursts:
    """``beats`` in bursts of at most ``max_burst``."""
    full, rest = divmod(beats, max_burst)
    return Bursts([(full, max_burst), (1, rest)])


def load_row_bursts(insn: MemInsn, row: int, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of data row ``row`` of a LOAD (a row starting mid-beat reads whole beats)."""
    elem = cfg.elem_bytes(insn.memory_type)
    bus = cfg.bus_bytes
    start = (insn.dram_base + row * insn.x_stride) * elem
    offset = start % bus if elem < bus else 0
    return split_bursts(-(-(offset + insn.x_size * elem) // bus), timing.max_burst_beats)


def store_row_bursts(insn: MemInsn, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of one row of a STORE."""
    beats = insn.x_size * max(1, cfg.out_elem_bytes // cfg.bus_bytes)
    return split_bursts(beats, timing.max_burst_beats)


def fetch_bursts(count: int, cfg: Config, timing: Timing) -> list[int]:
    """Instructions per burst fetch reads, for a stream of ``count`` instructions."""
    beats_per_insn = max(1, INSN_BYTES // cfg.bus_bytes)
    per_burst = max(1, timing.max_burst_beats // beats_per_insn)
    full, rest = divmod(count, per_burst)
    return [per_burst] * full + ([rest] if rest else [])


def pad_elems(insn: MemInsn) -> int:
    """Zero elements a LOAD writes into its buffer (padding)."""
    if insn.x_size == 0:
        return 0
    rows = insn.y_pad_0 + insn.y_size + insn.y_pad_1
    cols = insn.x_pad_0 + insn.x_size + insn.x_pad_1
    return rows * cols - insn.y_size * insn.x_size


def hazard_stall_cycles(writes: np.ndarray, reads: list[np.ndarray], window: int) -> int:
    """Stall cycles of micro-op executions that touch a tile written too recently.

    Execution ``u`` waits ``window − d`` cycles when the nearest earlier execution
    writing a tile it reads or writes is ``d < window`` executions before it (a
    first-order model: it counts distances in executions, not in cycles).
    """
    n = len(writes)
    stall = np.zeros(n, dtype=np.int64)
    for distance in range(min(window - 1, n - 1), 0, -1):
        earlier = writes[:-distance]
        hit = writes[distance:] == earlier
        for read in reads:
            hit |= read[distance:] == earlier
        stall[distance:] = np.where(hit, window - distance, stall[distance:])
    return int(stall.sum())
