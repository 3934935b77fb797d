"""Tiles that do not divide their loop: the last tile is a smaller tail tile, exactly."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import openvta
from openvta.compiler import LoweringError, conv2d, dense
from openvta.compiler.ops.common import divisors, tile_sizes
from openvta.compiler.ops.conv2d import Conv2dPlan, plan_conv2d
from openvta.compiler.ops.dense import DensePlan
from openvta.isa import preset
from openvta.runtime import Device

DEFAULT = preset("default")
TINY = preset("tiny")


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


def _check(op, inputs, backend: str = "functional") -> None:
    program = op.build(inputs)
    result = Device(backend).run(program)  # functional: race checker on
    np.testing.assert_array_equal(op.unpack(program.read("out", result.dram)), op.reference(inputs))


@pytest.mark.parametrize("n", [1, 2, 3, 4, 7, 13, 16, 17, 56])
def test_tile_sizes_cover_every_tiling_and_every_divisor(n: int) -> None:
    """Every size 1..n gives as many tiles as a tried size no larger than it (a naive sweep)."""
    sizes = tile_sizes(n)
    assert set(divisors(n)) <= set(sizes) <= set(range(1, n + 1))
    for size in range(1, n + 1):
        assert any(t <= size and -(-n // t) == -(-n // size) for t in sizes)


@pytest.mark.parametrize(("shape", "plan"), [
    (dict(hw=7, kernel=3, pad=1, stride=1, co=3), Conv2dPlan(2, 3, 5, 1, 1, "co")),
    (dict(hw=11, kernel=3, pad=1, stride=2, co=5), Conv2dPlan(2, 4, 5, 2, 1, "co")),
    (dict(hw=13, kernel=3, pad=1, stride=1, co=4), Conv2dPlan(1, 5, 13, 2, 2, "co")),
    (dict(hw=13, kernel=1, pad=0, stride=2, co=4), Conv2dPlan(2, 4, 5, 2, 2, "co")),
    (dict(hw=17, kernel=5, pad=2, stride=3, co=2), Conv2dPlan(1, 2, 4, 1, 2, "co")),
])
@pytest.mark.parametrize("backend", ["functional", "cycle"])
def test_conv2d_with_tail_tiles_matches_numpy(shape: dict, plan: Conv2dPlan, backend: str) -> None:
    b = DEFAULT.BLOCK_IN
    op = conv2d(DEFAULT, ci=2 * b, co=shape["co"] * b, hw=shape["hw"], kernel=shape["kernel"],
                pad=shape["pad"], stride=shape["stride"], vthreads=plan.vthreads, plan=plan)
    _check(op, _conv_inputs(op, shape["hw"]), backend)


@pytest.mark.parametrize(("batch", "out_blocks", "plan"), [
    (7, 5, DensePlan(3, 2, 1, 1)), (13, 3, DensePlan(5, 2, 2, 1)), (5, 4, DensePlan(2, 2, 2, 2))])
def test_dense_with_tail_tiles_matches_numpy(batch: int, out_blocks: int, plan: DensePlan) -> None:
    op = dense(DEFAULT, batch=batch, in_features=2 * DEFAULT.BLOCK_IN,
               out_features=out_blocks * DEFAULT.BLOCK_OUT, vthreads=plan.vthreads, plan=plan)
    _check(op, _dense_inputs(op, batch))


@pytest.mark.parametrize("hw", [17, 19, 23])
def test_the_planner_takes_tail_tiles_for_prime_sizes(hw: int) -> None:
    """A prime output size too large for one tile: with whole tiles only, one row per tile
    (``hw`` tiles at least); with a tail tile far fewer, and the program is still exact."""
    cfg = preset("tiny")
    op = conv2d(cfg, ci=2 * cfg.BLOCK_IN, co=2 * cfg.BLOCK_OUT, hw=hw, kernel=3, pad=1)
    plan = op.plan
    assert hw % plan.yb != 0
    assert -(-2 // plan.cob) * -(-hw // plan.yb) * -(-hw // plan.xb) < hw
    _check(op, _conv_inputs(op, hw))


def test_plans_of_resnet18_layers_keep_whole_tiles() -> None:
    """ResNet-18's sizes (56, 28, 14, 7) have divisors that already give the fewest tiles."""
    for hw, ci, co in ((56, 64, 64), (28, 128, 128), (14, 256, 256), (7, 512, 512)):
        plan = plan_conv2d(DEFAULT, 1, ci, co, hw, 3, 1, 1, 2)
        assert hw % plan.yb == 0 and hw % plan.xb == 0


