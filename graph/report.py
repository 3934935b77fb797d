"""The report of one model run: per fused group cycles, utilization, roofline and DRAM bytes.

A :class:`ModelReport` holds one :class:`KernelReport` per fused group, in execution order,
and the whole run's cycles at the accelerator's nominal clock (``Timing.clock_mhz``).  Where
the time goes is told three ways: the accelerator's compute unit busy (GEMM and ALU
instructions), the rest of the accelerator's cycles (the compute unit waiting for loads,
stores and dependency tokens: memory), and the CPU fallback groups' wall time measured by the
executor on this host (a different clock: seconds, not cycles).

The roofline fraction is the *ideal* one (:attr:`openvta.isa.Roofline.ideal_cycles`, the one
definition, the cycle model's too): the larger of the kernel's MACs at the peak rate and its
compulsory DRAM bytes (each input element the operator really uses, each weight and bias, each
output, once) at one bus beat per cycle, over the kernel's cycles.

Per-kernel figures need a back end that times every instruction (the cycle model's
``timeline``).  A back end that only counts (``rtl``, ``board``) leaves every kernel's cycles
None and its figures are the :class:`RegionReport` of each region: what it measured, its
counters added over the region's runs; no cycle-model figure stands in for them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from openvta.isa import (UNIT_COUNTERS, AluInsn, Config, Counter, GemmInsn, InsnTiming, MemInsn, Opcode, Roofline, Unit,
                         dram_type)
from openvta.runtime import Program

from .ir import Device
from .group_match import TUNED_PLAN

__all__ = ["KernelReport", "ModelReport", "RegionReport", "span_dram_bytes", "span_compute_busy_cycles"]


@dataclass(frozen=True)
class KernelReport:
    """One fused group as run.

    Members
    -------
    name :
        the group's node names joined by ``+``.
    placement :
        where it ran.
    cycles :
        accelerator cycles charged to it over every program run; None on the CPU and on back
        ends that do not time every instruction (``functional``, ``rtl``, ``board``: see
        :attr:`ModelReport.regions`).
    utilization :
        GEMM utilization: its MACs (the graph's, without block padding) over cycles × peak
        MACs per cycle; None on the CPU and where no time is counted.
    macs :
        multiply-accumulates over every sample run (accelerator groups; 0 on the CPU).
    compute_busy_cycles :
        cycles the compute unit spent executing the group's GEMM and ALU instructions (issue
        and loop cycles; its micro-op and accumulator loads are memory time); None
        unless the back end times every instruction (``cycle``).
    dram_read_bytes, dram_write_bytes :
        the bytes its load and store instructions moved (instruction fetch not counted);
        None on the CPU and where no time is counted.
    ideal_cycles :
        the fewest cycles any schedule of it could take (the cycle model's ideal bound).
    ideal_bound :
        ``"compute"`` or ``"memory"``: which roof limits any schedule.
    cpu_seconds :
        wall time of its nodes on the host (CPU groups; 0.0 on the accelerator).
    roofline :
        the kernel alone as a :class:`~openvta.isa.Roofline` (its cycles, MACs, moved and
        compulsory bytes), whose ``ideal_arithmetic_intensity``, ``gops`` and
        ``ideal_fraction`` place it on the roofline; None where ``ideal_cycles`` is.

    Two reports are equal when their counted figures are: ``cpu_seconds`` (a wall-time
    measurement), ``roofline`` (derived) and ``compute_busy_cycles`` (known only where every
    instruction is timed) do not enter the comparison.
    """

    name: str
    placement: Device
    cycles: int | None = None
    utilization: float | None = None
    macs: int = 0
    compute_busy_cycles: int | None = field(default=None, compare=False)
    dram_read_bytes: int | None = None
    dram_write_bytes: int | None = None
    ideal_cycles: float | None = None
    ideal_bound: str | None = None
    cpu_seconds: float = field(default=0.0, compare=False)
    roofline: Roofline | None = field(default=None, compare=False, repr=False)

    @property
    def ideal_fraction(self) -> float | None:
        """The roofline fraction: ``ideal_cycles / cycles`` (None where no time is counted)."""
        if self.ideal_cycles is None or not self.cycles:
            return None
        return self.ideal_cycles / self.cycles

    @property
    def dram_bytes(self) -> int | None:
        """Read and written bytes added up."""
        if self.dram_read_bytes is None or self.dram_write_bytes is None:
            return None
        return self.dram_read_bytes + self.dram_write_bytes


#: The counters a region's row shows, after its cycles: each unit busy, then the DRAM bytes.
REGION_COUNTERS = (*(UNIT_COUNTERS[u].busy for u in Unit), Counter.DRAM_READ_BYTES,
                   Counter.DRAM_WRITE_BYTES)


@dataclass(frozen=True)
class RegionReport:
    """What the back end measured over every run of one accelerator region's program.

    Members
    -------
    index :
        the region's index.
    backend :
        the back end that ran it.
    runs :
        how many times its program ran (once per slice of ``cfg.BATCH`` samples).
    counters :
        the back end's counters, added over the runs; a counter it does not report is absent.
    """

    index: int
    backend: str
    runs: int
    counters: Mapping[str, int]

    @property
    def cycles(self) -> int | None:
        """Clock cycles of every run, added up; None where the back end counts no time."""
        return self.counters.get(Counter.CYCLES.value)


@dataclass(frozen=True)
class ModelReport:
    """Whole-model cycles (every program run of every region) and one entry per fused group.

    Members
    -------
    cycles :
        accelerator cycles of every program run as the back end counted them, added up;
        None where it counts no time (``functional``) or no region ran.
    kernels :
        one :class:`KernelReport` per fused group, in execution order.
    clock_mhz :
        the accelerator's nominal clock (the configuration's ``Timing``); None if unknown.
    regions :
        one :class:`RegionReport` per accelerator region that ran: the back end's own counters.
    """

    cycles: int | None
    kernels: tuple[KernelReport, ...]
    clock_mhz: float | None = None
    regions: tuple[RegionReport, ...] = ()

    @property
    def milliseconds(self) -> float | None:
        """:attr:`cycles` at the nominal clock, in milliseconds."""
        return None if not self.clock_mhz or self.cycles is None else self.cycles / self.clock_mhz / 1000

    @property
    def timed_per_kernel(self) -> bool:
        """Whether every accelerator kernel has its own cycles (a back end that times every
        instruction); otherwise only :attr:`regions` hold what was measured."""
        accel = [k for k in self.kernels if k.placement is Device.ACCEL]
        return bool(accel) and all(k.cycles is not None for k in accel)

    @property
    def compute_busy_cycles(self) -> int | None:
        """Cycles the compute unit was busy, over every kernel (None unless timed per instruction)."""
        busy = [k.compute_busy_cycles for k in self.kernels if k.placement is Device.ACCEL]
        if not busy or any(b is None for b in busy):
            return None
        return sum(b for b in busy if b is not None)

    @property
    def memory_cycles(self) -> int | None:
        """Accelerator cycles the compute unit was not busy: waiting for loads, stores, tokens."""
        busy = self.compute_busy_cycles
        return None if busy is None or self.cycles is None else self.cycles - busy

    @property
    def cpu_seconds(self) -> float:
        """Wall time of the CPU fallback groups on this host."""
        return sum(k.cpu_seconds for k in self.kernels)

    @property
    def dram_bytes(self) -> int | None:
        """Bytes the accelerator's loads and stores moved, per kernel added up (None where the
        kernels are not timed)."""
        known = [k.dram_bytes for k in self.kernels if k.dram_bytes is not None]
        return sum(known) if known else None

    def format(self, plans: Mapping[str, str] | None = None) -> str:
        """A text table: one row per fused group, then the totals and where the time goes.

        ``plans`` (group name → which plan its kernel has, ``CompiledModel.kernel_plans()``
        of a model compiled with tuned plans) adds a ``plan`` column: ``tuned`` or ``default``.
        """
        names = [_short(k.name) for k in self.kernels]
        width = max([len(n) for n in names] + [6])
        plan = " plan" if plans else ""
        lines = [f"{'kernel':<{width}} {'where':>5} {'cycles':>12} {'util':>6} {'ideal':>6} "
                 f"{'bound':>7} {'DRAM KiB':>9} {'CPU ms':>8}{plan}"]
        for name, k in zip(names, self.kernels):
            cpu = f"{k.cpu_seconds * 1e3:.2f}" if k.placement is Device.CPU else ""
            dram = "" if k.dram_bytes is None else f"{k.dram_bytes / 1024:.0f}"
            note = (plans or {}).get(k.name, "")
            which = " " + ("tuned" if note.startswith(TUNED_PLAN) else "default") if note else ""
            cycles = "" if k.cycles is None else f"{k.cycles:,}"
            lines.append(f"{name:<{width}} {k.placement.value:>5} {cycles:>12} "
                         f"{_percent(k.utilization):>6} {_percent(k.ideal_fraction):>6} "
                         f"{k.ideal_bound or '':>7} {dram:>9} {cpu:>8}{which}")
        lines.append(self._total())
        if self.regions and not self.timed_per_kernel:
            lines.extend(self._measured())
        lines.extend(self._where())
        return "\n".join(lines)

    def _total(self) -> str:
        if self.cycles is None:
            return "total: accelerator cycles not counted on this back end"
        ms = self.milliseconds
        at = "" if ms is None else f" = {ms:.3f} ms at {self.clock_mhz:g} MHz"
        dram = "" if self.dram_bytes is None else f"; DRAM {self.dram_bytes:,} bytes"
        return f"total {self.cycles:,} accelerator cycles{at}{dram}"

    def _measured(self) -> list[str]:
        """The regions' rows: the back end's own counters ("-" for one it does not report)."""
        backends = ", ".join(sorted({r.backend for r in self.regions}))
        names = [Counter.CYCLES.value, *(c.value for c in REGION_COUNTERS)]
        heads = ["cycles", *(f"{u.value} busy" for u in Unit), "DRAM read B", "DRAM write B"]
        widths = [max(len(h), 12) for h in heads]
        lines = [f"measured by the {backends} back end, per region (its counters over every run):",
                 "region  runs " + " ".join(f"{h:>{w}}" for h, w in zip(heads, widths))]
        for r in self.regions:
            cells = [f"{r.counters[n]:,}" if n in r.counters else "-" for n in names]
            lines.append(f"{r.index:>6} {r.runs:>5} " + " ".join(f"{c:>{w}}" for c, w in zip(cells, widths)))
        return lines

    def _where(self) -> list[str]:
        cpu = f"CPU fallback  {self.cpu_seconds * 1e3:9.3f} ms wall on this host"
        busy, waiting = self.compute_busy_cycles, self.memory_cycles
        if not self.cycles or busy is None or waiting is None or not self.clock_mhz:
            return ["where the time goes: accelerator compute and memory not timed per "
                    "instruction on this back end", cpu]
        share = {"compute": busy / self.cycles, "memory": waiting / self.cycles}
        mhz = self.clock_mhz
        accel_ms, cpu_ms = self.cycles / mhz / 1000, self.cpu_seconds * 1e3
        whole = accel_ms + cpu_ms
        return [f"where the time goes: accelerator {accel_ms:.3f} ms ({accel_ms / whole:.1%}), CPU {cpu_ms:.3f} ms "
                f"({cpu_ms / whole:.1%}, measured)",
                f"accelerator compute {busy / mhz / 1000:9.3f} ms ({share['compute']:.1%} of "
                "its cycles: GEMM and ALU busy)",
                f"accelerator memory  {waiting / mhz / 1000:9.3f} ms ({share['memory']:.1%}: "
                "compute waiting for loads, stores, tokens)",
                cpu]


def _short(name: str) -> str:
    """A group's first node and how many more it fuses: ``layer1.0.conv1 +3``."""
    first, *rest = name.split("+")
    return f"{first} +{len(rest)}" if rest else first


