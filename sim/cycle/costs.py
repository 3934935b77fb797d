"""What each instruction costs, in cycles and bursts (see :mod:`openvta.isa.timing`).

Pure functions of an instruction, the configuration and the timing parameters; the
SimPy processes in :mod:`.model` spend the time these return, and the tests check
them in closed form.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from openvta.isa import INSN_BYTES, Config, MemInsn, Opcode, Timing
from openvta.isa.timing import AXI_BOUNDARY

__all__ = [
    "Bursts", "split_bursts", "item_bursts", "load_row_bursts", "store_row_bursts",
    "row_bursts", "rows_of", "fetch_bursts", "pad_elems", "hazard_stall_cycles",
]


class Bursts:
    """A train of bursts as run-length triples ``(count, beats, cycles)``, in order.

    ``cycles`` is how long one burst's data holds its channel: a cycle per beat, or,
    when the items moved (elements, instructions) are narrower than a beat, a cycle per
    item, since the RTL moves one item per cycle.  A pair ``(count, beats)`` means
    ``cycles == beats``.
    """

    def __init__(self, runs: list[tuple[int, int]] | list[tuple[int, int, int]]) -> None:
        self.runs = [(run[0], run[1], run[-1] if len(run) == 3 else run[1])
                     for run in runs if run[0] and run[1]]

    @property
    def count(self) -> int:
        return sum(count for count, _, _ in self.runs)

    @property
    def beats(self) -> int:
        return sum(count * beats for count, beats, _ in self.runs)

    @property
    def cycles(self) -> int:
        return sum(count * cycles for count, _, cycles in self.runs)


def item_bursts(start: int, nbytes: int, item_bytes: int, bus_bytes: int, max_burst: int) -> Bursts:
    """The bursts that move the ``nbytes`` bytes from byte ``start``, items of
    ``item_bytes`` bytes: whole beats from the one holding ``start``, in bursts of at most
    ``max_burst`` beats, split at every 4 KiB boundary (AXI4).

    The train only depends on ``start`` modulo 4 KiB (a bus beat divides 4 KiB), so rows
    of one instruction share their trains; callers must not modify the result.
    """
    return _item_bursts(start % AXI_BOUNDARY, nbytes, item_bytes, bus_bytes, max_burst)


@lru_cache(maxsize=4096)
def _item_bursts(start: int, nbytes: int, item_bytes: int, bus_bytes: int, max_burst: int) -> Bursts:
    runs: list[tuple[int, int, int]] = []
    addr, end = start - start % bus_bytes, start + nbytes
    while addr < end:
        burst = min(-(-(end - addr) // bus_bytes), max_burst,
                    (AXI_BOUNDARY - addr % AXI_BOUNDARY) // bus_bytes)
        moved = min(addr + burst * bus_bytes, end) - max(addr, start)
        cycles = moved // item_bytes if item_bytes < bus_bytes else burst
        if runs and runs[-1][1:] == (burst, cycles):
            runs[-1] = (runs[-1][0] + 1, burst, cycles)
        else:
            runs.append((1, burst, cycles))
        addr += burst * bus_bytes
    return Bursts(runs)


def split_bursts(start: int, beats: int, bus_bytes: int, max_burst: int) -> Bursts:
    """``beats`` whole beats from byte ``start`` (bus-aligned) in bursts of at most
    ``max_burst``, split at every 4 KiB boundary."""
    return item_bursts(start, beats * bus_bytes, bus_bytes, bus_bytes, max_burst)


def load_row_bursts(insn: MemInsn, row: int, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of data row ``row`` of a LOAD (a row starting mid-beat reads whole beats)."""
    elem = cfg.elem_bytes(insn.memory_type)
    start = (insn.dram_base + row * insn.x_stride) * elem
    return item_bursts(start, insn.x_size * elem, elem, cfg.bus_bytes, timing.max_burst_beats)


def store_row_bursts(insn: MemInsn, row: int, cfg: Config, timing: Timing) -> Bursts:
    """The bursts of row ``row`` of a STORE (a row of elements narrower than a beat may
    start and end inside a beat: those beats are written with strobes)."""
    elem = cfg.out_elem_bytes
    start = (insn.dram_base + row * insn.x_stride) * elem
    return item_bursts(start, insn.x_size * elem, elem, cfg.bus_bytes, timing.max_burst_beats)


def row_bursts(insn: MemInsn, cfg: Config, timing: Timing) -> list[Bursts]:
    """The bursts of every data row of a LOAD or STORE, in order (as
    :func:`load_row_bursts` and :func:`store_row_bursts`, reading the configuration once)."""
    elem = cfg.out_elem_bytes if insn.opcode == Opcode.STORE else cfg.elem_bytes(insn.memory_type)
    return rows_of(insn, elem, cfg.bus_bytes, timing.max_burst_beats)


def rows_of(insn: MemInsn, elem_bytes: int, bus_bytes: int, max_burst: int) -> list[Bursts]:
    """:func:`row_bursts` for elements of ``elem_bytes`` bytes (the cycle model's inner
    call: every row is a lookup of its first byte within 4 KiB)."""
    nbytes = insn.x_size * elem_bytes
    trains = _trains(nbytes, elem_bytes, bus_bytes, max_burst)
    base, stride = insn.dram_base * elem_bytes, insn.x_stride * elem_bytes
    rows = []
    for start in range(base, base + insn.y_size * stride, stride) if stride else [base] * insn.y_size:
        start %= AXI_BOUNDARY
        bursts = trains.get(start)
        if bursts is None:
            bursts = trains[start] = _item_bursts(start, nbytes, elem_bytes, bus_bytes, max_burst)
        rows.append(bursts)
    return rows


@lru_cache(maxsize=256)
def _trains(nbytes: int, item_bytes: int, bus_bytes: int, max_burst: int) -> dict[int, Bursts]:
    """The trains of rows of one size, by their first byte within 4 KiB (filled in as
    rows come; shared by every run, as :func:`_item_bursts`)."""
    return {}


def fetch_bursts(start: int, count: int, cfg: Config, timing: Timing) -> list[int]:
    """Instructions per burst fetch reads, for ``count`` instructions at byte ``start``."""
    beats_per_insn = max(1, INSN_BYTES // cfg.bus_bytes)
    max_burst = max(beats_per_insn, timing.max_burst_beats // beats_per_insn * beats_per_insn)
    bursts = item_bursts(start, count * INSN_BYTES, INSN_BYTES, cfg.bus_bytes, max_burst)
    if INSN_BYTES < cfg.bus_bytes:  # several instructions per beat: one a cycle
        return [cycles for n, _, cycles in bursts.runs for _ in range(n)]
    return [beats // beats_per_insn for n, beats, _ in bursts.runs for _ in range(n)]


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
