"""Machine v2's drain unit on the RTL (Verilator) against the functional simulator and the
cycle model.

Hand-built programs on a ``small`` machine with a drain unit (:data:`DRAIN`: 1x8x8, a
64-bit bus, an epi buffer of 128 words, eight stages), on ``tiny``'s GEMM behind a
64-bit bus (:data:`NARROW_DRAIN`: two drained tiles per beat, four stages), and a
compiled conv2d (``v2`` itself and a batch of two, :data:`BATCH_DRAIN`, are Verilator
builds of a minute each: ``benchmarks/rtl.py --v2-layers`` runs ``v2``): LOAD EPI
with padding and EPI_8BIT, descriptors side by side (stride 2) at indices above 15
(every pad field of the STORE), all seven operations on ``X`` and on the residual,
descriptors of no stage and of every stage, strided DRAM rows, STORE OUT and STORE ACC
of the same tiles, and drains of tiles a drain zeroed (with and without an ALU write
between them).  Every program's final DRAM and event counters must equal the functional
simulator's, and its cycle count the cycle model's within 2 %.  With one shared EPI
reader (``shared_dma``, in Amaranth's simulator) every counter must equal the two
readers' build's.
"""

from __future__ import annotations

import numpy as np
import pytest
from amaranth_harness import simulate_core
from config_sample import FULL_RTL
from rtl_check import check_on_rtl, rtl_backend

from openvta.hw.cosim.backend import RtlBackend
from openvta.hw.rtl.drain import drain_pipeline_cycles
from openvta.isa import (AluOp, Config, DrainOp, DrainStage, MemInsn, MemoryType, Module, Opcode, Uop,
                         drain_fill_cycles, encode_header, parse_drain_ops, preset, timing_for)
from openvta.isa.arith import clip_word
from openvta.runtime import Program, ProgramBuilder, UopKernel, UopLoop
from openvta.sim.functional import run

pytestmark = pytest.mark.rtl

#: ``small`` with machine v2's drain unit: eight stages, an epi buffer of 128 words.
DRAIN = preset("small").replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=8)
#: ``tiny``'s 1x4x4 GEMM on a 64-bit bus with four stages: a drained tile is half a beat.
NARROW_DRAIN = preset("tiny").replace(LOG_BUS_WIDTH=6, LOG_EPI_BUFF_SIZE=11, DRAIN_STAGES=4)
#: A batch of two (``tiny``'s 32-bit bus: a drained tile is two beats), six stages.
BATCH_DRAIN = preset("tiny").replace(LOG_BATCH=1, LOG_INP_BUFF_SIZE=11, LOG_ACC_BUFF_SIZE=13,
                                     LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=6)
#: The ULX3S build's drain (docs/FPGA_NOTES.md): three stages of one or two operations each.
LEAN_DRAIN = preset("small").replace(LOG_EPI_BUFF_SIZE=12, DRAIN_STAGES=3,
                                     DRAIN_OPS=parse_drain_ops("RSHR+SHR/ADD/CLIP"))

def _backend(stress: bool) -> RtlBackend:
    return rtl_backend(stress, seed=11)


def drains_of(program: Program) -> int:
    """The STORE ACC instructions of ``program`` that move data."""
    return sum(1 for insn in program.instructions()
               if isinstance(insn, MemInsn) and insn.opcode == Opcode.STORE
               and insn.memory_type == MemoryType.ACC and insn.x_size)


def check(program: Program, *, stress: bool = False, tolerance: float = 0.02) -> None:
    check_on_rtl(program, stress=stress, tolerance=tolerance, seed=11)


def _tiles(cfg: Config, rng: np.random.Generator, count: int, low: int, high: int, dtype: type) -> np.ndarray:
    return rng.integers(low, high, (count, cfg.BATCH, cfg.BLOCK_OUT)).astype(dtype)


def _lanes(cfg: Config) -> int:
    return cfg.BATCH * cfg.BLOCK_OUT


