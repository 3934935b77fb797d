"""The RTL on Verilator (cocotb, AxiLiteMaster) against the functional simulator.

Runs without stalls use the DRAM inside the design (``memory="native"``), runs under
stalls cocotbext-axi's AxiRam with its idle and back-pressure generators.

Every program's final DRAM must equal the functional simulator's bit for bit, every
event counter must be equal, and the cycle model must stay within 5 % of the RTL's
cycle count (2 % on the blocked GEMM).  Each program also runs under random AXI idle
cycles and back-pressure.  Random programs run on the presets and on a fixed sample of
other configurations the ISA accepts (``config_sample.py``: buses of 8 to 1024 bits,
batches above one, small buffers and queues), whose Verilator builds are cached too.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from config_sample import NARROW_STORE, SAMPLE, describe
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from programs import random_programs
from rtl_check import check_on_rtl

from openvta.blocked_gemm import build_blocked_gemm
from openvta.hw.cosim import runner
from openvta.hw.cosim.backend import RtlBackend
from openvta.isa import AluOp, Config, MemoryType, Module, Uop, preset
from openvta.runtime import Device, Program, ProgramBuilder, UopKernel, UopLoop
from openvta.sim.functional import run

pytestmark = pytest.mark.rtl

#: The cycle model is calibrated on the presets; on the sampled configurations (2-entry
#: queues, a load at the very start racing fetch for the bus) it is only held to this.
SAMPLE_MODEL_TOLERANCE = 0.15

def check(program: Program, *, stress: bool = False, tolerance: float = 0.05) -> None:
    check_on_rtl(program, stress=stress, tolerance=tolerance, seed=7)


def _alu_program(cfg):
    rng = np.random.default_rng(1)
    b = ProgramBuilder(cfg)
    tiles = rng.integers(-(2**31), 2**31, (12, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int64)
    tiles[6:] = rng.integers(-40, 40, tiles[6:].shape)
    src = b.tensor("acc", data=tiles.astype(np.int32))
    b.load_2d(MemoryType.ACC, 0, src, y_size=1, x_size=12)
    for k, op in enumerate(AluOp):
        kernel = UopKernel((Uop(k % 6, 6 + k),), (UopLoop(1),))
        b.alu(kernel, op, imm=[-7, 9, 123, 5, -3][k])
        b.alu(kernel, op)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    out = b.tensor("out", shape=(12, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    b.store_2d(0, out, y_size=3, x_size=4)
    return b.finish()


def _load_program(cfg):
    """Padded INP/WGT loads, ACC and ACC_8BIT loads, GEMM with reset and two loops, stores."""
    rng = np.random.default_rng(2)
    b = ProgramBuilder(cfg)
    inp = b.tensor("inp", data=rng.integers(-128, 128, (24, cfg.BATCH, cfg.BLOCK_IN), dtype=np.int8))
    wgt = b.tensor("wgt", data=rng.integers(-128, 128, (8, cfg.BLOCK_OUT, cfg.BLOCK_IN), dtype=np.int8))
    acc8 = b.tensor("acc8", data=rng.integers(-128, 128, (4, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int8))
    b.load_2d(MemoryType.INP, 0, inp, offset=5, y_size=3, x_size=2, x_stride=6,
              y_pad_0=1, y_pad_1=2, x_pad_0=1, x_pad_1=3)
    b.load_2d(MemoryType.WGT, 0, wgt, y_size=2, x_size=4)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.load_2d(MemoryType.ACC_8BIT, 20, acc8, y_size=1, x_size=4)
    b.gemm(UopKernel((Uop(0),), (UopLoop(8, dst_factor=1),)), reset=True)
    b.gemm(UopKernel((Uop(0, 0, 0), Uop(1, 3, 5)),
                     (UopLoop(2, dst_factor=2, src_factor=5, wgt_factor=1),
                      UopLoop(3, dst_factor=1, src_factor=1, wgt_factor=1))))
    b.gemm(UopKernel((Uop(7, 2, 2),), (UopLoop(4),)))  # one tile, back to back
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    out = b.tensor("out", shape=(24, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    b.store_2d(0, out, offset=1, y_size=2, x_size=4, x_stride=7)
    return b.finish()


def _gemm_program(cfg, vthreads: int):
    rng = np.random.default_rng(vthreads)
    a = rng.integers(-128, 128, (24, 40), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 40), dtype=np.int8)
    return build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=5)


@pytest.mark.parametrize("name", ["tiny", "small"])
@pytest.mark.parametrize("stress", [False, True])
@pytest.mark.parametrize("make", ["alu", "load", "gemm1", "gemm2"])
def test_programs_on_the_rtl(name: str, stress: bool, make: str) -> None:
    cfg = preset(name)
    program = {"alu": lambda: _alu_program(cfg), "load": lambda: _load_program(cfg),
               "gemm1": lambda: _gemm_program(cfg, 1), "gemm2": lambda: _gemm_program(cfg, 2)}[make]()
    check(program, stress=stress, tolerance=0.02 if make.startswith("gemm") else 0.05)


RANDOM_CONFIGS = [preset("tiny"), preset("small"), *SAMPLE]


@pytest.mark.parametrize("cfg", RANDOM_CONFIGS,
                         ids=lambda cfg: cfg.name if cfg.name != "custom" else describe(cfg))
def test_random_programs_on_the_rtl(cfg: Config) -> None:
    tolerance = 0.05 if cfg.name != "custom" else SAMPLE_MODEL_TOLERANCE

    # a bounded number in CI; OPENVTA_RTL_EXAMPLES=200 for a long run on demand
    @settings(max_examples=int(os.environ.get("OPENVTA_RTL_EXAMPLES", "3")), deadline=None,
              derandomize="OPENVTA_RTL_EXAMPLES" not in os.environ,
              suppress_health_check=list(HealthCheck))
    @given(st.data())
    def inner(data: st.DataObject) -> None:
        check(data.draw(random_programs(cfg, max_ops=8)), tolerance=tolerance)

    inner()


@pytest.mark.parametrize("stress", [False, True])
@pytest.mark.parametrize("make", ["alu", "load", "gemm1", "gemm2"])
def test_stores_and_loads_narrower_than_a_bus_beat(stress: bool, make: str) -> None:
    """tiny's 1x4x4 GEMM on a 64-bit bus: every inp, out and ACC_8BIT element is half a
    beat, so STOREs write half beats with strobes (rows start and end mid-beat) and LOADs
    take two elements from a beat."""
    cfg = NARROW_STORE
    assert cfg.out_elem_bytes * 2 == cfg.inp_elem_bytes * 2 == cfg.bus_bytes
    program = {"alu": lambda: _alu_program(cfg), "load": lambda: _load_program(cfg),
               "gemm1": lambda: _gemm_program(cfg, 1), "gemm2": lambda: _gemm_program(cfg, 2)}[make]()
    check(program, stress=stress, tolerance=0.02 if make.startswith("gemm") else 0.05)


def test_one_program_on_vtas_16x16_preset() -> None:
    program = _gemm_program(preset("vta"), 2)
    check(program, tolerance=0.02)


def test_device_and_waves_share_one_build(tmp_path) -> None:
    program = _gemm_program(preset("tiny"), 1)
    result = Device("rtl").run(program)
    np.testing.assert_array_equal(result.dram, run(program).dram)
    waves = tmp_path / "run.vcd"
    calls: list[tuple[str, int, int | None]] = []
    backend = RtlBackend(waves=waves, progress=lambda *call: calls.append(call))
    assert backend.build_dir(program.config) == RtlBackend().build_dir(program.config)
    with_waves = backend.run(program)
    assert (runner.BUILDING, 0, None) not in calls  # the build of the run without waves
    assert with_waves.counters == result.counters
    assert waves.stat().st_size > 1000 and b"$enddefinitions" in waves.read_bytes()[:200000]


def test_progress_reports_every_poll_with_increasing_cycles() -> None:
    program = _gemm_program(preset("tiny"), 2)  # a few thousand cycles: several polls
    calls: list[tuple[str, int, int | None]] = []
    result = Device("rtl", max_cycles=50_000, progress=lambda *call: calls.append(call)).run(program)
    cycles = [done for what, done, total in calls if what == "cycles"]
    assert all(total == 50_000 for what, _, total in calls if what == "cycles")
    assert len(cycles) >= result.counters["cycles"] // 1000  # a poll every 1000 cycles
    assert cycles == sorted(cycles) and len(set(cycles)) == len(cycles)
    assert cycles[-1] == result.counters["cycles"]


def test_bursts_split_at_4kib_boundaries() -> None:
    """DRAM past 4 KiB: AxiRam fails any burst that crosses a 4 KiB boundary (AXI4)."""
    rng = np.random.default_rng(4)
    a = rng.integers(-128, 128, (64, 96), dtype=np.int8)
    w = rng.integers(-128, 128, (32, 96), dtype=np.int8)
    program = build_blocked_gemm(preset("tiny"), a, w, vthreads=2, shift=6)
    assert len(program.dram) > 3 * 4096
    check(program, tolerance=0.02)


@pytest.mark.parametrize("make", ["depthwise", "uneven"])
def test_compiled_depthwise_and_uneven_thread_programs_on_the_rtl(make: str) -> None:
    """A depthwise conv2d (diagonal weight tiles) and a conv2d whose last virtual thread takes
    the tail tile: equal to the functional simulator, cycles within 2 % of the model's."""
    from openvta.api import operator, random_operands

    op = (operator("depthwise_conv2d", config="tiny", channels=8, hw=8, kernel=3, pad=1) if make == "depthwise"
          else operator("conv2d", config="tiny", hw=7, ci=8, co=8, kernel=3, pad=1, vthreads=4))
    check(op.build(random_operands(op, 0)), tolerance=0.02)


