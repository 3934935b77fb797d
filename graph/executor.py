"""Running a compiled model: CPU groups on numpy, each accelerator region on a Device.

Fused groups run in order.  A CPU group runs its nodes' references (the interpreter's
:func:`~openvta.graph.execute.run_node`); the first group of an accelerator region runs the
region's program on ``openvta.runtime.Device`` — the only way the graph level reaches a
simulator, the RTL or a board.

**Batches.**  A region's program is built for ``cfg.BATCH`` samples (1 on every preset).
The batch given to ``run`` is cut into slices of ``cfg.BATCH`` samples (the last one padded
with zeros, its extra rows dropped) and the program runs once per slice, each time from
its own DRAM image (so the constants are always there) with the slice's region inputs
packed into it (``NCHW{B}n{BI}c`` or ``NC{B}n{BI}c``, channels padded with zeros); the
region's outputs are read back and unpacked.  A model so runs any batch size without a
program per batch size, at the price of one program run per sample and region.

**Cycles.**  Each run's :class:`~openvta.isa.RunReport` is what its back end measured, and
the report shows nothing else.  ``ModelReport.cycles`` adds the cycles of every program run
(None on a back end that counts no time: ``functional``), and ``ModelReport.regions`` holds
each region's counters added over its runs.  Per kernel, a back end that times every
instruction (the ``cycle`` model's ``timeline``) has each run's cycles cut at the kernels'
first instructions (``RunReport.span_cycles``: a kernel is charged from the end of the
previous kernel's last instruction to the end of its own, the barrier between kernels
ordering them); a back end that counts only whole-program cycles (``rtl``, ``board``)
leaves the kernels' cycles None: no simulator is run behind it to cut its total.  A kernel's
utilization is its MACs (the graph's, without block padding) over its cycles times the
peak MACs per cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
import time
from dataclasses import replace

import numpy as np

from openvta.compiler.layout import pack_by_layout, unpack_by_layout
from openvta.isa import Config, Roofline, RunReport, timing_for
from openvta.runtime import Device as Target
from openvta.runtime import Program, Result

from .errors import ExecutionError
from .execute import run_node
from .ir import Device, Graph
from .regions import Region, Role
from .report import KernelReport, ModelReport, RegionReport, span_compute_busy_cycles, span_dram_bytes

__all__ = ["KernelReport", "ModelReport", "RegionReport", "run_graph"]


class _Run:
    """One call of :func:`run_graph`: the target, and the cycles counted so far."""

    def __init__(self, cfg: Config, target: Target) -> None:
        self.cfg, self.target = cfg, target
        self.cycles: dict[int, int] = {}
        self.busy: dict[int, int] | None = {}  # None once a run is not timed per instruction
        self.runs: dict[int, int] = {}
        self.counters: dict[int, dict[str, int]] = {}  # per region, added over its runs
        self.backend = target.name
        self.cpu_seconds: dict[int | None, float] = {}
        self.samples = 0
        self.timed = False

    def region(self, region: Region, values: dict[str, np.ndarray]) -> None:
        """Run ``region``'s program on every slice of the batch; its outputs into ``values``."""
        if region.program is None:
            raise ExecutionError(f"region {region.index} has no program; compile the model again")
        inputs = {t.name: values[t.value or t.name] for t in region.with_role(Role.INPUT)}
        outputs = region.with_role(Role.OUTPUT)
        self.samples = count = _batch(region, inputs)
        block = _rows_a_run(region, self.cfg)
        parts: dict[str, list[np.ndarray]] = {t.name: [] for t in outputs}
        for start in range(0, count, block):
            image = replace(region.program, dram=region.program.dram.copy())
            for t in region.with_role(Role.INPUT):
                packed = pack_by_layout(_slice(inputs[t.name], start, block), t.layout, self.cfg)
                image.write(t.name, packed.astype(t.dtype.numpy))
            result = self.target.run(image)
            for t in outputs:
                unpacked = unpack_by_layout(image.read(t.name, result.dram), t.layout, t.shape)
                parts[t.name].append(unpacked[:count - start])
            self.tally(region, image, result)
        for t in outputs:
            empty = np.zeros((0, *t.shape[1:]), t.dtype.numpy)
            values[t.value or t.name] = np.concatenate(parts[t.name]) if parts[t.name] else empty

    def tally(self, region: Region, image: Program, result: Result) -> None:
        """Add one program run's counters, and its per-kernel cycles where it timed every
        instruction."""
        report = result.report
        if not isinstance(report, RunReport):  # Device.run gives every result one
            raise ExecutionError(f"region {region.index}: the back end's report must be a RunReport, "
                                 f"not {type(report).__name__}")
        self.backend = report.backend or self.backend
        self.runs[region.index] = self.runs.get(region.index, 0) + 1
        added = self.counters.setdefault(region.index, {})
        for name, value in report.counters.items():
            added[name] = added.get(name, 0) + int(value)
        if report.timeline is None or report.measured_cycles is None:
            self.busy = None
            return
        spans = report.span_cycles(region.kernel_starts)
        busy = span_compute_busy_cycles(report.timeline, region.kernel_starts, image)
        self.timed = True
        for k, (kernel, cycles) in enumerate(zip(region.kernels, spans)):
            self.cycles[kernel.group] = self.cycles.get(kernel.group, 0) + cycles
            if self.busy is not None:
                self.busy[kernel.group] = self.busy.get(kernel.group, 0) + busy[k]