def test_a_tail_on_the_axis_the_threads_split_goes_to_the_last_thread() -> None:
    """4 tiles of 2 rows on 2 threads: thread 1's second tile is the 1-row tail (exact)."""
    op = conv2d(DEFAULT, ci=DEFAULT.BLOCK_IN, co=DEFAULT.BLOCK_OUT, hw=7, kernel=3, pad=1, vthreads=2,
                plan=Conv2dPlan(1, 2, 7, 1, 2, "y"))
    _check(op, _conv_inputs(op, 7))


def test_threads_that_do_not_divide_the_tiles_are_refused() -> None:
    op = conv2d(DEFAULT, ci=DEFAULT.BLOCK_IN, co=DEFAULT.BLOCK_OUT, hw=7, kernel=3, pad=1, vthreads=2,
                plan=Conv2dPlan(1, 3, 7, 1, 2, "y"))
    with pytest.raises(LoweringError, match=r"^bound inference: split of out\.out_i2\.outer \(extent 3\) "
                                            r"by nparts 2 does not divide it$"):
        op.build()


@pytest.mark.rtl
def test_tail_tiles_on_the_rtl() -> None:
    cfg = preset("tiny")
    conv = conv2d(cfg, ci=2 * cfg.BLOCK_IN, co=3 * cfg.BLOCK_OUT, hw=5, kernel=3, pad=1,
                  plan=Conv2dPlan(2, 2, 3, 1, 1, "co"))
    fc = dense(cfg, batch=5, in_features=2 * cfg.BLOCK_IN, out_features=3 * cfg.BLOCK_OUT,
               plan=DensePlan(2, 2, 1, 1))
    for op, inputs in ((conv, _conv_inputs(conv, 5)), (fc, _dense_inputs(fc, 5))):
        result = openvta.simulate(op.build(inputs), backend="rtl")
        np.testing.assert_array_equal(result["out"], op.reference(inputs))


@st.composite
def _tiled_conv2d(draw) -> tuple[dict, Conv2dPlan]:
    """A small conv2d and a tiling whose sizes are drawn freely (mostly not divisors)."""
    kernel = draw(st.sampled_from([1, 2, 3]))
    pad = draw(st.integers(0, kernel - 1))
    hw = draw(st.integers(max(1, kernel - 2 * pad), 13))
    stride = draw(st.integers(1, 3))
    oh = (hw + 2 * pad - kernel) // stride + 1
    co_t, ci_t = draw(st.integers(1, 3)), draw(st.integers(1, 2))
    # two threads split whole channel tiles; one thread may take any channel tile
    split = [d for d in divisors(co_t) if (co_t // d) % 2 == 0]
    vthreads = draw(st.sampled_from([1, 2])) if split else 1
    cob = draw(st.sampled_from(split)) if vthreads == 2 else draw(st.integers(1, co_t))
    plan = Conv2dPlan(cob, draw(st.integers(1, oh)), draw(st.integers(1, oh)),
                      draw(st.sampled_from(divisors(ci_t))), vthreads, "co")
    shape = dict(ci=ci_t * TINY.BLOCK_IN, co=co_t * TINY.BLOCK_OUT, hw=hw, kernel=kernel, pad=pad,
                 stride=stride)
    return shape, plan


@settings(max_examples=60, deadline=None, derandomize=True)
@given(case=_tiled_conv2d())
def test_any_tiling_that_fits_matches_numpy(case: tuple[dict, Conv2dPlan]) -> None:
    shape, plan = case
    op = conv2d(TINY, **shape, vthreads=plan.vthreads, plan=plan)
    inputs = _conv_inputs(op, 0)
    try:
        program = op.build(inputs)
    except LoweringError as error:  # tiles too large for tiny's buffers: nothing to compare
        assume("does not fit" not in str(error))
        raise
    result = Device("functional").run(program)
    np.testing.assert_array_equal(op.unpack(program.read("out", result.dram)), op.reference(inputs))
