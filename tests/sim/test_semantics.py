"""ISA.md §3, instruction by instruction: the functional simulator against numpy and the naive reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from reference import alu_reference, run_reference

from openvta.isa import AluOp, MemoryType, Module, Uop, preset
from openvta.runtime import ProgramBuilder, UopKernel, UopLoop
from openvta.sim.functional import FunctionalSimulator
from openvta.sim.functional.alu import alu_lanes

INT32_EDGES = [-(2**31), -(2**31) + 1, -65536, -129, -128, -1, 0, 1, 2, 127, 128, 255, 65535,
               2**30, 2**31 - 1]
SHIFTS = list(range(-40, 41)) + [63, 64, 65, -64, -65, 2**15 - 1, -(2**15)]


@pytest.mark.parametrize("op", list(AluOp))
def test_alu_lanes_match_reference_on_edges(op: AluOp) -> None:
    operands = SHIFTS if op == AluOp.SHR else INT32_EDGES
    pairs = list(itertools.product(INT32_EDGES, operands))
    a = np.array([p[0] for p in pairs], dtype=np.int64)
    b = np.array([p[1] for p in pairs], dtype=np.int64)
    expected = [alu_reference(op, int(x), int(y)) for x, y in pairs]
    assert alu_lanes(op, a, b).tolist() == expected


def test_shr_decisions() -> None:
    """SHR: low 6 bits of B, signed; negative shifts left; shift by 32 gives 0; imm 0 copies."""
    a = np.array([-1000, 1000, 0x40000000], dtype=np.int64)
    assert alu_lanes(AluOp.SHR, a, np.int64(0)).tolist() == [-1000, 1000, 0x40000000]
    assert alu_lanes(AluOp.SHR, a, np.int64(3)).tolist() == [-125, 125, 0x08000000]
    assert alu_lanes(AluOp.SHR, a, np.int64(-1)).tolist() == [-2000, 2000, -(2**31)]
    assert alu_lanes(AluOp.SHR, a, np.int64(-32)).tolist() == [0, 0, 0]
    assert alu_lanes(AluOp.SHR, a, np.int64(31)).tolist() == [-1, 0, 0]
    assert alu_lanes(AluOp.SHR, a, np.int64(64 + 3)).tolist() == [-125, 125, 0x08000000]


def test_add_and_mul_wrap_at_32_bits() -> None:
    a = np.array([2**31 - 1, -(2**31), 65536], dtype=np.int64)
    assert alu_lanes(AluOp.ADD, a, np.int64(1)).tolist() == [-(2**31), -(2**31) + 1, 65537]
    assert alu_lanes(AluOp.MUL, a, np.int64(65536)).tolist() == [-65536, 0, 0]


def _acc_program(cfg, acc_values: np.ndarray):
    """A builder with ``acc_values`` (tiles) in DRAM, loaded to acc[0:n]."""
    b = ProgramBuilder(cfg)
    src = b.tensor("acc", data=acc_values.astype(np.int32))
    b.load_2d(MemoryType.ACC, 0, src, y_size=1, x_size=len(acc_values))
    return b


def _run_state(program):
    sim = FunctionalSimulator(program)
    result = sim.run()
    return sim.state, result


@pytest.mark.parametrize("op", list(AluOp))
@pytest.mark.parametrize("use_imm", [True, False])
def test_alu_instruction_every_op(cfg, op: AluOp, use_imm: bool) -> None:
    rng = np.random.default_rng(int(op) * 2 + use_imm)
    tiles = rng.integers(-(2**31), 2**31, (8, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int64)
    if op == AluOp.SHR:
        tiles[4:] = rng.integers(-40, 40, tiles[4:].shape)
    b = _acc_program(cfg, tiles)
    imm = -7 if op != AluOp.SHR else 5
    kernel = UopKernel((Uop(0, 4),), (UopLoop(4, dst_factor=1, src_factor=1),))
    b.alu(kernel, op, imm=imm if use_imm else None)
    state, _ = _run_state(b.finish())
    operand = np.int64(imm) if use_imm else tiles[4:]
    expected = np.vectorize(lambda x, y: alu_reference(op, int(x), int(y)))(tiles[:4], operand)
    np.testing.assert_array_equal(state.acc[:4], expected)
    np.testing.assert_array_equal(state.out[:4], expected.astype(np.int8))
    np.testing.assert_array_equal(state.acc[4:8], tiles[4:])  # sources untouched


@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 0, 0, 0), (0, 2, 0, 0), (0, 0, 3, 0),
                                  (0, 0, 0, 4), (1, 2, 3, 4), (15, 15, 15, 15), (0, 15, 15, 0)])
@pytest.mark.parametrize("pad_min", [False, True])
def test_padded_load(pads: tuple[int, int, int, int], pad_min: bool) -> None:
    cfg = preset("default")
    y_pad_0, y_pad_1, x_pad_0, x_pad_1 = pads
    rng = np.random.default_rng(sum(pads))
    data = rng.integers(-128, 128, (6, 5, cfg.BATCH, cfg.BLOCK_IN), dtype=np.int8)
    b = ProgramBuilder(cfg)
    src = b.tensor("inp", data=data)
    # rows 1..3, columns 1..3 of a 6×5 tile matrix, base 7
    b.load_2d(MemoryType.INP, 7, src, offset=1 * 5 + 1, y_size=3, x_size=3, x_stride=5,
              y_pad_0=y_pad_0, y_pad_1=y_pad_1, x_pad_0=x_pad_0, x_pad_1=x_pad_1, pad_min=pad_min)
    state, result = _run_state(b.finish())
    expected = np.pad(data[1:4, 1:4], ((y_pad_0, y_pad_1), (x_pad_0, x_pad_1), (0, 0), (0, 0)),
                      constant_values=-128 if pad_min else 0)
    rows, cols = expected.shape[:2]
    np.testing.assert_array_equal(state.inp[7 : 7 + rows * cols], expected.reshape(-1, cfg.BATCH, cfg.BLOCK_IN))
    assert not state.inp[:7].any() and not state.inp[7 + rows * cols :].any()
    assert result.counters["inp_load_bytes"] == 9 * cfg.inp_elem_bytes  # padding is not DRAM traffic


def test_acc_8bit_sign_extends_and_load_acc_leaves_out_alone(cfg) -> None:
    rng = np.random.default_rng(1)
    small = rng.integers(-128, 128, (3, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int8)
    wide = rng.integers(-(2**31), 2**31, (3, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int64).astype(np.int32)
    b = ProgramBuilder(cfg)
    s8 = b.tensor("acc8", data=small)
    s32 = b.tensor("acc32", data=wide)
    b.load_2d(MemoryType.ACC_8BIT, 0, s8, y_size=1, x_size=3)
    b.load_2d(MemoryType.ACC, 3, s32, y_size=1, x_size=3)
    state, result = _run_state(b.finish())
    np.testing.assert_array_equal(state.acc[:3], small.astype(np.int32))
    np.testing.assert_array_equal(state.acc[3:6], wide)
    assert not state.out.any()  # LOAD ACC writes the accumulator only (decision)
    assert result.counters["acc_load_bytes"] == 3 * cfg.out_elem_bytes + 3 * cfg.acc_elem_bytes


def _gemm_setup(cfg, seed: int = 0):
    rng = np.random.default_rng(seed)
    b = ProgramBuilder(cfg)
    inp = rng.integers(-128, 128, (8, cfg.BATCH, cfg.BLOCK_IN), dtype=np.int8)
    wgt = rng.integers(-128, 128, (8, cfg.BLOCK_OUT, cfg.BLOCK_IN), dtype=np.int8)
    acc = rng.integers(-1000, 1000, (8, cfg.BATCH, cfg.BLOCK_OUT), dtype=np.int32)
    b.load_2d(MemoryType.INP, 0, b.tensor("inp", data=inp), y_size=1, x_size=8)
    b.load_2d(MemoryType.WGT, 0, b.tensor("wgt", data=wgt), y_size=1, x_size=8)
    b.load_2d(MemoryType.ACC, 0, b.tensor("acc", data=acc), y_size=1, x_size=8)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    return b, inp.astype(np.int64), wgt.astype(np.int64), acc.astype(np.int64)


def _tile_product(inp_tile: np.ndarray, wgt_tile: np.ndarray) -> np.ndarray:
    return inp_tile @ wgt_tile.T  # [BATCH][BLOCK_IN] · [BLOCK_OUT][BLOCK_IN]ᵀ


def test_gemm_reset_zeroes_acc_and_not_out(cfg) -> None:
    b, inp, wgt, acc = _gemm_setup(cfg)
    b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(4, dst_factor=1),)))  # writes out[0:4]
    b.gemm(UopKernel((Uop(1),), (UopLoop(2, dst_factor=2),)), reset=True)  # acc[1], acc[3]
    state, _ = _run_state(b.finish())
    first = acc[:4] + _tile_product(inp[0], wgt[0])
    assert not state.acc[[1, 3]].any()
    np.testing.assert_array_equal(state.acc[[0, 2]], first[[0, 2]])
    np.testing.assert_array_equal(state.out[:4], first.astype(np.int8))  # reset left out alone


def test_gemm_loops_with_both_factors(cfg) -> None:
    b, inp, wgt, acc = _gemm_setup(cfg, seed=3)
    uops = (Uop(0, 0, 0), Uop(1, 1, 2))
    loops = (UopLoop(2, dst_factor=2, src_factor=3, wgt_factor=1),
             UopLoop(3, dst_factor=1, src_factor=1, wgt_factor=2))
    b.gemm(UopKernel(uops, loops))
    program = b.finish()
    state, _ = _run_state(program)
    expected = acc.copy()
    for i, j, u in itertools.product(range(2), range(3), uops):
        a = u.dst_idx + 2 * i + j
        expected[a] += _tile_product(inp[u.src_idx + 3 * i + j], wgt[u.wgt_idx + i + 2 * j])
    np.testing.assert_array_equal(state.acc[:8], expected)
    np.testing.assert_array_equal(state.out[:6], expected[:6].astype(np.int8))


def test_back_to_back_accumulation_equals_sequential(cfg) -> None:
    """No hazard rule: the same tile accumulated by consecutive micro-ops and iterations."""
    b, inp, wgt, acc = _gemm_setup(cfg, seed=5)
    uops = (Uop(2, 0, 0), Uop(2, 1, 1), Uop(2, 2, 2))
    b.gemm(UopKernel(uops, (UopLoop(3, src_factor=1), UopLoop(2, wgt_factor=3))))
    state, _ = _run_state(b.finish())
    expected = acc[2].copy()
    for i, j, u in itertools.product(range(3), range(2), range(3)):
        expected += _tile_product(inp[u + i], wgt[u + 3 * j])
    np.testing.assert_array_equal(state.acc[2], expected)


def test_gemm_32bit_wraparound() -> None:
    cfg = preset("tiny")
    b = ProgramBuilder(cfg)
    ones = np.full((1, cfg.BATCH, cfg.BLOCK_IN), -128, dtype=np.int8)
    w = np.full((1, cfg.BLOCK_OUT, cfg.BLOCK_IN), -128, dtype=np.int8)
    start = np.full((1, cfg.BATCH, cfg.BLOCK_OUT), 2**31 - 1, dtype=np.int32)
    b.load_2d(MemoryType.INP, 0, b.tensor("i", data=ones), y_size=1, x_size=1)
    b.load_2d(MemoryType.WGT, 0, b.tensor("w", data=w), y_size=1, x_size=1)
    b.load_2d(MemoryType.ACC, 0, b.tensor("a", data=start), y_size=1, x_size=1)
    b.dep_push(Module.LOAD, Module.COMPUTE)
    b.dep_pop(Module.LOAD, Module.COMPUTE)
    b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(10),)))
    state, _ = _run_state(b.finish())
    total = (2**31 - 1) + 10 * cfg.BLOCK_IN * 128 * 128
    wrapped = (total + 2**31) % 2**32 - 2**31
    assert (state.acc[0] == wrapped).all()


@pytest.mark.parametrize("case", ["repeat_imm", "prefix_chain", "reverse_chain", "self_source"])
def test_alu_overlapping_micro_ops_are_sequential(case: str) -> None:
    """ALU micro-ops reading and writing the same tiles give the sequential result."""
    cfg = preset("tiny")
    tiles = np.arange(1, 9, dtype=np.int64)[:, None, None] * np.ones((1, cfg.BATCH, cfg.BLOCK_OUT), np.int64)
    b = _acc_program(cfg, tiles)
    if case == "repeat_imm":  # the same tile 5 times: +3 each
        b.alu(UopKernel((Uop(2, 0),), (UopLoop(5),)), AluOp.ADD, imm=3)
    elif case == "prefix_chain":  # acc[i] += acc[i-1], i ascending: a prefix sum
        b.alu(UopKernel((Uop(1, 0),), (UopLoop(7, dst_factor=1, src_factor=1),)), AluOp.ADD)
    elif case == "reverse_chain":  # acc[i] += acc[i+1] in ascending order reads old values
        b.alu(UopKernel((Uop(0, 1),), (UopLoop(7, dst_factor=1, src_factor=1),)), AluOp.ADD)
    else:  # acc[3] = acc[3] * acc[3], three times
        b.alu(UopKernel((Uop(3, 3),), (UopLoop(3),)), AluOp.MUL)
    program = b.finish()
    state, _ = _run_state(program)
    expected = np.frombuffer(run_reference_acc(program), dtype=np.int64)
    np.testing.assert_array_equal(state.acc[:8, 0, 0], expected)


def run_reference_acc(program) -> bytes:
    """Accumulator column 0 of tiles 0..7 after the naive reference runs ``program``."""
    from reference import ReferenceMachine
    from openvta.isa import Opcode

    machine = ReferenceMachine(program.config, program.dram)
    for insn in program.instructions():
        if insn.opcode == Opcode.LOAD:
            machine.load(insn)
        elif insn.opcode == Opcode.ALU:
            machine.alu(insn)
    return np.array([machine.acc[i][0][0] for i in range(8)], dtype=np.int64).tobytes()


def test_store_writes_only_its_rows(cfg) -> None:
    b, inp, wgt, acc = _gemm_setup(cfg, seed=9)
    b.alu(UopKernel((Uop(0, 0),), (UopLoop(8, dst_factor=1, src_factor=1),)), AluOp.SHR, imm=0)
    b.dep_push(Module.COMPUTE, Module.STORE)
    b.dep_pop(Module.COMPUTE, Module.STORE)
    out = b.tensor("out", shape=(4, 5, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    b.store_2d(2, out, offset=5 + 1, y_size=2, x_size=3, x_stride=5)
    program = b.finish()
    _, result = _run_state(program)
    got = program.read("out", result.dram)
    expected = np.zeros_like(got)
    expected[1:3, 1:4] = acc[2:8].astype(np.int8).reshape(2, 3, cfg.BATCH, cfg.BLOCK_OUT)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(result.dram, run_reference(program))