def _percent(value: float | None) -> str:
    return "" if value is None else f"{value:.1%}"


def span_dram_bytes(program: Program, starts: Sequence[int], cfg: Config) -> list[tuple[int, int]]:
    """``(read, written)`` bytes of each span's load and store instructions (as
    ``RunReport.span_cycles`` cuts spans: ``starts[k]`` to ``starts[k + 1] - 1``)."""
    bounds = [*starts, program.insn_count]
    moved = []
    insns = program.instructions()
    for begin, end in zip(bounds, bounds[1:]):
        read = written = 0
        for insn in insns[begin:end]:
            if isinstance(insn, MemInsn) and not insn.is_sync:
                nbytes = insn.y_size * insn.x_size * cfg.elem_bytes(dram_type(insn.opcode, insn.memory_type))
                if insn.opcode == Opcode.STORE:
                    written += nbytes
                else:
                    read += nbytes
        moved.append((read, written))
    return moved


def span_compute_busy_cycles(timeline: Iterable[InsnTiming], starts: Sequence[int],
                             program: Program) -> list[int]:
    """Cycles the compute unit spent executing each span's GEMM and ALU instructions.

    From a run's per-instruction timeline (:attr:`openvta.isa.RunReport.timeline`; on the
    cycle model an instruction runs from its take cycle, after its token pops, to its end:
    for GEMM and ALU instructions, issue and loop cycles only).  The compute unit's own
    loads (micro-ops, accumulators) are left out: they wait on DRAM.
    """
    insns = program.instructions()
    bounds = [int(s) for s in starts]
    busy = [0] * len(bounds)
    for record in timeline:
        if record.unit is Unit.COMPUTE and isinstance(insns[record.index], (GemmInsn, AluInsn)):
            span = max(0, bisect.bisect_right(bounds, record.index) - 1)
            busy[span] += record.end_cycle - record.start_cycle
    return busy