def residual_program(cfg: Config) -> Program:
    """A requantization with a residual (EPI_8BIT) over two rows; the same tiles drained
    again (zeroed: the residual alone), then an ALU ADD into them and a third drain
    through a descriptor of one stage (MUL by 2).

    (Not a descriptor of no stage: the functional simulator of this machine returns the
    zeroed tiles for a descriptor that leaves ``X`` alone, ``drain_tiles`` giving back a
    view of the accumulator it then zeroes; the RTL drains the tiles as they were.)"""
    rng, lanes, n = np.random.default_rng(5), _lanes(cfg), 8
    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=_tiles(cfg, rng, n, -2**20, 2**20, np.int32))
    res = b.tensor("res", data=_tiles(cfg, rng, n, -128, 128, np.int8))
    outs = [b.tensor(f"out{k}", shape=(n, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
            for k in range(3)]
    requant = (DrainStage(AluOp.SHR), DrainStage(AluOp.SHR, on_residual=True),
               DrainStage(AluOp.ADD, operand_residual=True), DrainStage(AluOp.MIN), DrainStage(AluOp.MAX))
    words = np.zeros((1 + len(requant), lanes), np.int32)
    words[0] = encode_header(cfg, requant[:cfg.DRAIN_STAGES], res_base=40)
    words[1:] = np.array([8, 1, 0, 127, -128])[:, None]
    add_r = np.zeros((2, lanes), np.int32)
    add_r[0] = encode_header(cfg, (DrainStage(AluOp.ADD, operand_residual=True),), res_base=40)
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=n)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.load_epi_words(0, words)
    b.load_epi_words(20, add_r)
    double = np.zeros((2, lanes), np.int32)
    double[0], double[1] = encode_header(cfg, (DrainStage(AluOp.MUL),)), 2
    b.load_epi_words(30, double)
    b.load_2d(MemoryType.EPI_8BIT, 40, res, y_size=1, x_size=n)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, outs[0], y_size=2, x_size=n // 2, epi_base=0)
    b.store_2d(0, outs[1], y_size=1, x_size=n, epi_base=20)
    b.dep_push(Module.STORE, Module.COMPUTE)
    b.dep_pop(Module.STORE, Module.COMPUTE)
    b.alu(UopKernel((Uop(0, 0),), (UopLoop(n, dst_factor=1, src_factor=1),)), AluOp.ADD, imm=-3)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, outs[2], y_size=1, x_size=n, epi_base=30)
    return b.finish()


def _codes(cfg: Config, residual: bool) -> tuple[DrainStage, ...]:
    """``DRAIN_STAGES`` stages: every operation, on ``X`` (and, with ``residual``, on ``R``)."""
    ops = [DrainOp.MUL, DrainOp.ADD, DrainOp.RSHR, DrainOp.SHR, DrainOp.MAX, DrainOp.CLIP, DrainOp.MIN, DrainOp.SHR,
           DrainOp.ADD, DrainOp.MUL, DrainOp.RSHR, DrainOp.CLIP]
    stages = []
    for k in range(cfg.DRAIN_STAGES):
        on_r = residual and k % 3 == 1
        b_r = residual and k % 3 == 2
        stages.append(DrainStage(ops[k % len(ops)], on_residual=on_r, operand_residual=b_r))
    return tuple(stages)


def _operand(op: DrainOp, rng: np.random.Generator, lanes: int) -> np.ndarray:
    if op in (DrainOp.SHR, DrainOp.RSHR):  # right shifts, and left shifts (negative amounts)
        return rng.integers(-3, 9, lanes)
    if op == DrainOp.CLIP:  # a (low, high) pair per lane, low <= high
        low = rng.integers(-3000, 0, lanes)
        return np.array([clip_word(int(lo), int(lo) + int(rng.integers(0, 6000))) for lo in low])
    if op == AluOp.MUL:
        return rng.integers(-5, 6, lanes)
    return rng.integers(-3000, 3000, lanes)


