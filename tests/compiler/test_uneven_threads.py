"""Virtual threads on an axis they do not divide evenly: the last thread takes the tail tile."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

import openvta
from openvta.compiler import LoweringError, conv2d, dense, lower
from openvta.compiler.ir import Block, Dma, Loop, LoopKind, Stmt, Threaded, walk
from openvta.compiler.lower import Lowered, lower_schedule
from openvta.compiler.ops.common import benchmark_operands, operator_epilogue, tile_sizes
from openvta.compiler.ops.conv2d import Conv2dPlan, check_conv2d_plan, plan_conv2d
from openvta.compiler.ops.dense import DensePlan, check_dense_plan, plan_dense
from openvta.compiler.passes.inject_vthreads import inject_vthreads
from openvta.isa import preset
from openvta.runtime import Device

DEFAULT = preset("vta")  # the threads' tiles as planned for VTA's machine
BACKENDS = ("functional", "cycle")


def _conv_inputs(op, seed: int) -> dict[str, np.ndarray]:
    p = op.params
    rng = np.random.default_rng(seed)
    return {"data": rng.integers(-128, 128, (p["n"], p["ci"], p["hw"], p["hw"]), dtype=np.int8),
            "weight": rng.integers(-128, 128, (p["co"], p["ci"], p["kernel"], p["kernel"]), dtype=np.int8),
            "bias": rng.integers(-(2**14), 2**14, (p["co"],), dtype=np.int32)}


def _dense_inputs(op, seed: int) -> dict[str, np.ndarray]:
    p = op.params
    rng = np.random.default_rng(seed)
    return {"data": rng.integers(-128, 128, (p["batch"], p["in_features"]), dtype=np.int8),
            "weight": rng.integers(-128, 128, (p["out_features"], p["in_features"]), dtype=np.int8),
            "bias": rng.integers(-(2**14), 2**14, (p["out_features"],), dtype=np.int32)}


def _check(op, inputs) -> None:
    """The program equals numpy on the functional simulator (race checker on) and the cycle model."""
    program = op.build(inputs)
    for backend in BACKENDS:
        result = Device(backend).run(program)
        np.testing.assert_array_equal(op.unpack(program.read("out", result.dram)), op.reference(inputs),
                                      err_msg=backend)


def _splits_unevenly(extent: int, threads: int) -> bool:
    """Some tile size gives the threads a whole number of tiles each, the last ending in a tail."""
    return any(-(-extent // size) % threads == 0 for size in tile_sizes(extent))


def _evenly(cfg, n: int, ci: int, co: int, hw: int, kernel: int, pad: int, stride: int, threads: int) -> bool:
    """A plan with no tail tile on the threads' axis fits (the planner's first choice)."""
    oh, co_t = (hw + 2 * pad - kernel) // stride + 1, -(-co // cfg.BLOCK_OUT)
    full = operator_epilogue("conv2d", 8, True, (0, 127), None)
    return any(not check_conv2d_plan(cfg, n, ci, co, hw, kernel, pad, stride,
                                     Conv2dPlan(cob, yb, xb, 1, threads, split), epilogue=full)
               for cob in tile_sizes(co_t) for yb in tile_sizes(oh) for xb in tile_sizes(oh)
               for split in ("co", "y"))


def test_seven_rows_on_four_threads_give_the_last_thread_a_one_row_tile() -> None:
    """The issue's example: tiles of 2 rows, thread 3 takes the 1-row tail tile."""
    op = conv2d(DEFAULT, hw=7, ci=32, co=16, kernel=5, pad=2, vthreads=4)
    assert op.plan == Conv2dPlan(cob=1, yb=2, xb=7, icb=2, vthreads=4, split="y")
    _check(op, _conv_inputs(op, 7))


def test_injection_gives_the_last_thread_the_tail_tiles_statements() -> None:
    """7 rows on 4 threads: threads 0-2 store 2 rows of 7 columns, thread 3 one row."""
    op = conv2d(DEFAULT, hw=7, ci=16, co=16, kernel=3, pad=1, vthreads=4)
    ir = lower(op.schedule, DEFAULT)
    stores = [s for s in walk(ir.body) if isinstance(s, Threaded) and isinstance(s.stmt, Dma) and s.stmt.store]
    assert [s.thread for s in stores] == [0, 1, 2, 3]
    assert [int(np.prod([d.extent for d in s.stmt.dims])) for s in stores] == [14, 14, 14, 7]


def test_an_even_split_is_still_preferred() -> None:
    """8 rows on 2 threads split evenly although an uneven plan would also fit: the planner
    looks for an even plan first, so programs that compiled before are unchanged."""
    plan = plan_conv2d(DEFAULT, 1, 32, 32, 8, 3, 1, 1, 2)
    assert not check_conv2d_plan(DEFAULT, 1, 32, 32, 8, 3, 1, 1, plan)


def test_the_tuners_check_stays_strict() -> None:
    plan = Conv2dPlan(cob=1, yb=2, xb=7, icb=2, vthreads=4, split="y")
    assert check_conv2d_plan(DEFAULT, 1, 32, 16, 7, 5, 2, 1, plan) == [
        "thread split: 4 threads must divide the whole tiles of y (7 in tiles of 2)"]
    assert check_conv2d_plan(DEFAULT, 1, 32, 16, 7, 5, 2, 1, plan, uneven=True) == []
    assert check_dense_plan(DEFAULT, 1, 1, 3, DensePlan(1, 2, 1, 2)) == [
        "thread split: 2 threads must divide the whole output tiles (3 in tiles of 2)"]
    assert check_dense_plan(DEFAULT, 1, 1, 3, DensePlan(1, 2, 1, 2), uneven=True) == []


