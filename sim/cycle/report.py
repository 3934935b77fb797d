"""The cycle model's report: where the cycles went, utilization and the roofline."""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from openvta.isa import Counter

from .memory import ModuleStats

if TYPE_CHECKING:
    from .model import CycleModel

__all__ = ["CycleReport", "build_report"]

_MODULE_COUNTERS = {
    "fetch": (Counter.FETCH_BUSY_CYCLES, None, Counter.FETCH_WAIT_MEMORY_CYCLES,
              Counter.FETCH_WAIT_QUEUE_CYCLES),
    "load": (Counter.LOAD_BUSY_CYCLES, Counter.LOAD_WAIT_TOKEN_CYCLES,
             Counter.LOAD_WAIT_MEMORY_CYCLES, Counter.LOAD_WAIT_QUEUE_CYCLES),
    "compute": (Counter.COMPUTE_BUSY_CYCLES, Counter.COMPUTE_WAIT_TOKEN_CYCLES,
                Counter.COMPUTE_WAIT_MEMORY_CYCLES, Counter.COMPUTE_WAIT_QUEUE_CYCLES),
    "store": (Counter.STORE_BUSY_CYCLES, Counter.STORE_WAIT_TOKEN_CYCLES,
              Counter.STORE_WAIT_MEMORY_CYCLES, Counter.STORE_WAIT_QUEUE_CYCLES),
}