def _batch(region: Region, inputs: Mapping[str, np.ndarray]) -> int:
    counts = {a.shape[0] for a in inputs.values()}
    if len(counts) != 1:
        raise ExecutionError(f"region {region.index} inputs must share one batch size, not "
                             f"{sorted(counts)!r}")
    for t in region.with_role(Role.INPUT):
        if inputs[t.name].shape[1:] != t.shape[1:]:
            raise ExecutionError(f"region {region.index} input {t.name!r} must have samples of shape "
                                 f"{t.shape[1:]}, not {inputs[t.name].shape[1:]}")
    return counts.pop()


def _rows_a_run(region: Region, cfg: Config) -> int:
    """The samples one run of ``region``'s program takes: ``cfg.BATCH``, or a dense kernel's
    static rows (a transformer's tokens, all in one run)."""
    sizes = {t.shape[0] for t in region.with_role(Role.INPUT) if t.shape}
    return max(sizes) if sizes else cfg.BATCH


def _slice(array: np.ndarray, start: int, block: int) -> np.ndarray:
    part = array[start:start + block]
    if len(part) < block:
        pad = np.zeros((block - len(part), *array.shape[1:]), array.dtype)
        part = np.concatenate([part, pad])
    return part


def run_graph(graph: Graph, cfg: Config, feeds: Mapping[str, np.ndarray],
              target: Target) -> tuple[dict[str, np.ndarray], ModelReport]:
    """Run the compiled ``graph`` on ``feeds``: outputs by name, and the report (module docstring).

    Raises
    ------
    ExecutionError
        for a region without a program or a node that fails, naming it.
    """
    run = _Run(cfg, target)
    values: dict[str, np.ndarray] = {**graph.constants, **feeds}
    region_of = {g: r for r in graph.regions for g in r.groups}
    done: set[int] = set()
    for node in graph.nodes:
        region = None if node.group is None else region_of.get(node.group)
        if region is None and node.placement is not None and node.placement.device is Device.ACCEL:
            raise ExecutionError(f"node {node.label} is placed on the accelerator but no region "
                                 "program runs it; compile the model again")
        if region is None:
            start = time.perf_counter()
            values[node.outputs[0]] = run_node(graph, node, values)
            wall = time.perf_counter() - start
            run.cpu_seconds[node.group] = run.cpu_seconds.get(node.group, 0.0) + wall
        elif region.index not in done:
            run.region(region, values)
            done.add(region.index)
    return {name: values[name] for name in graph.outputs}, _report(graph, cfg, run)


def _report(graph: Graph, cfg: Config, run: _Run) -> ModelReport:
    groups: dict[int | None, list[str]] = {}
    for node in graph.nodes:
        groups.setdefault(node.group, []).append(node.name)
    accel = _accelerator_reports(graph, cfg, run)
    kernels = []
    for group, names in groups.items():
        name = "+".join(names)
        if group in accel:
            kernels.append(replace(accel[group], name=name))
        else:
            kernels.append(KernelReport(name, Device.CPU, cpu_seconds=run.cpu_seconds.get(group, 0.0)))
    regions = tuple(RegionReport(index, run.backend, run.runs[index], counters)
                    for index, counters in sorted(run.counters.items()))
    measured = [r.cycles for r in regions]
    cycles = sum(c for c in measured if c is not None) if any(c is not None for c in measured) else None
    return ModelReport(cycles, tuple(kernels), timing_for(cfg).clock_mhz, regions)


def _accelerator_reports(graph: Graph, cfg: Config, run: _Run) -> dict[int, KernelReport]:
    """Per accelerator group: cycles, utilization and, once timed, bytes and the ideal bound."""
    peak = cfg.macs_per_uop // timing_for(cfg).gemm_ii_cycles
    compulsory = _compulsory_bytes(graph, cfg) if run.timed else {}
    reports = {}
    for region in graph.regions:
        runs = run.runs.get(region.index, 0)
        moved = (span_dram_bytes(region.program, region.kernel_starts, cfg)
                 if run.timed and region.program is not None else [])
        for k, kernel in enumerate(region.kernels):
            cycles, macs = run.cycles.get(kernel.group), kernel.macs * run.samples
            report = KernelReport(kernel.name, Device.ACCEL, cycles, macs=macs)
            if run.timed and cycles:
                read, written = compulsory[kernel.group]
                bound = Roofline(cycles, macs, peak, moved[k][0] * runs, moved[k][1] * runs,
                                 cfg.bus_bytes, timing_for(cfg).clock_mhz,
                                 compulsory_read_bytes=read * runs,
                                 compulsory_write_bytes=written * runs)
                busy = None if run.busy is None else run.busy.get(kernel.group, 0)
                report = replace(report, utilization=macs / (cycles * peak),
                                 compute_busy_cycles=busy, dram_read_bytes=bound.dram_read_bytes,
                                 dram_write_bytes=bound.dram_write_bytes,
                                 ideal_cycles=bound.ideal_cycles, ideal_bound=bound.ideal_bound,
                                 roofline=bound)
            reports[kernel.group] = report
    return reports


def _compulsory_bytes(graph: Graph, cfg: Config) -> dict[int, tuple[int, int]]:
    """Per accelerator group, ``(read, written)``: its operator's compulsory bytes per program run
    (the operator match kernels built, kept in ``graph.kernels``; built again only for a model
    file, which does not keep it)."""
    from .passes.match_kernels import group_kernels

    out = {}
    for group, match in group_kernels(graph, cfg).items():
        operator = match.build(cfg)
        read = sum(operator.used_bytes(n) for n in operator.logical_shapes if n != "out")
        out[group] = (read, operator.used_bytes("out"))
    return out