@pytest.mark.parametrize(("out_blocks", "threads"), [(3, 2), (5, 3), (7, 4), (5, 2)])
def test_dense_output_blocks_split_unevenly(out_blocks: int, threads: int) -> None:
    op = dense(DEFAULT, batch=3, in_features=2 * DEFAULT.BLOCK_IN, out_features=out_blocks * DEFAULT.BLOCK_OUT,
               vthreads=threads)
    assert op.plan == plan_dense(DEFAULT, 3, 2, out_blocks, threads, epilogue=op.epilogue)
    assert out_blocks % op.plan.ob and -(-out_blocks // op.plan.ob) % threads == 0
    _check(op, _dense_inputs(op, out_blocks))


def test_depthwise_rows_split_unevenly() -> None:
    op = openvta.operator("depthwise_conv2d", channels=16, hw=7, kernel=3, pad=1, vthreads=4)
    assert (op.plan.yb, op.plan.split) == (2, "y")
    _check(op, benchmark_operands(op, 7))


def test_dense_with_more_threads_than_tiles_is_still_refused() -> None:
    with pytest.raises(LoweringError, match=r"^plan dense: 4 virtual threads must divide the 3 output blocks, "
                                            r"evenly or with the last thread taking the tail tile$"):
        dense(DEFAULT, batch=1, in_features=16, out_features=48, vthreads=4)


@pytest.mark.parametrize(("shape", "plan"), [
    (dict(hw=7, kernel=3, pad=1, co=3), Conv2dPlan(2, 7, 7, 1, 2, "co")),  # channels: 2 + 1 blocks
    (dict(hw=11, kernel=3, pad=1, co=1), Conv2dPlan(1, 2, 11, 1, 3, "y")),  # rows: 2 tiles a thread, last 2 + 1
    (dict(hw=11, kernel=1, pad=0, co=1), Conv2dPlan(1, 3, 4, 1, 2, "y")),  # rows 3 + 3 | 3 + 2, columns 4+4+3
])
def test_conv2d_plans_with_an_uneven_split_and_several_tiles_per_thread(shape: dict, plan: Conv2dPlan) -> None:
    op = conv2d(DEFAULT, ci=DEFAULT.BLOCK_IN, co=shape["co"] * DEFAULT.BLOCK_OUT, hw=shape["hw"],
                kernel=shape["kernel"], pad=shape["pad"], vthreads=plan.vthreads, plan=plan)
    _check(op, _conv_inputs(op, shape["hw"]))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.filter_too_much])
@given(ci=st.integers(1, 40), co=st.integers(1, 40), hw=st.integers(1, 14), kernel=st.integers(1, 5),
       pad=st.integers(0, 3), stride=st.integers(1, 3), threads=st.integers(2, 4), seed=st.integers(0, 2**16))
def test_random_conv2d_shapes_without_an_even_split(ci: int, co: int, hw: int, kernel: int, pad: int, stride: int,
                                                    threads: int, seed: int) -> None:
    """Where no even split exists, a shape whose rows or channel blocks some tile size splits
    into a whole number of tiles per thread compiles and is exact; any other is refused
    naming the thread split."""
    assume(pad < kernel <= hw + 2 * pad)
    assume(not _evenly(DEFAULT, 1, ci, co, hw, kernel, pad, stride, threads))
    oh, co_t = (hw + 2 * pad - kernel) // stride + 1, -(-co // DEFAULT.BLOCK_OUT)
    if not (_splits_unevenly(oh, threads) or _splits_unevenly(co_t, threads)):
        event("refused: no tile size splits rows or channel blocks among the threads")
        with pytest.raises(LoweringError, match=rf"^plan conv2d: no axis of this conv2d splits among {threads} "
                                                r"virtual threads, evenly or with the last thread taking the tail"):
            conv2d(DEFAULT, ci=ci, co=co, hw=hw, kernel=kernel, pad=pad, stride=stride, vthreads=threads)
        return
    event("compiled with an uneven split")
    op = conv2d(DEFAULT, ci=ci, co=co, hw=hw, kernel=kernel, pad=pad, stride=stride, vthreads=threads)
    assert check_conv2d_plan(DEFAULT, 1, ci, co, hw, kernel, pad, stride, op.plan, epilogue=op.epilogue)
    _check(op, _conv_inputs(op, seed))


def test_a_tail_body_with_other_statements_is_refused_by_injection() -> None:
    """The threads run in lockstep: the last thread's body must match the others' statement for statement."""
    op = conv2d(DEFAULT, hw=7, ci=16, co=16, kernel=3, pad=1, vthreads=4)
    ir = lower_schedule(op.schedule, DEFAULT)
    loop = _vthread_loop(ir.body)
    broken = Loop(loop.var, loop.extent, loop.body, LoopKind.VTHREAD, tail=Block(()))
    with pytest.raises(LoweringError, match=r"^inject_vthreads: the last thread's tail tile (has 0 statements|"
                                            r"does not run the loop)"):
        inject_vthreads(Lowered(broken, ir.buffers, ir.slices, ir.vthreads, ir.inputs, ir.output, ir.cfg))


def _vthread_loop(stmt: Stmt) -> Loop:
    return next(s for s in walk(stmt) if isinstance(s, Loop) and s.kind == LoopKind.VTHREAD)
