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

**Cycles.**  ``ModelReport.cycles`` adds the cycles of every program run.  Per kernel, on
the ``cycle`` back end each run's cycles are cut at the kernels' first instructions
(``CycleReport.span_cycles``: a kernel is charged from the end of the previous kernel's
last instruction to the end of its own, the barrier between kernels ordering them); on
back ends that count only whole-program cycles (``rtl``, ``board``) the measured total is
apportioned over the kernels in the proportions of the cycle model's spans for the same
program (run once per region and call); ``functional`` counts no time (0 cycles, no
utilization).  A kernel's utilization is its MACs (the graph's, without block padding)
over its cycles times the peak MACs per cycle.
"""

from __future__ import annotations

from collections.abc import Mapping
import time
from dataclasses import replace

import numpy as np

from openvta.compiler.layout import pack_by_layout, unpack_by_layout
from openvta.isa import Config, Counter, timing_for
from openvta.runtime import Device as Target
from openvta.runtime import Program, Result
from openvta.sim.cycle.report import CycleReport

from .errors import ExecutionError
from .execute import run_node
from .ir import Device, Graph
from .regions import Region, Role
from .report import KernelReport, ModelReport, span_compute_busy_cycles, span_dram_bytes

__all__ = ["KernelReport", "ModelReport", "run_graph", "apportion"]


class _Run:
    """One call of :func:`run_graph`: the target, and the cycles counted so far."""

    def __init__(self, cfg: Config, target: Target) -> None:
        self.cfg, self.target = cfg, target
        self.cycles: dict[int, int] = {}
        self.weights: dict[int, list[int]] = {}
        self.busy: dict[int, int] | None = {}  # None once a run is not timed per instruction
        self.runs: dict[int, int] = {}
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
        block = self.cfg.BATCH
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
        """Add one program run's per-kernel cycles (nothing where the back end counts no time)."""
        report = result.report
        busy: list[int] | None = None
        if hasattr(report, "span_cycles"):  # the cycle model's report: per-instruction timing
            spans = list(report.span_cycles(region.kernel_starts))
            busy = span_compute_busy_cycles(report.model.records, region.kernel_starts, image)
        else:
            total = result.counters.get(Counter.CYCLES.value)
            if total is None:
                return
            if region.index not in self.weights:
                model = Target("cycle").run(image).report
                self.weights[region.index] = model.span_cycles(region.kernel_starts)
            spans = apportion(int(total), self.weights[region.index])
        self.timed = True
        self.runs[region.index] = self.runs.get(region.index, 0) + 1
        for k, (kernel, cycles) in enumerate(zip(region.kernels, spans)):
            self.cycles[kernel.group] = self.cycles.get(kernel.group, 0) + cycles
            if busy is None or self.busy is None:
                self.busy = None
            else:
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


def _slice(array: np.ndarray, start: int, block: int) -> np.ndarray:
    part = array[start:start + block]
    if len(part) < block:
        pad = np.zeros((block - len(part), *array.shape[1:]), array.dtype)
        part = np.concatenate([part, pad])
    return part


def apportion(total: int, weights: list[int]) -> list[int]:
    """``total`` split in proportion to ``weights`` (largest remainders), adding up to ``total``.

    >>> apportion(10, [1, 1, 1]), apportion(7, [0, 0]), apportion(100, [30, 10])
    ([4, 3, 3], [0, 7], [75, 25])
    """
    weight = sum(weights)
    if weight <= 0:
        return [0] * (len(weights) - 1) + [total]
    shares = [total * w // weight for w in weights]
    order = sorted(range(len(weights)), key=lambda i: -(total * weights[i] % weight))
    for i in order[:total - sum(shares)]:
        shares[i] += 1
    return shares


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
        region = region_of.get(node.group)  # type: ignore[arg-type]
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
    return ModelReport(sum(run.cycles.values()), tuple(kernels), timing_for(cfg).clock_mhz)


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
            cycles, macs = run.cycles.get(kernel.group, 0), kernel.macs * run.samples
            report = KernelReport(kernel.name, Device.ACCEL, cycles, macs=macs)
            if run.timed and cycles:
                read, written = compulsory[kernel.group]
                bound = CycleReport(cycles, {}, macs, peak, moved[k][0] * runs, moved[k][1] * runs,
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
    """Per accelerator group, ``(read, written)``: its operator's compulsory bytes per program run."""
    from .passes.match_kernels import group_kernels

    out = {}
    for group, match in group_kernels(graph, cfg).items():
        operator = match.build(cfg)
        read = sum(operator.used_bytes(n) for n in operator.logical_shapes if n != "out")
        out[group] = (read, operator.used_bytes("out"))
    return out
