"""The report of one model run: per fused group cycles, utilization, roofline and DRAM bytes.

A :class:`ModelReport` holds one :class:`KernelReport` per fused group, in execution order,
and the whole run's cycles at the accelerator's nominal clock (``Timing.clock_mhz``).  Where
the time goes is told three ways: the accelerator's compute unit busy (GEMM and ALU
instructions), the rest of the accelerator's cycles (the compute unit waiting for loads,
stores and dependency tokens: memory), and the CPU fallback groups' wall time measured by the
executor on this host (a different clock: seconds, not cycles).

The roofline fraction is the cycle model's *ideal* one (:attr:`openvta.sim.cycle.report.
CycleReport.ideal_cycles`, the one definition): the larger of the kernel's MACs at the peak
rate and its compulsory DRAM bytes (each input element the operator really uses, each weight
and bias, each output, once) at one bus beat per cycle, over the kernel's cycles.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from openvta.isa import AluInsn, Config, GemmInsn, MemInsn, Opcode
from openvta.runtime import Program
from openvta.sim.cycle.model import InsnRecord
from openvta.sim.cycle.report import CycleReport

from .ir import Device
from .kernel_match import TUNED_PLAN

__all__ = ["KernelReport", "ModelReport", "span_dram_bytes", "span_compute_busy_cycles"]


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
        accelerator cycles charged to it over every program run (0 on the CPU and on back
        ends that count no time).
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
        the kernel alone as the cycle model's report (its cycles, MACs, moved and compulsory
        bytes; no module statistics), whose ``ideal_arithmetic_intensity``, ``gops`` and
        ``ideal_fraction`` place it on the roofline; None where ``ideal_cycles`` is.

    Two reports are equal when their counted figures are: ``cpu_seconds`` (a wall-time
    measurement), ``roofline`` (derived) and ``compute_busy_cycles`` (known only where every instruction is timed, so
    a board's report can equal the cycle model's) do not enter the comparison.
    """

    name: str
    placement: Device
    cycles: int = 0
    utilization: float | None = None
    macs: int = 0
    compute_busy_cycles: int | None = field(default=None, compare=False)
    dram_read_bytes: int | None = None
    dram_write_bytes: int | None = None
    ideal_cycles: float | None = None
    ideal_bound: str | None = None
    cpu_seconds: float = field(default=0.0, compare=False)
    roofline: CycleReport | None = field(default=None, compare=False, repr=False)

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


@dataclass(frozen=True)
class ModelReport:
    """Whole-model cycles (every program run of every region) and one entry per fused group.

    Members
    -------
    cycles :
        accelerator cycles of every program run, added up.
    kernels :
        one :class:`KernelReport` per fused group, in execution order.
    clock_mhz :
        the accelerator's nominal clock (the configuration's ``Timing``); None if unknown.
    """

    cycles: int
    kernels: tuple[KernelReport, ...]
    clock_mhz: float | None = None

    @property
    def milliseconds(self) -> float | None:
        """:attr:`cycles` at the nominal clock, in milliseconds."""
        return None if not self.clock_mhz else self.cycles / self.clock_mhz / 1000

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
        return None if busy is None else self.cycles - busy

    @property
    def cpu_seconds(self) -> float:
        """Wall time of the CPU fallback groups on this host."""
        return sum(k.cpu_seconds for k in self.kernels)

    @property
    def dram_bytes(self) -> int:
        """Bytes the accelerator's loads and stores moved (0 where no time is counted)."""
        return sum(k.dram_bytes or 0 for k in self.kernels)

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
            lines.append(f"{name:<{width}} {k.placement.value:>5} {k.cycles:>12,} "
                         f"{_percent(k.utilization):>6} {_percent(k.ideal_fraction):>6} "
                         f"{k.ideal_bound or '':>7} {dram:>9} {cpu:>8}{which}")
        lines.append(self._total())
        lines.extend(self._where())
        return "\n".join(lines)

    def _total(self) -> str:
        ms = self.milliseconds
        at = "" if ms is None else f" = {ms:.3f} ms at {self.clock_mhz:g} MHz"
        return f"total {self.cycles:,} accelerator cycles{at}; DRAM {self.dram_bytes:,} bytes"

    def _where(self) -> list[str]:
        cpu = f"CPU fallback  {self.cpu_seconds * 1e3:9.3f} ms wall on this host"
        busy, waiting = self.compute_busy_cycles, self.memory_cycles
        if not self.cycles or busy is None or waiting is None or not self.clock_mhz:
            return ["where the time goes: accelerator compute and memory not timed per "
                    "instruction on this back end", cpu]
        share = {"compute": busy / self.cycles, "memory": waiting / self.cycles}
        mhz = self.clock_mhz
        return ["where the time goes:",
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
    ``CycleReport.span_cycles`` cuts spans: ``starts[k]`` to ``starts[k + 1] - 1``)."""
    bounds = [*starts, program.insn_count]
    moved = []
    insns = program.instructions()
    for begin, end in zip(bounds, bounds[1:]):
        read = written = 0
        for insn in insns[begin:end]:
            if isinstance(insn, MemInsn) and not insn.is_sync:
                nbytes = insn.y_size * insn.x_size * cfg.elem_bytes(insn.memory_type)
                if insn.opcode == Opcode.STORE:
                    written += nbytes
                else:
                    read += nbytes
        moved.append((read, written))
    return moved


def span_compute_busy_cycles(records: Iterable[InsnRecord], starts: Sequence[int],
                             program: Program) -> list[int]:
    """Cycles the compute module spent executing each span's GEMM and ALU instructions.

    From the cycle model's records (an instruction's record runs from its take cycle, after
    its token pops, to its end: for GEMM and ALU instructions, issue and loop cycles only).
    The compute module's own loads (micro-ops, accumulators) are left out: they wait on DRAM.
    """
    insns = program.instructions()
    bounds = [int(s) for s in starts]
    busy = [0] * len(bounds)
    for record in records:
        if record.module == "compute" and isinstance(insns[record.index], (GemmInsn, AluInsn)):
            busy[max(0, bisect.bisect_right(bounds, record.index) - 1)] += record.end - record.start
    return busy
