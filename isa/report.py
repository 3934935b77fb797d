"""What a back end measured: its counters, each unit's timing, and the roofline of a run.

Every back end returns a :class:`RunReport` as ``Result.report``, filled as far as it
can: the functional simulator counts events and no time (no cycle counter, no unit
timing, no timeline); the RTL and a board read their hardware counters (the cycle ones
too, where the image implements them) but time no single instruction; the cycle model
fills everything, a per-instruction :attr:`RunReport.timeline` included, and returns its
own subclass (``openvta.sim.cycle.CycleReport``).  A figure a back end did not measure is
absent (a counter missing from ``counters``) or None, never 0.

:class:`Roofline` is the one definition of the roofline and ideal bounds, used by the
cycle model's report and by the graph's per-kernel reports.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from .counters import UNIT_COUNTERS, Counter
from .enums import Unit

__all__ = ["InsnTiming", "LinkTiming", "Roofline", "RunReport", "UnitTiming", "unit_timing"]


@dataclass(frozen=True)
class UnitTiming:
    """Where one unit's cycles went; a figure its back end did not measure is None.

    Members
    -------
    busy_cycles :
        cycles it executed instructions (fetch: read and routed them).
    wait_token_cycles :
        cycles it waited on a dependency-token queue (None for fetch, which pops none).
    wait_memory_cycles :
        cycles it waited for the memory system.
    wait_queue_cycles :
        cycles it waited on its command queue (fetch: on a full one).
    """

    busy_cycles: int | None = None
    wait_token_cycles: int | None = None
    wait_memory_cycles: int | None = None
    wait_queue_cycles: int | None = None


@dataclass(frozen=True)
class InsnTiming:
    """One executed instruction of a timed run: which unit ran it, from when to when."""

    index: int
    unit: Unit
    start_cycle: int
    end_cycle: int


#: Bits a byte takes on a UART line (8N1: a start bit, 8 data bits, a stop bit).
UART_BITS_PER_BYTE = 10


@dataclass(frozen=True)
class LinkTiming:
    """A board run's host link, apart from its compute: the bytes on the wire each way
    (requests and replies) per phase, the time they take at the line rate (8N1), and the
    wall-clock seconds each phase took.

    Members
    -------
    baud :
        the line rate.
    upload_bytes, upload_s :
        writing the DRAM image (instructions, micro-ops, weights, inputs).
    control_bytes, control_s :
        START and the STATUS polls until FINISH (with the cycle counter read at each poll
        where the image has it and a progress hook shows it): the compute, seen from the host.
    readback_bytes, readback_s :
        reading the counters and the DRAM image back.

    Examples
    --------
    >>> link = LinkTiming(115200, 11520, 1.2, 2304, 0.5, 11520, 1.3)
    >>> link.wire_s(link.upload_bytes), link.transfer_s
    (1.0, 2.5)
    """

    baud: int
    upload_bytes: int
    upload_s: float
    control_bytes: int
    control_s: float
    readback_bytes: int
    readback_s: float

    def wire_s(self, count: int) -> float:
        """Seconds ``count`` bytes take on the line at :attr:`baud`."""
        return count * UART_BITS_PER_BYTE / self.baud

    @property
    def transfer_s(self) -> float:
        """Wall-clock seconds of moving the image both ways (the upload and the read-back)."""
        return self.upload_s + self.readback_s

    def format(self, cycles: int | None = None) -> str:
        """The transfer apart from the compute, as lines."""
        def phase(name: str, count: int, seconds: float) -> str:
            return (f"  {name:<10} {count:>10,} bytes  {self.wire_s(count):>9.3f} s on the wire  "
                    f"{seconds:>9.3f} s measured")
        compute = "" if cycles is None else f" ({cycles:,} cycles counted by the board)"
        return "\n".join([
            f"host link at {self.baud} baud (8N1): transfer {self.transfer_s:.3f} s, compute {self.control_s:.3f} s"
            + compute,
            phase("upload", self.upload_bytes, self.upload_s),
            phase("compute", self.control_bytes, self.control_s),
            phase("read-back", self.readback_bytes, self.readback_s)])


def unit_timing(counters: Mapping[str, int]) -> dict[Unit, UnitTiming]:
    """Each unit's timing from its cycle counters (:data:`~openvta.isa.counters.UNIT_COUNTERS`);
    a unit none of whose counters is present is left out.

    Examples
    --------
    >>> unit_timing({"cycles": 10, "load_busy_cycles": 4})
    {<Unit.LOAD: 'load'>: UnitTiming(busy_cycles=4, wait_token_cycles=None, wait_memory_cycles=None, \
wait_queue_cycles=None)}
    >>> unit_timing({"macs": 64})
    {}
    """
    out = {}
    for unit, names in UNIT_COUNTERS.items():
        figures = [None if name is None else counters.get(name.value) for name in names]
        if any(f is not None for f in figures):
            out[unit] = UnitTiming(*figures)
    return out


@dataclass(kw_only=True)
class RunReport:
    """What one run of a program on a back end measured (module docstring).

    Members
    -------
    backend :
        the back end's name (``functional``, ``cycle``, ``rtl``, ``board``…).
    counters :
        the counters it reports, by name (:class:`~openvta.isa.Counter` values).
    units :
        per unit, the timing it measured; empty where it measures no time.
    timeline :
        every executed instruction's unit and cycles, where the back end times each one
        (the cycle model); None otherwise.
    link :
        a board's host link: what moving the image took, apart from the compute
        (:class:`LinkTiming`); None on the other back ends.

    Examples
    --------
    >>> report = RunReport.measured("board", {"cycles": 120, "macs": 64})
    >>> report.measured_cycles, report.units, report.timeline is None
    (120, {}, True)
    """

    backend: str = ""
    counters: dict[str, int] = field(default_factory=dict)
    units: dict[Unit, UnitTiming] = field(default_factory=dict)
    timeline: tuple[InsnTiming, ...] | None = None
    link: LinkTiming | None = None

    @classmethod
    def measured(cls, backend: str, counters: Mapping[str, int], link: LinkTiming | None = None) -> RunReport:
        """The report of a back end that measures counters only: units from the counters."""
        figures = {str(k): int(v) for k, v in counters.items()}
        return cls(backend=backend, counters=figures, units=unit_timing(figures), link=link)

    @property
    def measured_cycles(self) -> int | None:
        """Clock cycles from start to FINISH, or None where the back end counts no time."""
        return self.counters.get(Counter.CYCLES.value)

    def format(self) -> str:
        """Each unit's timing as a table (``-`` for a figure not measured), after a board's
        host link (:meth:`LinkTiming.format`); empty when the back end measured neither.

        Examples
        --------
        >>> print(RunReport.measured("rtl", {"cycles": 9, "load_busy_cycles": 4}).format())
        unit          busy     token    memory     queue
        load             4         -         -         -
        """
        lines = [] if self.link is None else [self.link.format(self.measured_cycles)]
        if not self.units:
            return "\n".join(lines)
        lines.append(f"{'unit':<8} {'busy':>9} {'token':>9} {'memory':>9} {'queue':>9}")
        for unit, t in self.units.items():
            cells = [t.busy_cycles, t.wait_token_cycles, t.wait_memory_cycles, t.wait_queue_cycles]
            lines.append(f"{unit.value:<8} " + " ".join(f"{'-' if c is None else c:>9}" for c in cells))
        return "\n".join(lines)

    def span_cycles(self, starts: Sequence[int]) -> list[int]:
        """Cycles per span of consecutive instructions, adding up to the run's cycles.

        Span ``k`` holds instructions ``starts[k]`` to ``starts[k + 1] - 1`` (the last one to
        the end of the program); it is charged from the moment the previous span's last
        load, compute or store instruction ends (cycle 0 for the first) to the moment its
        own last one ends (the end of the run for the last span).  Fetch is not counted:
        it runs ahead of the other units.  When the spans are separated by barriers (the
        kernels of one program, ``openvta.compiler.build_program_starts``), a span's cycles
        are the time its kernel had the machine to itself.

        Raises
        ------
        ValueError
            unless ``starts`` begins at 0 and increases, or when the run has no timeline.

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
        total = self.measured_cycles
        if self.timeline is None or total is None:
            raise ValueError(f"the {self.backend or 'unnamed'} back end must time every instruction "
                             "to cut its run into spans, not only count cycles")
        ends = [0] * len(bounds)
        for record in self.timeline:
            if record.unit is not Unit.FETCH:
                span = bisect.bisect_right(bounds, record.index) - 1
                ends[span] = max(ends[span], record.end_cycle)
        ends[-1] = total
        for k in range(1, len(ends)):
            ends[k] = max(ends[k], ends[k - 1])  # a span with nothing to run costs nothing
        return [end - begin for begin, end in zip([0, *ends], ends)]


