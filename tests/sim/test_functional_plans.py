"""Loop plans: unexpanded index grids, and plans reused across instructions and data.

The executor works out each GEMM or ALU instruction's plan once per distinct fields and
micro-op words and reuses it.  These tests check the grids against their plain
expansion, and programs that repeat the same kernels over changing data (and the same
micro-op slots with changing micro-ops) against the naive reference.
"""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference import ReferenceMachine, run_reference

from openvta.isa import PRESETS, AluOp, GemmInsn, MemoryType, Module, Uop
from openvta.runtime import ProgramBuilder, UopKernel, UopLoop
from openvta.sim.functional import FunctionalSimulator
from openvta.sim.functional.gemm import Grid
from openvta.sim.functional.semantics import MachineState, execute_gemm


@st.composite
def grids(draw: st.DrawFn) -> tuple[Grid, np.ndarray]:
    """A grid (one or two micro-op axes) and its expansion written out with loops."""
    uop_shape = tuple(draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    base = np.array(draw(st.lists(st.integers(0, 3), min_size=int(np.prod(uop_shape)),
                                  max_size=int(np.prod(uop_shape)))), dtype=np.int64)
    base = base.reshape(uop_shape)
    outer, inner = draw(st.integers(0, 2)), draw(st.integers(0, 2))
    iters = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))  # no executions: never planned
    expanded = np.zeros(iters + uop_shape, dtype=np.int64)
    for i in range(iters[0]):
        for j in range(iters[1]):
            expanded[i, j] = base + i * outer + j * inner
    return Grid(base, outer, inner, iters), expanded


@settings(max_examples=200, deadline=None)
@given(case=grids(), data=st.data())
def test_grid_expands_varies_and_gives_planes_like_the_array(case: tuple[Grid, np.ndarray],
                                                            data: st.DataObject) -> None:
    grid, expanded = case
    np.testing.assert_array_equal(grid.full(), expanded)
    axes = list(range(expanded.ndim))
    for axis in axes:
        assert grid.varies(axis) == bool((expanded != expanded.take([0], axis=axis)).any())
    constant = [a for a in axes if not grid.varies(a) and data.draw(st.booleans())]
    keep = data.draw(st.permutations([a for a in axes if a not in constant]))
    shape = tuple(expanded.shape[a] for a in keep)
    where = tuple(0 if a in constant else slice(None) for a in axes)
    remaining = [a for a in axes if a not in constant]
    expected = expanded[where].transpose([remaining.index(a) for a in keep])
    np.testing.assert_array_equal(grid.plane(constant, list(keep), shape), expected)


def test_grid_select_and_split_reorder_the_micro_ops() -> None:
    grid = Grid(np.array([5, 1, 4, 0], dtype=np.int64), 10, 100, (2, 3))
    np.testing.assert_array_equal(grid.select(np.array([3, 0])).full(), grid.full()[:, :, [3, 0]])
    order = np.array([1, 3, 0, 2])
    split = grid.split(order, (2, 2))
    np.testing.assert_array_equal(split.full(), grid.full()[:, :, order].reshape(2, 3, 2, 2))


@st.composite
def repeated_kernel_programs(draw: st.DrawFn):
    """The same GEMM and ALU kernels run again and again over freshly loaded data."""
    cfg = PRESETS[draw(st.sampled_from(["tiny", "default"]))]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    b = ProgramBuilder(cfg)
    inp = b.tensor("inp", data=rng.integers(-128, 128, (16, cfg.BATCH, cfg.BLOCK_IN), dtype=np.int8))
    wgt = b.tensor("wgt", data=rng.integers(-128, 128, (16, cfg.BLOCK_OUT, cfg.BLOCK_IN),
                                            dtype=np.int8))
    out = b.tensor("out", shape=(16, cfg.BATCH, cfg.BLOCK_OUT), dtype="int8", role="output")
    gemm = UopKernel((Uop(0, 0, 0), Uop(0, 1, 1), Uop(1, 0, 2)),
                     (UopLoop(2, dst_factor=2, src_factor=2, wgt_factor=0),))
    alu = UopKernel((Uop(0, 0),), (UopLoop(4, dst_factor=1, src_factor=1),))
    b.gemm(UopKernel((Uop(0, 0, 0),), (UopLoop(4, dst_factor=1),)), reset=True)
    for round_ in range(draw(st.integers(2, 4))):
        b.load_2d(MemoryType.INP, 0, inp, offset=draw(st.integers(0, 12)), y_size=1, x_size=4)
        b.load_2d(MemoryType.WGT, 0, wgt, offset=draw(st.integers(0, 13)), y_size=1, x_size=3)
        b.dep_push(Module.LOAD, Module.COMPUTE)
        b.dep_pop(Module.LOAD, Module.COMPUTE)
        b.gemm(gemm)
        b.alu(alu, draw(st.sampled_from([AluOp.SHR, AluOp.ADD, AluOp.MAX])), imm=draw(
            st.sampled_from([None, 1, -3])))
        b.dep_push(Module.COMPUTE, Module.LOAD)
        b.dep_pop(Module.COMPUTE, Module.LOAD)
        b.dep_push(Module.COMPUTE, Module.STORE)
        b.dep_pop(Module.COMPUTE, Module.STORE)
        b.store_2d(0, out, offset=4 * round_, y_size=1, x_size=4)
        b.dep_push(Module.STORE, Module.COMPUTE)
        b.dep_pop(Module.STORE, Module.COMPUTE)
    return b.finish()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(program=repeated_kernel_programs())
