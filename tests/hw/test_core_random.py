"""The whole core in Amaranth's simulator against the functional simulator.

Random legal programs (``tests/programs.py``) and the hand-built blocked GEMM, on the
tiny and small presets and on a fixed sample of other configurations the ISA accepts
(``config_sample.py``): the final DRAM must be equal byte for byte, and every event
counter (:data:`openvta.isa.EVENT_COUNTERS`) equal.  Amaranth's simulator runs a few
thousand cycles a second, so the programs are kept small.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("amaranth")

sys.path.insert(0, str(Path(__file__).parent))

from amaranth_harness import simulate_core, simulate_core_on_ram  # noqa: E402
from config_sample import NARROW_STORE, SAMPLE, describe  # noqa: E402
from programs import random_programs  # noqa: E402

from openvta.blocked_gemm import (  # noqa: E402
    GemmBlocks,
    build_blocked_gemm,
    read_gemm_output,
    reference_gemm,
)
from openvta.isa import LeanBuild  # noqa: E402
from openvta.isa import (  # noqa: E402
    EVENT_COUNTERS,
    HW_COUNTERS,
    AluOp,
    Config,
    MemoryType,
    Module,
    Timing,
    Uop,
    preset,
    spram_timing,
    timing_for,
)
from openvta.runtime import Program, ProgramBuilder, UopKernel, UopLoop  # noqa: E402
from openvta.sim.cycle import simulate_cycles  # noqa: E402
from openvta.sim.functional import run  # noqa: E402

EXAMPLES = {"tiny": 12, "small": 6}
# A component that refuses its parameters must not leave an UnusedElaboratable warning.
REJECTED = pytest.mark.usefixtures("no_unused_elaboratable")


def assert_core_matches_functional(program: Program, timing: Timing | None = None,
                                   shared_dma: bool = False) -> np.ndarray:
    """Run ``program`` on the RTL (built for ``timing``, with ``shared_dma``) and the
    functional simulator; returns the final DRAM."""
    dram, counters = simulate_core(program, timing=timing, max_cycles=60000, shared_dma=shared_dma)
    expected = run(program)
    np.testing.assert_array_equal(dram, expected.dram)
    got = {c.value: counters[c.value] for c in EVENT_COUNTERS}
    want = {c.value: int(expected.counters[c]) for c in EVENT_COUNTERS}
    assert got == want
    return dram


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_random_programs_match_functional_simulator(name: str) -> None:
    cfg = preset(name)

    @settings(max_examples=EXAMPLES[name], deadline=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        assert_core_matches_functional(data.draw(random_programs(cfg)))

    check()


@pytest.mark.parametrize("cfg", [NARROW_STORE, *SAMPLE], ids=describe)
def test_random_programs_on_sampled_configurations(cfg: Config) -> None:
    """Buses narrower and wider than an element (strobed stores, several elements or
    instructions per beat), batches above one, small buffers and queues."""

    @settings(max_examples=4, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        assert_core_matches_functional(data.draw(random_programs(cfg, max_ops=8)))

    check()


# (m, n, k) and the blocks (None: the planner's, as large as fit)
GEMMS = [((5, 7, 9), None), ((8, 8, 8), GemmBlocks(2, 1, 1))]


@pytest.mark.parametrize("name", ["tiny", "small"])
@pytest.mark.parametrize("vthreads", [1, 2])
@pytest.mark.parametrize("shape,blocks", GEMMS, ids=["planned", "blocks-2-1-1"])
def test_blocked_gemm_matches_functional_simulator(name: str, vthreads: int,
                                                   shape: tuple[int, ...],
                                                   blocks: GemmBlocks | None) -> None:
    cfg = preset(name)
    m, n, k = shape
    rng = np.random.default_rng(m * n * k + vthreads)
    a = rng.integers(-128, 128, (m, k), dtype=np.int8)
    w = rng.integers(-128, 128, (n, k), dtype=np.int8)
    program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=3, blocks=blocks)
    dram = assert_core_matches_functional(program)
    np.testing.assert_array_equal(read_gemm_output(program, dram, m, n), reference_gemm(a, w, 3))


def test_a_core_built_with_fewer_counters_computes_the_same() -> None:
    """``counters="cycles"`` and ``"none"``: the same DRAM, the same cycle count, and the
    ``counters`` port carries only the counters built."""
    cfg = preset("tiny")
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 8), dtype=np.int8)
    program = build_blocked_gemm(cfg, a, w, vthreads=2, shift=4, blocks=GemmBlocks(2, 1, 1))
    dram, counters = simulate_core(program)
    assert len(counters) == len(HW_COUNTERS)
    for option, kept in (("cycles", ["cycles"]), ("none", [])):
        lean_dram, lean = simulate_core(program, counters=option)
        np.testing.assert_array_equal(lean_dram, dram)
        assert lean == {name: counters[name] for name in kept}


@REJECTED
def test_the_core_names_the_counter_sets() -> None:
    from openvta.hw.rtl.core import Core

    with pytest.raises(ValueError, match=r"^counters must be one of 'all', 'cycles', 'none', "
                                         r"not 'few'$"):
        Core(preset("tiny"), counters="few")


@pytest.mark.parametrize("cmd,dep,vthreads", [(1, 1, 1), (2, 1, 1), (1, 4, 2)])
def test_small_queues_stall_but_keep_results(cmd: int, dep: int, vthreads: int) -> None:
    """Command and token queues of one or two entries: fetch and the modules stall, and
    must neither deadlock (fetch holding the bus on a full queue did) nor change results."""
    cfg = preset("tiny").replace(CMD_QUEUE_DEPTH=cmd, DEP_QUEUE_DEPTH=dep)
    rng = np.random.default_rng(cmd * 10 + dep)
    a = rng.integers(-128, 128, (8, 8), dtype=np.int8)
    w = rng.integers(-128, 128, (8, 8), dtype=np.int8)
    program = build_blocked_gemm(cfg, a, w, vthreads=vthreads, shift=4, blocks=GemmBlocks(2, 1, 1))
    dram = assert_core_matches_functional(program)
    np.testing.assert_array_equal(read_gemm_output(program, dram, 8, 8), reference_gemm(a, w, 4))


def _forwarding_program(cfg):
    """Micro-ops that read the tile written one and two executions before, through
    every forwarding path of the compute pipeline: the GEMM's accumulator, the ALU's
    first operand and its second (vector) operand."""
    rng = np.random.default_rng(7)
    b = ProgramBuilder(cfg)
    inp = b.tensor("inp", data=rng.integers(-128, 128, (4, cfg.BATCH, cfg.BLOCK_IN), dtype=np.int8))
    wgt = b.tensor("wgt", data=rng.integers(-128, 128, (4, cfg.BLOCK_OUT, cfg.BLOCK_IN), dtype=np.int8))
    acc = b.tensor("acc", data=rng.integers(-1 << 12, 1 << 12, (4, cfg.BATCH, cfg.BLOCK_OUT),
                                            dtype=np.int32))
    b.load_2d(MemoryType.INP, 0, inp, y_size=1, x_size=4)
    b.load_2d(MemoryType.WGT, 0, wgt, y_size=1, x_size=4)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=4)
    b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(2, src_factor=1), UopLoop(3, wgt_factor=1))))
    b.gemm(UopKernel((Uop(1, 0, 1), Uop(2, 1, 0)), (UopLoop(3, src_factor=1, wgt_factor=1),)))
    b.alu(UopKernel((Uop(3, 0), Uop(0, 3)), (UopLoop(3),)), AluOp.ADD)  # b one back, a two
    b.alu(UopKernel((Uop(0, 1), Uop(3, 2), Uop(2, 0)), (UopLoop(2),)), AluOp.ADD)  # b two back
    b.alu(UopKernel((Uop(1, 1),), (UopLoop(4),)), AluOp.MUL)  # both operands one back
    b.alu(UopKernel((Uop(2, 0), Uop(2, 1)), (UopLoop(2),)), AluOp.MAX)  # a one back
    b.alu(UopKernel((Uop(3, 0),), (UopLoop(3),)), AluOp.SHR, imm=-1)  # a one back
    for tile in range(4):  # the out buffer holds low bytes only: bring the high ones down
        b.alu(UopKernel((Uop(4 + tile, tile),)), AluOp.ADD, imm=0)
    b.alu(UopKernel((Uop(4, 0), Uop(5, 0), Uop(6, 0), Uop(7, 0)), (UopLoop(1),)), AluOp.MIN,
          imm=0)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    out = b.tensor("out", shape=(8, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    b.store_2d(0, out, y_size=1, x_size=8)
    return b.finish()


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_results_are_forwarded_to_the_next_two_executions(name: str) -> None:
    assert_core_matches_functional(_forwarding_program(preset(name)))


#: Lean builds: the GEMM core folded over 2 cycles; one accumulator read port; the
#: ALU's MUL in two cycles; the micro-op stage; instructions in 2 and in 8 words;
#: everything at once, folded over 4 cycles, with one DMA reader per module.
LEAN = [LeanBuild(gemm_ii=2), LeanBuild(acc_ports=1), LeanBuild(mul_cycles=2),
        LeanBuild(uop_stage=1), LeanBuild(insn_words=2), LeanBuild(insn_words=8),
        LeanBuild(4, 4, 1, 2, 1, 1, 8)]


def _lean(cfg: Config, lean: LeanBuild) -> Timing:
    return lean.timing(timing_for(cfg))


def _blocked_gemm(cfg: Config) -> Program:
    rng = np.random.default_rng(3)
    a = rng.integers(-128, 128, (24, 40), dtype=np.int8)
    w = rng.integers(-128, 128, (16, 40), dtype=np.int8)
    return build_blocked_gemm(cfg, a, w, vthreads=2, shift=5)


@pytest.mark.parametrize("name", ["tiny", "small"])
@pytest.mark.parametrize("lean_build", LEAN, ids=lambda lean: lean.label)
def test_lean_builds_compute_the_same_and_cost_what_the_model_charges(
        name: str, lean_build: LeanBuild) -> None:
    """A core built for a lean timing gives the functional simulator's DRAM and event
    counters (the forwarding program goes through every forwarding path, now between
    the passes of one micro-op too).  On the forwarding program, where nothing overlaps
    compute, the cycles the lean build adds over the full one are exactly those the
    cycle model adds for that timing; on a blocked GEMM, where loads and stores overlap
    compute, the model's error on the lean build is within a point of its error on the
    full build."""
    cfg = preset(name)
    lean, shared = _lean(cfg, lean_build), bool(lean_build.shared_dma)
    for program in (_forwarding_program(cfg), _blocked_gemm(cfg)):
        assert_core_matches_functional(program, lean, shared)
    program = _forwarding_program(cfg)
    built = {timing_for(cfg): False, lean: shared}  # (the shared readers: not in the timing)
    rtl = {t: simulate_core(program, timing=t, shared_dma=s)[1]["cycles"] for t, s in built.items()}
    model = {t: simulate_cycles(program, t).counters["cycles"] for t in rtl}
    assert rtl[lean] - rtl[timing_for(cfg)] == model[lean] - model[timing_for(cfg)] > 0
    program = _blocked_gemm(cfg)
    error = {t: simulate_cycles(program, t).counters["cycles"]
             / simulate_core(program, max_cycles=60000, timing=t, shared_dma=s)[1]["cycles"] - 1
             for t, s in built.items()}
    assert abs(error[lean]) <= abs(error[timing_for(cfg)]) + 0.01, error


@pytest.mark.parametrize("lean_build", [LeanBuild(2, 2, 1, 2, 1), LeanBuild(gemm_ii=4, acc_ports=1)],
                         ids=lambda lean: lean.label)
def test_random_programs_on_lean_builds(lean_build: LeanBuild) -> None:
    cfg = preset("tiny")

    @settings(max_examples=4, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        assert_core_matches_functional(data.draw(random_programs(cfg)), _lean(cfg, lean_build))

    check()


@pytest.mark.parametrize("name", ["tiny", "small"])
def test_a_core_on_single_port_ram_costs_what_spram_timing_charges(name: str) -> None:
    """The SoC's on-chip DRAM single-ported (the UP5K's SPRAM: one burst at a time): the
    functional simulator's DRAM, and the model's error with :func:`spram_timing` within a
    point of its error with the default timing on the two-port RAM."""
    cfg = preset(name)
    for program in (_forwarding_program(cfg), _blocked_gemm(cfg)):
        error = {}
        for single, timing in ((False, timing_for(cfg)), (True, spram_timing(cfg))):
            dram, counters = simulate_core_on_ram(program, timing_for(cfg), single_port=single)
            np.testing.assert_array_equal(dram, run(program).dram)
            error[single] = simulate_cycles(program, timing).counters["cycles"] / counters["cycles"] - 1
        assert abs(error[True]) <= abs(error[False]) + 0.01, error


def test_random_programs_on_the_up5k_build() -> None:
    """The UP5K's design: lean ``tiny`` folded over 4, one DMA reader per module,
    instructions in 16-bit words, its DRAM single-ported."""
    cfg = preset("tiny")
    lean = LeanBuild(gemm_ii=4, alu_ii=4, acc_ports=1, shared_dma=1, insn_words=8)

    @settings(max_examples=4, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(random_programs(cfg, max_ops=8))
        dram, _ = simulate_core_on_ram(program, _lean(cfg, lean), single_port=True, shared_dma=True)
        np.testing.assert_array_equal(dram, run(program).dram)

    check()


@pytest.mark.parametrize("cfg", [NARROW_STORE, *SAMPLE], ids=describe)
def test_random_programs_with_instructions_in_words(cfg: Config) -> None:
    """``insn_move_cycles`` of 2, 4 or 8: the prefetch buffer and the command queues hold
    an instruction as that many words — words of a beat, or beats of a word, several
    instructions a beat, queues of two instructions (full, so the router waits for room
    by whole instructions)."""

    @settings(max_examples=3, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        words = data.draw(st.sampled_from([2, 4, 8]))
        program = data.draw(random_programs(cfg, max_ops=8))
        assert_core_matches_functional(program, timing_for(cfg).replace(insn_move_cycles=words))

    check()


@pytest.mark.parametrize("cfg", [preset("tiny"), preset("small"), NARROW_STORE, *SAMPLE[:3]], ids=describe)
def test_shared_dma_readers_take_the_same_cycles(cfg: Config) -> None:
    """One DMA reader per module (``shared_dma``) on random programs: the functional
    simulator's DRAM, and every counter the same as the build with a reader per buffer,
    cycles included (the option is not in the timing: the cycle model charges both
    alike).  Machine v2's store module: tests/hw/test_drain_rtl.py."""

    @settings(max_examples=3, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(st.data())
    def check(data: st.DataObject) -> None:
        program = data.draw(random_programs(cfg, max_ops=8))
        shared_dram, shared = simulate_core(program, max_cycles=60000, shared_dma=True)
        separate_dram, separate = simulate_core(program, max_cycles=60000)
        np.testing.assert_array_equal(shared_dram, run(program).dram)
        np.testing.assert_array_equal(shared_dram, separate_dram)
        assert shared == separate

    check()


@REJECTED
@pytest.mark.parametrize("changes,message", [
    ({"gemm_ii_cycles": 3}, r"^gemm_ii_cycles \(the GEMM core's fold\) must be a positive "
                            r"integer dividing BLOCK_OUT \(4\), not 3$"),
    ({"alu_imm_ii_cycles": 8, "alu_vec_ii_cycles": 8},
     r"^alu_imm_ii_cycles \(the ALU's fold\) must be a positive integer dividing "
     r"BATCH·BLOCK_OUT \(4\), not 8$"),
    ({"alu_vec_ii_cycles": 3}, r"^alu_vec_ii_cycles must be alu_imm_ii_cycles \(1: two "
                               r"accumulator read ports\) or one more \(2: one read port\), not 3$"),
    ({"alu_mul_cycles": 3}, r"^alu_mul_cycles must be 1 or 2 \(the ALU's products registered "
                            r"before their sum\), not 3$"),
    ({"gemm_pipeline_cycles": 6}, r"^gemm_pipeline_cycles and alu_pipeline_cycles must both be 5, "
                                  r"or both 6 \(the micro-op register stage\), not 6 and 5$"),
])
def test_a_timing_the_rtl_cannot_build_is_refused(changes: dict[str, int], message: str) -> None:
    from openvta.hw.rtl.core import Core

    cfg = preset("tiny")
    with pytest.raises(ValueError, match=message):
        Core(cfg, timing_for(cfg).replace(**changes))


@pytest.mark.parametrize("options,message", [
    ({"gemm_ii": 0}, r"^gemm_ii must be a positive integer, not 0$"),
    ({"alu_ii": 1.5}, r"^alu_ii must be a positive integer, not 1\.5$"),
    ({"acc_ports": 3}, r"^acc_ports must be 1 or 2, not 3$"),
    ({"mul_cycles": 0}, r"^mul_cycles must be 1 or 2, not 0$"),
    ({"uop_stage": 2}, r"^uop_stage must be 0 or 1, not 2$"),
    ({"shared_dma": 2}, r"^shared_dma must be 0 or 1, not 2$"),
    ({"insn_words": 16}, r"^insn_words must be 1 or 2 or 4 or 8, not 16$"),
])
def test_lean_build_options_are_checked(options: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LeanBuild(**options)