def all_ops_program(cfg: Config) -> Program:
    """Two descriptors of every stage side by side (stride 2, headers at 43 and 44), one
    on ``X`` alone, one with a residual loaded as EPI with padding; acc tiles from ACC
    and ACC_8BIT loads; a STORE OUT and a drain of the same tiles; strided DRAM rows."""
    rng, lanes, n = np.random.default_rng(6), _lanes(cfg), 12
    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=_tiles(cfg, rng, n, -2**16, 2**16, np.int32))
    acc8 = b.tensor("acc8", data=_tiles(cfg, rng, n, -128, 128, np.int8))
    res = b.tensor("res", data=_tiles(cfg, rng, 10, -2**12, 2**12, np.int32))
    plain = b.tensor("plain", shape=(3, 6, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    drained = b.tensor("drained", shape=(3, 6, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    with_r = b.tensor("with_r", shape=(2, 7, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    base, stride = 43, 2
    descriptors = [_codes(cfg, residual=False), _codes(cfg, residual=True)]
    words = np.zeros((stride * (1 + cfg.DRAIN_STAGES), lanes), np.int32)
    for j, stages in enumerate(descriptors):
        words[j] = encode_header(cfg, stages, res_base=base + len(words), stride=stride)
        for k, stage in enumerate(stages):
            words[j + (k + 1) * stride] = _operand(stage.op, rng, lanes)
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=n)
    b.load_2d(MemoryType.ACC_8BIT, n, acc8, y_size=1, x_size=n)
    b.alu(UopKernel((Uop(0, 0),), (UopLoop(n, dst_factor=1, src_factor=1),)), AluOp.SHR, imm=4)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.load_epi_words(base, words)
    # the residual: rows of 6 words, a zero word before each row and a zero row first
    b.load_2d(MemoryType.EPI, base + len(words), res, y_size=2, x_size=5, y_pad_0=1, x_pad_0=1)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, plain, offset=1, y_size=3, x_size=4, x_stride=6)  # the out buffer (ALU SHR's low bits)
    b.store_2d(0, drained, offset=1, y_size=3, x_size=4, x_stride=6, epi_base=base)
    b.store_2d(n - 2, with_r, offset=2, y_size=2, x_size=5, x_stride=7, epi_base=base + 1)
    return b.finish()


def mixed_counts_program(cfg: Config) -> Program:
    """Drains back to back whose descriptors have every stage, one, every stage again and
    none, each on its own tiles: the FIFO's tap moves with the count, and a long drain's
    tiles never come out of a short one's tap (nor a short one's out of the long one's)."""
    rng, lanes, n = np.random.default_rng(8), _lanes(cfg), 24
    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=_tiles(cfg, rng, n, -2**16, 2**16, np.int32))
    counts = (cfg.DRAIN_STAGES, 1, cfg.DRAIN_STAGES, 0)
    outs = [b.tensor(f"out{k}", shape=(6, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
            for k in range(len(counts))]
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=n)
    b.dep_push(Module.COMPUTE, Module.STORE)
    full = _codes(cfg, residual=False)
    for k, count in enumerate(counts):
        words = np.zeros((1 + count, lanes), np.int32)
        words[0] = encode_header(cfg, full[:count])
        for j, stage in enumerate(full[:count]):
            words[1 + j] = _operand(stage.op, rng, lanes)
        b.load_epi_words(20 * k, words)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    for k, out in enumerate(outs):
        b.store_2d(6 * k, out, y_size=2, x_size=3, epi_base=20 * k)
    return b.finish()


def long_program(cfg: Config, drain: bool = True, stages: int = 3) -> Program:
    """64 tiles in four rows of 16, through ``stages`` stages (SHR, MIN, MAX, then ADDs;
    or, ``drain=False``, the same STORE of the out buffer): the drain's throughput against
    a plain STORE's."""
    rng, lanes, n = np.random.default_rng(7), _lanes(cfg), 64
    b = ProgramBuilder(cfg)
    acc = b.tensor("acc", data=_tiles(cfg, rng, n, -2**20, 2**20, np.int32))
    out = b.tensor("out", shape=(n, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    ops = [(AluOp.SHR, 12), (AluOp.MIN, 127), (AluOp.MAX, -128)] + [(AluOp.ADD, 1)] * stages
    words = np.zeros((1 + stages, lanes), np.int32)
    words[0] = encode_header(cfg, tuple(DrainStage(op) for op, _ in ops[:stages]))
    words[1:] = np.array([value for _, value in ops[:stages]], np.int32).reshape(-1, 1)
    b.load_2d(MemoryType.ACC, 0, acc, y_size=1, x_size=n)
    b.alu(UopKernel((Uop(0, 0),), (UopLoop(n, dst_factor=1, src_factor=1),)), AluOp.SHR, imm=12)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.load_epi_words(0, words)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    b.store_2d(0, out, y_size=4, x_size=n // 4, epi_base=0 if drain else None)
    return b.finish()


PROGRAMS = {"residual": residual_program, "all_ops": all_ops_program, "long": long_program,
            "mixed_counts": mixed_counts_program}
# (Under AXI idle cycles and back-pressure the DMA writer's stream mode is tested unit by
# unit, tests/hw/test_units.py: the drain's whole programs under stalls were 140 s of
# make test's 20 minutes.)


@pytest.mark.parametrize("make", sorted(PROGRAMS))
def test_drain_programs_on_the_rtl(make: str) -> None:
    check(PROGRAMS[make](DRAIN))



@pytest.mark.parametrize("make", ["all_ops"])
def test_drained_tiles_narrower_than_a_bus_beat(make: str) -> None:
    """Two drained tiles per beat: the writer gathers them as they come out of the drain."""
    check(PROGRAMS[make](NARROW_DRAIN))


@pytest.mark.parametrize("make", ["residual", "all_ops"])
def test_one_shared_epi_reader_takes_the_same_cycles(make: str) -> None:
    """``shared_dma``: the store module's EPI and EPI_8BIT loads on one reader (the
    residual program has both, 32-bit residuals and 128-bit descriptor words; on
    NARROW_DRAIN's 64-bit bus one narrower and one wider than a beat) — the functional
    simulator's DRAM, and every counter, cycles included, as with two readers."""
    program = PROGRAMS[make](NARROW_DRAIN)
    shared_dram, shared = simulate_core(program, max_cycles=60000, shared_dma=True)
    separate_dram, separate = simulate_core(program, max_cycles=60000)
    np.testing.assert_array_equal(shared_dram, run(program).dram)
    np.testing.assert_array_equal(shared_dram, separate_dram)
    assert shared == separate


def test_a_drain_costs_a_store_and_the_pipeline() -> None:
    """A drain of 64 tiles takes as long as the STORE of the out buffer it replaces, plus
    ``drain_pipeline_cycles`` of its descriptor's stage count (the drain's latency less the
    writer's own start: 2·stages + 1, the stages past the count skipped)."""
    for stages in (0, 3, DRAIN.DRAIN_STAGES):  # (the plain program loads the same descriptor)
        cycles = {drain: _backend(False).run(long_program(DRAIN, drain, stages)).counters["cycles"]
                  for drain in (False, True)}
        assert abs(cycles[True] - cycles[False] - drain_pipeline_cycles(DRAIN, stages)) <= 1, stages
    for cfg in (DRAIN, NARROW_DRAIN, BATCH_DRAIN, preset("v2")):  # one truth: the RTL's and the model's
        for stages in range(cfg.DRAIN_STAGES + 2):
            assert drain_pipeline_cycles(cfg, stages) == drain_fill_cycles(cfg, timing_for(cfg), stages)


@pytest.mark.parametrize("vthreads", [1, 2])
def test_a_compiled_conv2d_with_a_residual_on_the_rtl(vthreads: int) -> None:
    """What the compiler emits for machine v2 — the graph level's requantization (SHR, a
    per-channel MUL, the rounding steps fused into RSHR, a CLIP), a requantized int8 residual
    added, ReLU; double-buffered loads, one reset per thread — on the drain configuration's
    RTL: equal to the functional simulator, cycles within 2 % of the model.  (``v2`` itself,
    with its 16 lanes and 12 stages, runs ResNet-18 C4, C5 and C11 in ``benchmarks/rtl.py``.)"""
    from openvta.compiler import conv2d
    from openvta.compiler.epilogue import AluStage, ChannelOperand, Epilogue, TensorOperand

    skip = TensorOperand("skip", "int8", (AluStage(AluOp.MUL, 21917), AluStage(AluOp.SHR, 13),
                                          AluStage(AluOp.ADD, 1), AluStage(AluOp.SHR, 1)))
    epilogue = Epilogue((AluStage(AluOp.SHR, 2), AluStage(AluOp.MUL, ChannelOperand("m")), AluStage(AluOp.SHR, 15),
                         AluStage(AluOp.ADD, 1), AluStage(AluOp.SHR, 1), AluStage(AluOp.MIN, 127),
                         AluStage(AluOp.MAX, -128), AluStage(AluOp.ADD, skip), AluStage(AluOp.MIN, 127),
                         AluStage(AluOp.MAX, 0)))
    op = conv2d(DRAIN, ci=16, co=16, hw=6, kernel=3, pad=1, shift=None, bias=False, clip=None, epilogue=epilogue,
                vthreads=vthreads)
    rng = np.random.default_rng(vthreads)
    inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype) for name, t in op.inputs.items()}
    inputs["m"] = rng.integers(10000, 30000, op.logical_shapes["m"]).astype(np.int32)
    program = op.build(inputs)
    assert any(insn.opcode == Opcode.STORE and insn.memory_type == MemoryType.ACC for insn in program.instructions())
    assert not any(insn.opcode == Opcode.ALU for insn in program.instructions())
    check(program)
    np.testing.assert_array_equal(op.unpack(program.read("out", _backend(False).run(program).dram)),
                                  op.reference(inputs))


# a build of its own (about 45 s): with OPENVTA_FULL_RTL=1, outside make test's 20 minutes
@pytest.mark.skipif(not FULL_RTL, reason="the lean drain's own RTL build runs with OPENVTA_FULL_RTL=1")
def test_a_drain_of_three_lean_stages_on_the_rtl() -> None:
    """The ULX3S build's drain (``DRAIN_OPS=RSHR+SHR/ADD/CLIP``: each stage built with only its
    operations): a ResNet-18 layer's epilogue (SHR, bias ADD, CLIP) drains, equal to the
    functional simulator, cycles within 2 % of the model; an epilogue with a MUL, which no
    stage has, stays on the compute ALU and is still exact."""
    from openvta.compiler import conv2d
    from openvta.compiler.epilogue import AluStage, ChannelOperand, Epilogue

    rng = np.random.default_rng(3)
    requant = Epilogue((AluStage(AluOp.MUL, ChannelOperand("m")), AluStage(AluOp.SHR, 15), AluStage(AluOp.MIN, 127),
                        AluStage(AluOp.MAX, -128)))
    for kwargs, drains in (({}, True), ({"shift": None, "bias": False, "clip": None, "epilogue": requant}, False)):
        op = conv2d(LEAN_DRAIN, ci=16, co=16, hw=6, kernel=3, pad=1, vthreads=2, **kwargs)
        inputs = {name: rng.integers(-100, 100, op.logical_shapes[name]).astype(t.dtype)
                  for name, t in op.inputs.items()}
        if "m" in inputs:
            inputs["m"] = rng.integers(10000, 30000, op.logical_shapes["m"]).astype(np.int32)
        program = op.build(inputs)
        assert (drains_of(program) > 0) == drains
        assert any(insn.opcode == Opcode.ALU for insn in program.instructions()) != drains
        check(program)
        np.testing.assert_array_equal(op.unpack(program.read("out", _backend(False).run(program).dram)),
                                      op.reference(inputs))