@dataclass
class CycleReport:
    """Figures of one run of the cycle model.

    Members
    -------
    cycles :
        clock cycles from start until FINISH completes.
    modules :
        per module: busy, waiting on a token, on memory, on its command queue.
    utilization :
        GEMM utilization, MACs ÷ (cycles × peak MACs per cycle).
    arithmetic_intensity :
        operations (2 per MAC) per DRAM byte moved.
    roofline_cycles :
        the fewest cycles this schedule could take: the larger of its MACs at the peak
        rate and the DRAM bytes it moves at one bus beat per cycle on each channel.  A
        schedule that moves more data raises its own roof.
    roofline_fraction :
        ``roofline_cycles / cycles``.
    compulsory_read_bytes, compulsory_write_bytes :
        the DRAM bytes any schedule of the operator must read and write (each input
        element it really uses, each weight and bias, each output element, once), from
        the program's symbols (:meth:`openvta.runtime.Program.compulsory_bytes`); None
        when the program does not carry them.
    ideal_cycles :
        the fewest cycles any schedule could take: the larger of the MACs at the peak
        rate and the compulsory bytes at one bus beat per cycle on each channel (the
        moved bytes when the compulsory ones are unknown: :attr:`ideal_source`).
    ideal_fraction :
        ``ideal_cycles / cycles``; for a compute-bound operator, the GEMM utilization.
    """

    cycles: int
    modules: dict[str, ModuleStats]
    macs: int
    peak_macs_per_cycle: int
    dram_read_bytes: int
    dram_write_bytes: int
    bus_bytes: int
    clock_mhz: float
    counters: dict[str, int] = field(default_factory=dict)
    compulsory_read_bytes: int | None = None
    compulsory_write_bytes: int | None = None
    model: CycleModel | None = field(default=None, repr=False, compare=False)

    def write_trace(self, path: str | Path) -> None:
        """Write the Chrome/Perfetto trace of this run to ``path`` (JSON)."""
        from .trace import write_chrome_trace

        assert self.model is not None, "the report has no model to trace"
        write_chrome_trace(self.model, path)

    def write_timeline(self, path: str | Path, title: str = "") -> None:
        """Write a PNG timeline of the four modules to ``path``."""
        from .trace import write_timeline

        assert self.model is not None, "the report has no model to draw"
        write_timeline(self.model, path, title)

    def span_cycles(self, starts: Sequence[int]) -> list[int]:
        """Cycles per span of consecutive instructions, adding up to :attr:`cycles`.

        Span ``k`` holds instructions ``starts[k]`` to ``starts[k + 1] - 1`` (the last one to
        the end of the program); it is charged from the moment the previous span's last
        load, compute or store instruction ends (cycle 0 for the first) to the moment its
        own last one ends (the end of the run for the last span).  Fetch is not counted:
        it runs ahead of the other modules.  When the spans are separated by barriers (the
        kernels of one program, ``openvta.compiler.build_program_starts``), a span's cycles
        are the time its kernel had the machine to itself.

        Raises
        ------
        ValueError
            unless ``starts`` begins at 0 and increases.

        Examples
        --------
        >>> from openvta.blocked_gemm import build_blocked_gemm
        >>> from openvta.isa import preset
        >>> from openvta.sim.cycle import simulate_cycles
        >>> import numpy as np
        >>> a = np.ones((4, 8), np.int8); w = np.ones((8, 8), np.int8)
        >>> report = simulate_cycles(build_blocked_gemm(preset("tiny"), a, w)).report
        >>> halves = report.span_cycles([0, 10])
        >>> sum(halves) == report.cycles and min(halves) > 0
        True
        """
        bounds = [int(s) for s in starts]
        if not bounds or bounds[0] != 0 or any(b <= a for a, b in zip(bounds, bounds[1:])):
            raise ValueError(f"span starts must begin at 0 and increase, not {list(starts)!r}")
        assert self.model is not None, "the report has no model to cut into spans"
        ends = [0] * len(bounds)
        for record in self.model.records:
            if record.module != "fetch":
                span = bisect.bisect_right(bounds, record.index) - 1
                ends[span] = max(ends[span], record.end)
        ends[-1] = self.cycles
        for k in range(1, len(ends)):
            ends[k] = max(ends[k], ends[k - 1])  # a span with nothing to run costs nothing
        return [end - begin for begin, end in zip([0, *ends], ends)]

    @property
    def utilization(self) -> float:
        return self.macs / (self.cycles * self.peak_macs_per_cycle) if self.cycles else 0.0

    @property
    def read_bandwidth(self) -> float:
        """Achieved read bandwidth in bytes per cycle."""
        return self.dram_read_bytes / self.cycles if self.cycles else 0.0

    @property
    def write_bandwidth(self) -> float:
        return self.dram_write_bytes / self.cycles if self.cycles else 0.0

    @property
    def arithmetic_intensity(self) -> float:
        moved = self.dram_read_bytes + self.dram_write_bytes
        return 2 * self.macs / moved if moved else float("inf")

    @property
    def compute_bound_cycles(self) -> float:
        return self.macs / self.peak_macs_per_cycle

    @property
    def memory_bound_cycles(self) -> float:
        return max(self.dram_read_bytes, self.dram_write_bytes) / self.bus_bytes

    @property
    def roofline_cycles(self) -> float:
        return max(self.compute_bound_cycles, self.memory_bound_cycles)

    @property
    def roofline_fraction(self) -> float:
        return self.roofline_cycles / self.cycles if self.cycles else 0.0

    @property
    def bound(self) -> str:
        """Which roof limits the program: ``"compute"`` or ``"memory"``."""
        return "compute" if self.compute_bound_cycles >= self.memory_bound_cycles else "memory"

    @property
    def ideal_source(self) -> str:
        """Whose bytes bound :attr:`ideal_cycles`: ``"compulsory"`` or ``"moved"`` (a fallback)."""
        known = self.compulsory_read_bytes is not None and self.compulsory_write_bytes is not None
        return "compulsory" if known else "moved"

    @property
    def ideal_arithmetic_intensity(self) -> float:
        """Operations (2 per MAC) per compulsory DRAM byte: the operator's, not the schedule's."""
        if self.compulsory_read_bytes is None or self.compulsory_write_bytes is None:
            return self.arithmetic_intensity
        needed = self.compulsory_read_bytes + self.compulsory_write_bytes
        return 2 * self.macs / needed if needed else float("inf")

    @property
    def ideal_memory_cycles(self) -> float:
        # read and write channels run side by side, as in memory_bound_cycles
        if self.compulsory_read_bytes is None or self.compulsory_write_bytes is None:
            return self.memory_bound_cycles
        return max(self.compulsory_read_bytes, self.compulsory_write_bytes) / self.bus_bytes

    @property
    def ideal_cycles(self) -> float:
        return max(self.compute_bound_cycles, self.ideal_memory_cycles)

    @property
    def ideal_fraction(self) -> float:
        return self.ideal_cycles / self.cycles if self.cycles else 0.0

    @property
    def ideal_bound(self) -> str:
        """Which roof limits any schedule: ``"compute"`` or ``"memory"``."""
        return "compute" if self.compute_bound_cycles >= self.ideal_memory_cycles else "memory"

    @property
    def gops(self) -> float:
        """Operations (2 per MAC) per second at the nominal clock, in GOPS."""
        return 2 * self.macs / self.cycles * self.clock_mhz * 1e-3 if self.cycles else 0.0

    def format(self) -> str:
        lines = [
            f"cycles                {self.cycles}",
            f"GEMM utilization      {self.utilization:.1%} of {self.peak_macs_per_cycle} MACs/cycle",
            f"throughput            {self.gops:.2f} GOPS at {self.clock_mhz:g} MHz",
            f"DRAM read / write     {self.dram_read_bytes} / {self.dram_write_bytes} bytes "
            f"({self.read_bandwidth:.2f} / {self.write_bandwidth:.2f} bytes/cycle of "
            f"{self.bus_bytes})",
            f"arithmetic intensity  {self.arithmetic_intensity:.2f} ops/byte",
            f"roofline bound        {self.roofline_cycles:.0f} cycles ({self.bound}-bound, "
            f"bytes moved); reached {self.roofline_fraction:.1%}",
            f"ideal bound           {self.ideal_cycles:.0f} cycles ({self.ideal_bound}-bound, "
            f"{self._ideal_bytes()}); reached {self.ideal_fraction:.1%}",
            "",
            f"{'module':<8} {'insns':>7} {'busy':>9} {'token':>9} {'memory':>9} {'queue':>9} "
            f"{'idle':>9}",
        ]
        for name, s in self.modules.items():
            lines.append(f"{name:<8} {s.insns:>7} {s.busy:>9} {s.wait_token:>9} "
                         f"{s.wait_memory:>9} {s.wait_queue:>9} {s.idle:>9}")
        return "\n".join(lines)

    def _ideal_bytes(self) -> str:
        if self.compulsory_read_bytes is None or self.compulsory_write_bytes is None:
            return "the program names no compulsory bytes: bytes moved"
        return (f"compulsory bytes {self.compulsory_read_bytes} read / "
                f"{self.compulsory_write_bytes} written")