def test_reused_plans_match_the_reference(program) -> None:
    sim = FunctionalSimulator(program)
    result = sim.run()
    np.testing.assert_array_equal(result.dram, run_reference(program))
    gemm_alu = sum(1 for insn in sim.machine.insns if insn.opcode.name in ("GEMM", "ALU"))
    # the reset, the GEMM, the ALU with and without its immediate: at most one plan each
    assert len(sim.state.plans) <= 4 < gemm_alu


def test_plans_follow_the_micro_ops_in_the_same_slots() -> None:
    """One GEMM instruction, run again after its micro-op slots are rewritten."""
    cfg = PRESETS["tiny"]
    rng = np.random.default_rng(7)
    state = MachineState(cfg, np.zeros(64, dtype=np.uint8))
    state.inp[:8] = rng.integers(-128, 128, state.inp[:8].shape)
    state.wgt[:8] = rng.integers(-128, 128, state.wgt[:8].shape)
    reference = ReferenceMachine(cfg, state.dram)
    reference.inp, reference.wgt = state.inp.tolist(), state.wgt.tolist()
    insn = GemmInsn(cfg=cfg, uop_bgn=0, uop_end=2, iter_out=2, iter_in=1, dst_factor_out=2,
                    src_factor_out=1, wgt_factor_out=1)
    for uops in ([Uop(0, 0, 0), Uop(1, 2, 3)], [Uop(1, 3, 0), Uop(0, 0, 4)]):
        state.uop[:2] = [u.encode(cfg) for u in uops]
        reference.uop = state.uop.tolist()
        execute_gemm(state, insn, "instruction 0")
        reference.gemm(insn)
        np.testing.assert_array_equal(state.acc, np.array(reference.acc, dtype=np.int32))
        np.testing.assert_array_equal(state.out, np.array(reference.out, dtype=np.int8))
    assert len(state.plans) == 2


def test_affine_targets_are_added_through_a_strided_view() -> None:
    """Rows 2 tiles apart, columns 7 apart: distinct, not one run, added in place."""
    cfg = PRESETS["default"]
    rng = np.random.default_rng(3)
    state = MachineState(cfg, np.zeros(64, dtype=np.uint8))
    state.inp[:8] = rng.integers(-128, 128, state.inp[:8].shape)
    state.wgt[:8] = rng.integers(-128, 128, state.wgt[:8].shape)
    state.acc[:16] = rng.integers(-(2**31), 2**31, state.acc[:16].shape, dtype=np.int32)
    state.uop[:2] = [Uop(0, 0, 0).encode(cfg), Uop(7, 0, 1).encode(cfg)]
    reference = ReferenceMachine(cfg, state.dram)
    reference.inp, reference.wgt = state.inp.tolist(), state.wgt.tolist()
    reference.acc, reference.uop = state.acc.tolist(), state.uop.tolist()
    insn = GemmInsn(cfg=cfg, uop_bgn=0, uop_end=2, iter_out=3, iter_in=1, dst_factor_out=2,
                    src_factor_out=1)
    execute_gemm(state, insn, "instruction 0")
    reference.gemm(insn)
    (plan,) = state.plans.values()
    assert plan.strided == (0, 3, 2, 2, 7)
    np.testing.assert_array_equal(state.acc, np.array(reference.acc, dtype=np.int32))
    np.testing.assert_array_equal(state.out, np.array(reference.out, dtype=np.int8))


def test_groups_of_one_shape_are_one_batched_product() -> None:
    """Micro-ops that differ in destination, input and weight at once, in two groups of
    two that do not split: one (2, R, K) by (2, C, K) product, equal to the reference."""
    cfg = PRESETS["default"]
    rng = np.random.default_rng(5)
    state = MachineState(cfg, np.zeros(64, dtype=np.uint8))
    state.inp[:16] = rng.integers(-128, 128, state.inp[:16].shape)
    state.wgt[:16] = rng.integers(-128, 128, state.wgt[:16].shape)
    uops = [Uop(0, 0, 0), Uop(0, 1, 1), Uop(1, 5, 7), Uop(1, 6, 2)]
    state.uop[:4] = [u.encode(cfg) for u in uops]
    reference = ReferenceMachine(cfg, state.dram)
    reference.inp, reference.wgt = state.inp.tolist(), state.wgt.tolist()
    reference.acc, reference.uop = state.acc.tolist(), state.uop.tolist()
    insn = GemmInsn(cfg=cfg, uop_bgn=0, uop_end=4, iter_out=3, iter_in=1, dst_factor_out=2,
                    src_factor_out=1)
    execute_gemm(state, insn, "instruction 0")
    reference.gemm(insn)
    (plan,) = state.plans.values()
    assert plan.gemm is not None and [p.src.shape for p in plan.gemm.parts] == [(2, 3, 2)]
    np.testing.assert_array_equal(state.acc, np.array(reference.acc, dtype=np.int32))
    np.testing.assert_array_equal(state.out, np.array(reference.out, dtype=np.int8))
