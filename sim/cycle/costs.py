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


#: AXI4 bursts never cross a 4 KiB address boundary (the RTL splits them there too).
AXI_BOUNDARY = 4096


def split_bursts(start: int, beats: int, bus_bytes: int, max_burst: int) -> Bursts:
    """``beats`` beats from byte ``start`` (bus-aligned) in bursts of at most
    ``max_burst``, split at every 4 KiB boundary."""
    runs: list[tuple[int, int]] = []
    addr = start
    while beats:
        burst = min(beats, max_burst, (AXI_BOUNDARY - addr % AXI_BOUNDARY) // bus_bytes)
        if runs and runs[-1][1] == burst:
            runs[-1] = (runs[-1][0] + 1, burst)
        else:
            runs.append((1, burst))
        beats -= burst
        addr += burst * bus_bytes
    return Bursts(runs)


def load_row_bursts(insn: MemInsn, row: int, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of data row ``row`` of a LOAD (a row starting mid-beat reads whole beats)."""
    elem = cfg.elem_bytes(insn.memory_type)
    bus = cfg.bus_bytes
    start = (insn.dram_base + row * insn.x_stride) * elem
    offset = start % bus if elem < bus else 0
    beats = -(-(offset + insn.x_size * elem) // bus)
    return split_bursts(start - offset, beats, bus, timing.max_burst_beats)


def store_row_bursts(insn: MemInsn, row: int, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of row ``row`` of a STORE."""
    beats = insn.x_size * max(1, cfg.out_elem_bytes // cfg.bus_bytes)
    start = (insn.dram_base + row * insn.x_stride) * cfg.out_elem_bytes
    return split_bursts(start, beats, cfg.bus_bytes, timing.max_burst_beats)


def fetch_bursts(start: int, count: int, cfg: Config, timing: Timing) -> list[int]:
    """Instructions per burst fetch reads, for ``count`` instructions at byte ``start``."""
    beats_per_insn = max(1, INSN_BYTES // cfg.bus_bytes)
    max_burst = max(beats_per_insn, timing.max_burst_beats // beats_per_insn * beats_per_insn)
    bursts = split_bursts(start, count * beats_per_insn, cfg.bus_bytes, max_burst)
    return [beats // beats_per_insn for n, beats in bursts.runs for _ in range(n)]


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