def build_report(model: CycleModel) -> CycleReport:
    """Close the books of a finished run: what no category claims is idle time."""
    cycles = int(model.env.now)
    counters = dict(model.machine.counters)
    for name, stats in model.stats.items():
        stats.busy, stats.wait_token = int(stats.busy), int(stats.wait_token)
        stats.wait_memory, stats.wait_queue = int(stats.wait_memory), int(stats.wait_queue)
        if name != "fetch" and model.status[name] == "waiting for an instruction":
            # waiting for an instruction while fetch could still route one is queue wait
            stats.wait_queue += max(0, min(model.fetch_done, cycles) - model.asked[name])
        stats.idle = cycles - stats.total
        busy, token, memory, queue = _MODULE_COUNTERS[name]
        counters[busy.value] = stats.busy
        if token is not None:
            counters[token.value] = stats.wait_token
        counters[memory.value] = stats.wait_memory
        counters[queue.value] = stats.wait_queue
    compute = model.stats["compute"].extra
    counters[Counter.CYCLES.value] = cycles
    counters[Counter.GEMM_BUSY_CYCLES.value] = compute.get("gemm", 0)
    counters[Counter.ALU_BUSY_CYCLES.value] = compute.get("alu", 0)
    cfg = model.cfg
    compulsory = model.machine.program.compulsory_bytes()
    return CycleReport(
        cycles=cycles,
        modules=model.stats,
        macs=counters[Counter.MACS.value],
        peak_macs_per_cycle=cfg.macs_per_uop // model.timing.gemm_ii_cycles,
        dram_read_bytes=counters[Counter.DRAM_READ_BYTES.value],
        dram_write_bytes=counters[Counter.DRAM_WRITE_BYTES.value],
        bus_bytes=cfg.bus_bytes,
        clock_mhz=model.timing.clock_mhz,
        counters=counters,
        compulsory_read_bytes=None if compulsory is None else compulsory[0],
        compulsory_write_bytes=None if compulsory is None else compulsory[1],
        model=model,
    )
