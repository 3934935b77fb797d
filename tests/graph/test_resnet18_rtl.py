"""The ResNet-18 example, whole, on the RTL: the tests' small variant (32×32 images, 16
channels in ``conv1``, 1000 classes: all 20 convs, the 8 residual blocks, the pooling and
``fc``) compiled for the ``small`` preset, every accelerator region's program on Verilator.

The logits equal the integer reference and the functional run's bit for bit; every region's
final DRAM image and event counters equal the functional simulator's on the same program;
the cycle model stays within 2 % of the RTL's cycles.  About 180,000 simulated cycles: some
15 s once the ``small`` Verilator build is cached (tests/hw/test_rtl.py builds it too).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import openvta
from openvta.graph.compiled_model import CompiledModel
from openvta.hw.cosim.backend import RtlBackend
from openvta.isa import EVENT_COUNTERS, Counter
from openvta.runtime import Program, Result
from openvta.sim.cycle import simulate_cycles
from openvta.sim.functional import run as run_functional

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "resnet18"
sys.path.insert(0, str(EXAMPLE))
from make_model import build_resnet18, random_images  # noqa: E402

pytestmark = [pytest.mark.rtl, pytest.mark.slow]

SMALL = {"size": 32, "width": 16}  # tests/graph/test_resnet18.py's variant
PRESET = "small"
#: The cycle model is calibrated on the presets' RTL (tests/hw/test_rtl.py: 2 % on GEMMs).
MODEL_TOLERANCE = 0.02


@pytest.fixture(scope="module")
def model() -> CompiledModel:
    return openvta.compile_model(build_resnet18(**SMALL), random_images(4, SMALL["size"], seed=1),
                                 config=PRESET)


@pytest.fixture
def rtl_runs(monkeypatch: pytest.MonkeyPatch) -> list[tuple[Program, Result]]:
    """Every program the ``rtl`` back end runs, with its result, in order."""
    runs: list[tuple[Program, Result]] = []
    original = RtlBackend.run

    def recording(self: RtlBackend, program: Program) -> Result:
        result = original(self, program)
        runs.append((program, result))
        return result

    monkeypatch.setattr(RtlBackend, "run", recording)
    return runs


def test_the_whole_small_resnet18_runs_on_the_rtl(
        model: CompiledModel, rtl_runs: list[tuple[Program, Result]]) -> None:
    regions = model.graph.regions
    assert sum(len(r.kernels) for r in regions) == 21  # 20 convs (conv1 packed by Im2Col) and fc
    x = random_images(1, SMALL["size"], seed=2)

    out = model.run(x, backend="rtl")

    expected = model.reference(x)["logits"]
    assert np.array_equal(out["logits"], expected)
    assert np.array_equal(model.run(x, backend="functional")["logits"], expected)
    assert len(np.unique(expected)) > 100  # not saturated: the numbers matter
    assert len(rtl_runs) == len(regions)  # one image: each region's program once
    for region, (program, result) in zip(regions, rtl_runs):
        golden = run_functional(program)
        np.testing.assert_array_equal(result.dram, golden.dram, err_msg=f"region {region.index}")
        for counter in EVENT_COUNTERS:
            assert result.counters[counter.value] == golden.counters[counter.value], \
                (region.index, counter.value)
        cycles = result.counters[Counter.CYCLES.value]
        modelled = simulate_cycles(program).counters[Counter.CYCLES.value]
        assert abs(modelled - cycles) <= MODEL_TOLERANCE * cycles, (region.index, modelled, cycles)
    measured = sum(result.counters[Counter.CYCLES.value] for _, result in rtl_runs)
    assert out.report.cycles == measured
    # the RTL counts whole programs: its counters per region, no per-kernel cycles of the model's
    assert [(r.backend, r.cycles) for r in out.report.regions] == [
        ("rtl", result.counters[Counter.CYCLES.value]) for _, result in rtl_runs]
    assert all(k.cycles is None and k.utilization is None for k in out.report.kernels)
