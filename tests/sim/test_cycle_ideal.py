"""The cycle report's ideal bound: MACs at the peak rate or compulsory DRAM bytes on the bus.

Beside the roofline of the bytes a schedule moves (``roofline_cycles``), the report bounds
any schedule of the operator (``ideal_cycles``) with the compulsory bytes its program's
symbols carry, and falls back to the moved bytes, saying so, for a program without them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import openvta
from openvta.blocked_gemm import build_blocked_gemm
from openvta.compiler.workloads import RESNET18, random_inputs
from openvta.isa import preset
from openvta.sim.cycle import CycleReport, simulate_cycles


def _report(**figures: int) -> CycleReport:
    base: dict[str, Any] = dict(cycles=1000, modules={}, macs=2560, peak_macs_per_cycle=256, dram_read_bytes=8000,
                dram_write_bytes=800, bus_bytes=8, clock_mhz=100.0)
    return CycleReport(**{**base, **figures})


def test_ideal_bound_by_hand_memory_bound() -> None:
    r = _report(compulsory_read_bytes=4000, compulsory_write_bytes=400)
    # compute 2560 / 256 = 10 cycles; moved max(8000, 800) / 8 = 1000; compulsory 4000 / 8 = 500
    assert (r.compute_bound_cycles, r.memory_bound_cycles, r.ideal_memory_cycles) == (10, 1000, 500)
    assert (r.roofline_cycles, r.roofline_fraction) == (1000, 1.0)
    assert (r.ideal_cycles, r.ideal_fraction, r.ideal_bound, r.ideal_source) == (500, 0.5, "memory",
                                                                                 "compulsory")
    assert (r.arithmetic_intensity, r.ideal_arithmetic_intensity) == (2 * 2560 / 8800, 2 * 2560 / 4400)


def test_ideal_bound_by_hand_write_channel_and_compute() -> None:
    # the write channel is the slower one: 1600 / 8 = 200 cycles
    assert _report(compulsory_read_bytes=800, compulsory_write_bytes=1600).ideal_cycles == 200
    # compute-bound: 256000 / 256 = 1000 cycles, the fraction is the GEMM utilization
    r = _report(macs=256000, compulsory_read_bytes=800, compulsory_write_bytes=1600)
    assert (r.ideal_cycles, r.ideal_bound, r.ideal_fraction, r.utilization) == (1000, "compute", 1.0, 1.0)


def test_without_compulsory_bytes_the_ideal_is_the_moved_roofline() -> None:
    r = _report(compulsory_read_bytes=4000)  # half known is unknown
    assert (r.ideal_source, r.ideal_cycles, r.ideal_fraction) == ("moved", r.roofline_cycles,
                                                                  r.roofline_fraction)
    assert r.ideal_arithmetic_intensity == r.arithmetic_intensity


def test_a_hand_built_program_falls_back_and_says_so() -> None:
    a, w = np.ones((4, 8), np.int8), np.ones((8, 8), np.int8)
    report = simulate_cycles(build_blocked_gemm(preset("tiny"), a, w)).report
    assert report.compulsory_read_bytes is report.compulsory_write_bytes is None
    assert (report.ideal_source, report.ideal_cycles) == ("moved", report.roofline_cycles)
    line = next(ln for ln in report.format().splitlines() if ln.startswith("ideal bound"))
    assert line == (f"ideal bound           {report.roofline_cycles:.0f} cycles "
                    f"({report.bound}-bound, the program names no compulsory bytes: bytes moved); "
                    f"reached {report.roofline_fraction:.1%}")


def test_a_compiled_strided_conv_reports_its_compulsory_bytes() -> None:
    op = openvta.operator("conv2d", config="tiny", ci=4, co=8, hw=8, kernel=1, stride=2)
    program = op.build()
    report = openvta.simulate(program, backend="cycle").report
    assert report is not None
    read, write = 4 * 4 * 4 + 8 * 4 + 8 * 4, 8 * 4 * 4     # a quarter of the input, weights, bias
    assert (report.compulsory_read_bytes, report.compulsory_write_bytes) == (read, write)
    assert read + write == op.compulsory_bytes
    assert report.ideal_cycles == max(report.macs / report.peak_macs_per_cycle,
                                      max(read, write) / report.bus_bytes)
    assert report.dram_read_bytes >= read and report.dram_write_bytes >= write
    assert report.ideal_cycles <= report.roofline_cycles <= report.cycles
    line = next(ln for ln in report.format().splitlines() if ln.startswith("ideal bound"))
    assert line == (f"ideal bound           {report.ideal_cycles:.0f} cycles ({report.ideal_bound}-bound, "
                    f"compulsory bytes {read} read / {write} written); reached {report.ideal_fraction:.1%}")


LAYERS = [f"C{i}" for i in range(2, 12)]


@pytest.mark.slow
@pytest.mark.parametrize("vthreads", [1, 2])
@pytest.mark.parametrize("layer", LAYERS)
def test_resnet18_layers_are_compute_bound_at_the_ideal(layer: str, vthreads: int) -> None:
    operands = random_inputs(RESNET18[layer], seed=0)
    program = openvta.compile("conv2d", layer=f"resnet18.{layer}", vthreads=vthreads, config="default",
                              inputs={k: operands[k] for k in ("data", "weight", "bias")})
    report = openvta.simulate(program, backend="cycle").report
    assert report is not None
    assert report.ideal_source == "compulsory"
    assert report.ideal_bound == "compute"
    assert report.ideal_cycles == report.compute_bound_cycles
    assert report.ideal_fraction == pytest.approx(report.utilization, rel=1e-12)
    assert report.compulsory_read_bytes is not None and report.compulsory_write_bytes is not None
    assert report.compulsory_read_bytes <= report.dram_read_bytes
    assert report.compulsory_write_bytes <= report.dram_write_bytes
