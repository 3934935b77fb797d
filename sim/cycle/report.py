"""The cycle model's report: where the cycles went, utilization and the roofline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from openvta.isa import Roofline, RunReport, Unit

from .memory import ModuleStats
from .trace import TraceSource, write_chrome_trace, write_timeline

__all__ = ["CycleReport"]


@dataclass
class CycleReport(RunReport, Roofline):
    """Figures of one run of the cycle model: a :class:`~openvta.isa.RunReport` that times
    every instruction (its ``timeline``) and a :class:`~openvta.isa.Roofline`.

    Members
    -------
    cycles :
        clock cycles from start until FINISH completes.
    modules :
        per unit: busy, waiting on a token, on memory, on its command queue, idle (its
        ``units`` are the same figures without the idle time).
    model :
        the finished run, for traces and timelines.

    The roofline's figures (``utilization``, ``roofline_cycles``, ``ideal_cycles``,
    ``ideal_fraction``…) are :class:`~openvta.isa.Roofline`'s; the counters, units and
    timeline :class:`~openvta.isa.RunReport`'s.
    """

    backend: str = field(default="cycle", kw_only=True)
    modules: dict[Unit, ModuleStats] = field(default_factory=dict)
    model: TraceSource | None = field(default=None, repr=False, compare=False)

    def write_trace(self, path: str | Path) -> None:
        """Write the Chrome/Perfetto trace of this run to ``path`` (JSON)."""
        if self.model is None:
            raise ValueError("the report must hold its model to be traced, not None")
        write_chrome_trace(self.model, path)

    def write_timeline(self, path: str | Path, title: str = "") -> None:
        """Write a PNG timeline of the four units to ``path``."""
        if self.model is None:
            raise ValueError("the report must hold its model to be drawn, not None")
        write_timeline(self.model, path, title)

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
            lines.append(f"{name.value:<8} {s.insns:>7} {s.busy:>9} {s.wait_token:>9} "
                         f"{s.wait_memory:>9} {s.wait_queue:>9} {s.idle:>9}")
        return "\n".join(lines)