@dataclass
class Roofline:
    """A run's (or a kernel's) figures and where they place it on the roofline.

    Members
    -------
    cycles :
        clock cycles it took.
    macs :
        its multiply-accumulates.
    peak_macs_per_cycle :
        the GEMM core's peak rate.
    dram_read_bytes, dram_write_bytes :
        the DRAM bytes it moved.
    bus_bytes :
        bytes per bus beat (one beat per cycle on each of the read and write channels).
    clock_mhz :
        the nominal clock.
    compulsory_read_bytes, compulsory_write_bytes :
        the DRAM bytes any schedule of the operator must read and write (each input
        element it really uses, each weight and bias, each output element, once); None
        when unknown.

    The derived figures: ``utilization`` (MACs ÷ (cycles × peak)), ``arithmetic_intensity``
    (operations, 2 per MAC, per DRAM byte moved), ``roofline_cycles`` (the fewest cycles
    this schedule could take: the larger of its MACs at the peak rate and the bytes it moves
    at one beat per cycle per channel; a schedule that moves more raises its own roof),
    ``ideal_cycles`` (the fewest any schedule could take: the same with the compulsory
    bytes, or the moved ones when those are unknown: ``ideal_source``) and their fractions
    of ``cycles``.

    Examples
    --------
    >>> r = Roofline(cycles=100, macs=1600, peak_macs_per_cycle=64, dram_read_bytes=800,
    ...              dram_write_bytes=100, bus_bytes=8, clock_mhz=100.0)
    >>> r.roofline_cycles, r.bound, f"{r.utilization:.0%}"
    (100.0, 'memory', '25%')
    """

    cycles: int
    macs: int
    peak_macs_per_cycle: int
    dram_read_bytes: int
    dram_write_bytes: int
    bus_bytes: int
    clock_mhz: float
    compulsory_read_bytes: int | None = None
    compulsory_write_bytes: int | None = None

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

    def _ideal_bytes(self) -> str:
        if self.compulsory_read_bytes is None or self.compulsory_write_bytes is None:
            return "the program names no compulsory bytes: bytes moved"
        return (f"compulsory bytes {self.compulsory_read_bytes} read / "
                f"{self.compulsory_write_bytes} written")
