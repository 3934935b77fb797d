"""The model run's report: per kernel bytes and ideal bound against the cycle model's own
whole-program figures, where the time goes, and the text table."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import conv_relu_graph, residual_graph

from openvta.graph.ir import Device
from openvta.graph.compiled_model import CompiledModel
from openvta.graph.pipeline import compile_model
from openvta.graph.report import KernelReport, ModelReport, RegionReport
from openvta.isa import Counter, timing_for
from openvta.runtime import Device as Target

X = np.random.default_rng(2).standard_normal((2, 16, 4, 4)).astype(np.float32)


@pytest.fixture(scope="module")
def residual() -> CompiledModel:
    return compile_model(residual_graph(), X, config="small")


@pytest.mark.parametrize("preset", ["tiny", "default"])
def test_a_one_kernel_region_matches_the_cycle_models_whole_program_figures(preset: str) -> None:
    """With one kernel per region the kernel's cycles and bytes are the program's."""
    x = np.random.default_rng(3).standard_normal((1, 16, 6, 6)).astype(np.float32)
    model = compile_model(conv_relu_graph(), x, config=preset)
    report = model.run(x, backend="cycle").report
    kernels = {k.name: k for k in report.kernels if k.placement is Device.ACCEL}
    for region in model.graph.regions:
        if len(region.kernels) != 1:
            continue
        assert region.program is not None
        whole = Target("cycle").run(region.program).report
        kernel = kernels[region.kernels[0].name]
        fetched = whole.counters[Counter.INSN_FETCH_BYTES.value]
        assert kernel.cycles == whole.cycles
        assert kernel.dram_read_bytes == whole.dram_read_bytes - fetched
        assert kernel.dram_write_bytes == whole.dram_write_bytes
        compute = whole.modules["compute"]  # GEMM and ALU loop cycles ≤ ours ≤ all its busy ones
        assert compute.extra["gemm"] + compute.extra.get("alu", 0) <= kernel.compute_busy_cycles
        assert kernel.compute_busy_cycles <= compute.busy


def test_per_kernel_figures_add_up(residual: CompiledModel) -> None:
    report = residual.run(X, backend="cycle").report
    accel = [k for k in report.kernels if k.placement is Device.ACCEL]
    assert len(accel) == 3 and report.cycles == sum(k.cycles for k in accel)
    for k in accel:
        assert k.ideal_cycles is not None and k.ideal_fraction is not None
        assert 0 < k.ideal_fraction <= 1 and k.ideal_bound in ("compute", "memory")
        assert k.dram_bytes and k.dram_bytes > 0
        assert k.roofline is not None and k.roofline.ideal_cycles == k.ideal_cycles
        assert k.roofline.cycles == k.cycles and k.roofline.macs == k.macs
        assert k.compute_busy_cycles is not None and 0 < k.compute_busy_cycles <= k.cycles
        assert k.macs == residual.graph.regions[0].kernels[accel.index(k)].macs * len(X)
    assert report.clock_mhz == timing_for(residual.config).clock_mhz
    assert report.milliseconds == report.cycles / report.clock_mhz / 1000
    assert report.compute_busy_cycles is not None and report.memory_cycles is not None
    assert report.compute_busy_cycles + report.memory_cycles == report.cycles
    cpu = [k for k in report.kernels if k.placement is Device.CPU]
    assert cpu and all(k.cpu_seconds > 0 for k in cpu)  # measured, never asserted on its size
    assert report.cpu_seconds == sum(k.cpu_seconds for k in cpu)


def test_functional_counts_no_time(residual: CompiledModel) -> None:
    report = residual.run(X).report
    accel = [k for k in report.kernels if k.placement is Device.ACCEL]
    assert report.cycles is None and report.milliseconds is None and report.dram_bytes is None
    assert all(k.cycles is None and k.ideal_fraction is None and k.dram_bytes is None for k in accel)
    assert [r.backend for r in report.regions] == ["functional"] * len(residual.graph.regions)
    assert all(Counter.CYCLES.value not in r.counters and r.cycles is None for r in report.regions)
    assert report.compute_busy_cycles is None and report.memory_cycles is None
    assert "not timed per instruction on this back end" in report.format()


def test_format_is_one_row_per_group_then_totals() -> None:
    report = ModelReport(
        1500,
        (KernelReport("q", Device.CPU, cpu_seconds=0.00125),
         KernelReport("conv+relu", Device.ACCEL, 1000, 0.5, 2048, 600, 3072, 1024, 800.0,
                      "compute"),
         KernelReport("fc", Device.ACCEL, 500, 0.25, 512, 400, 1024, 0, 100.0, "memory")),
        clock_mhz=100.0)
    lines = report.format().splitlines()
    assert lines[0].split() == ["kernel", "where", "cycles", "util", "ideal", "bound", "DRAM",
                                "KiB", "CPU", "ms"]
    assert lines[1].split() == ["q", "cpu", "1.25"]  # no accelerator cycles: an empty cell
    assert lines[2].split() == ["conv", "+1", "accel", "1,000", "50.0%", "80.0%", "compute", "4"]
    assert lines[3].split() == ["fc", "accel", "500", "25.0%", "20.0%", "memory", "1"]
    assert lines[4] == "total 1,500 accelerator cycles = 0.015 ms at 100 MHz; DRAM 5,120 bytes"
    assert lines[5] == "where the time goes: accelerator 0.015 ms (1.2%), CPU 1.250 ms (98.8%, measured)"
    assert lines[6].split()[:4] == ["accelerator", "compute", "0.010", "ms"]
    assert "(66.7% of its cycles" in lines[6]
    assert lines[7].split()[:4] == ["accelerator", "memory", "0.005", "ms"]
    assert lines[8].split()[:4] == ["CPU", "fallback", "1.250", "ms"]
    assert len(lines) == 9


def test_equality_ignores_the_measured_wall_time_and_the_busy_split() -> None:
    one = KernelReport("a", Device.ACCEL, 10, compute_busy_cycles=5, cpu_seconds=0.1)
    assert one == KernelReport("a", Device.ACCEL, 10)
    assert one != KernelReport("a", Device.ACCEL, 11)


def test_an_rtl_like_run_shows_its_counters_per_region_and_no_model_figures() -> None:
    """A back end that counts whole programs: kernels without cycles, its counters per region."""
    counters = {"cycles": 900, "load_busy_cycles": 300, "compute_busy_cycles": 500, "macs": 64}
    report = ModelReport(900, (KernelReport("conv+relu", Device.ACCEL, macs=32),
                               KernelReport("fc", Device.ACCEL, macs=32)), 100.0,
                         (RegionReport(0, "rtl", 1, counters),))
    assert not report.timed_per_kernel and report.dram_bytes is None
    lines = report.format().splitlines()
    assert lines[1].split() == ["conv", "+1", "accel"] and lines[2].split() == ["fc", "accel"]
    assert lines[3] == "total 900 accelerator cycles = 0.009 ms at 100 MHz"
    assert lines[4] == "measured by the rtl back end, per region (its counters over every run):"
    assert lines[5].split()[:3] == ["region", "runs", "cycles"]
    assert lines[6].split() == ["0", "1", "900", "-", "300", "500", "-", "-", "-"]
    assert lines[7].startswith("where the time goes: accelerator compute and memory not timed")