def test_the_command_line_runs_a_lean_image_on_the_rtl(tmp_path, capsys) -> None:
    """``openvta run --backend rtl`` with the lean build's options builds that image's RTL
    (the UP5K design's: folded over 4, one acc port, shared readers, 16-bit words): the
    result equals the functional simulator's, and its cycles are within 2 % of the cycle
    model's run with the same options."""
    from openvta.cli import main
    from openvta.runtime import load_result

    rng = np.random.default_rng(5)
    a = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 16), dtype=np.int8)
    program = build_blocked_gemm(preset("tiny"), a, w, vthreads=2, shift=6)
    path = tmp_path / "gemm.npz"
    program.save(path)
    lean = ["--gemm-ii", "4", "--alu-ii", "4", "--acc-ports", "1", "--insn-words", "8"]
    assert main(["run", str(path), "--backend", "rtl", *lean, "--shared-dma", "--quiet",
                 "-o", str(tmp_path / "rtl.npz")]) == 0
    rtl = load_result(tmp_path / "rtl.npz")
    assert np.array_equal(rtl.dram, run(program).dram)
    assert main(["run", str(path), "--backend", "cycle", *lean]) == 0
    modelled = int(next(line.split()[1] for line in capsys.readouterr().out.splitlines()
                        if line.startswith("  cycles ")))
    assert abs(modelled / rtl.counters["cycles"] - 1) <= 0.02, (modelled, rtl.counters["cycles"])
